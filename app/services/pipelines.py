"""A pipeline request checked and stored, and a pipeline as the API shows it.

POST /v1/pipelines comes here: everything that can be checked before the first step runs is (the datasets, their
kinds and languages, the models, the registry name, the steps' job settings against the datasets that exist), so a
bad request is a 4xx naming the problem rather than a pipeline that fails later; then
app/services/pipeline_runner.py moves it on.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.core.settings import Settings
from app.db.keys import Caller
from app.db.pipeline_tables import Pipeline
from app.db.tables import Dataset, TrainedModel
from app.schemas.pipelines import BacktranslationCreate, DistillationCreate, PipelinePublic, StepPublic
from app.services import job_submission, model_refs, pipeline_steps, target_languages
from app.services.dataset_translations import same_language, text_language
from app.services.datasets import refuse_failed
from app.services.errors import InvalidField


def _dataset(session: Session, owner_id: str, dataset_id: Any, field: str, kind: str) -> Dataset:
    dataset = session.get(Dataset, str(dataset_id))
    if dataset is None or dataset.owner_id != owner_id:
        raise InvalidField(field, f"dataset {dataset_id} not found")
    if dataset.kind != kind:
        raise InvalidField(field, f"dataset {dataset_id} is {dataset.kind}; {field} must be a {kind} dataset")
    refuse_failed(dataset, field)
    return dataset


def _model(session: Session, owner_id: str, ref: str, field: str) -> TrainedModel:
    model = model_refs.resolve(session, ref, owner_id)
    if model is None:
        raise InvalidField(field, f"model {ref} not found")
    if model.objective != "translation":
        raise InvalidField(field, f"model {ref} was trained for {model.objective}, not translation")
    return model


def _agree(field: str, what: str, known: tuple[str | None, str], expected: str | None, why: str) -> None:
    """InvalidField when a language that is known (declared, or identified by the data report) is not the one the
    pipeline needs there."""
    language, how = known
    if language and expected and not same_language(language, expected):
        raise InvalidField(field, f"{what} is in {language} ({how}); {why} {expected}")


def _translate_into(
    model: TrainedModel, field: str, reads: str | None, writes: str | None, dataset: Dataset
) -> str | None:
    """The target language a model of several pairs is asked for when it translates the pipeline's text (`writes`,
    the side of `dataset` it makes), checked against its pairs (a pair it never saw together is allowed: zero-shot);
    None for a model of one pair. InvalidField on `field` when the dataset does not say which, or the model cannot."""
    pairs = target_languages.trained_pairs(model)
    if not pairs:
        return None
    trained = ", ".join(f"{source}->{target}" for source, target in pairs)
    if writes is None:
        raise InvalidField(
            field,
            f"model {model.id} was trained on {trained}: declare the languages of dataset {dataset.id}, so the "
            "pipeline knows which of its targets to translate into",
        )
    known = {code for pair in pairs for code in pair}
    target = next((code for code in sorted(known) if same_language(code, writes)), writes)
    source = next((code for code in sorted(known) if reads and same_language(code, reads)), None)
    try:
        return target_languages.for_model(model, target, source).tag
    except InvalidField as exc:
        raise InvalidField(field, f"{exc.message}; dataset {dataset.id} needs it to write {writes}") from exc


def _backtranslation(session: Session, owner_id: str, body: BacktranslationCreate) -> dict[str, Any]:
    """The checked settings of a back-translation, its languages and its reverse model's id resolved."""
    real = _dataset(session, owner_id, body.dataset_id, "dataset_id", "parallel")
    text = _dataset(session, owner_id, body.monolingual_dataset_id, "monolingual_dataset_id", "monolingual")
    if body.valid_dataset_id is not None:
        _dataset(session, owner_id, body.valid_dataset_id, "valid_dataset_id", "parallel")
    source, target = text_language(real, "source"), text_language(real, "target")
    _agree(
        "monolingual_dataset_id", f"dataset {text.id}'s text", text_language(text, "text"), target[0],
        f"back-translation needs text in the target language of dataset {real.id}:",
    )  # fmt: skip
    settings = body.model_dump(mode="json", exclude={"reverse_job", "job"})
    settings |= {"reverse_job": body.reverse_job.given(), "job": body.job.given(), "decoding": body.decoding.settings()}
    if body.reverse_model_id is not None:
        reverse = _model(session, owner_id, body.reverse_model_id, "reverse_model_id")
        reads = (reverse.source_language, "the model's source language")
        writes = (reverse.target_language, "the model's target language")
        _agree("reverse_model_id", f"model {reverse.id} translates from a language that", reads, target[0],
               f"it must read the target language of dataset {real.id}:")  # fmt: skip
        _agree("reverse_model_id", f"model {reverse.id} translates into a language that", writes, source[0],
               f"it must write the source language of dataset {real.id}:")  # fmt: skip
        settings["reverse_model_id"] = reverse.id
        settings["translate_into"] = _translate_into(reverse, "reverse_model_id", target[0], source[0], real)
        source = (source[0] or reverse.target_language, source[1])
        target = (target[0] or reverse.source_language, target[1])
    settings["languages"] = {"source": source[0], "target": target[0]}
    return settings


