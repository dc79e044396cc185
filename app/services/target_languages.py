"""Which language a translate request asks a model for: a model of several pairs (a job's `pairs`) needs
`target_language`, one of the targets it was trained on (unless they share one); a pair it never saw together is
allowed (zero-shot: Johnson et al., 2017) and flagged where the request names its source language."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.db.tables import TrainedModel
from app.services.errors import InvalidField


@dataclass(frozen=True)
class Target:
    tag: str | None  # the target language whose token begins each source; None: the model has one target
    zero_shot: bool | None  # None: a model of one pair, or a request that does not name its source language


def _pairs_text(pairs: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{source}->{target}" for source, target in pairs)


def resolve(
    model_id: str,
    pairs: Sequence[tuple[str, str]],
    languages: tuple[str | None, str | None],
    target_language: str | None,
    source_language: str | None,
) -> Target:
    """The request's Target; InvalidField (422) naming what the model was trained on when it cannot be served."""
    if not pairs:
        trained = languages[1]
        if target_language is not None and trained is not None and target_language != trained:
            raise InvalidField(
                "target_language", f"model {model_id} translates into {trained!r}, not {target_language!r}"
            )
        return Target(None, None)
    targets = sorted({target for _, target in pairs})
    if target_language is None and len(targets) == 1:  # pairs into one language (de->en, fr->en; a fine-tune)
        target_language = targets[0]
    if target_language is None:
        raise InvalidField(
            "target_language",
            f"model {model_id} was trained on {_pairs_text(pairs)}: give target_language, one of {', '.join(targets)}",
        )
    if target_language not in targets:
        raise InvalidField(
            "target_language",
            f"model {model_id} was trained on {_pairs_text(pairs)}: it cannot translate into {target_language!r} "
            f"(one of {', '.join(targets)})",
        )
    if source_language is None:
        return Target(target_language, None)
    known = {language for pair in pairs for language in pair}
    if source_language not in known:
        raise InvalidField(
            "source_language",
            f"model {model_id} was trained on {_pairs_text(pairs)}: {source_language!r} is none of its languages",
        )
    if source_language == target_language:
        raise InvalidField("source_language", f"source_language and target_language are both {source_language!r}")
    return Target(target_language, (source_language, target_language) not in set(pairs))


def trained_pairs(model: TrainedModel) -> tuple[tuple[str, str], ...]:
    """The language pairs of a model of several, as its job trained them (kept with the model, and with an import
    of its export); none for a model of one pair."""
    return tuple((source, target) for source, target in model.pairs or ())


def for_model(model: TrainedModel, target_language: str | None, source_language: str | None) -> Target:
    """resolve() for a model row: the background routes (file, dataset translations, evaluations) that read it."""
    pairs = trained_pairs(model)
    languages = (model.source_language, model.target_language)
    return resolve(model.id, pairs, languages, target_language, source_language)
