"""Creating a sweep (the pure part of POST /v1/sweeps): its search space checked against the job schema, its
study begun; and the job body of each trial. Running it, trial after trial, is sweep_runner.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.db.keys import Caller
from app.db.tables import Sweep
from app.schemas.jobs import MAX_TAGS, JobCreate, ModelSpec, TrainingSpec
from app.schemas.sweeps import METRIC_DIRECTIONS, SweepCreate
from app.services import idempotency, job_submission, sweep_study
from app.services.errors import InvalidField

SECTIONS: dict[str, Any] = {"model": ModelSpec, "training": TrainingSpec}
TRANSLATION_METRICS = ("bleu", "chrf")
MIN_EVAL_MINUTES = 0.25  # a trial evaluates at most this often, however short its time budget


def request_digest(body: SweepCreate) -> str:
    canonical = json.dumps(body.model_dump(mode="json", exclude_unset=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _set(config: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    """A copy of a job body with `section.field` set."""
    section, field = name.split(".", 1)
    out = copy.deepcopy(config)
    out.setdefault(section, {})[field] = value
    return out


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def _validate_job(session: Session, settings: Settings, owner_id: str, body: JobCreate) -> list[str]:
    """What job_submission.new_job checks of a trial's job, before any exists (the quota aside); the names of its
    language pairs (en-nl), as its metrics carry them (none for a job of one pair)."""
    if body.register_as is not None:
        raise InvalidField("job.register_as", "a sweep registers its best trial's model under the sweep's name")
    body, pairs = job_submission.as_run(session, owner_id, body)
    job_submission.validate(session, settings, owner_id, body)
    return [f"{p.source_language}-{p.target_language}" for p in pairs]


def _check_names(space: dict[str, Any]) -> None:
    for name in space:
        section, _, field = name.partition(".")
        schema = SECTIONS.get(section)
        if schema is None or field not in schema.model_fields:
            known = sorted(f"{s}.{f}" for s, model in SECTIONS.items() for f in model.model_fields)
            raise InvalidField(
                "space",
                f"{name!r} is not a job setting: a dimension names a field of the job's model or training section, "
                f"one of {', '.join(known)}",
            )


def _candidates(dim: dict[str, Any]) -> list[Any]:
    """The values of a dimension that bound what a trial may get: every choice, or a range's two ends."""
    return list(dim["values"]) if dim["type"] == "choice" else [dim["low"], dim["high"]]


def _check_values(
    session: Session, settings: Settings, owner_id: str, base: dict[str, Any], space: dict[str, Any]
) -> None:
    """Each choice and each end of each range, put into the fixed job, makes a job the service accepts."""
    for name, dim in space.items():
        for value in _candidates(dim):
            try:
                body = JobCreate.model_validate(_set(base, name, value))
                _validate_job(session, settings, owner_id, body)
            except ValidationError as exc:
                raise InvalidField("space", f"{name}={value!r} makes no valid job: {_first_error(exc)}") from exc
            except InvalidField as exc:
                raise InvalidField("space", f"{name}={value!r} makes no valid job: {exc.field}: {exc.message}") from exc


def validate(session: Session, settings: Settings, owner_id: str, body: SweepCreate) -> None:
    """Everything that can be known before the first trial; InvalidField (422) naming the field otherwise."""
    try:
        pairs = _validate_job(session, settings, owner_id, body.job)
    except InvalidField as exc:
        raise InvalidField(f"job.{exc.field}", exc.message) from exc
    space = {name: dim.model_dump() for name, dim in body.space.items()}
    _check_names(space)
    _check_values(session, settings, owner_id, body.job.model_dump(mode="json", exclude_unset=True), space)
    metric = body.objective.metric
    name, _, pair = (metric or "").partition("/")
    if pair and pair not in pairs:
        held = f"the job's pairs are {', '.join(pairs)}" if pairs else "the job has one pair (give job.pairs)"
        raise InvalidField("objective.metric", f"{metric} names the pair {pair!r}, but {held}")
    if name in TRANSLATION_METRICS and body.job.objective != "translation":
        raise InvalidField(
            "objective.metric",
            f"{metric} is scored on translations; a {body.job.objective} job records valid_loss and valid_ppl",
        )
    if body.sampler == "grid" and sweep_study.grid_size(space) is None:
        raise InvalidField("sampler", "a grid takes choice dimensions only; give each range as a choice of values")
    _check_first_trials(body, space)


def _choice(dim: dict[str, Any], value: Any) -> Any | None:
    """The choice equal to value (JSON's 2 is the choice 2.0), or None (never a choice); bool is an int in Python,
    but a choice of 1 does not take true, nor a choice of true 1."""
    for v in dim["values"]:
        if (
            value == v
            and isinstance(value, bool) == isinstance(v, bool)
            and isinstance(value, str) == isinstance(v, str)
        ):
            return v
    return None


