"""Schemas of hyperparameter sweeps: the search space, objective and budget of POST /v1/sweeps, and what a sweep
and its trials look like (app/services/sweeps.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, StringConstraints, Tag, model_validator

from app.schemas.common import Input, Output
from app.schemas.jobs import JobCreate, JobStatus, Objective
from app.schemas.registry_names import RegisteredName

SweepStatus = Literal["running", "succeeded", "failed", "cancelled"]
# The validation metrics a job records (worker/tasks/training.py eval_metrics) that a sweep may optimise; bleu and
# chrf only for translation. A metric's direction when the request gives none: scores up, losses down.
# A job of several language pairs records each pair's too, under "name/pair" (bleu/en-nl): a sweep may optimise one.
METRIC_DIRECTIONS = {"bleu": "maximize", "chrf": "maximize", "valid_loss": "minimize", "valid_ppl": "minimize"}
Metric = Annotated[
    str,
    StringConstraints(pattern=r"^(bleu|chrf|valid_loss|valid_ppl)(/[A-Za-z0-9_-]{2,40})?$"),
    Field(examples=["bleu", "chrf", "valid_loss", "valid_ppl", "bleu/en-nl"]),
]
Direction = Literal["maximize", "minimize"]
ChoiceValue = str | bool | int | float
MAX_DIMENSIONS = 20
MAX_FIRST_TRIALS = 20


class Choice(Input):
    """One of the values (Optuna's suggest_categorical)."""

    type: Literal["choice"]
    values: list[ChoiceValue] = Field(min_length=1, max_length=50)


class FloatRange(Input):
    """A float in [low, high], uniform or (log) uniform in its logarithm (Optuna's suggest_float)."""

    type: Literal["float"]
    low: float
    high: float
    log: bool = Field(False, description="sample uniformly in log space (a learning rate); low must be > 0")

    @model_validator(mode="after")
    def _ordered(self) -> FloatRange:
        _check_range(self.low, self.high, self.log)
        return self


class IntRange(Input):
    """An integer in [low, high], every `step`-th, or uniform in its logarithm (Optuna's suggest_int)."""

    type: Literal["int"]
    low: int
    high: int
    step: int = Field(1, ge=1)
    log: bool = Field(False, description="sample uniformly in log space (a warm-up length); step must be 1")

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        _check_range(self.low, self.high, self.log)
        if self.log and self.step != 1:
            raise ValueError(f"a log range takes step 1, got step={self.step}")
        return self


def _check_range(low: float, high: float, log: bool) -> None:
    if low > high:
        raise ValueError(f"low={low} is above high={high}")
    if log and low <= 0:
        raise ValueError(f"a log range needs low > 0, got low={low}")


def _dimension_type(value: Any) -> str | None:
    return value.get("type") if isinstance(value, dict) else getattr(value, "type", None)


# Told apart by "type" (a callable discriminator: Input's NUL guard, a before-validator, rules out a field one).
Dimension = Annotated[
    Annotated[Choice, Tag("choice")] | Annotated[FloatRange, Tag("float")] | Annotated[IntRange, Tag("int")],
    Discriminator(
        _dimension_type,
        custom_error_type="dimension_type",
        custom_error_message="a dimension's type is choice, float or int",
    ),
]


class SweepObjective(Input):
    metric: Metric | None = Field(
        None, description="the validation metric to optimise; default: bleu for translation, valid_loss otherwise"
    )
    direction: Direction | None = Field(None, description="default: maximize for bleu and chrf, minimize for losses")


class SweepBudget(Input):
    """When to stop starting trials: whichever comes first. At least one is required."""

    minutes: float | None = Field(
        None,
        gt=0,
        le=60 * 24 * 30,
        description="worker minutes over all trials (each trial's run time, times its devices); a trial is started "
        "while the minutes spent plus those the running trials may still take stay under it",
    )
    trials: int | None = Field(None, ge=1, le=1000, description="trials started, pruned and failed ones included")

    @model_validator(mode="after")
    def _one_given(self) -> SweepBudget:
        if self.minutes is None and self.trials is None:
            raise ValueError("give minutes, trials or both")
        return self


class SweepCreate(Input):
    name: RegisteredName = Field(
        description="the registry name the best trial's model is registered under, with alias best (name@best)"
    )
    job: JobCreate = Field(
        description="the fields every trial shares (dataset, objective, settings); a trial's own settings replace "
        "those the space names. Give training.max_minutes for trials of a fixed time (what pruning compares)"
    )
    space: dict[str, Dimension] = Field(
        min_length=1,
        max_length=MAX_DIMENSIONS,
        description='the settings searched, by their place in the job: "training.lr_scale", "model.dropout", '
        '"model.preset", ...; each value is checked against the job schema',
    )
    objective: SweepObjective = SweepObjective()
    budget: SweepBudget
    max_concurrent_trials: int = Field(1, ge=1, le=64, description="trials queued or running at once")
    sampler: Literal["tpe", "random", "grid"] = Field(
        "tpe", description="Optuna's TPE (default), random search, or a grid over choice dimensions (each point once)"
    )
    pruner: Literal["asha", "median", "none"] = Field(
        "asha",
        description="asha: Optuna's asynchronous successive halving (rungs at 1/9 and 1/3 of a trial's budget); "
        "median: stop a trial below the median of the others at the same point; none",
    )
    seed: int = Field(0, ge=0, le=2**31 - 1, description="the sampler's seed: the same sweep samples the same trials")
    first_trials: list[dict[str, ChoiceValue]] = Field(
        default_factory=list,
        max_length=MAX_FIRST_TRIALS,
        description="settings to try first, in order, before the sampler's own (Ray Tune's points_to_evaluate, "
        "Optuna's enqueue_trial): the values you train with today, so that the sweep is measured against them and "
        "its pruner compares the others with them. A point names some or all of the space's settings, each within "
        "its dimension; the sampler draws the rest. Not with the grid sampler",
    )


class TrialCurve(Output):
    """The objective at each evaluation of a trial: the `resource` (seconds of training, or steps) it was
    reported at, and its value."""

    at: list[int]
    values: list[float]


class TrialPublic(Output):
    number: int
    job_id: str | None = Field(description="null for a trial whose sampled settings the service refused")
    status: JobStatus | Literal["invalid"]
    params: dict[str, Any]
    given: bool = Field(False, description="its settings came from the request's first_trials, not the sampler")
    value: float | None = Field(description="the objective of the trial's model (complete trials only)")
    best_value: float | None = Field(description="the best objective it reported")
    curve: TrialCurve
    stop_reason: str | None = Field(None, description="why it stopped early: pruned (by whom, where), its error")
    model_id: str | None = None
    worker_minutes: float | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class BestTrial(Output):
    number: int
    job_id: str | None
    value: float
    params: dict[str, Any]
    model_id: str | None = None
    model_ref: str | None = Field(None, description="name@best once the sweep registered it")


class SweepPublic(Output):
    id: str
    name: str
    status: SweepStatus
    objective: Objective
    metric: Metric
    direction: Direction
    resource: Literal["seconds", "steps"] = Field(description="what trial curves and pruning rungs are indexed by")
    space: dict[str, Any]
    job: dict[str, Any] = Field(description="the fixed job fields, as given")
    budget: SweepBudget
    max_concurrent_trials: int
    sampler: str
    pruner: str
    seed: int
    first_trials: list[dict[str, Any]] | None = Field(
        None, description="the settings tried first, as given (GET /v1/sweeps/{id})"
    )
    cancel_requested: bool
    trial_counts: dict[str, int] = Field(description="trials by status")
    worker_minutes: float = Field(description="worker minutes spent by its trials so far")
    best: BestTrial | None
    importance: dict[str, float] | None = Field(
        None, description="each setting's share of the objective's variation (Optuna's PED-ANOVA), summing to 1"
    )
    stop_reason: str | None
    error: str | None
    trials: list[TrialPublic] | None = Field(None, description="every trial, by number (GET /v1/sweeps/{id})")
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
