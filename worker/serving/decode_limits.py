"""How much an inference worker decodes at once, from its device: a CPU in batches of 32 sentences, as always; a GPU
in batches of up to 1,024 sentences, as many as a quarter of its free memory holds (model/decode/batches.py). A
micro-batch (the texts of the requests that arrived together) is at most INFERENCE_MAX_BATCH sentences: by
default 64 on a CPU and 1,024 on a GPU, so that a GPU worker decodes the requests coalesced in one micro-batch in
as few batches as its memory allows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from model.decode.batches import CPU_BATCH_SENTENCES, GPU_BATCH_SENTENCES, beam_token_budget
from model.nn.transformer import Transformer

CPU_MICRO_BATCH = 64  # INFERENCE_MAX_BATCH's default on a CPU (its default before it followed the device)
GPU_MICRO_BATCH = GPU_BATCH_SENTENCES


@dataclass(frozen=True)
class DecodeLimits:
    max_sentences: int  # in one decoding batch
    max_beam_tokens: int | None  # beam x sentences x longest source in one batch; None: no bound but the count


def free_memory(device: torch.device) -> int:
    """Bytes a new batch can take on a CUDA device: what the driver has free plus what PyTorch's caching
    allocator holds without using."""
    free, _total = torch.cuda.mem_get_info(device)
    stats = torch.cuda.memory_stats(device)  # read once: each of memory_reserved and memory_allocated reads it all
    return int(free + stats.get("reserved_bytes.all.current", 0) - stats.get("allocated_bytes.all.current", 0))


def decode_limits(
    model: Transformer, device: torch.device, free: Callable[[torch.device], int] = free_memory
) -> DecodeLimits:
    if device.type != "cuda":
        return DecodeLimits(CPU_BATCH_SENTENCES, None)
    dtype_bytes = next(model.parameters()).element_size()
    return DecodeLimits(GPU_BATCH_SENTENCES, beam_token_budget(model.config, dtype_bytes, free(device)))


def micro_batch(setting: int | None, device: torch.device) -> int:
    """INFERENCE_MAX_BATCH, or its default on this device."""
    if setting is not None:
        return setting
    return GPU_MICRO_BATCH if device.type == "cuda" else CPU_MICRO_BATCH
