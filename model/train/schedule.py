"""The learning rate of "Attention Is All You Need" (Sec. 5.3, Eq. 3): linear warm-up, then inverse square root.

    lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

scale = 1 is the paper. Steps count optimizer updates from 1; the rate rises linearly to its peak at
step = warmup_steps and decays as 1 / sqrt(step) afterwards. The peak is

    peak_lr = scale * d_model^-0.5 * warmup_steps^-0.5

(7.0e-4 for the paper's d_model=512, warmup_steps=4000), so a schedule can equally be given by the peak
rate that users often think in: InverseSqrtSchedule.from_peak_lr(peak_lr, d_model, warmup_steps) picks
scale = peak_lr * sqrt(d_model * warmup_steps). Both parametrisations give exactly the same curve shape.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


@dataclass(frozen=True)
class InverseSqrtSchedule:
    """Eq. 3 as a pure function of the step; stateless, so resuming needs nothing but the step."""

    d_model: int
    warmup_steps: int
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.d_model, int) or self.d_model <= 0:
            raise ValueError(f"d_model={self.d_model!r} must be a positive int")
        if not isinstance(self.warmup_steps, int) or self.warmup_steps < 1:
            raise ValueError(f"warmup_steps={self.warmup_steps!r} must be an int >= 1")
        if not (isinstance(self.scale, (int, float)) and math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale={self.scale!r} must be a positive number")

    @classmethod
    def from_peak_lr(cls, peak_lr: float, d_model: int, warmup_steps: int) -> InverseSqrtSchedule:
        """The schedule whose rate reaches peak_lr at step = warmup_steps (then decays as 1 / sqrt(step))."""
        if not (isinstance(peak_lr, (int, float)) and math.isfinite(peak_lr) and peak_lr > 0):
            raise ValueError(f"peak_lr={peak_lr!r} must be a positive number")
        return cls(d_model, warmup_steps, scale=peak_lr * math.sqrt(d_model * warmup_steps))

    @property
    def peak_lr(self) -> float:
        return self.lr(self.warmup_steps)

    def lr(self, step: int) -> float:
        """Learning rate of optimizer update number `step` (1-based)."""
        if step < 1:
            raise ValueError(f"step={step} must be >= 1 (Eq. 3 counts updates from 1)")
        lr: float = self.scale * self.d_model**-0.5 * min(step**-0.5, step * self.warmup_steps**-1.5)
        return lr

    def state_dict(self) -> dict[str, Any]:
        return {"name": "inverse_sqrt", **asdict(self)}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> InverseSqrtSchedule:
        if state.get("name") != "inverse_sqrt":
            raise ValueError(f"not an inverse_sqrt schedule state: name={state.get('name')!r}")
        return cls(int(state["d_model"]), int(state["warmup_steps"]), float(state["scale"]))


def lambda_lr(optimizer: Optimizer, schedule: InverseSqrtSchedule) -> LambdaLR:
    """The same schedule as a torch scheduler, for callers who prefer scheduler.step() after optimizer.step().

    Sets every group's base lr to 1 so the lambda is the rate itself; LambdaLR counts from 0, Eq. 3 from 1.
    """
    for group in optimizer.param_groups:
        group["lr"] = 1.0
        group["initial_lr"] = 1.0
    return LambdaLR(optimizer, lambda epoch: schedule.lr(epoch + 1))
