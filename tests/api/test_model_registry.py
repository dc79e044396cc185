"""The model registry: a model's name, version, tags and description (PATCH /v1/models/{id}), aliases of a name
and their history, and `name@version` / `name@alias` / `name@latest` on the model routes. Model rows are
inserted as a finished job leaves them; translate gets a stand-in for the inference worker that answers with the
id it was sent (tests/e2e/test_model_registry.py translates through an alias with a real worker)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.services import inference_client
from tests.api.test_init_model import _model_row


def _register(client, headers, model_id: str, name: str) -> dict:
    response = client.patch(f"/v1/models/{model_id}", json={"name": name}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def _point(client, headers, ref: str, **body: Any):
    name, _, alias = ref.partition("@")
    return client.put(f"/v1/models/{name}/aliases/{alias}", json=body, headers=headers)


@pytest.fixture
def worker_echo(monkeypatch):
    """Translate answers with the model id the API sent to the worker, for each text."""

    class Result:
        id = "task-1"

        def __init__(self, answer: dict) -> None:
            self.answer = answer
            self.backend = self

        def get_task_meta(self, _task_id: str) -> dict:  # the answer is there at the first look
            return {"status": "SUCCESS"}

        def forget(self) -> None:
            pass

        def get(self, **_kwargs: Any) -> dict:
            return self.answer

    class Sender:
        def send_task(self, _task: str, args: list[Any], **_kwargs: Any) -> Result:
            model_id, texts = args
            translations = [{"text": model_id, "score": 0.0} for _ in texts]
            return Result({"translations": translations, "backend": "pytorch", "compute_ms": 1.0})

    monkeypatch.setattr(inference_client, "queue_depth", lambda: 0)
    monkeypatch.setattr(inference_client, "get_sender", Sender)


def test_names_give_versions_per_owner_and_renaming_takes_the_next_version(client, alice, make_key):
    first, second, third = (_model_row("alice") for _ in range(3))
    v1 = _register(client, alice, first, "en-de")
    assert (v1["name"], v1["version"], v1["aliases"]) == ("en-de", 1, [])
    assert _register(client, alice, second, "en-de")["version"] == 2
    assert _register(client, alice, second, "en-de")["version"] == 2  # the same name again changes nothing
    # Another owner's name space is their own: bob's first en-de is his version 1.
    bob = make_key("bob")
    _model_row("bob")
    bobs = client.get("/v1/models", headers=bob).json()["data"][0]["id"]
    assert _register(client, bob, bobs, "en-de")["version"] == 1
    # Renaming moves a model to the next version of the new name; a freed number is never given again.
    assert _register(client, alice, second, "en-fr")["version"] == 1
    assert _register(client, alice, third, "en-de")["version"] == 3
    assert _register(client, alice, second, "en-de")["version"] == 4
    listed = client.get("/v1/models", params={"name": "en-de"}, headers=alice).json()
    assert sorted((m["version"], m["id"]) for m in listed["data"]) == [(1, first), (3, third), (4, second)]
    assert listed["total"] == 3
    cleared = client.patch(f"/v1/models/{first}", json={"name": None}, headers=alice).json()
    assert (cleared["name"], cleared["version"]) == (None, None)
    assert client.get("/v1/models/en-de@1", headers=alice).status_code == 404


@pytest.mark.parametrize("name", ["En-De", "-en", "en de", "en@de", "x" * 65, ""])
def test_an_invalid_name_is_422_naming_it(client, alice, name):
    model = _model_row("alice")
    response = client.patch(f"/v1/models/{model}", json={"name": name}, headers=alice)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "name"]
    assert repr(name) in response.json()["detail"][0]["msg"]


def test_tags_description_and_languages_are_set_shown_and_filtered(client, alice):
    tagged, other = _model_row("alice"), _model_row("alice", objective="denoising")
    body = {"tags": ["prod", "numbers", "prod"], "description": "numbers to words", "source_language": "en"}
    patched = client.patch(f"/v1/models/{tagged}", json={**body, "target_language": "pt-BR"}, headers=alice).json()
    assert patched["tags"] == ["prod", "numbers"]
    assert (patched["description"], patched["source_language"], patched["target_language"]) == (
        "numbers to words",
        "en",
        "pt-BR",
    )
    assert patched["objective"] == "translation"
    client.patch(f"/v1/models/{other}", json={"tags": ["numbers"]}, headers=alice)
    by_tag = client.get("/v1/models", params=[("tag", "numbers"), ("tag", "prod")], headers=alice).json()
    assert [m["id"] for m in by_tag["data"]] == [tagged]
    assert {m["id"] for m in client.get("/v1/models?tag=numbers", headers=alice).json()["data"]} == {tagged, other}
    assert client.get("/v1/models?name=En-De", headers=alice).status_code == 422
    bad = client.patch(f"/v1/models/{tagged}", json={"source_language": "english!"}, headers=alice)
    assert bad.status_code == 422 and "'english!'" in bad.text
    assert client.patch(f"/v1/models/{tagged}", json={"tags": ["a b"]}, headers=alice).status_code == 422


def test_the_model_list_filters_by_objective(client, alice):
    translation, denoising = _model_row("alice"), _model_row("alice", objective="denoising")
    page = client.get("/v1/models?objective=denoising", headers=alice).json()
    assert ([m["id"] for m in page["data"]], page["total"]) == ([denoising], 1)
    assert [m["id"] for m in client.get("/v1/models?objective=translation", headers=alice).json()["data"]] == [
        translation
    ]
    response = client.get("/v1/models?objective=summarization", headers=alice)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["query", "objective"]


def test_aliases_are_set_moved_listed_deleted_and_every_move_is_recorded(client, alice, make_key):
    v1, v2 = _model_row("alice"), _model_row("alice")
    _register(client, alice, v1, "en-de")
    _register(client, alice, v2, "en-de")
    created = _point(client, alice, "en-de@production", version=1)
    assert created.status_code == 200, created.text
    assert (created.json()["model_id"], created.json()["version"]) == (v1, 1)
    assert client.get(f"/v1/models/{v1}", headers=alice).json()["aliases"] == ["production"]
    other_key = make_key("alice")  # a second key of the same owner moves it
    moved = _point(client, other_key, "en-de@production", model_id=v2)
    assert (moved.json()["model_id"], moved.json()["version"]) == (v2, 2)
    _point(client, alice, "en-de@staging", version=2)
    listed = client.get("/v1/models/en-de/aliases", headers=alice).json()
    assert [(a["alias"], a["version"]) for a in listed] == [("production", 2), ("staging", 2)]
    assert client.get(f"/v1/models/{v2}", headers=alice).json()["aliases"] == ["production", "staging"]
    assert client.delete("/v1/models/en-de/aliases/production", headers=alice).status_code == 204
    assert client.get("/v1/models/en-de/aliases/production", headers=alice).status_code == 404
    assert client.get("/v1/models/en-de@production", headers=alice).status_code == 404

    history = client.get("/v1/models/en-de/aliases/production/history", headers=alice).json()
    moves = [(e["from_version"], e["to_version"], e["from_model_id"], e["to_model_id"]) for e in history["data"]]
    assert moves == [(2, None, v2, None), (1, 2, v1, v2), (None, 1, None, v1)]  # newest first
    prefixes = [client.get("/v1/me", headers=h).json()["key_prefix"] for h in (alice, other_key, alice)]
    assert [e["key_prefix"] for e in history["data"]] == prefixes
    key_ids = [e["key_id"] for e in history["data"]]
    assert key_ids[0] == key_ids[2] != key_ids[1]
    times = [e["created_at"] for e in history["data"]]
    assert times == sorted(times, reverse=True)


def test_an_alias_must_point_at_a_version_of_its_name(client, alice):
    named, unnamed, elsewhere = _model_row("alice"), _model_row("alice"), _model_row("alice")
    _register(client, alice, named, "en-de")
    _register(client, alice, elsewhere, "en-fr")
    for body, field, words in (
        ({"version": 7}, "version", "version 7 of model en-de not found"),
        ({"model_id": unnamed}, "model_id", f"model {unnamed} is not a version of en-de"),
        ({"model_id": elsewhere}, "model_id", f"model {elsewhere} is not a version of en-de"),
    ):
        response = _point(client, alice, "en-de@production", **body)
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"] == ["body", field] and words in response.text
    both = _point(client, alice, "en-de@production", version=1, model_id=named)
    assert both.status_code == 422, both.text  # exactly one of the two
    assert {tuple(d["loc"]) for d in both.json()["detail"]} == {
        ("body", "AliasToVersion", "model_id"),
        ("body", "AliasToModel", "version"),
    }
    assert _point(client, alice, "en-de@production").status_code == 422
    for alias in ("Prod", "3", "latest", "a@b"):
        response = _point(client, alice, f"en-de@{alias}", version=1)
        assert response.status_code in (404, 422), response.text
        if response.status_code == 422:
            assert response.json()["detail"][0]["loc"] == ["path", "alias"] and repr(alias) in response.text
    assert client.get("/v1/models/en-de/aliases", headers=alice).json() == []


def test_renaming_or_deleting_a_model_removes_its_aliases_and_records_it(client, alice):
    v1, v2 = _model_row("alice"), _model_row("alice")
    _register(client, alice, v1, "en-de")
    _register(client, alice, v2, "en-de")
    _point(client, alice, "en-de@production", version=1)
    _point(client, alice, "en-de@staging", version=2)
    _register(client, alice, v1, "en-de-old")
    assert [a["alias"] for a in client.get("/v1/models/en-de/aliases", headers=alice).json()] == ["staging"]
    deleted = client.delete(f"/v1/models/{v2}?aliases=drop", headers=alice)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["aliases"] == [
        {"name": "en-de", "alias": "staging", "action": "dropped", "model_id": None, "version": None}
    ]
    assert client.get("/v1/models/en-de/aliases", headers=alice).json() == []
    for alias, gone in (("production", v1), ("staging", v2)):
        last = client.get(f"/v1/models/en-de/aliases/{alias}/history", headers=alice).json()["data"][0]
        assert (last["from_model_id"], last["to_model_id"]) == (gone, None)


def test_name_refs_reach_read_anatomy_translate_and_delete(client, alice, worker_echo):
    v1, v2 = _model_row("alice"), _model_row("alice")
    _register(client, alice, v1, "en-de")
    _register(client, alice, v2, "en-de")
    _point(client, alice, "en-de@production", version=1)
    for ref, expected in (("en-de@1", v1), ("en-de@2", v2), ("en-de@production", v1), ("en-de@latest", v2)):
        assert client.get(f"/v1/models/{ref}", headers=alice).json()["id"] == expected, ref
        assert client.get(f"/v1/models/{ref}/anatomy", headers=alice).json()["model_id"] == expected, ref
        translated = client.post(f"/v1/models/{ref}/translate", json={"texts": ["one"]}, headers=alice)
        assert translated.status_code == 200, translated.text
        assert translated.json()["model_id"] == expected  # the id the worker was sent
        assert translated.json()["translations"][0]["text"] == expected
        assert client.get(f"/v1/models/{ref}/evaluations", headers=alice).status_code == 200
        assert client.get(f"/v1/models/{ref}/translations", headers=alice).status_code == 200
    assert client.delete("/v1/models/en-de@production?aliases=drop", headers=alice).status_code == 200
    assert client.get(f"/v1/models/{v1}", headers=alice).status_code == 404
    assert client.get(f"/v1/models/{v2}", headers=alice).status_code == 200


@pytest.mark.parametrize(
    "ref", ["en-de@9", "en-de@canary", "nope@1", "nope@latest", "en-de@0", "EN@1", "en-de@", "en-de@x@y"]
)
def test_an_unknown_ref_is_404_naming_it(client, alice, ref):
    _register(client, alice, _model_row("alice"), "en-de")
    for path in (f"/v1/models/{ref}", f"/v1/models/{ref}/anatomy"):
        response = client.get(path, headers=alice)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["detail"] == f"model {ref} not found"
    translated = client.post(f"/v1/models/{ref}/translate", json={"texts": ["one"]}, headers=alice)
    assert translated.status_code == 404 and translated.json()["detail"] == f"model {ref} not found"


def test_another_owners_names_and_aliases_are_404(client, alice, make_key):
    model = _model_row("alice")
    _register(client, alice, model, "en-de")
    _point(client, alice, "en-de@production", version=1)
    bob = make_key("bob")
    for method, path in (
        ("GET", "/v1/models/en-de@1"),
        ("GET", "/v1/models/en-de@production"),
        ("GET", "/v1/models/en-de@latest/anatomy"),
        ("POST", "/v1/models/en-de@production/translate"),
        ("DELETE", "/v1/models/en-de@production"),
        ("GET", "/v1/models/en-de/aliases"),
        ("GET", "/v1/models/en-de/aliases/production"),
        ("GET", "/v1/models/en-de/aliases/production/history"),
        ("DELETE", "/v1/models/en-de/aliases/production"),
    ):
        body = {"texts": ["one"]} if path.endswith("translate") else None
        response = client.request(method, path, headers=bob, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert model not in response.text
    assert _point(client, bob, "en-de@production", model_id=model).status_code == 404
    assert client.get("/v1/models", params={"name": "en-de"}, headers=bob).json()["total"] == 0
    # Bob's own en-de is his: his @1 is his model, Alice's alias untouched.
    _model_row("bob")
    bobs = client.get("/v1/models", headers=bob).json()["data"][0]["id"]
    _register(client, bob, bobs, "en-de")
    assert client.get("/v1/models/en-de@1", headers=bob).json()["id"] == bobs
    assert client.get("/v1/models/en-de@production", headers=alice).json()["id"] == model


def test_an_alias_moved_while_requests_flow_serves_every_request_and_then_only_the_new_version(
    client, alice, worker_echo
):
    """Fault: the alias moves from v1 to v2 while another thread keeps translating through `en-de@production`.
    Pass: every request answers 200 from v1 or v2, and every request sent after the move answers from v2 (no
    resolution of the alias is cached)."""
    v1, v2 = _model_row("alice"), _model_row("alice")
    _register(client, alice, v1, "en-de")
    _register(client, alice, v2, "en-de")
    _point(client, alice, "en-de@production", version=1)
    moved, stop = threading.Event(), threading.Event()
    seen: list[tuple[bool, int, str]] = []  # (sent after the move, status, model that answered)

    def keep_calling() -> None:
        while not stop.is_set():
            after = moved.is_set()
            for path, body in (("translate", {"texts": ["one"]}), ("", None)):
                method = "POST" if body else "GET"
                url = f"/v1/models/en-de@production/{path}".rstrip("/")
                response = client.request(method, url, json=body, headers=alice)
                answered = response.json().get("model_id" if body else "id", "") if response.status_code == 200 else ""
                seen.append((after, response.status_code, answered))

    caller = threading.Thread(target=keep_calling)
    caller.start()
    try:
        while len(seen) < 20:
            threading.Event().wait(0.01)
        assert _point(client, alice, "en-de@production", version=2).status_code == 200
        moved.set()
        count = len(seen)
        while len(seen) < count + 20:
            threading.Event().wait(0.01)
    finally:
        stop.set()
        caller.join(timeout=30)
    assert all(status == 200 for _, status, _ in seen), seen
    assert {m for after, _, m in seen if not after} <= {v1, v2} and v1 in {m for _, _, m in seen}
    after_move = [m for after, _, m in seen if after]
    assert len(after_move) >= 20 and set(after_move) == {v2}, after_move
