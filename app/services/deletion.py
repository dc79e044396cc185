"""Deleting a job, a model, a name or a dataset: every row in one transaction, the files left to the collector; a
job's worker minutes stay counted.

Each deletion records tombstones of the store prefixes its files live under (app/db/tombstone_rows.py) with the row
deletion, so nothing is half deleted: a failed commit leaves rows and files, a committed one leaves files that the
collector (worker/tasks/collect.py) deletes after the grace period. Refusals name what stands in the way.
The caller commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from app.db import tombstone_rows
from app.db.background_tables import Evaluation
from app.db.base import utcnow
from app.db.dataset_translation_tables import DatasetTranslation
from app.db.job_rows import ACTIVE_STATES
from app.db.keys import Caller
from app.db.registry_tables import ModelAlias, ModelName
from app.db.tables import Dataset, Job, Sweep, TrainedModel
from app.db.task_rows import QUEUED, RUNNING
from app.db.usage_tables import DeletedJobUsage
from app.services import quotas, registry
from app.services.errors import Conflict, NotFound
from app.services.evaluations import evaluations_prefix
from app.services.exports import exports_prefix
from app.services.file_translations import translations_prefix


@dataclass(frozen=True)
class AliasOutcome:
    """What deleting a model did to one alias that pointed at it: dropped, or moved to another version."""

    name: str
    alias: str
    action: Literal["dropped", "moved"]
    model_id: str | None = None  # where a moved alias points now
    version: int | None = None


def job_prefix(job_id: str) -> str:
    """A job's checkpoints (worker/tasks/training.py) and everything else it stored."""
    return f"jobs/{job_id}"


def delete_job(session: Session, job: Job) -> None:
    """Delete a job that has stopped, with its metrics, logs, checkpoints, tags and probes (ON DELETE CASCADE).
    The model it trained stays and keeps serving: its `job_id` names the deleted job."""
    if job.status in ACTIVE_STATES:
        state = "cancelling" if job.cancel_requested else job.status
        raise Conflict(
            f"job {job.id} is {state}: cancel it first (POST /v1/jobs/{job.id}/cancel) "
            "and delete it once it has stopped"
        )
    if job.sweep_id is not None:
        sweep = session.get(Sweep, job.sweep_id)
        if sweep is not None and sweep.status == "running":
            raise Conflict(f"job {job.id} is a trial of sweep {sweep.id}, which is running: stop the sweep first")
    tombstone_rows.bury(session, job.owner_id, "job", job.id, [job_prefix(job.id)])
    keep_usage(session, job)
    # Conditional: a job that a worker took in the meantime (a re-queued one) is not deleted under it.
    gone = session.execute(delete(Job).where(Job.id == job.id, Job.status.not_in(ACTIVE_STATES)))
    if getattr(gone, "rowcount", 0) != 1:
        session.rollback()
        raise Conflict(f"job {job.id} started in the meantime: cancel it first")
    session.expunge(job)


def keep_usage(session: Session, job: Job) -> None:
    """The job's run, kept for the daily worker-minutes quota (app/services/quotas.py): deleting a job never gives
    its minutes back."""
    if job.started_at is None:
        return  # it never ran
    finished = job.finished_at or utcnow()
    processes = quotas.processes(job.training_config)
    session.add(
        DeletedJobUsage(
            owner_id=job.owner_id, job_id=job.id, started_at=job.started_at, finished_at=finished, processes=processes
        )
    )


def model_prefixes(model: TrainedModel) -> list[str]:
    """Where a model's files are: its weights, and the exports, hypotheses and translated files made from it."""
    return [
        model.storage_key,
        exports_prefix(model.id),
        evaluations_prefix(model.id),
        translations_prefix(model.id),
    ]


def _bury_model(session: Session, model: TrainedModel) -> None:
    tombstone_rows.bury(session, model.owner_id, "model", model.id, model_prefixes(model))
    session.delete(model)  # tags, aliases, evaluations and file translations: ON DELETE CASCADE


def alias_names(model: TrainedModel) -> list[str]:
    return [f"{row.name}@{row.alias}" for row in model.alias_rows]


def delete_model(
    session: Session, caller: Caller, model: TrainedModel, drop_aliases: bool, move_to: TrainedModel | None
) -> list[AliasOutcome]:
    """Delete a model. Aliases pointing at it refuse the deletion (409 naming them) unless they are dropped or moved
    to `move_to`, another version of the same name; every move is recorded in the alias's history."""
    rows = list(model.alias_rows)
    if rows and not drop_aliases and move_to is None:
        raise Conflict(
            f"model {model.id} is what {', '.join(alias_names(model))} point(s) at: move the aliases first, or ask "
            "for ?aliases=drop or ?move_aliases_to=<another version of the name>"
        )
    outcomes: list[AliasOutcome] = []
    for row in rows:
        if move_to is not None:
            registry.point_alias(session, caller, row.name, row.alias, move_to)
            outcomes.append(AliasOutcome(row.name, row.alias, "moved", move_to.id, move_to.version))
        else:
            outcomes.append(AliasOutcome(row.name, row.alias, "dropped"))
    if move_to is None:
        registry.drop_aliases(session, caller, model)
    session.expire(model, ["alias_rows"])
    _bury_model(session, model)
    session.flush()
    return outcomes


