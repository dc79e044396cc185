"""POST/GET/DELETE /v1/datasets: uploads stored as they come, then parsed and checked by the worker's code (run here
in process, as the data queue's worker runs it): processing -> ready | failed naming the line; clear 4xx errors,
nothing half-written."""

from __future__ import annotations

import gzip
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


def _process(client, headers, response) -> dict:
    """Run the data queue's task on the uploaded dataset, as a worker would; the dataset as GET shows it after."""
    from worker.data.ingest import process

    assert response.status_code == 201, response.text
    assert response.json()["status"] == "processing"
    process(response.json()["id"])
    return client.get(f"/v1/datasets/{response.json()['id']}", headers=headers).json()


def _ready(client, headers, data: bytes, **kwargs) -> dict:
    return _process(client, headers, _upload(client, headers, data, **kwargs))


def _artifact_files(settings_root) -> list:
    return [p for p in settings_root.rglob("*") if p.is_file()]


def test_upload_jsonl_is_processing_then_ready_with_statistics(client, make_key):
    headers = make_key("alice")
    response = _upload(client, headers, _jsonl([("one", "eins"), ("two", "zwei"), ("three", "drei")]))
    assert response.status_code == 201, response.text
    assert (response.json()["status"], response.json()["rows"]) == ("processing", 0)
    body = _process(client, headers, response)
    assert (body["kind"], body["format"], body["rows"], body["status"]) == ("parallel", "jsonl", 3, "ready")
    assert body["stats"]["source"]["max"] == 5 and body["stats"]["target"]["min"] == 4
    assert body["compression"] == "none" and body["processed_at"] is not None
    assert "storage_key" not in body and "path" not in json.dumps(body)


def test_upload_tsv_and_monolingual(client, make_key):
    headers = make_key("alice")
    tsv = _ready(client, headers, "hello\thallo\nbye\ttschüss\n".encode(), filename="pairs.tsv")
    assert (tsv["status"], tsv["format"]) == ("ready", "tsv")
    text = _ready(client, headers, b"the cat sat\nthe dog ran\n\n", filename="mono.txt", kind="monolingual")
    assert (text["format"], text["rows"]) == ("text", 2)


def test_the_format_is_read_from_the_first_line_when_the_name_says_nothing(client, make_key):
    headers = make_key("alice")
    assert _ready(client, headers, _jsonl([("a", "b")]), filename="corpus")["format"] == "jsonl"
    assert _ready(client, headers, b"a\tb\n", filename="corpus")["format"] == "tsv"


def test_a_gzip_file_is_stored_compressed_and_parsed(client, make_key):
    headers = make_key("alice")
    data = gzip.compress(_jsonl([(f"s{i}", f"t{i}") for i in range(500)]))
    body = _ready(client, headers, data, filename="train.jsonl.gz")
    assert (body["status"], body["rows"], body["compression"], body["size_bytes"]) == ("ready", 500, "gzip", len(data))


