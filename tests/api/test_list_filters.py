"""The list filters that follow a dataset's use: GET /v1/jobs?dataset_id= (jobs that train, validate or test on it)
and GET /v1/datasets?parent_id= (the datasets filtered from it), each within the caller's organisation."""

from __future__ import annotations

from tests.api.test_datasets import _jsonl, _ready

PAIRS = [(f"the cat number {i} sat", f"le chat numéro {i} était assis") for i in range(20)]


def _ids(page: dict) -> list[str]:
    return [row["id"] for row in page["data"]]


def test_jobs_are_listed_by_the_dataset_they_train_validate_or_test_on(client, alice, make_key):
    train, valid, other = (_ready(client, alice, _jsonl(PAIRS))["id"] for _ in range(3))
    uses_both = client.post(
        "/v1/jobs",
        json={"objective": "translation", "dataset_id": train, "valid_dataset_id": valid},
        headers=alice,
    ).json()["id"]
    tested = client.post(
        "/v1/jobs", json={"objective": "translation", "dataset_id": other, "test_dataset_id": valid}, headers=alice
    ).json()["id"]
    listed = lambda dataset_id, key=alice: client.get(f"/v1/jobs?dataset_id={dataset_id}", headers=key).json()  # noqa: E731
    assert _ids(listed(train)) == [uses_both]
    assert set(_ids(listed(valid))) == {uses_both, tested} and listed(valid)["total"] == 2
    assert _ids(listed(other)) == [tested]
    assert listed(train, make_key("bob"))["data"] == []  # another organisation's dataset: nothing of it
    assert client.get(f"/v1/jobs?dataset_id={'x' * 37}", headers=alice).status_code == 422


def test_datasets_are_listed_by_the_dataset_they_were_filtered_from(client, alice, make_key):
    parent = _ready(client, alice, _jsonl(PAIRS + PAIRS[:5]))["id"]
    child = client.post(f"/v1/datasets/{parent}/filter", json={"rules": {"deduplicate": True}}, headers=alice)
    assert child.status_code == 201, child.text
    listed = client.get(f"/v1/datasets?parent_id={parent}", headers=alice).json()
    assert _ids(listed) == [child.json()["id"]] and listed["data"][0]["parent_id"] == parent
    assert client.get(f"/v1/datasets?parent_id={child.json()['id']}", headers=alice).json()["data"] == []
    assert client.get(f"/v1/datasets?parent_id={parent}", headers=make_key("bob")).json()["data"] == []
