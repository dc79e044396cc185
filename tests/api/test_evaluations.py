"""POST/GET /v1/models/{id}/evaluations checked before a worker is involved: ownership, the dataset's kind, the
limits; an accepted evaluation is queued and readable, its hypotheses 409 until it succeeds."""

from __future__ import annotations

import pytest

from tests.api.test_init_model import _model_row


def test_an_evaluation_is_queued_listed_and_read(client, alice, parallel_id):
    model = _model_row("alice")
    body = {"dataset_id": parallel_id, "beam_size": 2, "tokenize": "intl"}
    response = client.post(f"/v1/models/{model}/evaluations", json=body, headers=alice)
    assert response.status_code == 202, response.text
    evaluation = response.json()
    assert (evaluation["status"], evaluation["sentences"], evaluation["progress"]) == ("queued", 2, 0.0)
    assert evaluation["settings"] == {"beam_size": 2, "alpha": 0.6, "tokenize": "intl", "max_sentences": None}
    assert evaluation["scores"] is None and evaluation["hypotheses_url"] is None
    listed = client.get(f"/v1/models/{model}/evaluations", headers=alice).json()
    assert listed["total"] == 1 and listed["data"][0]["id"] == evaluation["id"]
    read = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice)
    assert read.json()["id"] == evaluation["id"]
    early = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}/hypotheses", headers=alice)
    assert early.status_code == 409 and "queued, not succeeded" in early.json()["detail"]


@pytest.mark.parametrize(
    ("body", "loc", "message"),
    [
        ({"beam_size": 99}, ["body", "beam_size"], "beam_size=99 exceeds MAX_BEAM_SIZE"),
        ({"tokenize": "moses"}, ["body", "tokenize"], "Input should be"),
        ({"dataset_id": "mono"}, ["body", "dataset_id"], "is monolingual; a test set is parallel"),
        ({"dataset_id": "00000000-0000-0000-0000-000000000000"}, ["body", "dataset_id"], "not found"),
        ({"max_sentences": 0}, ["body", "max_sentences"], "greater than or equal to 1"),
    ],
)
def test_a_bad_request_is_422_naming_the_field_and_leaves_nothing(
    client, alice, parallel_id, mono_id, body, loc, message
):
    model = _model_row("alice")
    body = {"dataset_id": parallel_id, **body}
    if body["dataset_id"] == "mono":
        body["dataset_id"] = mono_id
    response = client.post(f"/v1/models/{model}/evaluations", json=body, headers=alice)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"][-len(loc) :] == loc[-len(loc) :] and message in d["msg"] for d in detail), detail
    assert client.get(f"/v1/models/{model}/evaluations", headers=alice).json()["total"] == 0


def test_a_denoising_model_is_not_scored(client, alice, parallel_id):
    model = _model_row("alice", objective="denoising")
    response = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id}, headers=alice)
    assert response.status_code == 422 and "only translation is scored" in response.text


def test_another_owners_model_or_evaluation_is_404(client, alice, parallel_id, make_key):
    bob = make_key("bob")
    model = _model_row("alice")
    evaluation = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id}, headers=alice).json()
    for path in ("", f"/{evaluation['id']}", f"/{evaluation['id']}/hypotheses"):
        assert client.get(f"/v1/models/{model}/evaluations{path}", headers=bob).status_code == 404
    theirs = _model_row("bob")
    assert (
        client.post(f"/v1/models/{theirs}/evaluations", json={"dataset_id": parallel_id}, headers=alice).status_code
        == 404
    )
    # alice's dataset is not bob's to score on
    response = client.post(f"/v1/models/{theirs}/evaluations", json={"dataset_id": parallel_id}, headers=bob)
    assert response.status_code == 422 and "not found" in response.text
    assert client.get(f"/v1/models/{model}/evaluations/{theirs}", headers=alice).status_code == 404


def test_a_job_may_name_a_test_set_of_the_right_kind(client, alice, parallel_id, mono_id):
    job = {"objective": "translation", "dataset_id": parallel_id, "training": {"max_steps": 5}}
    ok = client.post("/v1/jobs", json={**job, "test_dataset_id": parallel_id}, headers=alice)
    assert ok.status_code == 201 and ok.json()["test_dataset_id"] == parallel_id
    bad = client.post("/v1/jobs", json={**job, "test_dataset_id": mono_id}, headers=alice)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "test_dataset_id"


def test_the_task_fails_an_evaluation_whose_dataset_is_gone_and_skips_a_finished_one(client, alice, parallel_id):
    """The worker's task, run here: a test set deleted after the request fails the evaluation, saying why (never
    left queued or running); a redelivered message for an evaluation that is over changes nothing."""
    from worker.tasks.evaluation import evaluate_task

    model = _model_row("alice")
    evaluation = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": parallel_id}, headers=alice).json()
    assert client.delete(f"/v1/datasets/{parallel_id}", headers=alice).status_code == 204
    evaluate_task.run(evaluation["id"])
    failed = client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice).json()
    assert failed["status"] == "failed" and "dataset None no longer exists" not in failed["error"], failed
    assert "its test set was deleted" in failed["error"], failed
    evaluate_task.run(evaluation["id"])  # redelivered: over, so left as it is
    assert client.get(f"/v1/models/{model}/evaluations/{evaluation['id']}", headers=alice).json() == failed
