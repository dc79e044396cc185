"""A parallel dataset as a translation memory over HTTP (real workers, PostgreSQL, Redis): matches beside the
machine translation, exact ones instead of it, and each bad request refused naming its problem."""

from __future__ import annotations

import pytest
from num2words import num2words

from tests.support.client import write_jsonl

# The memory's targets are the German words in capitals: a translation that comes from it cannot be the model's.
NUMBERS = range(0, 1000, 7)


@pytest.fixture(scope="module")
def memory(served, tmp_path_factory) -> dict:
    api = served["api"]
    folder = tmp_path_factory.mktemp("memory")
    pairs = [(num2words(n, lang="en"), num2words(n, lang="de").upper()) for n in NUMBERS]
    return api.upload(write_jsonl(folder / "memory.jsonl", pairs), "parallel")


def _translate(served, body: dict, key: str | None = None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return served["api"].http.post(
        f"/v1/models/{served['models']['translation']}/translate", json=body, headers=headers
    )


def test_matches_come_beside_the_translation_and_exact_ones_instead_of_it(served, memory):
    """Pass: without replace_at every text is translated by the model, its memory matches beside it (the exact one
    first, at 100); with replace_at 100 the text stored in the memory comes back instead, for that text only."""
    texts = [num2words(14, lang="en"), num2words(15, lang="en"), "  fourteen  "]
    body = {"texts": texts, "memory": {"dataset_id": memory["id"], "min_score": 60, "max_matches": 2}}
    response = _translate(served, body)
    assert response.status_code == 200, response.text
    beside = response.json()
    assert beside["backend"] in ("pytorch", "ctranslate2")
    first, second, spaced = beside["translations"]
    assert first["origin"] == "machine" and first["text"] != "VIERZEHN" and first["score"] is not None
    assert first["memory_matches"][0] == {"source": "fourteen", "target": "VIERZEHN", "score": 100.0, "segment": 2}
    assert spaced["memory_matches"][0]["score"] == 100.0  # whitespace aside
    assert all(m["score"] < 100 and m["score"] >= 60 for m in second["memory_matches"])  # 15 is not in it
    body["memory"]["replace_at"] = 100
    replaced = _translate(served, body).json()
    first, second, spaced = replaced["translations"]
    assert (first["text"], first["origin"], first["score"]) == ("VIERZEHN", "memory", None)
    assert spaced["text"] == "VIERZEHN" and second["origin"] == "machine" and second["text"] != ""
    only_memory = _translate(served, {**body, "texts": texts[:1]}).json()
    assert only_memory["backend"] == "memory" and only_memory["translations"][0]["text"] == "VIERZEHN"


def test_a_memory_that_cannot_serve_is_refused_naming_the_problem(served, memory, tmp_path):
    """Fault: a dataset that does not exist (or is another organisation's), a monolingual one, one in other
    languages than the model's, a score out of range, a key without `read`. Pass: 422s naming the field and the
    dataset, a 403 naming the scope; nothing is translated."""
    api = served["api"]
    (tmp_path / "mono.txt").write_text("one\ntwo\n")
    mono = api.upload(tmp_path / "mono.txt", "monolingual")
    cases = [
        ({"dataset_id": "0" * 36}, 422, "not found"),
        ({"dataset_id": mono["id"]}, 422, "a translation memory needs a parallel one"),
        ({"dataset_id": memory["id"], "min_score": 101}, 422, "less than or equal to 100"),
        ({"dataset_id": memory["id"], "max_matches": 0}, 422, "greater than or equal to 1"),
    ]
    for spec, status, needle in cases:
        response = _translate(served, {"texts": ["one"], "memory": spec})
        assert response.status_code == status and needle in response.text, (spec, response.text)
    model_id = served["models"]["translation"]
    write_jsonl(tmp_path / "fr.jsonl", [("un", "EINS"), ("deux", "ZWEI")])
    with open(tmp_path / "fr.jsonl", "rb") as f:
        created = api.http.post(
            "/v1/datasets",
            data={"name": "fr.jsonl", "kind": "parallel", "source_language": "fr"},
            files={"file": ("fr.jsonl", f)},
        )
    assert created.status_code == 201, created.text
    french = api.processed(created.json()["id"])
    assert api.http.patch(f"/v1/models/{model_id}", json={"source_language": "en"}).status_code == 200
    try:
        response = _translate(served, {"texts": ["one"], "memory": {"dataset_id": french["id"]}})
        assert response.status_code == 422 and "source language is fr, the model's en" in response.text
    finally:
        api.http.patch(f"/v1/models/{model_id}", json={"source_language": None})
    no_read = api.http.post("/v1/keys", json={"name": "infer-only", "scopes": ["inference"]}).json()["key"]
    response = _translate(served, {"texts": ["one"], "memory": {"dataset_id": memory["id"]}}, key=no_read)
    assert response.status_code == 403 and "lacks scope 'read'" in response.text
    assert _translate(served, {"texts": ["one"]}, key=no_read).status_code == 200  # without a memory it may


def test_the_cli_prints_each_translations_matches_under_it(served, memory):
    """`translate --text ... --memory DATASET`: a line per translation, its matches indented under it; with
    --memory-replace-at 100 the exact match is printed instead of the model's translation."""
    from bench.harness.stack import run_cli

    key = served["api"].http.headers["authorization"].removeprefix("Bearer ")
    env = {**served["env"], "TRANSFORMER_URL": served["url"], "TRANSFORMER_API_KEY": key}
    model = served["models"]["translation"]
    out = run_cli(env, "translate", model, "--text", "fourteen", "--memory", memory["id"]).splitlines()
    assert out[0] != "VIERZEHN" and out[1] == "  memory\t100.00\tfourteen\tVIERZEHN", out
    assert all(line.startswith("  memory\t") for line in out[1:])
    replaced = run_cli(
        env, "translate", model, "--text", "fourteen", "--memory", memory["id"], "--memory-replace-at", "100"
    )
    assert replaced.splitlines()[0] == "VIERZEHN"