def test_a_truncated_gzip_fails_naming_where(client, make_key):
    headers = make_key("alice")
    data = gzip.compress(_jsonl([(f"source {i}", f"target {i}") for i in range(20000)]), compresslevel=1)
    body = _ready(client, headers, data[: len(data) // 2], filename="train.jsonl.gz")
    assert body["status"] == "failed"
    assert "gzip stream is truncated or corrupt" in body["error"] and body["error_line"] > 1
    assert body["rows"] == 0


def test_a_gzip_bomb_without_a_newline_fails_naming_the_line_limit_and_the_next_dataset_is_ready(client, make_key):
    """64 MiB of zeros and no newline in 64 KB of gzip: the worker holds at most MAX_DATASET_LINE_KB of it (the
    review's 10 MB file unpacked to 10 GB the same way), fails the dataset naming line 1 and the limit, and parses
    the next dataset as ever."""
    from tests.support.bombs import zeros_gz

    headers = make_key("alice")
    data = zeros_gz(64)
    assert len(data) < 200_000
    body = _ready(client, headers, data, filename="bomb.jsonl.gz")
    assert (body["status"], body["error_line"], body["rows"]) == ("failed", 1, 0)
    assert "longer than 1048576 bytes, the longest line allowed (MAX_DATASET_LINE_KB=1024)" in body["error"]
    plain = _ready(client, headers, b"x" * (1024 * 1024 + 1) + b"\n", filename="long.txt", kind="monolingual")
    assert plain["status"] == "failed" and "MAX_DATASET_LINE_KB=1024" in plain["error"]
    assert _ready(client, headers, _jsonl([("one", "eins")]))["status"] == "ready"


def test_a_gzip_file_that_unpacks_past_its_bound_fails_naming_the_limit_and_the_bytes(client, make_key, settings_env):
    """Valid rows, 6 MiB once unpacked, from a 1 MiB-limit service that lets a file unpack to 4 times that."""
    settings_env(MAX_DATASET_MB="1", DATASET_UNPACKED_RATIO="4")
    headers = make_key("alice")
    row = _jsonl([("a", "b")])
    data = gzip.compress(row * (6 * 1024 * 1024 // len(row)))
    body = _ready(client, headers, data, filename="rows.jsonl.gz")
    assert body["status"] == "failed" and body["error_line"] == 4 * 1024 * 1024 // len(row) + 1
    assert "unpacks to more than 4194304 bytes (DATASET_UNPACKED_RATIO=4 times MAX_DATASET_MB=1)" in body["error"]
    assert _ready(client, headers, gzip.compress(row * 1000), filename="ok.jsonl.gz")["rows"] == 1000


@pytest.mark.parametrize(
    ("data", "filename", "message", "line"),
    [
        (b'{"source": "a", "target": "b"}\n{"source": "a", "target": \n', "x.jsonl", "line 2", 2),
        (b'{"source": "a", "target": "b"}\n{"source": "c"}\n', "x.jsonl", '"target"', 2),
        (b"   \n\n", "x.jsonl", "empty", None),
        (b"ok\tgut\n\xff\xfe broken\tkaputt\n", "x.tsv", "UTF-8", 2),
        (b"only one column\n", "x.tsv", "line 1", 1),
    ],
)
def test_bad_files_fail_naming_the_line_and_problem(client, make_key, data, filename, message, line):
    headers = make_key("alice")
    body = _ready(client, headers, data, filename=filename)
    assert body["status"] == "failed" and message in body["error"] and body["error_line"] == line
    job = client.post("/v1/jobs", headers=headers, json={"objective": "translation", "dataset_id": body["id"]})
    assert job.status_code == 422 and "failed its checks" in job.text and message in job.json()["detail"][0]["msg"]
    report = client.get(f"/v1/datasets/{body['id']}/report", headers=headers)
    assert report.status_code == 409 and f"has no report: it failed: {body['error']}" in report.json()["detail"]


def test_an_empty_file_is_422_and_nothing_is_stored(client, make_key):
    from app.core.settings import get_settings

    response = _upload(client, make_key("alice"), b"", filename="x.jsonl")
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "file"] and "empty" in response.json()["detail"][0]["msg"]
    assert all("datasets" not in str(p) for p in _artifact_files(get_settings().data_dir))
    assert client.get("/v1/datasets", headers=make_key("alice")).json()["total"] == 0


def test_a_job_on_a_dataset_still_processing_is_accepted_and_waits(client, make_key):
    headers = make_key("alice")
    dataset = _upload(client, headers, _jsonl([("one", "eins"), ("two", "zwei")])).json()
    job = client.post("/v1/jobs", headers=headers, json={"objective": "translation", "dataset_id": dataset["id"]})
    assert job.status_code == 201, job.text
    assert job.json()["status"] == "queued"


def test_too_large_upload_is_413_naming_the_limit(client, make_key, settings_env):
    settings_env(MAX_DATASET_MB="1")
    response = _upload(client, make_key("alice"), _jsonl([("x" * 1000, "y" * 1000)] * 600))
    assert response.status_code == 413
    assert "MAX_DATASET_MB=1" in response.json()["detail"]


def test_form_fields_declare_the_languages_and_the_format(client, make_key):
    headers = make_key("alice")
    response = _upload(client, headers, b"a\tb\n", filename="x")
    body = client.post(
        "/v1/datasets",
        headers=headers,
        data={"name": "d", "kind": "parallel", "source_language": "en", "target_language": "de", "format": "tsv"},
        files={"file": ("x", b"one\teins\n")},
    ).json()
    assert (body["source_language"], body["target_language"], body["format"]) == ("en", "de", "tsv")
    bad = client.post(
        "/v1/datasets",
        headers=headers,
        data={"name": "d", "kind": "parallel", "source_language": "english!"},
        files={"file": ("x", b"one\teins\n")},
    )
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "source_language"]
    assert response.status_code == 201


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


def test_delete_removes_the_row_and_leaves_the_file_to_the_collector(client, make_key):
    """The file stays for a worker still reading it; the collector deletes it after ARTIFACT_GRACE_SECONDS
    (tests/api/test_deletion.py)."""
    from app.artifacts import get_store

    headers = make_key("alice")
    dataset = _upload(client, headers, _jsonl([("a", "b")])).json()
    assert get_store().exists(f"datasets/{dataset['id']}")
    assert client.delete(f"/v1/datasets/{dataset['id']}", headers=headers).status_code == 204
    assert client.get(f"/v1/datasets/{dataset['id']}", headers=headers).status_code == 404
    assert get_store().exists(f"datasets/{dataset['id']}")


def test_other_owner_gets_404_everywhere(client, make_key):
    alice, bob = make_key("alice"), make_key("bob")
    dataset_id = _upload(client, alice, _jsonl([("a", "b")])).json()["id"]
    for method in ("GET", "DELETE"):
        response = client.request(method, f"/v1/datasets/{dataset_id}", headers=bob)
        assert response.status_code == 404
        assert response.json() == {"detail": f"dataset {dataset_id} not found"}
    assert client.get(f"/v1/datasets/{dataset_id}", headers=alice).status_code == 200


def test_a_2_gb_upload_over_the_default_limit_is_413_before_anything_is_stored(client, make_key):
    """2 GiB declared against the default MAX_DATASET_MB=2000: refused from its headers, the body never read."""
    from app.core.settings import get_settings

    sent = []

    def body():
        sent.append(1)
        yield b"--x\r\n"

    response = client.post(
        "/v1/datasets",
        headers={
            **make_key("alice"),
            "content-type": "multipart/form-data; boundary=x",
            "content-length": str(2 * 1024**3),
        },
        content=body(),
    )
    assert response.status_code == 413, response.text
    assert response.json()["detail"] == (
        f"request body of {2 * 1024**3} bytes exceeds the limit of {2000 * 1024 * 1024} bytes (MAX_DATASET_MB=2000)"
    )
    assert all("datasets" not in str(p) for p in _artifact_files(get_settings().data_dir))
    assert client.get("/v1/datasets", headers=make_key("alice")).json()["total"] == 0


def test_the_worker_writes_a_data_report_served_at_its_own_url(client, make_key):
    """Empty sides, duplicates and copies pass the parsing (they are data problems, not a malformed file) and the
    report counts each, with its line numbers."""
    headers = make_key("alice")
    rows = [(f"the cat number {i} sat on the mat", f"le chat numéro {i} était assis sur le tapis") for i in range(40)]
    rows += [rows[3], ("copy me please", "copy me please"), ("an empty target", "")]
    response = client.post(
        "/v1/datasets",
        headers=headers,
        data={"name": "crawl", "kind": "parallel", "source_language": "en", "target_language": "fr"},
        files={"file": ("crawl.jsonl", _jsonl(rows))},
    )
    early = client.get(f"/v1/datasets/{response.json()['id']}/report", headers=headers)  # the worker has not parsed it
    assert early.status_code == 409 and "has no report: it is still being processed" in early.json()["detail"]
    dataset = _process(client, headers, response)
    assert (dataset["status"], dataset["rows"]) == ("ready", 43)
    report = client.get(f"/v1/datasets/{dataset['id']}/report", headers=headers)
    assert report.status_code == 200, report.text
    problems = report.json()["problems"]
    assert problems["duplicates"]["count"] == 1 and problems["duplicates"]["examples"][0]["line"] == 41
    assert problems["copies"]["count"] == 1 and problems["copies"]["examples"][0]["line"] == 42
    assert problems["empty"]["count"] == 1 and problems["empty"]["examples"][0]["line"] == 43
    assert report.json()["rows"] == 43 and report.json()["languages"]["source"] == "en"
    other = client.get(f"/v1/datasets/{dataset['id']}/report", headers=make_key("bob"))
    assert other.status_code == 404
