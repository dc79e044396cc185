"""API keys: only their SHA-256 is stored, they are looked up by digest and compared in constant time, and they
never reach a log, wherever a client puts them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

import httpx
from sqlalchemy import event, text

from tests.security.conftest import bearer


def test_the_database_holds_only_the_sha256_of_a_key(pg_client):
    from app.db.session import get_engine

    clear = bearer("alice")["Authorization"].removeprefix("Bearer ")
    assert pg_client.get("/v1/me", headers={"Authorization": f"Bearer {clear}"}).status_code == 200
    with get_engine().connect() as connection:
        rows = [dict(row._mapping) for row in connection.execute(text("SELECT * FROM api_keys"))]
    assert len(rows) == 1 and rows[0]["key_hash"] == hashlib.sha256(clear.encode()).hexdigest()
    dump = repr(rows)
    secret_part = clear[len(rows[0]["prefix"]) :]  # the prefix (tsk_ and 6 characters) is shown to humans by design
    assert len(secret_part) >= 36 and secret_part[:12] not in dump and secret_part[-12:] not in dump


def test_keys_are_looked_up_by_digest_and_compared_with_compare_digest(pg_client, monkeypatch):
    """The database sees only the SHA-256 of the presented key (so lookup time says nothing about stored keys),
    and the match is confirmed with hmac.compare_digest, whose time does not depend on where digests differ."""
    from app.db.session import get_engine

    clear = bearer("alice")["Authorization"].removeprefix("Bearer ")
    wrong = "tsk_" + secrets.token_urlsafe(32)
    digest = hashlib.sha256(clear.encode()).hexdigest()
    statements: list[str] = []
    comparisons: list[tuple] = []
    real_compare = hmac.compare_digest

    def record_sql(_conn, _cursor, statement, parameters, _context, _executemany) -> None:
        statements.append(f"{statement} {parameters!r}")

    def record_compare(a, b):
        comparisons.append((a, b))
        return real_compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", record_compare)
    event.listen(get_engine(), "before_cursor_execute", record_sql)
    try:
        assert pg_client.get("/v1/me", headers={"Authorization": f"Bearer {clear}"}).status_code == 200
        seen_good, compared_good = list(statements), list(comparisons)
        assert pg_client.get("/v1/me", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
    finally:
        event.remove(get_engine(), "before_cursor_execute", record_sql)
    assert any(digest in s and "key_hash" in s for s in seen_good), seen_good
    assert not any(clear in s or wrong in s for s in statements), "a clear key reached the database"
    assert compared_good == [(digest, digest)]
    assert comparisons == compared_good, "an unknown key's digest matches no row, so nothing is compared"


def test_keys_never_reach_the_logs_at_debug_level(debug_stack):
    """Good and bad keys, sent in every place a client might put one, appear in no process log (API, worker)."""
    url, key = debug_stack.url, debug_stack.key("keyholder")
    bad = "tsk_" + secrets.token_urlsafe(32)
    basic = base64.b64encode(f"keyholder:{key}".encode()).decode()
    with httpx.Client(base_url=url, timeout=30) as http:
        good = {"Authorization": f"Bearer {key}"}
        assert http.get("/v1/me", headers=good).status_code == 200
        ping = http.post("/v1/pings", headers=good, json={"queue": "inference"})  # a round trip through the worker
        assert ping.status_code == 202, ping.text
        for candidate in (key, bad):
            for headers in (
                {"Authorization": f"Bearer {candidate}"},
                {"Authorization": f"bearer {candidate}"},
                {"Authorization": candidate},
                {"X-API-Key": candidate},
                {"Authorization": f"Basic {basic}"},
                {"Cookie": f"session={candidate}; key={candidate}"},
            ):
                http.get("/v1/me", headers=headers)
            for params in ({"api_key": candidate}, {"key": candidate, "token": candidate}, {"access_token": candidate}):
                assert http.get("/v1/me", params=params).status_code == 401
            assert http.get(f"/v1/jobs/{candidate}", headers=good).status_code == 404  # a key pasted as an id
            assert http.post("/v1/pings", headers=good, json={"queue": candidate}).status_code == 422
            assert http.post("/v1/pings", headers={"Authorization": f"Bearer {bad}"}, json={}).status_code == 401
        http.get("/dashboard", params={"key": key})
        answered = None
        for _ in range(60):
            answered = http.get(f"/v1/pings/{ping.json()['id']}", headers=good).json()["answered_at"]
            if answered:
                break
            time.sleep(0.5)
        assert answered, "the inference worker never answered the ping"
    logs = {name: debug_stack.processes.log(name) for name in debug_stack.processes.children}
    assert "GET /v1/me" in logs["api"] and " 401" in logs["api"], "the API's access log is missing"
    assert "DEBUG" in logs["inference"] and "service.ping" in logs["inference"], "the worker's debug log is missing"
    for name, text_ in logs.items():
        for secret, what in (
            (key, "the key"),
            (bad, "a bad key"),
            (key[len("tsk_") :], "the key's body"),
            (bad[len("tsk_") :], "a bad key's body"),
        ):
            assert secret not in text_, f"{what} appears in the {name} log"
