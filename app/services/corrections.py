"""Learning from corrections: people correct a model's translations, and an adaptation fine-tunes the model on them.

A correction is kept with the model it corrects (app/db/correction_tables.py). An adaptation gathers the corrections
of a model and of the models it descends from (parent_model_id: an adapted model's corrections add to its parent's),
the latest of each source, into a parallel dataset whose `lineage` names them; then submits a job that starts from
the model, trains on that dataset mixed with the model's original data (mixed fine-tuning: model/data/mixing.py)
and publishes its model as the next version of the model's registry name (`register_as`).
"""

from __future__ import annotations

import io
import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.db.correction_tables import Correction
from app.db.keys import Caller
from app.db.tables import Dataset, Job, TrainedModel
from app.schemas.corrections import AdaptationCreate, CorrectionCreate
from app.schemas.jobs import JobCreate
from app.services import job_submission
from app.services.datasets import create_upload, store_delete
from app.services.errors import InvalidField

# An adaptation's training settings unless it gives its own, measured on 500 corrections of a real domain shift
# (bench/corrections.py, bench/results/corrections-variants-cpu-2026-11-29.json): the best checkpoint by the chrF of
# the validation translations (held-out corrections and original rows), since the mix's validation loss rises from
# the first evaluations while both domains' translations improve; a tenth of the paper's learning rate, below a
# fine-tuning job's quarter: 2 minutes at 0.1 gained 7.4 BLEU on the new domain and lost none on the original one,
# at 0.25 gained 8.1 and lost 1.1.
ADAPTATION_TRAINING = {"best_metric": "chrf", "lr_scale": 0.1}
MAX_ANCESTORS = 32  # how far up parent_model_id an adaptation looks for corrections


def check_model(model: TrainedModel) -> None:
    if model.objective != "translation":
        raise InvalidField(
            "model_id", f"model {model.id} is a {model.objective} model: corrections are to translations"
        )


def create(session: Session, key: Caller, model: TrainedModel, body: CorrectionCreate) -> Correction:
    """A correction of `model`'s translation, added to the session (the caller commits)."""
    check_model(model)
    if "\n" in body.source or "\n" in body.corrected:
        raise InvalidField("corrected" if "\n" in body.corrected else "source", "one segment: no line breaks")
    correction = Correction(
        owner_id=model.owner_id,
        model_id=model.id,
        key_id=key.id,
        key_prefix=key.prefix,
        source=body.source.strip(),
        translation=body.translation.strip(),
        corrected=body.corrected.strip(),
    )
    if not correction.source or not correction.corrected:
        raise InvalidField("source" if not correction.source else "corrected", "only white space")
    session.add(correction)
    return correction


def lineage(session: Session, model: TrainedModel) -> list[str]:
    """The model's id, then its parent's, and so on up (the owner's models only; a cycle or a deleted parent ends
    it)."""
    chain = [model.id]
    parent = model.parent_model_id
    while parent and parent not in chain and len(chain) < MAX_ANCESTORS:
        row = session.get(TrainedModel, parent)
        if row is None or row.owner_id != model.owner_id:
            break
        chain.append(row.id)
        parent = row.parent_model_id
    return chain


def gathered(session: Session, model_ids: list[str]) -> list[Correction]:
    """The latest correction of each source among these models', oldest first."""
    rows = session.scalars(
        select(Correction).where(Correction.model_id.in_(model_ids)).order_by(Correction.created_at, Correction.id)
    ).all()
    latest = {row.source: row for row in rows}  # later rows replace earlier ones
    return sorted(latest.values(), key=lambda row: (row.created_at, row.id))


def _mix_dataset(session: Session, model: TrainedModel, body: AdaptationCreate) -> str:
    if body.mix_dataset_id is not None:
        return str(body.mix_dataset_id)
    job = session.get(Job, model.job_id) if model.job_id else None
    if job is None or job.dataset_id is None or session.get(Dataset, job.dataset_id) is None:
        raise InvalidField(
            "mix_dataset_id",
            f"model {model.id}'s training data is gone (its job or dataset was deleted, or it was imported): name "
            "a dataset of the original domain to mix in, so the model does not forget it",
        )
    return job.dataset_id


def _dataset_bytes(corrections: list[Correction]) -> bytes:
    lines = (json.dumps({"source": c.source, "target": c.corrected}, ensure_ascii=False) for c in corrections)
    return ("\n".join(lines) + "\n").encode("utf-8")


def adapt(
    session: Session, settings: Settings, key: Caller, model: TrainedModel, body: AdaptationCreate
) -> tuple[Job, Dataset, list[Correction], list[str]]:
    """The corrections as a dataset and the job adapting the model to them (queued; the caller dispatches it)."""
    check_model(model)
    register_as = body.register_as or model.name
    if register_as is None:
        raise InvalidField(
            "register_as", f"model {model.id} has no registry name: name the one the adapted model is published under"
        )
    models = lineage(session, model)
    corrections = gathered(session, models)
    if not corrections:
        raise InvalidField(
            "model_id", f"model {model.id} has no corrections yet: POST /v1/models/{model.id}/corrections first"
        )
    mix_dataset_id = _mix_dataset(session, model, body)
    training: dict[str, Any] = body.training.model_dump(exclude_unset=True) if body.training else {}
    job_body = JobCreate.model_validate(
        {
            "objective": "translation",
            "dataset_id": "00000000-0000-0000-0000-000000000000",  # the corrections' dataset, made below
            "init_model_id": model.id,
            "mix_dataset_id": mix_dataset_id,
            "mix_share": body.mix_share,
            "register_as": register_as,
            "name": body.name or f"adapt {register_as} to {len(corrections)} corrections",
            "training": {**ADAPTATION_TRAINING, **training, "max_minutes": body.max_minutes},
        }
    )
    job_submission.check_registering(key, job_body)
    dataset = create_upload(
        session,
        model.owner_id,
        f"corrections to {model.name}@{model.version}" if model.name else f"corrections to {model.id}",
        "parallel",
        "corrections.jsonl",
        io.BytesIO(_dataset_bytes(corrections)),
        fmt="jsonl",
        source_language=model.source_language,
        target_language=model.target_language,
        lineage={
            "kind": "corrections",
            "model_id": model.id,
            "models": models,
            "corrections": len(corrections),
            "through": corrections[-1].created_at.isoformat(),
        },
    )
    try:
        job_body = job_body.model_copy(update={"dataset_id": dataset.id})
        job, _ = job_submission.create(session, settings, key, job_body, None)
    except BaseException:
        session.rollback()
        row = session.get(Dataset, dataset.id)
        if row is not None:
            session.delete(row)
            session.commit()
        store_delete(f"datasets/{dataset.id}")
        raise
    return job, dataset, corrections, models
