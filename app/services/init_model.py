"""A job that starts from a trained model (`init_model_id`): it keeps that model's architecture and tokenizer; only
its dropout may change, and its layers may be fewer (it then starts from a spread subset of them: shrink and
fine-tune, model/train/shrink.py)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.schemas.jobs import JobCreate, ModelSpec
from app.services import model_refs
from app.services.errors import InvalidField

# What a job starting from a model may change in its `model` section: regularisation, not the architecture.
INIT_MODEL_MAY_CHANGE = ("dropout", "attention_dropout")
# What it may lower: the layers of each stack (the job starts from a subset of the model's)
INIT_MODEL_MAY_SHRINK = ("n_encoder_layers", "n_decoder_layers")


def inherit_model(session: Session, owner_id: str, body: JobCreate) -> JobCreate:
    """With init_model_id: the body whose `model` section is that model's architecture (and its job's vocabulary
    request), keeping the dropout it asks for; InvalidField (422) naming the field for a model that is not the
    caller's or an architecture field that differs from it. The tokenizer is that model's, so vocab_size must not
    differ either. Without init_model_id: the body as it is."""
    if body.init_model_id is None:
        return body
    parent = model_refs.resolve(session, body.init_model_id, owner_id)
    if parent is None:
        raise InvalidField("init_model_id", f"model {body.init_model_id} not found")
    config, given = parent.config, body.model.model_fields_set - {"preset"}
    parent_spec = (parent.job.model_config or {}) if parent.job else {}
    asked_vocab = parent_spec.get("vocab_size")
    inherited = {name: config[name] for name in ModelSpec.model_fields if name not in ("preset", "vocab_size")}
    for name in sorted(given - set(INIT_MODEL_MAY_CHANGE)):
        value = getattr(body.model, name)
        have = config["vocab_size"] if name == "vocab_size" else inherited[name]
        if name == "vocab_size" and value in (config["vocab_size"], asked_vocab):
            continue
        if name in INIT_MODEL_MAY_SHRINK and value > have:
            raise InvalidField(
                f"model.{name}",
                f"{name}={value} exceeds init model {parent.id}'s {have}: a job starting from a model may keep fewer "
                "of its layers, not add any",
            )
        if value != have and name not in INIT_MODEL_MAY_SHRINK:
            raise InvalidField(
                f"model.{name}",
                f"{name}={value!r} conflicts with init model {parent.id}'s {have!r}: a job starting from a model keeps "
                f"its architecture and tokenizer (only {' and '.join(INIT_MODEL_MAY_CHANGE)} may change, and the "
                "layers be fewer)",
            )
    changes = {name: getattr(body.model, name) for name in given & {*INIT_MODEL_MAY_CHANGE, *INIT_MODEL_MAY_SHRINK}}
    vocab = asked_vocab if isinstance(asked_vocab, int) else config["vocab_size"]
    # The preset names where the parent's architecture came from: its job's (the worker's choice, for an auto job).
    # An imported model has no job: its architecture is all in the overrides, over tiny's (as before auto).
    preset = parent_spec.get("preset") or (body.model.preset if not body.model.auto else "tiny")
    spec = ModelSpec.model_construct(
        preset=preset, vocab_size=vocab, **{**inherited, **changes}
    )  # validated once already: the parent's own job
    languages = {  # the parent's, where the request gives none
        field: getattr(body, field) or getattr(parent, field) for field in ("source_language", "target_language")
    }
    return body.model_copy(update={"model": spec, "init_model_id": parent.id, **languages})  # name@alias: as it is now
