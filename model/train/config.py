"""The settings of one training run (TrainConfig) and the error a user can fix (TrainingError).

TrainConfig is a job's TrainSettings (model/train/settings.py: each field and its default declared once, for the
API and the trainer alike) plus the fields only the trainer sets. Torch-free apart from the schedule it builds
(the API imports model/train/settings.py, not this), and shared by every part of training: data preparation, the
optimizer step, evaluation and the loop.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from model.train.budget import batch_lr_scale
from model.train.schedule import InverseSqrtSchedule
from model.train.settings import MAX_KEEP_CHECKPOINTS, Precision, TrainSettings

# preempted: the worker is shutting down; a checkpoint of the current step is written so another resumes it.
StopReason = Literal["max_steps", "max_minutes", "early_stopping", "cancelled", "preempted"]


class TrainingError(ValueError):
    """A problem the user can fix (too little data, sequences too long, a diverging learning rate, ...)."""


PRECISIONS: tuple[Precision, ...] = get_args(Precision)
Beta = Annotated[float, Field(ge=0, lt=1)]


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value  # a JSON round trip gives a list


class TrainConfig(TrainSettings):
    """Everything one training run needs: a job's settings (TrainSettings, whose fields and defaults are the
    product's: model/train/settings.py) plus what a job cannot set. Validated when built (pydantic: a bad value
    raises a ValueError naming the field); model_copy(update=...) does not validate, so build a new one instead."""

    device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?|mps)$")
    peak_lr: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="instead of lr_scale: the rate reached at step warmup_steps"
    )
    adam_betas: Annotated[tuple[Beta, Beta], BeforeValidator(_tuple)] = (0.9, 0.98)
    adam_eps: float = Field(1e-9, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    eval_max_sentences: int = Field(
        200, ge=1, description="validation sentences greedy-decoded for BLEU/chrF (decoding is slow)"
    )

    @field_validator("peak_lr")
    @classmethod
    def _one_rate(cls, peak_lr: float | None, info: ValidationInfo) -> float | None:
        lr_scale = info.data.get("lr_scale")
        if lr_scale is not None and peak_lr is not None:
            raise ValueError(f"give lr_scale={lr_scale} or peak_lr={peak_lr}, not both")
        return peak_lr

    @classmethod
    def from_settings(cls, settings: TrainSettings, **trainer: Any) -> TrainConfig:
        """The config of a job's settings (TrainSettings or a schema that extends it, such as the API's), with
        `trainer`'s fields on top (device=..., or a setting replaced)."""
        return cls(**{**{name: getattr(settings, name) for name in TrainSettings.model_fields}, **trainer})

    def schedule(self, d_model: int) -> InverseSqrtSchedule:
        if self.peak_lr is not None:
            return InverseSqrtSchedule.from_peak_lr(self.peak_lr, d_model, self.warmup_steps)
        return InverseSqrtSchedule(d_model, self.warmup_steps, self.resolved_lr_scale)

    @property
    def resolved_lr_scale(self) -> float:
        """lr_scale as given, else the default for one device's update (max_tokens_per_batch x grad_accum_steps;
        model/train/budget.py batch_lr_scale): a data-parallel job's update is larger and gets the same, more
        cautious, scale."""
        if self.lr_scale is not None:
            return self.lr_scale
        return batch_lr_scale(self.max_tokens_per_batch * self.grad_accum_steps)

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
        return self.model_dump()

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """Inverse of to_dict, also of the dicts of older versions (checkpoints store one); unknown keys are
        refused. A key saved before its field existed is missing and gets today's default."""
        d = dict(d)
        if "bf16" in d:  # configs saved before `precision`: bf16=True meant "bf16 on a GPU", False "fp32"
            legacy = d.pop("bf16")
            d.setdefault("precision", None if legacy else "fp32")
        if d.get("average_last") == 0:  # before average_last >= 1: 0 and 1 both meant "no averaging"
            d["average_last"] = 1
        if "keep_checkpoints" in d and d["keep_checkpoints"] is None:  # before the bound: None kept every one
            d["keep_checkpoints"] = MAX_KEEP_CHECKPOINTS
        unknown = sorted(set(d) - set(cls.model_fields))
        if unknown:
            raise ValueError(f"unknown TrainConfig key(s) {unknown}")
        return cls.model_validate(d)
