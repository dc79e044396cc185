"""What an inference worker decodes at once, by device (worker/serving/decode_limits.py); a GPU is what its memory
reports, injected here: no GPU is needed."""

from __future__ import annotations

import torch

from model.decode.batches import CPU_BATCH_SENTENCES, GPU_BATCH_SENTENCES, beam_token_budget
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from worker.serving.decode_limits import CPU_MICRO_BATCH, GPU_MICRO_BATCH, decode_limits, micro_batch

CUDA = torch.device("cuda", 0)


def _model(dtype: torch.dtype = torch.bfloat16) -> Transformer:
    return Transformer(ModelConfig.from_preset("tiny", 300)).to(dtype)


def test_a_cpu_worker_decodes_in_batches_of_32_sentences():
    limits = decode_limits(_model(torch.float32), torch.device("cpu"), free=lambda _: 1 / 0)  # never asked
    assert (limits.max_sentences, limits.max_beam_tokens) == (CPU_BATCH_SENTENCES, None)


def test_a_gpu_worker_decodes_as_much_as_a_share_of_its_free_memory_holds():
    model, asked = _model(), []

    def free(device: torch.device) -> int:
        asked.append(device)
        return 60 * 2**30

    limits = decode_limits(model, CUDA, free)
    assert asked == [CUDA] and limits.max_sentences == GPU_BATCH_SENTENCES
    assert limits.max_beam_tokens == beam_token_budget(model.config, 2, 60 * 2**30)
    less = decode_limits(model, CUDA, lambda _: 6 * 2**30)
    assert less.max_beam_tokens is not None and less.max_beam_tokens * 9 < limits.max_beam_tokens


def test_the_micro_batch_follows_the_device_unless_set():
    assert micro_batch(None, torch.device("cpu")) == CPU_MICRO_BATCH == 64
    assert micro_batch(None, CUDA) == GPU_MICRO_BATCH == 1024
    assert micro_batch(96, CUDA) == micro_batch(96, torch.device("cpu")) == 96


def test_a_gpus_free_memory_is_the_drivers_plus_what_the_allocator_holds_unused(monkeypatch):
    """free_memory on a GPU (its driver's and allocator's readings injected): the allocator's statistics are read
    once, and its reserved but unallocated bytes count as free."""
    from worker.serving import decode_limits as limits

    reads: list[torch.device] = []

    def memory_stats(device: torch.device) -> dict[str, int]:
        reads.append(device)
        return {"reserved_bytes.all.current": 5 * 2**30, "allocated_bytes.all.current": 2 * 2**30}

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (10 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "memory_stats", memory_stats)
    assert limits.free_memory(CUDA) == 13 * 2**30 and reads == [CUDA]
