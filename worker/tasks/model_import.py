"""Import an uploaded model archive (POST /v1/models/import) as one of the owner's models.

The API stores the upload under a staging key and sends its id; this task unpacks it safely, verifies and loads
the model (model/io/import_archive.py), writes it as a served checkpoint to models/<id>, inserts the row and
deletes the staging file. The model's files are charged to the organisation's storage quota as stored (413
naming the limit when they would pass it, leaving nothing), not as the archive's compressed size. Idempotent by
model id: a redelivery finds the row and answers it. A refused archive (ArchiveError: model/io/import_archive.py
checks every file it reads and names the bad one) is a 422 and leaves nothing: no row, no model files, no staging
file. A staging file whose message expired unread, so that this task never ran, is the reaper's to remove
(worker/reaper.py).
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from celery import shared_task

from app.artifacts import ArtifactNotFound, ArtifactStoreError, get_store
from app.core.settings import Settings, get_settings
from app.core.task_names import IMPORT
from app.db.session import session_scope
from app.db.tables import TrainedModel
from app.schemas.job_pairs import MAX_PAIRS
from app.services import quotas
from app.services.errors import PayloadTooLarge
from model.data.language_pairs import LanguagePair, check_pairs, common_language
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import save_checkpoint
from model.io.checkpoint_files import checkpoint_sha256
from model.io.import_archive import ArchiveError, ModelLimits, load_archive_folder, safe_extract
from model.probes.anatomy import count_parameters
from worker.serving.errors import ModelUnavailable, RequestError
from worker.tasks.inference import INFERENCE_TASK, errors_as_results

log = logging.getLogger(__name__)
MB = 1024 * 1024


def imported_pairs(meta: dict[str, Any], tokenizer: Tokenizer) -> list[list[str]]:
    """The language pairs an archive's model of several was trained on (its manifest's "pairs"), each target one
    its tokenizer holds a token for; ArchiveError naming what is wrong with them. [] for a model of one pair."""
    pairs = meta.get("pairs")
    if pairs is None:
        return []
    try:
        if not isinstance(pairs, list) or not 1 <= len(pairs) <= MAX_PAIRS:
            raise ValueError(f"a list of 1 to {MAX_PAIRS} [source, target] pairs")
        if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(c, str) for c in p) for p in pairs):
            raise ValueError("each a [source, target] pair of language codes")
        checked = [LanguagePair(source, target) for source, target in pairs]
        check_pairs(checked)
    except ValueError as exc:
        raise ArchiveError(f"its manifest's pairs {str(pairs)[:200]} are not valid: {exc}") from exc
    missing = sorted({p.target for p in checked} - set(tokenizer.language_tokens))
    if missing:
        raise ArchiveError(f"its manifest's pairs translate into {missing}, but its tokenizer has no token for them")
    return [[p.source, p.target] for p in checked]


def model_limits(settings: Settings) -> ModelLimits:
    """The dimensions an imported model may have (IMPORT_MAX_*)."""
    return ModelLimits(
        vocab_size=settings.import_max_vocab_size,
        d_model=settings.import_max_d_model,
        layers=settings.import_max_layers,
        heads=settings.import_max_heads,
        d_ff=settings.import_max_d_ff,
        max_positions=settings.import_max_positions,
    )


@shared_task(name=IMPORT, **INFERENCE_TASK)  # type: ignore[untyped-decorator]  # celery ships no types
@errors_as_results
def import_task(staging_key: str, model_id: str, owner_id: str, filename: str) -> dict[str, Any]:
    with session_scope() as session:
        if session.get(TrainedModel, model_id) is not None:
            return {"model_id": model_id, "created": False}
    settings, store = get_settings(), get_store()
    key = f"models/{model_id}"
    unpacked: Path | None = None  # the scratch folder, never named to the caller
    try:
        archive = store.fetch(staging_key)
        scratch = settings.data_dir.resolve() / "imports"
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            unpacked = Path(tmp) / "x"
            folder = safe_extract(
                archive,
                unpacked,
                settings.max_dataset_mb * MB * settings.import_unpacked_ratio,
                max_members=settings.import_max_members,
                max_metadata_bytes=settings.import_max_metadata_mb * MB,
            )
            model, tokenizer, meta = load_archive_folder(folder, model_limits(settings))
            target = save_checkpoint(
                store.local_path(key),
                model,
                tokenizer,
                meta["objective"],
                step=int(meta.get("step", 0)),
                metrics=meta.get("metrics", {}),
                kind="model",
                extra_meta={"imported_from": filename[:200], "noise": meta.get("noise", "span")}
                | ({"pairs": pairs} if (pairs := imported_pairs(meta, tokenizer)) else {}),
            )
        store.push(target, key)
        row = TrainedModel(
            id=model_id,
            owner_id=owner_id,
            job_id=None,
            objective=meta["objective"],
            config=model.config.to_dict(),
            tokenizer_fingerprint=tokenizer.fingerprint,
            metrics={k: float(v) for k, v in (meta.get("metrics") or {}).items() if isinstance(v, int | float)},
            source="import",
            parameters=count_parameters(model.config)["total"],
            storage_key=key,
            sha256=checkpoint_sha256(target),
            size_bytes=sum(f.stat().st_size for f in target.iterdir() if f.is_file()),
            pairs=pairs or None,
            source_language=common_language(pair[0] for pair in pairs),
            target_language=common_language(pair[1] for pair in pairs),
        )
        with session_scope() as session:  # charged as stored (unpacked), under the organisation's lock until committed
            quotas.reserve_storage(session, settings, owner_id, row.size_bytes)
            session.add(row)
    except PayloadTooLarge as exc:
        store.delete(key)
        raise RequestError(413, f"{filename}: {exc.detail}") from exc
    except ArchiveError as exc:
        detail = str(exc) if unpacked is None else str(exc).replace(f"{unpacked}{os.sep}", "")
        raise RequestError(422, f"{filename}: {detail}") from exc
    except ArtifactNotFound as exc:
        raise ModelUnavailable(404, f"the upload {staging_key} is gone; upload the archive again") from exc
    except ArtifactStoreError as exc:
        store.delete(key)
        raise ModelUnavailable(503, "the artifact store is unavailable; try again") from exc
    except Exception:
        store.delete(key)  # no model files without a row
        raise
    finally:
        try:
            store.delete(staging_key)
        except ArtifactStoreError:
            log.warning("import %s: the staging file %s was not deleted", model_id, staging_key)
    log.info("imported %s as model %s (%s)", filename, model_id, meta["objective"])
    return {"model_id": model_id, "created": True}
