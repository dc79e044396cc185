"""What a training run reports to its caller: per-step progress, each checkpoint written, the final result, and the
hooks (Callbacks) through which they leave. Plain dataclasses, so a caller (the Celery worker) can write them to a
database without knowing the loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from model.train.config import StopReason

if TYPE_CHECKING:
    from model.probes.dynamics import DynamicsRecord
    from model.probes.embeddings import EmbeddingRecord


@dataclass
class StepInfo:
    step: int
    total_steps: int
    loss: float  # label-smoothed training loss per target token
    lr: float
    tokens_per_second: float  # target tokens per second (moving average over steps)
    grad_norm: float  # before clipping
    elapsed: float  # seconds of training, summed over resumed attempts
    eta_seconds: float
    nll_loss: float = 0.0  # training cross entropy without smoothing (compare with the validation loss)
    tokens: int = 0  # target tokens in this update
    epoch: int = 0
    # The positions the model computed on, padding included (0: not counted): padded_tokens of the decoder, against
    # `tokens`; src_tokens real and padded_src_tokens of the encoder.
    padded_tokens: int = 0
    src_tokens: int = 0
    padded_src_tokens: int = 0

    @property
    def target_padding(self) -> float | None:
        """The share of the decoder's positions that are padding (None when not counted)."""
        return 1 - self.tokens / self.padded_tokens if self.padded_tokens else None

    @property
    def source_padding(self) -> float | None:
        """The share of the encoder's positions that are padding (None when not counted)."""
        return 1 - self.src_tokens / self.padded_src_tokens if self.padded_src_tokens else None


@dataclass
class CheckpointInfo:
    step: int
    path: str
    sha256: str  # checkpoint_sha256(path)
    size_bytes: int
    metrics: dict[str, float]
    kind: str = "step"  # "step" (resumable) or "averaged" (weights only)


@dataclass
class Callbacks:
    """Hooks for the caller; each may be None. should_stop, should_preempt and should_finish are polled once per
    step, so keep them cheap. should_stop (cancel) ends the run without a final checkpoint; should_preempt (the
    process is going away) ends it right after a checkpoint of the current step, skipping the final evaluation;
    should_finish (a time budget outside the run is spent: the organisation's worker minutes) ends it as
    max_minutes does, with its final evaluation and checkpoint, once it has trained a step."""

    on_step: Callable[[StepInfo], None] | None = None
    on_eval: Callable[[int, dict[str, float]], None] | None = None
    on_checkpoint: Callable[[CheckpointInfo], None] | None = None
    # weights every config.dynamics_every updates, attention at every evaluation, embeddings at every checkpoint
    on_dynamics: Callable[[DynamicsRecord | EmbeddingRecord], None] | None = None
    # once, before the first update: model/train/memory_profile.memory_report of the next batch, or {"error": "..."}
    on_memory: Callable[[dict[str, Any]], None] | None = None
    should_stop: Callable[[], bool] | None = None
    should_preempt: Callable[[], bool] | None = None
    should_finish: Callable[[], bool] | None = None


@dataclass
class TrainResult:
    stop_reason: StopReason
    step: int
    elapsed: float
    metrics: dict[str, float]  # the last evaluation
    best_valid_loss: float | None
    best_step: int | None
    last_checkpoint: str | None
    best_checkpoint: str | None
    averaged_checkpoint: str | None
    model_checkpoint: str | None  # the one to serve: averaged, else best by validation loss, else last
    losses: list[float] = field(default_factory=list)  # training loss of every step of this attempt
    best_checkpoint_step: int | None = None  # best_checkpoint's step (best_step is the best evaluation's)
