"""The settings of one training run (TrainConfig) and the error a user can fix (TrainingError).

Torch-free apart from the schedule it builds, and shared by every part of training: data preparation, the
optimizer step, evaluation and the loop.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, cast

from model.train.schedule import InverseSqrtSchedule

# preempted: the worker is shutting down; a checkpoint of the current step is written so another resumes it.
StopReason = Literal["max_steps", "max_minutes", "early_stopping", "cancelled", "preempted"]


class TrainingError(ValueError):
    """A problem the user can fix (too little data, sequences too long, a diverging learning rate, ...)."""


PRECISIONS = ("fp32", "bf16")


@dataclass
class TrainConfig:
    """Hyper-parameters of one training run; paper defaults (Sec. 5.3, 5.4) unless noted."""

    max_steps: int = 100_000  # optimizer updates (the paper trains base for 100k)
    max_minutes: float | None = None  # wall-clock budget for training steps, summed over resumed attempts
    max_tokens_per_batch: int = 4096  # padded tokens per micro-batch (the paper: ~25k source + 25k target)
    grad_accum_steps: int = 1  # micro-batches per update: effective batch = max_tokens_per_batch * this
    warmup_steps: int = 4000
    lr_scale: float | None = None  # Eq. 3 multiplier; None = 1.0 (the paper) unless peak_lr is given
    peak_lr: float | None = None  # alternative: the rate reached at step warmup_steps
    label_smoothing: float = 0.1
    clip_norm: float | None = 1.0  # max global grad norm; None = no clipping (the norm is still reported)
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    seed: int = 0
    eval_every: int = 1000  # steps; the last step is always evaluated, and checkpoints are when the budget allows
    # Most of wall-clock time evaluation may take (0.05 = 5%): an evaluation due by eval_every is skipped while
    # the evaluations so far plus one more would exceed it. None = evaluate every eval_every steps and at every
    # checkpoint, whatever it costs.
    eval_budget: float | None = None
    checkpoint_every: int = 1000
    early_stopping_patience: int | None = None  # evaluations without a lower validation loss before stopping
    keep_checkpoints: int | None = 5  # newest step checkpoints kept (plus the best); None = keep all
    average_last: int = 0  # average the last N checkpoints at the end (Sec. 6.1 uses 5); 0 or 1 = off
    device: str = "cpu"
    # "bf16": bf16 autocast (weights, optimizer and loss stay fp32), on a GPU and on a CPU alike; "fp32": none.
    # None: bf16 on a GPU, fp32 on a CPU (see resolved_precision).
    precision: str | None = None
    compile: bool = False  # torch.compile the encoder and decoder layers (model/nn/compile.py); eager if that fails
    # Steps whose loss, NLL and gradient norm are read from the device together, in one wait (every step is still
    # reported, once its interval is read). None: 10 on a GPU, 1 on a CPU, where a read waits for nothing.
    log_every: int | None = None
    # Updates between records of the per-component dynamics (model/probes/dynamics.py: gradient, weight and update
    # norms of every W_Q, W_K, ... per layer), sent to Callbacks.on_dynamics; step 1 is always recorded. None: none.
    # Its cost is measured by bench/dynamics_cost.py (the goal: under 3% of step time).
    dynamics_every: int | None = 25
    # Tokens whose nearest neighbours in the embedding matrix are recorded at each checkpoint (with the 2-D map of
    # the most frequent tokens, model/probes/embeddings.py); None: the most frequent words. Off with dynamics_every.
    probe_tokens: list[str] | None = None
    eval_max_sentences: int = 200  # validation sentences greedy-decoded for BLEU/chrF (decoding is slow)

    def __post_init__(self) -> None:
        # a JSON round trip gives a list; the length is checked below
        self.adam_betas = cast(tuple[float, float], tuple(self.adam_betas))
        _positive_int(
            self,
            "max_steps",
            "max_tokens_per_batch",
            "grad_accum_steps",
            "warmup_steps",
            "eval_every",
            "checkpoint_every",
            "eval_max_sentences",
        )
        _int(self, "seed", "average_last")
        if self.average_last < 0:
            raise ValueError(f"average_last={self.average_last} must be >= 0")
        for name in ("early_stopping_patience", "keep_checkpoints", "log_every", "dynamics_every"):
            if getattr(self, name) is not None:
                _positive_int(self, name)
        if self.probe_tokens is not None and not (
            isinstance(self.probe_tokens, list) and all(isinstance(t, str) and t for t in self.probe_tokens)
        ):
            raise ValueError(f"probe_tokens={self.probe_tokens!r} must be a list of non-empty strings or None")
        if self.eval_budget is not None and not (_number(self.eval_budget) and 0 < self.eval_budget <= 1):
            raise ValueError(f"eval_budget={self.eval_budget!r} must be a fraction in (0, 1] or None")
        for name in ("max_minutes", "lr_scale", "peak_lr", "clip_norm"):
            value = getattr(self, name)
            if value is not None and not (_number(value) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name}={value!r} must be a positive number or None")
        if self.lr_scale is not None and self.peak_lr is not None:
            raise ValueError(f"give lr_scale={self.lr_scale} or peak_lr={self.peak_lr}, not both")
        if not (_number(self.label_smoothing) and 0.0 <= self.label_smoothing < 1.0):
            raise ValueError(f"label_smoothing={self.label_smoothing!r} must be in [0, 1)")
        if len(self.adam_betas) != 2 or not all(_number(b) and 0.0 <= b < 1.0 for b in self.adam_betas):
            raise ValueError(f"adam_betas={self.adam_betas!r} must be two numbers in [0, 1)")
        if not (_number(self.adam_eps) and self.adam_eps > 0):
            raise ValueError(f"adam_eps={self.adam_eps!r} must be a positive number")
        if not (_number(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay={self.weight_decay!r} must be a number >= 0")
        if not isinstance(self.device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?|mps", self.device):
            raise ValueError(f"device={self.device!r} must be 'cpu', 'cuda', 'cuda:N' or 'mps'")
        if self.precision is not None and self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r} must be one of {list(PRECISIONS)} or None")
        if not isinstance(self.compile, bool):
            raise ValueError(f"compile={self.compile!r} must be a bool")
        if self.keep_checkpoints is not None and self.average_last > self.keep_checkpoints:
            raise ValueError(
                f"average_last={self.average_last} needs keep_checkpoints >= {self.average_last}, "
                f"got {self.keep_checkpoints}"
            )

    def schedule(self, d_model: int) -> InverseSqrtSchedule:
        if self.peak_lr is not None:
            return InverseSqrtSchedule.from_peak_lr(self.peak_lr, d_model, self.warmup_steps)
        return InverseSqrtSchedule(d_model, self.warmup_steps, 1.0 if self.lr_scale is None else self.lr_scale)

    @property
    def resolved_precision(self) -> str:
        """The precision this config trains in: the one asked for, else bf16 on a GPU and fp32 elsewhere."""
        if self.precision is not None:
            return self.precision
        return "bf16" if self.device.startswith("cuda") else "fp32"

    @property
    def resolved_log_every(self) -> int:
        """Steps per read of the step results: the one asked for, else 10 on a GPU and 1 elsewhere."""
        if self.log_every is not None:
            return self.log_every
        return 10 if self.device.startswith("cuda") else 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """Inverse of to_dict; unknown keys are refused."""
        d = dict(d)
        if "bf16" in d:  # configs saved before `precision`: bf16=True meant "bf16 on a GPU", False "fp32"
            legacy = d.pop("bf16")
            d.setdefault("precision", None if legacy else "fp32")
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown TrainConfig key(s) {unknown}")
        return cls(**d)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(obj: Any, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name}={value!r} must be an int")


def _positive_int(obj: Any, *names: str) -> None:
    _int(obj, *names)
    for name in names:
        if getattr(obj, name) < 1:
            raise ValueError(f"{name}={getattr(obj, name)} must be >= 1")