def _within(dim: dict[str, Any], value: Any) -> str | None:
    """Why `value` is not a point of the dimension, or None."""
    if dim["type"] == "choice":
        if _choice(dim, value) is None:
            return f"{value!r} is not one of its values {dim['values']}"
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value!r} is not a number"
    if dim["type"] == "int" and (not float(value).is_integer() or (int(value) - dim["low"]) % dim.get("step", 1)):
        return f"{value!r} is not an integer of the range (low {dim['low']}, step {dim.get('step', 1)})"
    if not dim["low"] <= value <= dim["high"]:
        return f"{value!r} is outside [{dim['low']}, {dim['high']}]"
    return None


def _check_first_trials(body: SweepCreate, space: dict[str, Any]) -> None:
    """Each first trial names settings of the space with values its dimensions hold; not with a grid, which
    visits its own points."""
    if body.first_trials and body.sampler == "grid":
        raise InvalidField("first_trials", "a grid visits each of its points once by itself: give no first_trials")
    for i, point in enumerate(body.first_trials):
        if not point:
            raise InvalidField(f"first_trials[{i}]", "is empty: name at least one setting of the space")
        for name, value in point.items():
            if name not in space:
                raise InvalidField(f"first_trials[{i}]", f"{name!r} is not in the space ({', '.join(sorted(space))})")
            if (why := _within(space[name], value)) is not None:
                raise InvalidField(f"first_trials[{i}]", f"{name}: {why}")


def create(
    session: Session, settings: Settings, caller: Caller, body: SweepCreate, idempotency_key: str | None
) -> tuple[Sweep, bool]:
    """Insert the sweep (running) and begin its study; its first trials are started by sweep_runner.advance.
    Returns (sweep, created); an idempotent replay returns the first sweep."""
    digest = request_digest(body)
    if idempotency_key is not None:
        existing = idempotency.find(session, Sweep, caller.owner_id, idempotency_key)
        if existing is not None:
            return idempotency.replay(existing, digest, idempotency_key, "sweep"), False
    validate(session, settings, caller.owner_id, body)
    metric = body.objective.metric or ("bleu" if body.job.objective == "translation" else "valid_loss")
    space = {name: dim.model_dump() for name, dim in body.space.items()}
    timed = body.job.training.max_minutes is not None or "training.max_minutes" in space
    sweep = Sweep(
        owner_id=caller.owner_id,
        key_id=caller.id,
        key_prefix=caller.prefix,
        name=body.name,
        objective=body.job.objective,
        job_config=body.job.model_dump(mode="json", exclude_unset=True),
        space=space,
        metric=metric,
        direction=body.objective.direction or METRIC_DIRECTIONS[metric.partition("/")[0]],
        budget_minutes=body.budget.minutes,
        budget_trials=body.budget.trials,
        max_concurrent=body.max_concurrent_trials,
        sampler=body.sampler,
        pruner=body.pruner,
        seed=body.seed,
        resource="seconds" if timed else "steps",
        idempotency_key=idempotency_key,
        request_sha256=digest,
    )
    session.add(sweep)
    try:
        session.flush()
        sweep_study.create(session, sweep, [_as_dimension(space, point) for point in body.first_trials])
        session.commit()
    except IntegrityError:  # a concurrent request with the same Idempotency-Key won the race
        session.rollback()
        existing = idempotency.find(session, Sweep, caller.owner_id, idempotency_key) if idempotency_key else None
        if existing is None:
            raise
        assert idempotency_key is not None
        return idempotency.replay(existing, digest, idempotency_key, "sweep"), False
    return sweep, True


def _as_dimension(space: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """A first trial's values as its dimensions give them: an int range's 3.0 as 3, a float range's 1 as 1.0."""

    def cast(dim: dict[str, Any], value: Any) -> Any:
        if dim["type"] == "choice":
            return _choice(dim, value)  # checked before: one of the choices
        return int(value) if dim["type"] == "int" else float(value)

    return {name: cast(space[name], value) for name, value in point.items()}


def trial_minutes(sweep: Sweep, params: dict[str, Any]) -> float | None:
    """A trial's training minutes: its own, if the space searches them, else the fixed job's."""
    minutes = params.get("training.max_minutes", sweep.job_config.get("training", {}).get("max_minutes"))
    return float(minutes) if minutes is not None else None


def trial_body(sweep: Sweep, number: int, params: dict[str, Any]) -> JobCreate:
    """The job of trial `number`: the fixed fields, its settings, a name and tag that tell whose trial it is, and
    an evaluation cadence that lets the pruner compare it early (unless the fixed job gives one)."""
    config = copy.deepcopy(sweep.job_config)
    for name, value in params.items():
        config = _set(config, name, value)
    training = config.setdefault("training", {})
    if "eval_every" not in training and "eval_every_minutes" not in training:
        minutes = trial_minutes(sweep, params)
        if minutes is not None:  # evaluations at each ninth of its time: the pruner's rungs (sweep_study.py)
            training["eval_every_minutes"] = max(MIN_EVAL_MINUTES, minutes * sweep_study.FIRST_RUNG)
        else:
            training["eval_every"] = max(1, int(training.get("max_steps", 2000) * sweep_study.FIRST_RUNG))
    config["name"] = f"{sweep.name} #{number}"
    tags = list(config.get("tags", []))
    if len(tags) < MAX_TAGS:
        tags.append(f"sweep:{sweep.name}")
    config["tags"] = tags
    return JobCreate.model_validate(config)
