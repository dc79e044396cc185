"""POST /v1/datasets/{id}/filter: the rules checked before anything is queued, each bad one a 422 naming it; the
filtered dataset made by the data queue's code (run here in process) records its parent, its rules and what each
removed, and one whose rules remove everything fails saying so."""

from __future__ import annotations

import pytest

from tests.api.test_datasets import _jsonl, _ready, _upload

PAIRS = [(f"the cat number {i} sat on the mat", f"le chat numéro {i} était assis sur le tapis") for i in range(60)]


def _filter(client, headers, dataset_id, rules, **extra):
    return client.post(f"/v1/datasets/{dataset_id}/filter", headers=headers, json={"rules": rules, **extra})


@pytest.mark.parametrize(
    ("rules", "where", "message"),
    [
        ({}, ["body", "rules"], "no rule is on"),
        ({"deduplicate": False}, ["body", "rules"], "no rule is on"),
        ({"max_ratio": 1}, ["body", "rules", "max_ratio"], "greater than 1"),
        ({"min_length": 5, "max_length": 2}, ["body", "rules"], "min_length=5 is greater than max_length=2"),
        ({"max_length": 0}, ["body", "rules", "max_length"], "greater than or equal to 1"),
        ({"drop_everything": True}, ["body", "rules", "drop_everything"], "Extra inputs"),
        ({"deduplicate": "yes"}, ["body", "rules", "deduplicate"], "valid boolean"),
    ],
)
def test_bad_rules_are_422_naming_them(client, alice, rules, where, message):
    dataset = _ready(client, alice, _jsonl(PAIRS))
    response = _filter(client, alice, dataset["id"], rules)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == where and message in detail["msg"], detail
    assert client.get("/v1/datasets", headers=alice).json()["total"] == 1


def test_the_wrong_language_needs_a_declared_one(client, alice):
    dataset = _ready(client, alice, _jsonl(PAIRS))
    response = _filter(client, alice, dataset["id"], {"drop_wrong_language": True})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "rules", "drop_wrong_language"]
    assert "declares no language" in response.json()["detail"][0]["msg"]


def test_a_dataset_still_processing_is_409_and_a_monolingual_one_422(client, alice):
    processing = _upload(client, alice, _jsonl(PAIRS)).json()
    response = _filter(client, alice, processing["id"], {"deduplicate": True})
    assert response.status_code == 409 and "still being processed" in response.json()["detail"]
    mono = _ready(client, alice, b"one sentence\nanother one\n", filename="m.txt", kind="monolingual")
    response = _filter(client, alice, mono["id"], {"deduplicate": True})
    assert response.status_code == 422 and "filter parallel datasets" in response.text


def test_another_owners_dataset_is_404(client, alice, make_key):
    dataset = _ready(client, alice, _jsonl(PAIRS))
    response = _filter(client, make_key("bob"), dataset["id"], {"deduplicate": True})
    assert response.status_code == 404


def test_a_filtered_dataset_records_its_parent_rules_and_counts(client, alice):
    from worker.data.filtering import make

    rows = PAIRS + PAIRS[:10] + [("same text here", "same text here")] * 3
    parent = _ready(client, alice, _jsonl(rows), name="crawl")
    response = _filter(client, alice, parent["id"], {"deduplicate": True, "drop_copies": True})
    assert response.status_code == 201, response.text
    child = response.json()
    assert (child["status"], child["parent_id"], child["name"]) == ("processing", parent["id"], "crawl (filtered)")
    assert child["filter_rules"] == {"deduplicate": True, "drop_copies": True}
    assert make(child["id"]) == "ready"
    child = client.get(f"/v1/datasets/{child['id']}", headers=alice).json()
    assert child["rows"] == 60 and (child["format"], child["compression"]) == ("jsonl", "gzip")
    # the first copy of "same text here" is the copy rule's; its repeats are duplicates, removed first
    assert child["filter_counts"] == {"total": 73, "kept": 60, "removed": {"duplicates": 12, "copies": 1}}
    job = client.post("/v1/jobs", headers=alice, json={"objective": "translation", "dataset_id": child["id"]})
    assert job.status_code == 201, job.text


def test_rules_that_remove_every_row_fail_the_dataset_saying_so(client, alice):
    from worker.data.filtering import make

    parent = _ready(client, alice, _jsonl(PAIRS))
    child = _filter(client, alice, parent["id"], {"min_length": 50}).json()
    assert make(child["id"]) == "failed"
    child = client.get(f"/v1/datasets/{child['id']}", headers=alice).json()
    assert child["status"] == "failed"
    assert child["error"] == "the rules removed all 60 rows (length 60): nothing is left to train on"
    assert child["filter_counts"] == {"total": 60, "kept": 0, "removed": {"length": 60}}
    job = client.post("/v1/jobs", headers=alice, json={"objective": "translation", "dataset_id": child["id"]})
    assert job.status_code == 422 and "nothing is left" in job.text
