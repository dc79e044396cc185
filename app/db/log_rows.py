"""A job's log lines: appended in batches, bounded per job, read in pages of `seq`.

A job keeps its newest MAX_LINES - 1 lines and, just before them, one line saying how many earlier ones were
dropped: when a job logs too much, the end (where a failure's traceback is) matters more than the middle. Lines
are numbered by `seq` over the job's whole life, so the count of dropped lines is the marker's own seq.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db.run_record_tables import JobLog
from app.db.tables import Job

LEVELS = ("info", "warning", "error", "critical")
MAX_LINES = 2000  # per job, the marker of dropped lines included
MAX_CHARS = 8000  # per line, a traceback included
MARKER_LOGGER = "job_logs"
_NOTE_ROOM = 40  # characters kept free for the note of what clip() cut


@dataclass(frozen=True)
class LogLine:
    level: str  # one of LEVELS
    logger: str
    message: str
    attempt: int | None
    created_at: datetime


def clip(message: str, limit: int = MAX_CHARS) -> str:
    """At most `limit` characters: the head and the tail (a traceback's last lines name the error) around a note
    of how many were cut. NUL characters go: PostgreSQL's text cannot hold them."""
    message = message.replace("\x00", "")
    if len(message) <= limit:
        return message
    keep = max(0, limit - _NOTE_ROOM)
    head, tail = keep // 2, keep - keep // 2
    note = f"\n… {len(message) - keep} characters dropped …\n"
    return message[:head] + note + (message[-tail:] if tail else "")


def dropped_note(dropped: int, kept: int) -> str:
    return f"… {dropped} earlier lines dropped (a job keeps its newest {kept})"


def append(
    session: Session, job_id: str, lines: Sequence[LogLine], skipped: int = 0, max_lines: int = MAX_LINES
) -> bool:
    """Add `lines` after the job's last line; `skipped` lines were lost before they got here and count as dropped.
    Keeps the newest max_lines - 1 and a marker before them. False (nothing written) when the job is gone."""
    if max_lines < 2:
        raise ValueError(f"max_lines={max_lines} must be >= 2 (one line and the marker)")
    # No lock: the caller may hold the job's row in a transaction of its own. Two writers at once (rare: a worker
    # that lost the lease) collide on (job_id, seq), and the one that fails tries again (worker/training/job_log.py).
    if session.get(Job, job_id) is None:
        return False
    if not lines and not skipped:
        return True
    last = session.scalar(select(func.max(JobLog.seq)).where(JobLog.job_id == job_id)) or 0
    first = last + skipped + 1
    keep_from = max(1, first + len(lines) - 1 - (max_lines - 1) + 1)  # the first seq of the newest max_lines - 1
    if keep_from > 1:
        session.execute(delete(JobLog).where(JobLog.job_id == job_id, JobLog.seq < keep_from))
        session.add(
            JobLog(
                job_id=job_id,
                seq=keep_from - 1,
                attempt=None,
                level="warning",
                logger=MARKER_LOGGER,
                message=dropped_note(keep_from - 1, max_lines - 1),
            )
        )
    session.add_all(
        JobLog(
            job_id=job_id,
            seq=seq,
            attempt=line.attempt,
            level=line.level,
            logger=line.logger[:100],
            message=line.message,
            created_at=line.created_at,
        )
        for seq, line in enumerate(lines, start=first)
        if seq >= keep_from
    )
    return True


def page(session: Session, job_id: str, after: int, limit: int, levels: Sequence[str]) -> tuple[list[JobLog], bool]:
    """The job's lines after seq `after` at the levels given, oldest first, at most `limit`; and whether more follow."""
    rows = session.scalars(
        select(JobLog)
        .where(JobLog.job_id == job_id, JobLog.seq > after, JobLog.level.in_(levels))
        .order_by(JobLog.seq)
        .limit(limit + 1)
    ).all()
    return list(rows[:limit]), len(rows) > limit


def at_or_above(level: str) -> tuple[str, ...]:
    """The levels a minimum level selects."""
    return LEVELS[LEVELS.index(level) :]
