"""The registry against a real inference worker: translate through `name@alias`, and move the alias while
requests flow (PostgreSQL, Redis, the API and workers as processes; the models of tests/e2e/conftest.py)."""

from __future__ import annotations

import threading

from sqlalchemy import create_engine, text

from bench.harness.rows import insert_model


def test_translate_through_an_alias_follows_it_when_it_moves_while_requests_flow(served):
    """Fault: `numbers@production` moves from version 1 to version 2 while another thread keeps translating
    through it. Pass: every request is 200 and translated; every request sent after the move is served by
    version 2 (the worker was sent its id), none by a stale resolution of the alias."""
    from num2words import num2words

    api, trained = served["api"], served["models"]["translation"]
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        key, sha = c.execute(text("SELECT storage_key, sha256 FROM models WHERE id = :m"), {"m": trained}).one()
    copy = insert_model(served["env"]["DATABASE_URL"], "alice", key, sha)  # the same files, another model
    for model_id, version in ((trained, 1), (copy, 2)):
        named = api.http.patch(f"/v1/models/{model_id}", json={"name": "numbers", "tags": ["e2e"]})
        assert named.status_code == 200, named.text
        assert named.json()["version"] == version
    assert api.http.put("/v1/models/numbers/aliases/production", json={"version": 1}).status_code == 200

    texts = [num2words(n, lang="en") for n in served["held_out"][:2]]
    first = api.http.post("/v1/models/numbers@production/translate", json={"texts": texts, "beam_size": 2})
    assert first.status_code == 200, first.text
    assert first.json()["model_id"] == trained
    assert all(t["text"] for t in first.json()["translations"]), first.json()

    moved, stop = threading.Event(), threading.Event()
    seen: list[tuple[bool, int, str]] = []  # (sent after the move, status, model that answered)

    def keep_translating() -> None:
        while not stop.is_set():
            after = moved.is_set()
            response = api.http.post("/v1/models/numbers@production/translate", json={"texts": texts[:1]})
            ok = response.status_code == 200 and bool(response.json()["translations"][0]["text"])
            seen.append((after, response.status_code if ok else -1, response.json().get("model_id", "")))

    callers = [threading.Thread(target=keep_translating) for _ in range(2)]
    for thread in callers:
        thread.start()
    try:
        while len(seen) < 10:
            threading.Event().wait(0.05)
        moving = api.http.put("/v1/models/numbers/aliases/production", json={"model_id": copy})
        assert moving.status_code == 200 and moving.json()["version"] == 2, moving.text
        moved.set()
        count = len(seen)
        while len(seen) < count + 10:
            threading.Event().wait(0.05)
    finally:
        stop.set()
        for thread in callers:
            thread.join(timeout=60)
    assert all(status == 200 for _, status, _ in seen), seen
    assert trained in {m for after, _, m in seen if not after}
    after_move = [m for after, _, m in seen if after]
    assert len(after_move) >= 10 and set(after_move) == {copy}, after_move
    history = api.http.get("/v1/models/numbers/aliases/production/history").json()["data"]
    assert [(e["from_model_id"], e["to_model_id"]) for e in history] == [(trained, copy), (None, trained)]
    # name@version and name@latest reach the same routes
    assert api.http.get("/v1/models/numbers@1/anatomy").json()["model_id"] == trained
    assert api.http.get("/v1/models/numbers@latest").json()["id"] == copy
