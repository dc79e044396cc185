"""How fast this host trains a prepared job: a few real optimizer steps, timed (for model/train/budget.py)."""

from __future__ import annotations

import statistics
import time
from itertools import cycle, islice

import torch

from model.data.batching import TokenBatcher
from model.nn.transformer import Transformer
from model.train.config import TrainConfig
from model.train.prepare import PreparedData
from model.train.step import autocast_for, build_optimizer, train_step


def measure_throughput(data: PreparedData, config: TrainConfig, max_tokens: int, steps: int = 3) -> float:
    """Batch tokens (max_tokens_per_batch units) per second of one process: one warm-up step, then the median
    of `steps` timed ones, on real batches of the data at max_tokens, with a throw-away model.

    The global RNG is left as it was, so the job trains exactly as it would have without the measurement.
    """
    if steps < 1:
        raise ValueError(f"steps={steps} must be >= 1")
    examples = data.train_examples(0) if callable(data.train_examples) else data.train_examples
    batches = list(islice(cycle(TokenBatcher(examples, max_tokens, shuffle=True, seed=config.seed)), steps + 1))
    if not batches:
        raise ValueError("the data yields no training batches to time")
    device = torch.device(config.device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        model = Transformer(data.model_config).to(device).train()
        optimizer, autocast = build_optimizer(model, config), autocast_for(device, config.resolved_precision)
        seconds = []
        for batch in batches:
            t0 = time.perf_counter()
            train_step(model, optimizer, [batch], 1e-4, config, autocast)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds.append(time.perf_counter() - t0)
    return max_tokens / statistics.median(seconds[1:])
