"""Score a model on a test set (an Evaluation row): translate the dataset's sources, compare with its targets.

BLEU, chrF and chrF++ come from sacrebleu with their signatures (the string that says how a score was computed,
to be quoted with it); the hypotheses go to the artifact store, one line per row. Redelivered after a worker died,
the task starts the evaluation again; a finished one is skipped.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from sacrebleu.metrics import BLEU, CHRF

from app.artifacts import ArtifactStoreError, get_store
from app.db import task_rows
from app.db.models import Dataset, Evaluation
from app.db.session import session_scope
from app.model_evaluations import hypotheses_key
from app.task_names import EVALUATE
from model.data import DataError
from model.inference import translate
from worker.job_data import read_rows
from worker.serving.errors import RequestError
from worker.tasks.inference import cache

log = logging.getLogger(__name__)
CHUNK = 64  # sentences decoded between two progress updates


def score(hypotheses: list[str], references: list[str], tokenize: str) -> dict[str, Any]:
    """{"bleu", "chrf", "chrf++"}: each {"score", "signature"} from sacrebleu's corpus-level metrics."""
    scores = {}
    for name, metric in (("bleu", BLEU(tokenize=tokenize)), ("chrf", CHRF()), ("chrf++", CHRF(word_order=2))):
        result = metric.corpus_score(hypotheses, [references])
        scores[name] = {"score": round(float(result.score), 4), "signature": metric.get_signature().format()}
    return scores


def _load(evaluation_id: str) -> tuple[Evaluation, list[tuple[str, str]]] | None:
    with session_scope() as session:
        evaluation = session.get(Evaluation, evaluation_id)
        if evaluation is None or evaluation.status in (task_rows.SUCCEEDED, task_rows.FAILED):
            return None  # deleted with its model, or over: a redelivery has nothing to do
        dataset = session.get(Dataset, evaluation.dataset_id) if evaluation.dataset_id else None
        if dataset is None:
            raise RequestError(404, "its test set was deleted before it was read; ask again with another")
        rows = read_rows(dataset)
        session.expunge(evaluation)
    limit = evaluation.settings.get("max_sentences")
    return evaluation, rows[:limit] if limit else rows


def _evaluate(evaluation_id: str) -> None:
    loaded = _load(evaluation_id)
    if loaded is None:
        return
    evaluation, rows = loaded
    with session_scope() as session:
        if not task_rows.claim(session, Evaluation, evaluation_id, sentences=len(rows)):
            return
    model = cache().get(evaluation.model_id)
    settings, limit = evaluation.settings, model.model.config.max_positions
    sources = [source for source, _ in rows]
    # A source longer than the model takes gets an empty hypothesis (and costs it its share of the score).
    fits = [len(model.tokenizer.encode(s)) + 1 <= limit for s in sources]
    hypotheses: list[str] = []
    for start in range(0, len(sources), CHUNK):
        chunk = [s for s, ok in zip(sources[start : start + CHUNK], fits[start : start + CHUNK]) if ok]
        decoded = iter(
            translate(model.model, model.tokenizer, chunk, beam_size=settings["beam_size"], alpha=settings["alpha"])
        )
        hypotheses += [next(decoded)["text"] if ok else "" for ok in fits[start : start + CHUNK]]
        with session_scope() as session:
            if not task_rows.progress(session, Evaluation, evaluation_id, len(hypotheses)):
                return  # deleted meanwhile
    scores = score(hypotheses, [target for _, target in rows], settings["tokenize"])
    scores["too_long"] = fits.count(False)
    key = hypotheses_key(evaluation.model_id, evaluation_id)
    get_store().write_bytes(key, "".join(h.replace("\n", " ") + "\n" for h in hypotheses).encode())
    with session_scope() as session:
        task_rows.succeed(session, Evaluation, evaluation_id, scores=scores, hypotheses_key=key)
    log.info("evaluation %s of model %s: %s", evaluation_id, evaluation.model_id, {k: v for k, v in scores.items()})


@shared_task(name=EVALUATE, acks_late=True, ignore_result=True, send_events=False)
def evaluate_task(evaluation_id: str) -> None:
    """Idempotent by id. Any problem fails the evaluation with its reason: none stays running."""
    try:
        _evaluate(evaluation_id)
    except (RequestError, DataError, ArtifactStoreError) as exc:
        reason = exc.detail if isinstance(exc, RequestError) else str(exc)
        log.warning("evaluation %s failed: %s", evaluation_id, reason)
        with session_scope() as session:
            task_rows.fail(session, Evaluation, evaluation_id, reason)
    except Exception as exc:  # a bug or an exhausted host: said in the evaluation, never left running
        reason = f"{type(exc).__name__}: {exc}"
        log.exception("evaluation %s failed: %s", evaluation_id, reason)
        with session_scope() as session:
            task_rows.fail(session, Evaluation, evaluation_id, reason)
