"""Corrections and adaptations over the API (no worker trains here): corrections kept per model and listed newest
first; an adaptation gathers the latest correction of each source of the model and its ancestors into a dataset
with lineage and queues a job that starts from the model, mixes its original data in and registers its model; each
bad request a clear 4xx with nothing left behind. The adaptation training is proven on real workers in
tests/e2e/test_corrections.py."""

from __future__ import annotations

import json

from tests.api.test_init_model import _model_row
from tests.api.test_jobs import _job


def _correct(client, headers, model_id: str, source: str, corrected: str, translation: str = "") -> dict:
    body = {"source": source, "translation": translation, "corrected": corrected}
    response = client.post(f"/v1/models/{model_id}/corrections", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


def _datasets(client, headers) -> int:
    return client.get("/v1/datasets", headers=headers).json()["total"]


def _with_training_data(model_id: str, dataset_id: str, name: str | None = "numbers") -> None:
    """The model's job trained on `dataset_id`, and the model registered as `name`."""
    from app.db.session import session_scope
    from app.db.tables import Job, TrainedModel

    with session_scope() as session:
        model = session.get(TrainedModel, model_id)
        session.get(Job, model.job_id).dataset_id = dataset_id
        model.name, model.version = name, (1 if name else None)


def test_corrections_are_kept_per_model_listed_newest_first_and_deleted(client, alice, make_key):
    model = _model_row("alice")
    first = _correct(client, alice, model, "  two ", " zwei", "zwo")
    assert (first["source"], first["corrected"], first["translation"]) == ("two", "zwei", "zwo")  # trimmed
    second = _correct(client, alice, model, "three", "drei")
    page = client.get(f"/v1/models/{model}/corrections", headers=alice).json()
    assert page["total"] == 2 and [c["id"] for c in page["data"]] == [second["id"], first["id"]]
    bob = make_key("bob")
    assert client.get(f"/v1/models/{model}/corrections", headers=bob).status_code == 404
    assert client.delete(f"/v1/models/{model}/corrections/{first['id']}", headers=bob).status_code == 404
    assert client.delete(f"/v1/models/{model}/corrections/{first['id']}", headers=alice).status_code == 204
    assert client.delete(f"/v1/models/{model}/corrections/{first['id']}", headers=alice).status_code == 404
    assert client.get(f"/v1/models/{model}/corrections", headers=alice).json()["total"] == 1
    actions = [e["action"] for e in client.get("/v1/audit", headers=alice).json()["data"]]
    assert actions[:3] == ["correction.deleted", "correction.added", "correction.added"]


def test_bad_corrections_are_422_naming_the_field(client, alice):
    model, denoising = _model_row("alice"), _model_row("alice", objective="denoising")
    url = f"/v1/models/{model}/corrections"
    for body, said in (
        ({"source": "two", "corrected": ""}, "corrected"),
        ({"source": "", "corrected": "zwei"}, "source"),
        ({"source": "  ", "corrected": "zwei"}, "only white space"),
        ({"source": "two", "corrected": "zw\nei"}, "no line breaks"),
        ({"source": "two" * 2000, "corrected": "zwei"}, "source"),
        ({"source": "two", "corrected": "zwei", "status": "x"}, "status"),
    ):
        response = client.post(url, json=body, headers=alice)
        assert response.status_code == 422 and said in response.text, (body, response.text)
    response = client.post(f"/v1/models/{denoising}/corrections", json={"source": "a", "corrected": "b"}, headers=alice)
    assert response.status_code == 422 and "corrections are to translations" in response.text
    unknown = client.post(f"/v1/models/{'0' * 36}/corrections", json={"source": "a", "corrected": "b"}, headers=alice)
    assert unknown.status_code == 404
    assert client.get(url, headers=alice).json()["total"] == 0


def test_an_adaptation_gathers_the_latest_corrections_of_the_model_and_its_ancestors(client, alice, parallel_id):
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    parent, child = _model_row("alice"), _model_row("alice")
    with session_scope() as session:
        session.get(TrainedModel, child).parent_model_id = parent
    _with_training_data(child, parallel_id)
    _correct(client, alice, parent, "two", "zwo")
    _correct(client, alice, parent, "three", "drei")
    _correct(client, alice, child, "two", "zwei")  # later: this one wins
    datasets = _datasets(client, alice)
    response = client.post(f"/v1/models/{child}/adaptations", json={"max_minutes": 2, "mix_share": 0.3}, headers=alice)
    assert response.status_code == 201, response.text
    adaptation = response.json()
    assert adaptation["corrections"] == 2 and adaptation["models"] == [child, parent]
    assert (adaptation["register_as"], adaptation["mix_dataset_id"]) == ("numbers", parallel_id)
    assert _datasets(client, alice) == datasets + 1
    dataset = client.get(f"/v1/datasets/{adaptation['dataset_id']}", headers=alice).json()
    assert dataset["lineage"]["kind"] == "corrections" and dataset["lineage"]["models"] == [child, parent]
    assert dataset["name"] == "corrections to numbers@1" and dataset["kind"] == "parallel"
    from app.artifacts import get_store

    stored = get_store().fetch(f"datasets/{dataset['id']}/data.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in stored] == [
        {"source": "three", "target": "drei"},
        {"source": "two", "target": "zwei"},
    ]
    job = client.get(f"/v1/jobs/{adaptation['job_id']}", headers=alice).json()
    assert (job["init_model_id"], job["dataset_id"], job["mix_dataset_id"]) == (child, dataset["id"], parallel_id)
    assert (job["mix_share"], job["register_as"], job["training"]["max_minutes"]) == (0.3, "numbers", 2)
    assert job["training"]["lr_scale"] == 0.1  # an adaptation's default, below a fine-tuning job's 0.25
    assert job["training"]["best_metric"] == "chrf"  # an adaptation's best checkpoint: by its translations
    jobs_mixing = client.get("/v1/jobs", params={"dataset_id": parallel_id}, headers=alice).json()["data"]
    assert job["id"] in [j["id"] for j in jobs_mixing]
    refused = client.delete(f"/v1/datasets/{parallel_id}", headers=alice)  # the queued job mixes it in
    assert refused.status_code == 409 and job["id"] in refused.text
    actions = [e["action"] for e in client.get("/v1/audit", headers=alice).json()["data"]]
    assert actions[0] == "adaptation.requested"


def test_an_adaptation_that_cannot_run_is_refused_naming_why_and_leaves_nothing(client, alice, parallel_id):
    model = _model_row("alice")
    url = f"/v1/models/{model}/adaptations"
    datasets, jobs = _datasets(client, alice), client.get("/v1/jobs", headers=alice).json()["total"]  # the model's

    def refused(body: dict, status: int, said: str, headers=alice) -> None:
        response = client.post(url, json=body, headers=headers)
        assert response.status_code == status and said in response.text, (body, response.text)

    refused({}, 422, "has no registry name")
    refused({"register_as": "numbers"}, 422, "has no corrections yet")
    _correct(client, alice, model, "two", "zwei")
    refused({"register_as": "numbers"}, 422, "training data is gone")  # its job has no dataset
    refused({"register_as": "Numbers!"}, 422, "register_as")
    nothing = "00000000-0000-0000-0000-000000000000"
    refused({"register_as": "numbers", "mix_dataset_id": nothing}, 422, f"dataset {nothing} not found")
    refused({"register_as": "numbers", "mix_share": 1}, 422, "mix_share")
    # a job the service refuses once the corrections' dataset is made: that dataset goes too
    body = {"register_as": "numbers", "mix_dataset_id": parallel_id, "training": {"devices": 64}}
    refused(body, 422, "MAX_DEVICES_PER_JOB")
    trainer = client.post("/v1/keys", headers=alice, json={"name": "t", "scopes": ["read", "train", "inference"]})
    refused(
        {"register_as": "numbers", "mix_dataset_id": parallel_id},
        403,
        "needs scope 'models:write'",
        headers={"Authorization": f"Bearer {trainer.json()['key']}"},
    )
    assert _datasets(client, alice) == datasets
    assert client.get("/v1/jobs", headers=alice).json()["total"] == jobs


def test_a_jobs_mix_and_registration_are_checked(client, alice, parallel_id, mono_id):
    def refused(body: dict, status: int, said: str, headers=alice) -> None:
        response = client.post("/v1/jobs", json=body, headers=headers)
        assert response.status_code == status and said in response.text, (body, response.text)

    refused(_job(parallel_id, mix_share=0.5), 422, "give mix_dataset_id too")
    refused(_job(parallel_id, mix_dataset_id=parallel_id), 422, "is the training dataset itself")
    refused(
        {"objective": "denoising", "dataset_id": mono_id, "training": {"best_metric": "bleu"}},
        422,
        "best_metric='bleu' scores translations",
    )
    refused(
        {"objective": "denoising", "dataset_id": mono_id, "training": {"reverse": True}},
        422,
        "reverse swaps the sides of translation pairs",
    )
    reverse = _job(parallel_id, test_dataset_id=parallel_id, training={"reverse": True})
    refused(reverse, 422, "is scored source -> target")
    trainer = client.post("/v1/keys", headers=alice, json={"name": "t", "scopes": ["read", "train"]})
    refused(
        _job(parallel_id, register_as="numbers"),
        403,
        "needs scope 'models:write'",
        headers={"Authorization": f"Bearer {trainer.json()['key']}"},
    )
    sweep = {
        "name": "numbers",
        "job": _job(parallel_id, register_as="numbers"),
        "space": {"model.dropout": {"type": "float", "low": 0.0, "high": 0.3}},
        "budget": {"trials": 2},
    }
    response = client.post("/v1/sweeps", json=sweep, headers=alice)
    assert response.status_code == 422 and "registers its best trial" in response.text
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 0


def test_a_job_registers_its_model_only_while_its_key_may(client, alice, parallel_id):
    """The worker asks registering_caller when the job succeeds: a revoked key leaves the model unregistered."""
    from app.db.keys import Caller
    from app.db.session import session_scope
    from app.db.tables import Job
    from worker.tasks.training import _registering_caller

    created = client.post("/v1/jobs", json=_job(parallel_id, register_as="numbers"), headers=alice).json()
    assert created["register_as"] == "numbers"
    plain = client.post("/v1/jobs", json=_job(parallel_id), headers=alice).json()
    with session_scope() as session:
        assert _registering_caller(session, session.get(Job, plain["id"])) is None
        assert isinstance(_registering_caller(session, session.get(Job, created["id"])), Caller)
        key_id = session.get(Job, created["id"]).key_id
    assert client.delete(f"/v1/keys/{key_id}", headers=alice).status_code in (200, 204)
    with session_scope() as session:
        why = _registering_caller(session, session.get(Job, created["id"]))
    assert isinstance(why, str) and why.startswith("succeeded, but its model was not registered as numbers: API key")
    assert "was revoked" in why


def test_the_command_line_sends_lists_and_adapts(cli, alice, client, parallel_id, tmp_path):
    model = _model_row("alice")
    _with_training_data(model, parallel_id)
    key = alice["Authorization"].removeprefix("Bearer ")
    code, _, err = cli("correct", model, "two", "--translation", "zwo", "--corrected", "zwei", "--key", key)
    assert code == 0 and "1 correction of" in err, err
    fixes = tmp_path / "fixes.jsonl"
    lines = [
        '{"source": "three", "corrected": "drei"}',
        "",
        '{"source": "four", "translation": "x", "corrected": "vier"}',
    ]
    fixes.write_text("\n".join(lines) + "\n")
    code, _, err = cli("correct", model, "--file", str(fixes), "--key", key)
    assert code == 0 and "2 corrections of" in err, err
    fixes.write_text('{"source": "five"}\n')
    code, _, err = cli("correct", model, "--file", str(fixes), "--key", key)
    assert code == 1 and "fixes.jsonl:1: each line is an object with source, corrected" in err
    code, out, _ = cli("corrections", model, "--key", key)
    assert code == 0 and out.splitlines()[1].split()[1:3] == ["four", "x"]  # newest first
    code, out, err = cli("adapt", model, "--minutes", "2", "--mix-share", "0.3", "--key", key)
    assert code == 0 and "adapting" in err and "3 corrections" in err and "next version of numbers" in err, err
    job = client.get(f"/v1/jobs/{out.strip()}", headers=alice).json()
    assert (job["init_model_id"], job["mix_share"], job["training"]["max_minutes"]) == (model, 0.3, 2)
