"""A training config for the short runs of the training loop's spec (and of the probes' tests, which train too)."""

from __future__ import annotations

from model.train.config import TrainConfig
from model.train.settings import MAX_KEEP_CHECKPOINTS


def quick_config(**overrides) -> TrainConfig:
    base = dict(
        max_steps=10,
        max_tokens_per_batch=256,
        warmup_steps=10,
        peak_lr=1e-3,
        eval_every=1000,
        checkpoint_every=1000,
        eval_max_sentences=8,
        keep_checkpoints=MAX_KEEP_CHECKPOINTS,  # every checkpoint these short runs write
        seed=0,
        eval_budget=None,  # every due evaluation runs, however long it takes
    )
    return TrainConfig(**{**base, **overrides})
