"""Opt-in torch.compile of the encoder and decoder layers, with a fallback to eager: for training
(TrainConfig.compile; the validation decoding runs the compiled layers too) and for serving (SERVING_COMPILE).

Each layer's forward is compiled with dynamic shapes (length-bucketed batches change shape every step, beam search
every decoding step, and recompiling for each would cost more than it saves). Compilation happens at the first
call, so a failure can surface there as well as here; either way the layers go back to eager and the reason is
logged (eager_on_failure).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
from torch import nn

from model.nn.out_of_memory import is_out_of_memory
from model.nn.transformer import Transformer

log = logging.getLogger(__name__)

T = TypeVar("T")


def _layers(model: Transformer) -> Iterator[nn.Module]:
    yield from model.encoder.layers
    yield from model.decoder.layers


def compile_layers(model: Transformer, compiler: Callable[..., Any] | None = None) -> bool:
    """Replace each layer's forward by its compiled version; False (and eager again) if compiling fails."""
    compiler = compiler or torch.compile
    try:
        for layer in _layers(model):
            layer.forward = compiler(layer.forward, dynamic=True)
    except Exception as exc:  # noqa: BLE001  # any compiler failure: run eagerly instead
        uncompile_layers(model, f"{type(exc).__name__}: {exc}")
        return False
    return True


def is_compiled(model: Transformer) -> bool:
    return any("forward" in layer.__dict__ for layer in _layers(model))


def uncompile_layers(model: Transformer, reason: str) -> None:
    """Back to the layers' own forward methods, logging why."""
    for layer in _layers(model):
        layer.__dict__.pop("forward", None)
    log.warning("torch.compile failed, running without it: %s", reason)


def eager_on_failure(model: Transformer, call: Callable[[], T], keep: tuple[type[BaseException], ...] = ()) -> T:
    """call(); if it fails while the model's layers are compiled, they go back to eager and call() runs again.

    Errors of the kinds in `keep` (the caller's own: a bad request, a diverged loss) and out-of-memory errors
    are raised as they are: running eagerly would not help. call() must be safe to repeat after a failure."""
    try:
        return call()
    except Exception as exc:
        if not is_compiled(model) or isinstance(exc, keep) or is_out_of_memory(exc):
            raise
        uncompile_layers(model, f"{type(exc).__name__}: {exc}")
    return call()
