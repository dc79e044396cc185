"""The Optuna side of a sweep: its study (sampler and pruner from the sweep's row), the search space as Optuna's
distributions, and the few calls the service makes (ask for a trial's settings, report a value, tell a result,
weigh the settings' importance). The study's storage is the sweep's journal in our database (sweep_journal.py):
callers lock the sweep first and commit after.

No sampler or pruner of our own: TPE, random and grid sampling, asynchronous successive halving and the median
rule are Optuna's, as is PED-ANOVA, the importance evaluator.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.pruners import BasePruner, MedianPruner, NopPruner, SuccessiveHalvingPruner
from optuna.samplers import BaseSampler, GridSampler, RandomSampler, TPESampler
from optuna.storages import JournalStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, Trial, TrialState
from sqlalchemy.orm import Session

from app.db.tables import Sweep
from app.services.sweep_journal import SweepJournal

optuna.logging.set_verbosity(optuna.logging.WARNING)  # its INFO line per trial would drown the service's own
log = logging.getLogger(__name__)

# Successive halving with a reduction factor of 3 and a first rung at 1/9 of a trial's budget: rungs at 1/9 and
# 1/3, so a trial is compared twice before it has spent a third of its time, and only the best third go on each
# time (Li et al., "A System for Massively Parallel Hyperparameter Tuning", 2020; Optuna's SuccessiveHalvingPruner).
REDUCTION_FACTOR = 3
FIRST_RUNG = 1 / 9
FIRST_TRIALS = "first_trials"  # the study's user attribute: the request's first_trials
GIVEN = "given"  # a trial's user attribute: its settings came from first_trials
# Random trials before TPE models the results: Optuna's default of 10 would be most of a one-hour sweep.
TPE_STARTUP_TRIALS = 5


def distributions(space: dict[str, Any]) -> dict[str, BaseDistribution]:
    """The sweep's space (app/schemas/sweeps.py dimensions, as stored) as Optuna distributions."""
    out: dict[str, BaseDistribution] = {}
    for name, dim in space.items():
        if dim["type"] == "choice":
            out[name] = CategoricalDistribution(dim["values"])
        elif dim["type"] == "float":
            out[name] = FloatDistribution(dim["low"], dim["high"], log=dim.get("log", False))
        else:
            out[name] = IntDistribution(dim["low"], dim["high"], log=dim.get("log", False), step=dim.get("step", 1))
    return out


def grid_size(space: dict[str, Any]) -> int | None:
    """How many points a grid over the space has (None unless every dimension is a choice)."""
    size = 1
    for dim in space.values():
        if dim["type"] != "choice":
            return None
        size *= len(dim["values"])
    return size


def trial_budget(sweep: Sweep) -> float:
    """What one trial may spend in the sweep's resource: training seconds (max_minutes) or steps (max_steps); the
    least a trial may get where the space searches it."""
    field, default = ("max_minutes", None) if sweep.resource == "seconds" else ("max_steps", 2000)
    dim = sweep.space.get(f"training.{field}")
    budget = (
        min(dim["values"])
        if dim and dim["type"] == "choice"
        else dim["low"]
        if dim
        else sweep.job_config.get("training", {}).get(field, default)
    )
    return float(budget) * (60 if sweep.resource == "seconds" else 1)


