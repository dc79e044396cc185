"""Checkpoint averaging (Sec. 6.1: "averaging the last 5 checkpoints"): the element-wise mean of the weights of
one model's checkpoints, written as an inference-only checkpoint (kind "averaged", not resumable)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from model.io.checkpoint import load_checkpoint, save_checkpoint
from model.io.checkpoint_files import CheckpointError
from model.nn.transformer import Transformer


def average_checkpoints(directories: Sequence[str | Path]) -> dict[str, Tensor]:
    """Element-wise mean of the weights of checkpoints of one model (Sec. 6.1), as a full state dict.

    Every checkpoint must have the same model config and tokenizer. The mean is taken in float64 and cast
    back; tied names share one averaged tensor, as in the model.
    """
    if not directories:
        raise ValueError("average_checkpoints needs at least one checkpoint")
    ckpts = [load_checkpoint(d, with_optimizer=False) for d in directories]
    first = ckpts[0]
    for c in ckpts[1:]:
        if c.model_config != first.model_config:
            raise CheckpointError(f"{c.path} has another model config than {first.path}")
        if c.tokenizer.fingerprint != first.tokenizer.fingerprint:
            raise CheckpointError(f"{c.path} has another tokenizer than {first.path}")
    averaged: dict[str, Tensor] = {}
    by_id: dict[int, Tensor] = {}
    for name, t in first.model_state.items():
        if id(t) in by_id:  # an alias of a tied tensor already averaged
            averaged[name] = by_id[id(t)]
            continue
        if t.is_floating_point():
            total = torch.zeros_like(t, dtype=torch.float64)
            for c in ckpts:
                total += c.model_state[name].double()
            out = (total / len(ckpts)).to(t.dtype)
        else:
            out = ckpts[-1].model_state[name].clone()
        averaged[name] = by_id[id(t)] = out
    return averaged


def write_averaged_checkpoint(
    directories: Sequence[str | Path],
    directory: str | Path,
    metrics: dict[str, float] | Callable[[Transformer], dict[str, float]] | None = None,
    device: str | torch.device = "cpu",
) -> Path:
    """Average checkpoints and write the result as an inference-only checkpoint (kind "averaged"). metrics: the
    averaged model's, or a function that measures them on it (the model is on `device` then)."""
    newest = load_checkpoint(directories[-1], with_optimizer=False)
    model = Transformer(newest.model_config).to(device)
    model.load_state_dict(average_checkpoints(directories), strict=True)
    if callable(metrics):
        metrics = metrics(model)
    extra = {
        k: v
        for k, v in newest.meta.items()
        if k not in ("format_version", "kind", "objective", "step", "metrics", "model", "tokenizer_fingerprint")
    }
    extra["averaged_from"] = [Path(d).name for d in directories]
    return save_checkpoint(
        directory,
        model,
        newest.tokenizer,
        newest.objective,
        step=newest.step,
        metrics=metrics,
        kind="averaged",
        extra_meta=extra,
    )
