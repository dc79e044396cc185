"""The collector: deletes the artifact-store prefixes of deleted rows once their tombstones are old enough.

Deleting a job, a model or a dataset writes tombstones in its transaction (app/db/tombstone_rows.py); the reaper
sends the ids of those older than ARTIFACT_GRACE_SECONDS to the data queue (`service.collect_artifacts`), and this
deletes each prefix, then its tombstone. Every step is safe to repeat: a tombstone already collected is gone (a
redelivered message, two reapers sending the same ids), a missing key is fine to delete in every store, and a store
that fails leaves the tombstone for the next sweep. A prefix that a row still refers to is skipped and kept, its
tombstone too, until nothing does.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from app.artifacts import ArtifactStore, ArtifactStoreError
from app.db import tombstone_rows
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import ArtifactTombstone

log = logging.getLogger(__name__)


def due_ids(grace: timedelta) -> list[int]:
    with session_scope() as session:
        return tombstone_rows.due(session, utcnow() - grace)


def collect(store: ArtifactStore, tombstone_ids: list[int], grace: timedelta) -> list[str]:
    """Delete the prefixes of these tombstones that are due and that nothing refers to; returns those deleted."""
    deleted: list[str] = []
    for tombstone_id in tombstone_ids:
        with session_scope() as session:
            tombstone = session.get(ArtifactTombstone, tombstone_id)
            if tombstone is None:
                continue  # collected already
            if tombstone.deleted_at > utcnow() - grace:
                log.info("tombstone %s (%s): not due yet", tombstone_id, tombstone.prefix)
                continue
            prefix = tombstone.prefix
            reason = tombstone_rows.still_referenced(session, tombstone)
            if reason is not None:  # kept, and looked at again by the next sweep
                log.warning(
                    "artifacts %s of deleted %s %s kept: %s", prefix, tombstone.kind, tombstone.object_id, reason
                )
                continue
        try:
            store.delete(prefix)
        except ArtifactStoreError as exc:
            log.error("artifacts %s: not deleted (%s); the next sweep tries again", prefix, exc)
            continue
        with session_scope() as session:
            tombstone_rows.remove(session, tombstone_id)
        log.info("artifacts %s: deleted", prefix)
        deleted.append(prefix)
    return deleted
