"""Pipelines: chains of ordinary jobs, dataset translations and filtered datasets that carry a workflow for its user
(back-translation, distillation: app/services/pipeline_runner.py moves them on).

`steps` is the plan, in order: each {"name", "kind" (train | translate | filter), "id" (the object once started,
else null), "earlier" (ids of the attempts a retry replaced)}; each step's state is its object's. running ->
succeeded | failed | cancelled. Deleted with its owner; its objects stay. Imported by migrations/env.py beside
app/db/tables.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow


class Pipeline(Base):
    __tablename__ = "pipelines"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    key_id: Mapped[str] = mapped_column(String(36))  # the key that created it: its jobs are submitted as that key
    key_prefix: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(30))  # backtranslation | distillation
    name: Mapped[str] = mapped_column(String(200))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)  # the request, as checked
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20), default="running", index=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    model_id: Mapped[str | None] = mapped_column(String(36), nullable=True)  # the last step's model, once succeeded
    version: Mapped[int] = mapped_column(Integer, default=0)  # bumped to lock the row: advance() takes turns
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
