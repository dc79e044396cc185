"""A sweep's Optuna study, kept in the service's own database: Optuna's JournalStorage replays a log of operations,
and this backend keeps that log as rows of sweep_journal, read and written through the caller's session. The
study's changes (a trial asked for, a value reported, a trial told) therefore commit or roll back with the rows
the caller writes beside them (the trial's job), and every process that opens the study (API, workers, reaper)
sees the same one.

Optuna numbers the log from 0 and expects every reader to see the same order. `lock` serializes writers per
sweep (an UPDATE of the sweep's row, held to the commit: PostgreSQL locks the row, SQLite the database), so
the next number is the count so far, and (sweep_id, seq) as the primary key refuses a duplicate if a caller
forgot to lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from optuna.storages.journal import BaseJournalBackend
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.tables import Sweep, SweepJournalEntry


def lock(session: Session, sweep_id: str) -> Sweep | None:
    """The sweep, locked to this transaction (None if it is gone): whoever changes its study takes turns."""
    session.execute(update(Sweep).where(Sweep.id == sweep_id).values(version=Sweep.version + 1, updated_at=utcnow()))
    sweep = session.get(Sweep, sweep_id, populate_existing=True)
    return sweep


class SweepJournal(BaseJournalBackend):
    def __init__(self, session: Session, sweep_id: str) -> None:
        self.session, self.sweep_id = session, sweep_id

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        return list(
            self.session.scalars(
                select(SweepJournalEntry.entry)
                .where(SweepJournalEntry.sweep_id == self.sweep_id, SweepJournalEntry.seq >= log_number_from)
                .order_by(SweepJournalEntry.seq)
            )
        )

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        count = select(func.count()).where(SweepJournalEntry.sweep_id == self.sweep_id)
        start = self.session.scalar(count) or 0
        self.session.add_all(
            SweepJournalEntry(sweep_id=self.sweep_id, seq=start + i, entry=entry) for i, entry in enumerate(logs)
        )
        self.session.flush()