def _distillation(session: Session, owner_id: str, body: DistillationCreate) -> dict[str, Any]:
    """The checked settings of a distillation, its teacher's id and languages resolved."""
    teacher = _model(session, owner_id, body.teacher_model_id, "teacher_model_id")
    data = _dataset(session, owner_id, body.dataset_id, "dataset_id", "parallel")
    if body.valid_dataset_id is not None:
        _dataset(session, owner_id, body.valid_dataset_id, "valid_dataset_id", "parallel")
    _agree("dataset_id", f"dataset {data.id}'s source", text_language(data, "source"), teacher.source_language,
           f"teacher {teacher.id} translates from")  # fmt: skip
    _agree("dataset_id", f"dataset {data.id}'s target", text_language(data, "target"), teacher.target_language,
           f"teacher {teacher.id} translates into")  # fmt: skip
    settings = body.model_dump(mode="json", exclude={"job"})
    settings |= {"job": body.job.given(), "teacher_model_id": teacher.id, "decoding": body.decoding.settings()}
    reads, writes = text_language(data, "source")[0], text_language(data, "target")[0]
    settings["translate_into"] = _translate_into(teacher, "teacher_model_id", reads, writes, data)
    settings["languages"] = {
        "source": teacher.source_language or reads,
        "target": teacher.target_language or settings["translate_into"],
    }
    return settings


def create(
    session: Session, settings: Settings, key: Caller, body: BacktranslationCreate | DistillationCreate
) -> Pipeline:
    """Check the request (InvalidField naming the field; Forbidden for register_as without models:write) and
    insert the running pipeline with its plan; the caller commits and advances it."""
    if isinstance(body, DistillationCreate) and (body.student_beam_size or 0) > settings.max_beam_size:
        raise InvalidField(
            "student_beam_size",
            f"student_beam_size={body.student_beam_size} exceeds MAX_BEAM_SIZE={settings.max_beam_size}",
        )
    checked = (
        _backtranslation(session, key.owner_id, body)
        if isinstance(body, BacktranslationCreate)
        else _distillation(session, key.owner_id, body)
    )
    pipeline = Pipeline(
        owner_id=key.owner_id, key_id=key.id, key_prefix=key.prefix, kind=body.kind, name=body.name,
        settings=checked, steps=pipeline_steps.plan(checked), status="running", cancel_requested=False, version=0,
    )  # fmt: skip
    for step in pipeline.steps:  # each training step's job, against the datasets that exist now
        if step["kind"] == pipeline_steps.TRAIN:
            job = pipeline_steps.job_body(pipeline, step["name"], {})
            job_submission.check_registering(key, job)
            try:
                if job.init_model_id is not None:  # a student from its teacher: the teacher's architecture
                    job = job_submission.as_run(session, key.owner_id, job)[0]
                job_submission.validate(session, settings, key.owner_id, job)
            except InvalidField as exc:
                named = exc.field if exc.field.split(".")[0] in ("dataset_id", "valid_dataset_id") else None
                prefix = "reverse_job" if step["name"] == "reverse" else "job"
                raise InvalidField(named or f"{prefix}.{exc.field}", exc.message) from exc
    session.add(pipeline)
    return pipeline


def public(session: Session, pipeline: Pipeline) -> PipelinePublic:
    steps = []
    for step in pipeline.steps:
        now = pipeline_steps.state(session, step)
        steps.append(
            StepPublic(
                name=step["name"],
                kind=step["kind"],
                id=step["id"],
                status=now.status,  # type: ignore[arg-type]
                error=now.error,
                url=now.url,
                output=now.output,
                earlier=step.get("earlier", []),
            )  # fmt: skip
        )
    return PipelinePublic(
        id=pipeline.id,
        kind=pipeline.kind,  # type: ignore[arg-type]  # one of the kinds, as created
        name=pipeline.name,
        status=pipeline.status,  # type: ignore[arg-type]  # one of PipelineStatus, written by the runner
        error=pipeline.error,
        cancel_requested=pipeline.cancel_requested,
        settings=pipeline.settings,
        steps=steps,
        model_id=pipeline.model_id,
        created_at=pipeline.created_at,
        updated_at=pipeline.updated_at,
        finished_at=pipeline.finished_at,
    )
