"""Ping: a round trip API -> broker -> worker -> database, visible through the API."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from app.api.deps import SessionDep
from app.api.scopes import ReadKey
from app.core.task_names import PING
from app.db.tables import Ping
from app.schemas.service import PingCreate, PingPublic
from app.services.queueing import send

router = APIRouter(prefix="/v1", tags=["service"])


def _public(ping: Ping) -> PingPublic:
    round_trip = None
    if ping.answered_at is not None:
        round_trip = (ping.answered_at - ping.created_at).total_seconds() * 1000
    return PingPublic(
        id=ping.id,
        queue=ping.queue,
        created_at=ping.created_at,
        answered_at=ping.answered_at,
        worker=ping.worker,
        round_trip_ms=round_trip,
    )


@router.post(
    "/pings",
    response_model=PingPublic,
    status_code=status.HTTP_202_ACCEPTED,
    responses={400: {"description": "Body is not UTF-8 JSON"}, 503: {"description": "Broker unavailable"}},
)
def create_ping(body: PingCreate, session: SessionDep, key: ReadKey) -> PingPublic:
    ping = Ping(owner_id=key.owner_id, queue=body.queue)
    session.add(ping)
    session.commit()  # enqueue after commit, never before
    try:
        send(PING, [ping.id], queue=body.queue)
    except Exception as exc:
        session.delete(ping)
        session.commit()
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"broker unavailable: {type(exc).__name__}",
            headers={"Retry-After": "5"},
        ) from exc
    return _public(ping)


@router.get("/pings/{ping_id}", response_model=PingPublic, responses={404: {"description": "Not found"}})
def read_ping(ping_id: str, session: SessionDep, key: ReadKey) -> PingPublic:
    ping = session.get(Ping, ping_id)
    if ping is None or ping.owner_id != key.owner_id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"ping {ping_id} not found")
    return _public(ping)