def versions_of(session: Session, owner_id: str, name: str) -> list[TrainedModel]:
    query = (
        select(TrainedModel)
        .where(TrainedModel.owner_id == owner_id, TrainedModel.name == name)
        .order_by(TrainedModel.version)
    )
    return list(session.scalars(query))


def delete_name(
    session: Session, caller: Caller, name: str, delete_versions: bool
) -> tuple[list[TrainedModel], list[AliasOutcome]]:
    """Delete a registered name with all its versions and aliases (each removal recorded); the name is free again
    and its versions count from 1. Versions refuse it (409 listing them) unless `delete_versions`."""
    versions = versions_of(session, caller.owner_id, name)
    if versions and not delete_versions:
        listed = ", ".join(f"{name}@{m.version} ({m.id})" for m in versions)
        raise Conflict(f"name {name} has versions {listed}: ask for ?versions=delete to delete them with it")
    aliases = select(ModelAlias).where(ModelAlias.owner_id == caller.owner_id, ModelAlias.name == name)
    dropped = []
    for row in list(session.scalars(aliases.order_by(ModelAlias.alias))):
        dropped.append(AliasOutcome(row.name, row.alias, "dropped"))
        registry.remove_alias(session, caller, row)
    for model in versions:
        session.expire(model, ["alias_rows"])
        _bury_model(session, model)
    session.execute(delete(ModelName).where(ModelName.owner_id == caller.owner_id, ModelName.name == name))
    session.flush()
    return versions, dropped


# where a job or a sweep names a dataset
DATASET_FIELDS = ("dataset_id", "valid_dataset_id", "test_dataset_id", "mix_dataset_id")


def dataset_users(session: Session, dataset: Dataset) -> list[str]:
    """What would fail mid-run without the dataset, each named: active jobs that train, validate or test on it,
    evaluations and translations of it queued or running, datasets being filtered from it, running sweeps whose
    trials name it."""
    users = []
    fields = (getattr(Job, field) == dataset.id for field in DATASET_FIELDS)
    named = or_(*fields, Job.pair_rows.any(dataset_id=dataset.id))
    jobs = session.scalars(select(Job.id).where(named, Job.status.in_(ACTIVE_STATES)).order_by(Job.id)).all()
    if jobs:
        users.append(f"active job(s) {', '.join(jobs)}")
    tasks: tuple[tuple[type[Evaluation] | type[DatasetTranslation], str], ...] = (
        (Evaluation, "evaluation(s)"),
        (DatasetTranslation, "dataset translation(s)"),
    )
    for table, what in tasks:
        pending = table.status.in_((QUEUED, RUNNING))
        busy = session.scalars(select(table.id).where(table.dataset_id == dataset.id, pending).order_by(table.id)).all()
        if busy:
            users.append(f"{what} {', '.join(busy)} queued or running")
    children = session.scalars(
        select(Dataset.id).where(Dataset.parent_id == dataset.id, Dataset.status == "processing").order_by(Dataset.id)
    ).all()
    if children:
        users.append(f"dataset(s) {', '.join(children)} being filtered from it")
    sweeps = session.scalars(
        select(Sweep).where(Sweep.owner_id == dataset.owner_id, Sweep.status == "running").order_by(Sweep.id)
    )
    running = [sweep.id for sweep in sweeps if dataset.id in (sweep.job_config.get(f) for f in DATASET_FIELDS)]
    if running:
        users.append(f"running sweep(s) {', '.join(running)}")
    return users


def delete_dataset(session: Session, dataset: Dataset) -> None:
    """Delete a dataset nothing uses (409 naming what does), its file left to the collector (a worker still reading
    it finishes first); the datasets filtered from it keep their parent_id. The row is locked first, as a job,
    evaluation or filter that names it locks it (FOR SHARE): one submitted at the same moment either holds it, and
    the deletion sees it and refuses, or finds it gone."""
    locked = session.get(Dataset, dataset.id, with_for_update=True, populate_existing=True)
    if locked is None:
        raise NotFound("dataset", dataset.id)
    users = dataset_users(session, locked)
    if users:
        raise Conflict(f"dataset {locked.id} is used by {'; '.join(users)}: wait for them to finish or cancel them")
    if locked.storage_key:  # nothing for a dataset read in place: its URI is not ours
        tombstone_rows.bury(session, locked.owner_id, "dataset", locked.id, [f"datasets/{locked.id}"])
    session.delete(locked)
    session.flush()
