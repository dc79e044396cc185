"""Make a dataset by translating another's text with a model (a DatasetTranslation row): synthetic pairs for
back-translation, a teacher's translations for distillation.

The rows are read a line at a time and translated CHUNK_ROWS at a time, on the worker's device with the backend the
request asked for (CTranslate2 by default, in batches sorted by length), by beam search or by sampling; each chunk's
pairs go to the artifact store as a part of their own, then the row's progress. A task redelivered after its worker
died resumes after the last part written, so no row is lost or translated twice (PyTorch's sampled chunks even
repeat their draws: each chunk's seed is the request's plus its index; CTranslate2's cannot be seeded). At the end
the parts are joined into the new dataset's file (gzip JSONL), its row is made (`processing`, with its lineage) in
the transaction that marks the translation succeeded, and its parsing is queued: it is then checked and reported on
like an upload. A text empty or too long for the model makes no pair: counted in the translation's `counts`.

A parallel dataset's other side is a human reference for each translation: the translations are scored against it
(`reference_scores`: BLEU, chrF and the length ratio of the first SCORED_PAIRS pairs), which tells before any training
what a student will learn from its teacher (a teacher that leaves the ends of sentences out shows a ratio below 1).
"""

from __future__ import annotations

import gzip
import json
import logging
import tempfile
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import sacrebleu
from sqlalchemy import update

from app.artifacts import get_store
from app.core.settings import get_settings
from app.core.task_names import DATA_QUEUE, PROCESS_DATASET
from app.db import task_rows
from app.db.base import utcnow
from app.db.dataset_translation_tables import DatasetTranslation
from app.db.session import session_scope
from app.db.tables import Dataset
from app.services import quotas
from app.services.dataset_translations import parts_prefix
from app.services.errors import PayloadTooLarge
from app.services.queueing import get_sender
from model.decode.sampling import Sampling
from worker.data import ingest
from worker.data.source import rows
from worker.serving.errors import RequestError
from worker.serving.model_cache import LoadedModel
from worker.serving.target_tokens import check_target, tagged
from worker.serving.translation import AUTO, Options, resolve, translate
from worker.tasks.inference import cache

log = logging.getLogger(__name__)
CHUNK_ROWS = 1024  # rows a part holds: the unit of progress and of resumption (never changed under a running row)
SCORED_PAIRS = 100_000  # translations scored against the dataset's other side: enough for stable corpus scores


def reference_scores(hypotheses: list[str], references: list[str]) -> dict[str, float | int]:
    """Corpus BLEU (sacrebleu's 13a tokens) and chrF of the translations against their references, and the length
    ratio (the translations' tokens over the references', BLEU's own count)."""
    bleu = sacrebleu.corpus_bleu(hypotheses, [references])
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {
        "pairs": len(hypotheses),
        "bleu": round(float(bleu.score), 2),
        "chrf": round(float(chrf.score), 2),
        "length_ratio": round(bleu.sys_len / bleu.ref_len, 3) if bleu.ref_len else 0.0,
    }


def part_key(prefix: str, index: int) -> str:
    return f"{prefix}/part-{index:07d}.json.gz"


def texts(dataset: Dataset, side: str, limit: int) -> Iterator[tuple[str, str | None]]:
    """The first `limit` texts of the dataset's side ("source", "target" of a parallel dataset; "text"), each with
    the other side of its pair (None for a monolingual dataset)."""
    column = {"source": 1, "text": 1, "target": 2}[side]
    other = {"source": 2, "target": 1}.get(side)
    with rows(dataset) as numbered:
        for row in islice(numbered, limit):
            yield row[column], (row[other] if other is not None else None)


def options_of(decoding: dict[str, Any], seed_offset: int) -> Options:
    """The decoding the request asked for; a sampled chunk's seed is the request's plus its index."""
    if decoding["method"] == "sampling":
        sampling = Sampling(decoding["temperature"], decoding["top_k"], decoding["seed"] + seed_offset)
        return Options(beam_size=1, sampling=sampling)
    return Options(beam_size=decoding["beam_size"])