class _Grid(GridSampler):
    """Optuna's grid, less its call to study.stop() when the grid is done, which only its optimize loop accepts: a
    sweep counts its grid's points itself (sweep_runner._why_no_more)."""

    def after_trial(self, study: Any, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        return None


def sampler(sweep: Sweep, trials_so_far: int) -> BaseSampler:
    """A fresh sampler for the next trial. Its seed follows the sweep's seed and the trials so far: a study is
    reopened for every trial (by whichever process starts it), so a fixed seed would draw the same point again."""
    seed = (sweep.seed * 100_003 + trials_so_far) % 2**32
    if sweep.sampler == "random":
        return RandomSampler(seed=seed)
    if sweep.sampler == "grid":
        # The sweep's own seed: the grid shuffles its points by it, and trials are told apart by their point's index.
        return _Grid({name: dim["values"] for name, dim in sweep.space.items()}, seed=sweep.seed)
    with warnings.catch_warnings():  # multivariate and constant_liar are marked experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # multivariate: settings that interact (a rate and its warm-up) are modelled together; constant_liar: a
        # running trial counts as a poor one, so trials started together do not all draw the same point.
        return TPESampler(seed=seed, n_startup_trials=TPE_STARTUP_TRIALS, multivariate=True, constant_liar=True)


def pruner(sweep: Sweep) -> BasePruner:
    first_rung = max(1, int(trial_budget(sweep) * FIRST_RUNG))
    if sweep.pruner == "asha":
        return SuccessiveHalvingPruner(min_resource=first_rung, reduction_factor=REDUCTION_FACTOR)
    if sweep.pruner == "median":
        return MedianPruner(n_startup_trials=2, n_warmup_steps=first_rung)
    return NopPruner()


def _storage(session: Session, sweep: Sweep) -> JournalStorage:
    return JournalStorage(SweepJournal(session, sweep.id))


def create(session: Session, sweep: Sweep, first_trials: list[dict[str, Any]] | None = None) -> optuna.Study:
    """Begin the sweep's study; the settings to try first are kept with it (the study's user attributes) and
    enqueued one at a time as their turn comes (ask), so the study never holds a trial that has no job."""
    study = optuna.create_study(
        storage=_storage(session, sweep),
        study_name=sweep.id,
        direction=StudyDirection.MAXIMIZE if sweep.direction == "maximize" else StudyDirection.MINIMIZE,
        pruner=pruner(sweep),
    )
    if first_trials:
        study.set_user_attr(FIRST_TRIALS, first_trials)
    return study


def first_trials(study: optuna.Study) -> list[dict[str, Any]]:
    return list(study.user_attrs.get(FIRST_TRIALS, []))


def load(session: Session, sweep: Sweep) -> optuna.Study:
    """The sweep's study, replayed from its journal (the caller holds the sweep's lock)."""
    study = optuna.load_study(study_name=sweep.id, storage=_storage(session, sweep), pruner=pruner(sweep))
    study.sampler = sampler(sweep, len(study.get_trials(deepcopy=False)))
    return study


def trial(study: optuna.Study, number: int) -> FrozenTrial:
    return study.get_trials(deepcopy=False)[number]  # a study's trials are numbered 0, 1, ... in creation order


def ask(study: optuna.Study, space: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A new trial's number and settings: the next of the first trials given, while any is left (the sampler
    draws what it leaves out), else the sampler's."""
    given, number = first_trials(study), len(study.get_trials(deepcopy=False))
    if number < len(given):
        study.enqueue_trial(given[number], user_attrs={GIVEN: True})
    asked = study.ask(distributions(space))
    return asked.number, dict(asked.params)


def report(study: optuna.Study, number: int, at: int, value: float, may_prune: bool = True) -> bool:
    """Record the objective at `at` (seconds or steps) for a running trial; whether the pruner stops it (never
    where `may_prune` is false). A point already reported (an attempt resumed from a checkpoint evaluates again)
    is kept as first reported."""
    frozen = trial(study, number)
    if frozen.state != TrialState.RUNNING:
        return False
    running = Trial(study, frozen._trial_id)  # Optuna has no public lookup of a trial's storage id by number
    if at not in frozen.intermediate_values:
        running.report(value, at)
    return may_prune and running.should_prune()


def tell(
    study: optuna.Study, number: int, state: TrialState, value: float | None = None, reason: str | None = None
) -> None:
    """Finish a running trial (a no-op for one already finished: a redelivered end is harmless)."""
    frozen = trial(study, number)
    if frozen.state != TrialState.RUNNING:
        return
    if reason:
        set_stop_reason(study, number, reason)
    study.tell(number, value if state == TrialState.COMPLETE else None, state=state, skip_if_finished=True)


def set_stop_reason(study: optuna.Study, number: int, reason: str) -> None:
    """Why a trial stopped early (pruned, failed, refused), kept with it in the study."""
    Trial(study, trial(study, number)._trial_id).set_user_attr("stop_reason", reason)


def importance(study: optuna.Study) -> dict[str, float] | None:
    """Each setting's share of the objective's variation over the complete trials (PED-ANOVA, Optuna's default
    evaluator), or None while there are too few to tell (fewer than 3, or one that varies nothing)."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 3:
        return None
    try:
        return {name: float(share) for name, share in optuna.importance.get_param_importances(study).items()}
    except (ValueError, RuntimeError, ZeroDivisionError) as exc:  # e.g. every complete trial drew the same values
        log.info("sweep %s: no importance yet (%s)", study.study_name, exc)
        return None
