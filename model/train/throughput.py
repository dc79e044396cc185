"""How fast this host trains a prepared job: a few real optimizer steps, timed (for model/train/budget.py)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from itertools import cycle, islice
from typing import TypeVar

import torch

from model.data.batching import TokenBatcher
from model.nn.transformer import Transformer
from model.train.config import TrainConfig
from model.train.prepare import PreparedData
from model.train.step import autocast_for, build_optimizer, train_step

B = TypeVar("B")


def steady_step_seconds(step: Callable[[B], object], batches: Sequence[B], sync: Callable[[], None]) -> list[float]:
    """Seconds of `step` on each batch, timed in a second pass over the same batches: the first pass pays what a
    new batch shape costs once (cuDNN attention builds an execution plan per shape, cuBLAS picks its kernels, the
    caching allocator grows), as training does once per shape over thousands of steps. Timing first sights
    instead made the probe of an H200 read 18,410 tokens/s at 8,192-token batches against 76,810 at 2,048, and
    61,876 for `base` at 32,768 where its steady step runs 336,368
    (bench/results/gpu_suite-cuda-h200-2026-11-27*.json)."""
    for batch in batches:
        step(batch)
    sync()
    seconds = []
    for batch in batches:
        t0 = time.perf_counter()
        step(batch)
        sync()
        seconds.append(time.perf_counter() - t0)
    return seconds


def measure_throughput(data: PreparedData, config: TrainConfig, max_tokens: int, steps: int = 3) -> float:
    """Batch tokens (max_tokens_per_batch units) per second of one process: the median of `steps` timed steps on
    real batches of the data at max_tokens, each batch stepped once untimed first (steady_step_seconds), with a
    throw-away model.

    The global RNG is left as it was, so the job trains exactly as it would have without the measurement.
    """
    if steps < 1:
        raise ValueError(f"steps={steps} must be >= 1")
    examples = data.train_examples(0) if callable(data.train_examples) else data.train_examples
    batches = list(islice(cycle(TokenBatcher(examples, max_tokens, shuffle=True, seed=config.seed)), steps))
    if not batches:
        raise ValueError("the data yields no training batches to time")
    device = torch.device(config.device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        model = Transformer(data.model_config).to(device).train()
        optimizer, autocast = build_optimizer(model, config), autocast_for(device, config.resolved_precision)
        seconds = steady_step_seconds(
            lambda batch: train_step(model, optimizer, [batch], 1e-4, config, autocast),
            batches,
            lambda: torch.cuda.synchronize(device) if device.type == "cuda" else None,
        )
    return max_tokens / statistics.median(seconds)