def translate_chunk(
    loaded: LoadedModel,
    chunk: list[str],
    settings: dict[str, Any],
    index: int,
    backend: str,
    references: list[str | None] | None = None,
    target: str | None = None,
) -> tuple[dict[str, Any], str | None]:
    """A part: the chunk's pairs as the new dataset holds them, and its rows left out ("empty", "too_long"); and
    the backend that translated (None when nothing was). With `references` (the other side of each row of a
    parallel dataset), the part also holds each translation and its reference ("scored"), non-empty ones only.
    `target`: the token of that language begins each text the model reads (a model of several pairs)."""
    limit = loaded.model.config.max_positions
    lengths = [len(ids) + 1 for ids in loaded.tokenizer.encode_batch(tagged(chunk, target))]  # and </s>
    empty = [not text.strip() for text in chunk]
    kept = [i for i, (blank, n) in enumerate(zip(empty, lengths)) if not blank and n <= limit]
    todo = [chunk[i] for i in kept]
    by = None
    made: list[str] = []
    if todo:
        results, by = translate(loaded, tagged(todo, target), options_of(settings["decoding"], index), backend)
        made = [r["text"] for r in results]
    tag = settings.get("tag")
    pairs = []
    for text, translation in zip(todo, made):
        if settings["synthetic_side"] == "target":
            pairs.append([text, translation])
        else:
            pairs.append([f"{tag} {translation}" if tag else translation, text])
    too_long = sum(1 for blank, n in zip(empty, lengths) if not blank and n > limit)
    part = {"rows": len(chunk), "pairs": pairs, "empty": sum(empty), "too_long": too_long}
    if references is not None:
        wanted = (references[i] for i in kept)
        part["scored"] = [[made_, ref] for made_, ref in zip(made, wanted) if ref and ref.strip()]
    return part, by


def _progress(translation_id: str, translated: int) -> bool:
    with session_scope() as session:
        return task_rows.progress(session, DatasetTranslation, translation_id, translated)


def _load(translation_id: str) -> tuple[DatasetTranslation, Dataset] | None:
    with session_scope() as session:
        row = session.get(DatasetTranslation, translation_id)
        if row is None or row.status in (task_rows.SUCCEEDED, task_rows.FAILED):
            return None  # deleted, or over: a redelivery has nothing to do
        dataset = session.get(Dataset, row.dataset_id)
        session.expunge_all()
    if dataset is None:
        return None  # deleted with it (the row cascades)
    return row, dataset


