"""Schemas of a training job's log (GET /v1/jobs/{id}/logs)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from app.schemas.common import Output
from app.schemas.jobs import JobStatus

LogLevel = Literal["info", "warning", "error", "critical"]


class JobLogLine(Output):
    seq: int = Field(description="the line's number in the job's log, from 1; pass the last one seen as `after`")
    time: datetime = Field(validation_alias="created_at")
    level: LogLevel
    logger: str = Field(description="the module that logged it, e.g. worker.tasks.training")
    attempt: int | None = Field(description="the attempt that logged it; null for a line about the log itself")
    message: str = Field(description="redacted; a failure's traceback follows its message")


class JobLogPublic(Output):
    job_id: str
    status: JobStatus = Field(description="the job's status when the lines were read: follow until it is final")
    lines: list[JobLogLine] = Field(description="oldest first")
    next_after: int = Field(description="the `after` that reads on from here: the last line's seq, or `after`")
    has_more: bool = Field(description="more lines follow already: ask again with `after=next_after` at once")
