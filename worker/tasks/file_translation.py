"""Translate an uploaded text file (a FileTranslation row): sentences in batches, the result to the store.

Lines are cut into sentences by model/data/segments.py and joined back with their spacing; blank lines and order are
kept, so the result has the source's lines: a translation with a line break is made one line. A sentence longer
than the model takes is cut into pieces that fit (at whitespace where it can), each translated, joined with a
space; a piece that cannot fit (one character too long for the model) is left as it is, counted in the row's
`settings.untranslated`. Redelivered after a worker died, the task starts again; a finished translation is
skipped; any failure fails the row with its reason, never leaving it running.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from celery import shared_task

from app.artifacts import ArtifactStoreError, get_store
from app.core.task_names import TRANSLATE_FILE
from app.db import task_rows
from app.db.background_tables import FileTranslation
from app.db.session import session_scope
from app.services.file_translations import result_key
from model.data.segments import join_document, join_pieces, one_line, pieces_that_fit, sentences, split_document
from model.decode.glossary import Glossary
from worker.serving.errors import RequestError
from worker.serving.glossary_terms import compiled_glossary, stored_glossary, term_counts, with_terms
from worker.serving.model_cache import LoadedModel
from worker.serving.target_tokens import check_target, tagged
from worker.serving.translation import AUTO, PYTORCH, Options, resolve, translate
from worker.tasks.inference import cache

log = logging.getLogger(__name__)
CHUNK = 32  # pieces (sentences, or parts of a long one) decoded between two progress updates


def _decode(pieces: list[str], ok: list[bool], decode: Callable[[list[str]], list[str]]) -> list[str]:
    """The translations of pieces, each on one line; a piece that does not fit (not ok) is left as it is."""
    decoded = iter(decode([p for p, f in zip(pieces, ok) if f]) if any(ok) else [])
    return [one_line(next(decoded)) if f else p for p, f in zip(pieces, ok)]


def _translate_pieces(
    translation_id: str,
    loaded: LoadedModel,
    pieces: list[str],
    ok: list[bool],
    ends: list[int],
    options: Options,
    backend: str,
    terms: Glossary | None = None,
    target: str | None = None,
) -> tuple[list[str], set[str], list[dict[str, Any]]] | None:
    """The pieces translated CHUNK at a time (with the glossary's terms, given one), progress written after each (in
    sentences: `ends`), the backends that answered, and the results that met glossary terms; it stops early once a
    second backend answered (CTranslate2 failing part-way under auto). `target`: the token of that language begins
    each piece (a model of several pairs). None if the row was deleted meanwhile."""
    answered: set[str] = set()
    applied: list[dict[str, Any]] = []

    def decode(pieces: list[str]) -> list[str]:
        texts = tagged(pieces, target)
        results, by = translate(loaded, texts, options, backend)
        answered.add(by)
        if terms is not None:
            results = with_terms(loaded, terms, texts, results)
            applied.extend(r for r in results if r["glossary_terms"])
        return [t["text"] for t in results]

    done: list[str] = []
    for start in range(0, len(pieces), CHUNK):
        done += _decode(pieces[start : start + CHUNK], ok[start : start + CHUNK], decode)
        if len(answered) > 1:
            break
        with session_scope() as session:
            if not task_rows.progress(session, FileTranslation, translation_id, bisect_right(ends, len(done))):
                return None
    return done, answered, applied


def _translate(translation_id: str) -> None:
    with session_scope() as session:
        row = session.get(FileTranslation, translation_id)
        if row is None or row.status in (task_rows.SUCCEEDED, task_rows.FAILED):
            return  # deleted with its model, or over: a redelivery has nothing to do
        session.expunge(row)
    text = get_store().read_bytes(row.source_key).decode("utf-8")
    document = split_document(text, row.settings.get("language", "en"))
    todo = sentences(document)
    backend = resolve(row.settings.get("backend", AUTO))  # rows from before the setting: as a request leaving it open
    with session_scope() as session:
        if not task_rows.claim(session, FileTranslation, translation_id, sentences=len(todo)):
            return
    loaded = cache().get(row.model_id)
    if loaded.objective != "translation":
        raise RequestError(422, f"model {row.model_id} was trained for {loaded.objective}, not translation")
    check_target(loaded, row.target_language)
    limit = loaded.model.config.max_positions

    def fits(text: str) -> bool:
        return len(loaded.tokenizer.encode(tagged([text], row.target_language)[0])) + 1 <= limit  # and </s>

    split = [pieces_that_fit(s, fits) for s in todo]
    pieces = [p for sentence in split for p in sentence]
    ok = [fits(p) for p in pieces]  # all but a character too long for the model
    ends = list(accumulate(len(sentence) for sentence in split))  # pieces done when each sentence is
    options = Options(beam_size=row.settings["beam_size"])
    glossary_id = row.settings.get("glossary_id")
    terms = compiled_glossary(loaded, stored_glossary(glossary_id)) if glossary_id else None
    passed = _translate_pieces(translation_id, loaded, pieces, ok, ends, options, backend, terms, row.target_language)
    if passed is not None and len(passed[1]) > 1:  # the file is then PyTorch's throughout
        log.warning("translation %s: CTranslate2 failed part-way; translating it again with PyTorch", translation_id)
        passed = _translate_pieces(
            translation_id, loaded, pieces, ok, ends, options, PYTORCH, terms, row.target_language
        )
    if passed is None:
        return  # deleted meanwhile
    done, answered, applied = passed
    by = min(answered, default=None)  # one backend, or None when no piece fitted the model
    key = result_key(row.model_id, translation_id)
    translations = join_pieces(done, [len(sentence) for sentence in split])
    get_store().write_bytes(key, join_document(document, translations).encode("utf-8"))
    settings = {**row.settings, "untranslated": ok.count(False)}
    if terms is not None:
        settings["glossary_terms"] = term_counts(applied)
    with session_scope() as session:
        task_rows.succeed(session, FileTranslation, translation_id, result_key=key, settings=settings, backend=by)
    log.info(
        "translated %s (%d sentences, %d pieces) with model %s by %s",
        row.filename, len(todo), len(pieces), row.model_id, by,
    )  # fmt: skip


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=TRANSLATE_FILE, acks_late=True, ignore_result=True, send_events=False
)
def translate_file_task(translation_id: str) -> None:
    """Idempotent by id."""
    try:
        _translate(translation_id)
    except (RequestError, ArtifactStoreError) as exc:
        reason = exc.detail if isinstance(exc, RequestError) else str(exc)
        log.warning("translation %s failed: %s", translation_id, reason)
        with session_scope() as session:
            task_rows.fail(session, FileTranslation, translation_id, reason)
    except Exception as exc:  # a bug or an exhausted host: said in the row, never left running
        log.exception("translation %s failed", translation_id)
        with session_scope() as session:
            task_rows.fail(session, FileTranslation, translation_id, f"{type(exc).__name__}: {exc}")
