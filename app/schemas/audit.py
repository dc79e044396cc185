"""The audit trail as the API shows it (GET /v1/audit)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.schemas.common import Output


class AuditEventPublic(Output):
    id: str
    created_at: datetime
    action: str
    object_kind: str
    object_id: str
    details: dict[str, Any]
    key_id: str | None
    key_name: str | None
    key_prefix: str | None
    member_id: str | None
    member_name: str | None
    request_id: str | None
    client: str | None
