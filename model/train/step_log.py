"""Per-step progress read from the device once per interval: the loop queues each update's sums (PendingStep)
and StepLog reads log_every of them in one transfer, then reports every step (StepInfo) as before.

On a GPU a read waits for everything queued before it; reading once per interval lets the device run ahead of
the host for that many steps. A loss that is not finite fails the run at the read, naming its step: the loop
reads before every evaluation and checkpoint, so no checkpoint holds the weights of a diverged step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from model.train.config import TrainingError
from model.train.events import StepInfo
from model.train.loader import TokenCounts
from model.train.step import PendingStep, read_steps


@dataclass
class _Queued:
    step: int
    lr: float
    epoch: int
    sums: PendingStep
    counts: TokenCounts | None


class StepLog:
    """Pending steps and the moving averages (seconds per step, target tokens per second) of those read."""

    def __init__(
        self,
        every: int,
        total_steps: int,
        max_minutes: float | None,
        on_step: Callable[[StepInfo], None] | None,
    ) -> None:
        self.every, self.total_steps, self.max_minutes, self.on_step = every, total_steps, max_minutes, on_step
        self.pending: list[_Queued] = []
        self.interval_start = 0.0  # elapsed seconds when the first pending step began
        self.step_seconds: float | None = None
        self.tokens_per_second: float | None = None
        self.losses: list[float] = []  # every step's training loss, in order

    def add(
        self, step: int, lr: float, epoch: int, sums: PendingStep, started: float, counts: TokenCounts | None = None
    ) -> None:
        """Queue one update that began at `started` (elapsed seconds); counts: its real and padded positions."""
        if not self.pending:
            self.interval_start = started
        self.pending.append(_Queued(step, lr, epoch, sums, counts))

    @property
    def due(self) -> bool:
        return len(self.pending) >= self.every

    def flush(self, elapsed: Callable[[], float]) -> None:
        """Read the pending steps (one wait for the device) and report each; `elapsed` gives the elapsed seconds
        after the read, so the interval's time includes the device's work. Each step of the interval is given an
        equal share of it: the host cannot tell them apart without waiting once per step."""
        if not self.pending:
            return
        queued, self.pending = self.pending, []
        results = read_steps([q.sums for q in queued])
        now = elapsed()
        dt = max((now - self.interval_start) / len(queued), 1e-9)
        for i, (q, result) in enumerate(zip(queued, results)):
            if not math.isfinite(result.loss):
                raise TrainingError(
                    f"the training loss became {result.loss} at step {q.step}; lower the "
                    f"learning rate (peak_lr / lr_scale) or raise warmup_steps"
                )
            self.losses.append(result.loss)
            self.step_seconds = dt if self.step_seconds is None else 0.9 * self.step_seconds + 0.1 * dt
            tps = result.n_tokens / dt
            self.tokens_per_second = tps if self.tokens_per_second is None else 0.9 * self.tokens_per_second + 0.1 * tps
            at = now - (len(queued) - 1 - i) * dt  # elapsed seconds at the end of this step
            eta = (self.total_steps - q.step) * self.step_seconds
            if self.max_minutes is not None:
                eta = max(0.0, min(eta, self.max_minutes * 60 - at))
            if self.on_step is not None:
                self.on_step(
                    StepInfo(
                        q.step,
                        self.total_steps,
                        result.loss,
                        q.lr,
                        self.tokens_per_second,
                        result.grad_norm,
                        at,
                        eta,
                        result.nll_loss,
                        result.n_tokens,
                        q.epoch,
                        q.counts.padded_tgt if q.counts is not None else 0,
                        q.counts.src if q.counts is not None else 0,
                        q.counts.padded_src if q.counts is not None else 0,
                    )
                )