def make(translation_id: str) -> str:
    """Translate the dataset and make the new one: "succeeded", or "skipped" when there is nothing to do (or the row
    was deleted meanwhile). A failure raises: the task fails the row with its reason."""
    loaded_rows = _load(translation_id)
    if loaded_rows is None:
        return "skipped"
    row, dataset = loaded_rows
    settings, store = row.settings, get_store()
    prefix = parts_prefix(row.model_id, row.id)
    written = {key for key, _ in store.list_files(prefix)}
    backend = resolve(settings.get("backend", AUTO))
    loaded = cache().get(row.model_id)
    if loaded.objective != "translation":
        raise RequestError(422, f"model {row.model_id} was trained for {loaded.objective}, not translation")
    check_target(loaded, row.target_language)
    n_parts = -(-row.sentences // CHUNK_ROWS)
    done = sum(
        min(CHUNK_ROWS, row.sentences - i * CHUNK_ROWS) for i in range(n_parts) if part_key(prefix, i) in written
    )
    with session_scope() as session:
        if not task_rows.claim(session, DatasetTranslation, row.id, translated=done, resumed_from=done):
            return "skipped"
    answered: set[str] = set()
    chunks = _chunks(texts(dataset, settings["side"], row.sentences))
    for index, chunk in enumerate(chunks):
        if part_key(prefix, index) in written:
            continue
        references = [ref for _, ref in chunk] if dataset.kind == "parallel" else None
        sources = [text for text, _ in chunk]
        part, by = translate_chunk(loaded, sources, settings, index, backend, references, row.target_language)
        answered.update([by] if by else [])
        store.write_bytes(part_key(prefix, index), gzip.compress(json.dumps(part, ensure_ascii=False).encode()))
        done += len(chunk)
        if not _progress(row.id, done):
            log.info("dataset translation %s was deleted or stopped; its parts go with it", row.id)
            return "skipped"
    return _finish(row, dataset, prefix, n_parts, min(answered, default=None))


def _chunks(items: Iterator[tuple[str, str | None]]) -> Iterator[list[tuple[str, str | None]]]:
    while chunk := list(islice(items, CHUNK_ROWS)):
        yield chunk


def _finish(row: DatasetTranslation, parent: Dataset, prefix: str, n_parts: int, backend: str | None) -> str:
    """Join the parts into the new dataset's file, make its row with the translation's success, queue its parsing."""
    store = get_store()
    counts = {"pairs": 0, "empty": 0, "too_long": 0}
    scored: list[list[str]] = []
    key = f"datasets/{row.output_dataset_id}/data.jsonl.gz"
    scratch = get_settings().data_dir / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        path = Path(tmp) / "data.jsonl.gz"
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=5) as out:
            for index in range(n_parts):
                part = json.loads(gzip.decompress(store.read_bytes(part_key(prefix, index))))
                for source, target in part["pairs"]:
                    out.write(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n")
                counts["pairs"] += len(part["pairs"])
                counts["empty"] += part["empty"]
                counts["too_long"] += part["too_long"]
                scored.extend(part.get("scored", [])[: SCORED_PAIRS - len(scored)])
        if counts["pairs"] == 0:
            raise RequestError(
                422, f"no row of dataset {parent.id} could be translated: {counts['empty']} empty, "
                f"{counts['too_long']} too long for the model",
            )  # fmt: skip
        digest, size = ingest.sha256_of(path), path.stat().st_size
        store.push(path, key)
    scores = reference_scores([h for h, _ in scored], [r for _, r in scored]) if scored else None
    try:
        made = _record(row, parent, key, digest, size, counts, backend, scores)
    except PayloadTooLarge as exc:
        store.delete(f"datasets/{row.output_dataset_id}")
        raise RequestError(413, str(exc.detail)) from exc
    if made:
        try:
            get_sender().send_task(PROCESS_DATASET, args=[row.output_dataset_id], queue=DATA_QUEUE)
        except Exception as exc:  # the reaper sends it again: the dataset stays processing until then
            log.warning("dataset %s: its parsing could not be queued (%s)", row.output_dataset_id, exc)
    store.delete(prefix)
    return "succeeded" if made else "skipped"


def _record(
    row: DatasetTranslation,
    parent: Dataset,
    key: str,
    digest: str,
    size: int,
    counts: dict[str, int],
    backend: str | None,
    scores: dict[str, float | int] | None,
) -> bool:
    """The new dataset's row and the translation's success, in one transaction (charged to the organisation's
    storage quota as stored: PayloadTooLarge over it); False when the translation is no longer running (deleted or
    failed meanwhile): the file is deleted then."""
    settings = row.settings
    with session_scope() as session:
        quotas.reserve_storage(session, get_settings(), row.owner_id, size)
        done = session.execute(
            update(DatasetTranslation)
            .where(DatasetTranslation.id == row.id, DatasetTranslation.status == task_rows.RUNNING)
            .values(
                status=task_rows.SUCCEEDED,
                translated=row.sentences,
                backend=backend,
                settings={**settings, "counts": counts, **({"reference_scores": scores} if scores else {})},
                finished_at=utcnow(),
                updated_at=utcnow(),
            )
        )
        if not getattr(done, "rowcount", 0):
            session.rollback()
            get_store().delete(f"datasets/{row.output_dataset_id}")
            return False
        lineage = {
            "kind": "translation",
            "translation_id": row.id,
            "model_id": row.model_id,
            "dataset_id": parent.id,
            "side": settings["side"],
            "decoding": settings["decoding"],
            "synthetic_side": settings["synthetic_side"],
            **({"tag": settings["tag"]} if settings.get("tag") else {}),
        }
        session.add(
            Dataset(
                id=row.output_dataset_id,
                owner_id=row.owner_id,
                name=settings["name"],
                kind="parallel",
                format="jsonl",
                compression="gzip",
                rows=0,
                size_bytes=size,
                sha256=digest,
                stats={},
                status="processing",
                source_language=settings["languages"]["source"],
                target_language=settings["languages"]["target"],
                parent_id=parent.id,
                lineage=lineage,
                storage_key=key,
            )
        )
    return True
