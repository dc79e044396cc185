"""POST/GET/DELETE /v1/datasets: validated uploads, clear 4xx errors, nothing half-written."""

from __future__ import annotations

import json

import pytest


def _jsonl(pairs) -> bytes:
    return "".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in pairs).encode()


def _upload(client, headers, data: bytes, filename="train.jsonl", kind="parallel", name="demo"):
    return client.post(
        "/v1/datasets",
        headers=headers,
        data={"name": name, "kind": kind},
        files={"file": (filename, data, "application/octet-stream")},
    )


def _artifact_files(settings_root) -> list:
    return [p for p in settings_root.rglob("*") if p.is_file()]


def test_upload_jsonl_returns_statistics(client, make_key):
    response = _upload(client, make_key("alice"), _jsonl([("one", "eins"), ("two", "zwei"), ("three", "drei")]))
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["kind"], body["format"], body["rows"]) == ("parallel", "jsonl", 3)
    assert body["stats"]["source"]["max"] == 5 and body["stats"]["target"]["min"] == 4
    assert "storage_key" not in body and "path" not in json.dumps(body)


def test_upload_tsv_and_monolingual(client, make_key):
    headers = make_key("alice")
    tsv = _upload(client, headers, "hello\thallo\nbye\ttschüss\n".encode(), filename="pairs.tsv")
    assert tsv.status_code == 201 and tsv.json()["format"] == "tsv"
    text = _upload(client, headers, b"the cat sat\nthe dog ran\n\n", filename="mono.txt", kind="monolingual")
    assert text.status_code == 201 and (text.json()["format"], text.json()["rows"]) == ("text", 2)


@pytest.mark.parametrize(
    ("data", "filename", "message"),
    [
        (b'{"source": "a", "target": "b"}\n{"source": "a", "target": \n', "x.jsonl", "line 2"),
        (b'{"source": "a", "target": "b"}\n{"source": "c"}\n', "x.jsonl", '"target"'),
        (b"", "x.jsonl", "empty"),
        (b"   \n\n", "x.jsonl", "empty"),
        (b"ok\tgut\n\xff\xfe broken\tkaputt\n", "x.tsv", "UTF-8"),
        (b"only one column\n", "x.tsv", "line 1"),
    ],
)
def test_bad_files_are_422_naming_the_line_and_problem(client, make_key, settings_env, data, filename, message):
    from app.core.settings import get_settings

    response = _upload(client, make_key("alice"), data, filename=filename)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "file"]
    assert message in detail["msg"]
    assert _artifact_files(get_settings().data_dir) == [] or all(
        "datasets" not in str(p) for p in _artifact_files(get_settings().data_dir)
    )
    assert client.get("/v1/datasets", headers=make_key("bob")).json()["total"] == 0


def test_too_large_upload_is_413(client, make_key, settings_env):
    settings_env(MAX_UPLOAD_MB="1")
    response = _upload(client, make_key("alice"), _jsonl([("x" * 1000, "y" * 1000)] * 600))
    assert response.status_code == 413
    assert "MAX_UPLOAD_MB=1" in response.json()["detail"]


def test_wrong_kind_value_is_422(client, make_key):
    response = _upload(client, make_key("alice"), b"a\n", kind="images")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "kind"]


def test_list_paginates_with_total(client, make_key):
    headers = make_key("alice")
    for i in range(3):
        assert _upload(client, headers, _jsonl([("a", "b")]), name=f"d{i}").status_code == 201
    page = client.get("/v1/datasets?limit=2&offset=0", headers=headers).json()
    assert (page["total"], len(page["data"]), page["limit"]) == (3, 2, 2)
    rest = client.get("/v1/datasets?limit=2&offset=2", headers=headers).json()
    assert len(rest["data"]) == 1
    assert {d["name"] for d in page["data"] + rest["data"]} == {"d0", "d1", "d2"}


def test_delete_removes_row_and_file(client, make_key):
    from app.artifacts import get_store

    headers = make_key("alice")
    dataset = _upload(client, headers, _jsonl([("a", "b")])).json()
    assert get_store().exists(f"datasets/{dataset['id']}")
    assert client.delete(f"/v1/datasets/{dataset['id']}", headers=headers).status_code == 204
    assert client.get(f"/v1/datasets/{dataset['id']}", headers=headers).status_code == 404
    assert not get_store().exists(f"datasets/{dataset['id']}")


def test_other_owner_gets_404_everywhere(client, make_key):
    alice, bob = make_key("alice"), make_key("bob")
    dataset_id = _upload(client, alice, _jsonl([("a", "b")])).json()["id"]
    for method in ("GET", "DELETE"):
        response = client.request(method, f"/v1/datasets/{dataset_id}", headers=bob)
        assert response.status_code == 404
        assert response.json() == {"detail": f"dataset {dataset_id} not found"}
    assert client.get(f"/v1/datasets/{dataset_id}", headers=alice).status_code == 200
