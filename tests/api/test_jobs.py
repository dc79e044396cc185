"""POST /v1/jobs validation, idempotency, listing, cancel of a queued job (no worker involved)."""

from __future__ import annotations

import json

import pytest


def _job(dataset_id, **extra):
    return {"objective": "translation", "dataset_id": dataset_id, **extra}


def test_submit_returns_queued_job_with_defaults(client, alice, parallel_id):
    response = client.post("/v1/jobs", json=_job(parallel_id, training={"max_steps": 50}), headers=alice)
    assert response.status_code == 201, response.text
    job = response.json()
    assert (job["status"], job["attempt"], job["objective"]) == ("queued", 0, "translation")
    assert job["progress"] == {
        "step": 0,
        "total_steps": 50,
        "fraction": 0.0,
        "tokens_seen": 0,
        "tokens_per_second": None,
        "eta_seconds": None,
        "bound_by": "steps",
        "elapsed_seconds": None,
        "budget_seconds": None,
    }
    assert job["model"]["preset"] == "auto" and job["training"]["label_smoothing"] == 0.1
    assert (job["training"]["eval_budget"], job["training"]["tokenizer"]) == (0.05, "byte_bpe")
    assert client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["id"] == job["id"]


def test_the_job_stores_every_training_setting_and_an_older_one_reads_with_the_defaults(client, alice, parallel_id):
    """The stored section is the resolved one (defaults filled, lr_scale chosen); a row stored before a field
    existed reads with its default, and one a bound tightened since refuses reads as it is."""
    from app.db.session import session_scope
    from app.db.tables import Job
    from app.schemas.jobs import TrainingSpec
    from tests.api.test_job_labels import job_rows

    defaults = TrainingSpec().model_dump(mode="json")
    job_id = client.post("/v1/jobs", json=_job(parallel_id, training={"max_steps": 50, "seed": 7}), headers=alice)
    with session_scope() as session:
        stored = session.get(Job, job_id.json()["id"]).training_config
    assert stored == {**defaults, "max_steps": 50, "seed": 7, "lr_scale": 1.0}
    old = job_rows("alice", 1, training_config={"max_steps": 10})[0]
    assert client.get(f"/v1/jobs/{old}", headers=alice).json()["training"] == {**defaults, "max_steps": 10}
    loose = job_rows("alice", 1, training_config={"max_steps": 10, "warmup_steps": 0})[0]
    assert client.get(f"/v1/jobs/{loose}", headers=alice).json()["training"]["warmup_steps"] == 0


def test_a_time_budget_leaves_the_settings_not_given_to_the_worker(client, alice, parallel_id):
    """With max_minutes, the vocabulary, batch, warm-up and step limit the request left out are marked for the
    worker to choose (model/train/budget.py); those given stay the user's, and without max_minutes nothing is chosen."""
    budget_only = client.post("/v1/jobs", json=_job(parallel_id, training={"max_minutes": 10}), headers=alice).json()
    assert budget_only["auto_settings"] == {
        "fields": ["vocab_size", "max_tokens_per_batch", "warmup_steps", "max_steps", "preset"],
        "chosen": None,
        "reasons": None,
        "inputs": None,
        "expected_updates": None,
        "throughput": None,
        "probe_seconds": None,
        "preset_inputs": None,
        "compile_inputs": None,
    }
    some = client.post(
        "/v1/jobs",
        json=_job(
            parallel_id,
            model={"preset": "tiny", "vocab_size": 8000},
            training={"max_minutes": 10, "max_tokens_per_batch": 4096},
        ),
        headers=alice,
    ).json()
    assert some["auto_settings"]["fields"] == ["warmup_steps", "max_steps"]
    # The rate's scale follows the batch: chosen with it by the worker, else now (model/train/budget.py).
    assert budget_only["training"]["lr_scale"] is None and some["training"]["lr_scale"] == 1.0
    small = _job(parallel_id, training={"max_minutes": 10, "max_tokens_per_batch": 1536})
    assert client.post("/v1/jobs", json=small, headers=alice).json()["training"]["lr_scale"] == 0.71
    steps_only = {"model": {"preset": "tiny"}, "training": {"max_steps": 50}}
    assert client.post("/v1/jobs", json=_job(parallel_id, **steps_only), headers=alice).json()["auto_settings"] is None
    # Leaving a setting out is another request than giving its default: an Idempotency-Key tells them apart.
    key = {**alice, "Idempotency-Key": "budget-1"}
    assert client.post("/v1/jobs", json=_job(parallel_id, training={"max_minutes": 5}), headers=key).status_code == 201
    explicit = _job(
        parallel_id,
        training={"max_minutes": 5, "max_tokens_per_batch": 4096, "warmup_steps": 400, "max_steps": 2000},
        model={"preset": "tiny", "vocab_size": 8000},
    )
    assert client.post("/v1/jobs", json=explicit, headers=key).status_code == 409


def test_the_preset_is_the_workers_to_choose_unless_the_job_names_one(client, alice, parallel_id):
    """Left out or null, model.preset is auto: marked for the worker to choose (with or without a time budget); named,
    it is the job's. A stored section from before auto, without a preset, reads as the tiny it trained."""
    from tests.api.test_job_labels import job_rows

    for model in ({}, {"preset": None}, {"preset": "auto"}):
        job = client.post("/v1/jobs", json=_job(parallel_id, model=model), headers=alice).json()
        assert job["model"]["preset"] == "auto" and job["auto_settings"]["fields"] == ["preset"], job
    named = client.post("/v1/jobs", json=_job(parallel_id, model={"preset": "small"}), headers=alice).json()
    assert named["model"]["preset"] == "small" and named["auto_settings"] is None
    old = job_rows("alice", 1, model_config={"vocab_size": 500})[0]
    assert client.get(f"/v1/jobs/{old}", headers=alice).json()["model"]["preset"] == "tiny"
    # Overrides apply to every preset the worker may choose: one no preset can take is refused, naming each.
    refused = client.post("/v1/jobs", json=_job(parallel_id, model={"n_heads": 3}), headers=alice)
    assert refused.status_code == 422
    message = refused.json()["detail"][0]["msg"]
    assert "d_model=64 is not divisible by n_heads=3 (tiny)" in message and "d_model=1024" in message
    assert client.post("/v1/jobs", json=_job(parallel_id, model={"n_heads": 16}), headers=alice).status_code == 201


def test_a_budget_chosen_batch_is_checked_at_its_smallest_size(client, alice, parallel_id):
    """The worker's batch starts at 1,536 tokens: a model too large for the worker even at that size is refused
    now, naming the size, not after the worker has prepared the data."""
    response = client.post(
        "/v1/jobs",
        json=_job(
            parallel_id,
            model={"preset": "big", "d_model": 8192, "n_heads": 16, "d_ff": 32768},
            training={"max_minutes": 10},
        ),
        headers=alice,
    )
    assert response.status_code == 422
    assert "at 1536 tokens per batch" in response.json()["detail"][0]["msg"], response.text


@pytest.mark.parametrize(
    ("body_update", "loc", "message"),
    [
        (
            {"model": {"preset": "tiny", "d_model": 100, "n_heads": 3}},
            ["body", "model"],
            "d_model=100 is not divisible by n_heads=3",
        ),
        ({"model": {"preset": "huge"}}, ["body", "model", "preset"], "'tiny', 'small', 'base' or 'big'"),
        ({"training": {"max_steps": 0}}, ["body", "training", "max_steps"], "greater than or equal to 1"),
        ({"training": {"max_length": 2000}}, ["body", "training", "max_length"], "max_positions=1024"),
        (
            {"training": {"max_tokens_per_batch": 64, "max_length": 100}},
            ["body", "training", "max_tokens_per_batch"],
            "cannot hold one sentence",
        ),
        (
            {"model": {"preset": "big", "vocab_size": 64000}, "training": {"max_tokens_per_batch": 200000}},
            ["body", "training", "max_tokens_per_batch"],
            "WORKER_MEMORY_LIMIT_GB",
        ),
        (
            {"training": {"average_last": 5, "keep_checkpoints": 3}},
            ["body", "training", "average_last"],
            "needs keep_checkpoints >= 5",
        ),
        ({"training": {"learning_rate": 1}}, ["body", "training", "learning_rate"], "Extra inputs are not permitted"),
        ({"training": {"tokenizer": "wordpiece"}}, ["body", "training", "tokenizer"], "'bpe', 'unigram' or 'byte_bpe'"),
        ({"training": {"eval_budget": 0}}, ["body", "training", "eval_budget"], "greater than 0"),
        ({"training": {"precision": "fp16"}}, ["body", "training", "precision"], "'fp32' or 'bf16'"),
        ({"training": {"log_every": 0}}, ["body", "training", "log_every"], "greater than or equal to 1"),
        ({"training": {"warmup_steps": 0}}, ["body", "training", "warmup_steps"], "greater than or equal to 1"),
        ({"training": {"keep_checkpoints": None}}, ["body", "training", "keep_checkpoints"], "valid integer"),
        ({"model": {"init": "kaiming"}}, ["body", "model", "init"], "'normal' or 'xavier'"),
        ({"status": "succeeded"}, ["body", "status"], "Extra inputs are not permitted"),
        ({"owner": "bob"}, ["body", "owner"], "Extra inputs are not permitted"),
    ],
)
def test_invalid_jobs_are_422_naming_the_field(client, alice, parallel_id, body_update, loc, message):
    response = client.post("/v1/jobs", json={**_job(parallel_id), **body_update}, headers=alice)
    assert response.status_code == 422, response.text
    details = response.json()["detail"]
    assert any(d["loc"] == loc and message in d["msg"] for d in details), details
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 0


def test_dataset_of_the_wrong_kind_is_422(client, alice, mono_id, parallel_id):
    response = client.post("/v1/jobs", json=_job(mono_id), headers=alice)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "dataset_id"]
    assert "needs a parallel dataset" in response.json()["detail"][0]["msg"]
    response = client.post("/v1/jobs", json={"objective": "denoising", "dataset_id": parallel_id}, headers=alice)
    assert "needs a monolingual dataset" in response.json()["detail"][0]["msg"]


def test_someone_elses_dataset_is_422_not_found(client, alice, make_key, parallel_id):
    response = client.post("/v1/jobs", json=_job(parallel_id), headers=make_key("bob"))
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"] == f"dataset {parallel_id} not found"


def test_idempotency_key_replays_the_same_job_and_refuses_another_body(client, alice, parallel_id):
    headers = {**alice, "Idempotency-Key": "submit-1"}
    first = client.post("/v1/jobs", json=_job(parallel_id), headers=headers)
    again = client.post("/v1/jobs", json=_job(parallel_id), headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    other = client.post("/v1/jobs", json=_job(parallel_id, training={"max_steps": 7}), headers=headers)
    assert other.status_code == 409
    assert "submit-1" in other.json()["detail"]
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 1


def test_cancel_a_queued_job_is_immediate_and_final(client, alice, parallel_id):
    job_id = client.post("/v1/jobs", json=_job(parallel_id), headers=alice).json()["id"]
    cancelled = client.post(f"/v1/jobs/{job_id}/cancel", headers=alice)
    assert cancelled.status_code == 202
    assert cancelled.json()["status"] == "cancelled"
    again = client.post(f"/v1/jobs/{job_id}/cancel", headers=alice)
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]


def test_list_filters_by_status(client, alice, parallel_id):
    ids = [client.post("/v1/jobs", json=_job(parallel_id), headers=alice).json()["id"] for _ in range(3)]
    client.post(f"/v1/jobs/{ids[0]}/cancel", headers=alice)
    queued = client.get("/v1/jobs?status=queued", headers=alice).json()
    assert queued["total"] == 2 and {j["id"] for j in queued["data"]} == set(ids[1:])
    assert client.get("/v1/jobs?status=bogus", headers=alice).status_code == 422


def test_dataset_in_use_cannot_be_deleted(client, alice, parallel_id):
    client.post("/v1/jobs", json=_job(parallel_id), headers=alice)
    response = client.delete(f"/v1/datasets/{parallel_id}", headers=alice)
    assert response.status_code == 409
    assert "used by active job" in response.json()["detail"]


def test_other_owner_gets_404_for_every_job_route(client, alice, make_key, parallel_id):
    job_id = client.post("/v1/jobs", json=_job(parallel_id), headers=alice).json()["id"]
    bob = make_key("bob")
    for method, path in [
        ("GET", ""),
        ("POST", "/cancel"),
        ("GET", "/metrics"),
        ("GET", "/checkpoints"),
        ("GET", "/events"),
    ]:
        response = client.request(method, f"/v1/jobs/{job_id}{path}", headers=bob)
        assert response.status_code == 404, (method, path)
        assert response.json() == {"detail": f"job {job_id} not found"}


def test_metrics_are_downsampled_for_long_runs(client, alice, parallel_id):
    from app.db import metric_rows
    from app.db.session import session_scope

    job_id = client.post("/v1/jobs", json=_job(parallel_id), headers=alice).json()["id"]
    with session_scope() as session:
        for step in range(1, 20_001):
            metric_rows.record(session, job_id, step, {"loss": 1.0 / step})
    body = client.get(f"/v1/jobs/{job_id}/metrics?names=loss&max_points=500", headers=alice).json()
    series = body["series"]["loss"]
    assert series["total_points"] == 20_000
    assert len(series["steps"]) == len(series["values"]) == 500
    assert series["steps"][-1] == 20_000 and series["values"][-1] == pytest.approx(1 / 20_000)
    assert series["steps"] == sorted(series["steps"])
    assert client.get(f"/v1/jobs/{job_id}", headers=alice).json()["latest_metrics"]["loss"]["step"] == 20_000
    since = client.get(f"/v1/jobs/{job_id}/metrics?since_step=19990", headers=alice).json()["series"]["loss"]
    assert since["steps"][0] == 19990 and since["total_points"] == 11


def test_extremes_downsampling_keeps_a_one_step_spike_that_means_flatten(client, alice, parallel_id):
    """100,000 points with one spike: `downsample=extremes` keeps it (and the lowest, first and last points), at most
    max_points points in step order; the default means dilute it into its bucket. A zoomed view reads a step range."""
    from app.db.run_record_tables import Metric
    from app.db.session import session_scope

    job_id = client.post("/v1/jobs", json=_job(parallel_id), headers=alice).json()["id"]
    values = {step: 5.0 - step / 50_000 for step in range(1, 100_001)}
    values[61_234] = 40.0
    with session_scope() as session:
        session.execute(
            Metric.__table__.insert(),
            [{"job_id": job_id, "step": s, "name": "loss", "value": v} for s, v in values.items()],
        )
    url = f"/v1/jobs/{job_id}/metrics?names=loss&max_points=2001"
    extremes = client.get(f"{url}&downsample=extremes", headers=alice).json()["series"]["loss"]
    assert extremes["total_points"] == 100_000 and len(extremes["steps"]) <= 2001
    assert extremes["steps"] == sorted(set(extremes["steps"]))
    assert dict(zip(extremes["steps"], extremes["values"]))[61_234] == 40.0
    assert (extremes["steps"][0], extremes["steps"][-1]) == (1, 100_000)  # the whole run, to its last value
    assert extremes["values"][-1] == values[100_000]
    assert min(extremes["values"]) == values[100_000]
    means = client.get(url, headers=alice).json()["series"]["loss"]
    assert max(means["values"]) < 6  # the spike, averaged with its bucket's 99 neighbours
    refused = client.get(f"{url}&downsample=median", headers=alice)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["query", "downsample"]
    zoomed = client.get(f"{url}&since_step=61000&until_step=61500", headers=alice).json()["series"]["loss"]
    assert zoomed["total_points"] == 501 and (zoomed["steps"][0], zoomed["steps"][-1]) == (61_000, 61_500)
    backwards = client.get(f"{url}&since_step=10&until_step=9", headers=alice)
    assert backwards.status_code == 422
    assert backwards.json()["detail"][0]["msg"] == "until_step 9 is before since_step 10"


def test_events_stream_metrics_progress_and_end(client, alice, parallel_id):
    from app.db import metric_rows
    from app.db.session import session_scope

    job_id = client.post("/v1/jobs", json=_job(parallel_id), headers=alice).json()["id"]
    with session_scope() as session:
        metric_rows.record(session, job_id, 1, {"train_loss": 5.0})
        metric_rows.record(session, job_id, 2, {"train_loss": 4.0})
    client.post(f"/v1/jobs/{job_id}/cancel", headers=alice)
    with client.stream("GET", f"/v1/jobs/{job_id}/events", headers=alice) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    events = [block for block in text.split("\n\n") if block.startswith(("id:", "event:"))]
    kinds = [line.split(": ", 1)[1] for block in events for line in block.splitlines() if line.startswith("event:")]
    assert kinds == ["metric", "metric", "progress", "end"]
    first = json.loads(events[0].splitlines()[-1].removeprefix("data: "))
    assert first == {"step": 1, "name": "train_loss", "value": 5.0}
    progress = json.loads(events[2].splitlines()[-1].removeprefix("data: "))
    assert progress["status"] == "cancelled"
    # Resuming with Last-Event-ID skips what was already seen.
    last_id = events[1].splitlines()[0].removeprefix("id: ")
    with client.stream("GET", f"/v1/jobs/{job_id}/events", headers={**alice, "Last-Event-ID": last_id}) as response:
        again = "".join(response.iter_text())
    assert "event: metric" not in again and "event: end" in again


def test_metrics_history_gives_the_event_id_to_stream_only_newer_points(client, alice, parallel_id):
    """The dashboard reads the (downsampled) history, then follows /events from the history's last_event_id:
    the stream sends only the points recorded after the history was read, not everything again."""
    from app.db import metric_rows
    from app.db.session import session_scope

    job_id = client.post("/v1/jobs", json=_job(parallel_id), headers=alice).json()["id"]
    assert client.get(f"/v1/jobs/{job_id}/metrics", headers=alice).json()["last_event_id"] == 0
    with session_scope() as session:
        for step in range(1, 4):
            metric_rows.record(session, job_id, step, {"train_loss": 1.0 / step})
    history = client.get(f"/v1/jobs/{job_id}/metrics", headers=alice).json()
    assert history["series"]["train_loss"]["steps"] == [1, 2, 3] and history["last_event_id"] > 0
    with session_scope() as session:
        metric_rows.record(session, job_id, 4, {"train_loss": 0.25})
    client.post(f"/v1/jobs/{job_id}/cancel", headers=alice)
    with client.stream(
        "GET", f"/v1/jobs/{job_id}/events", headers={**alice, "Last-Event-ID": str(history["last_event_id"])}
    ) as response:
        text = "".join(response.iter_text())
    streamed = [
        json.loads(line.removeprefix("data: "))["step"]
        for block in text.split("\n\n")
        if "event: metric" in block
        for line in block.splitlines()
        if line.startswith("data: ")
    ]
    assert streamed == [4]


def test_a_running_multi_host_job_says_how_many_hosts_joined_until_all_have(client, alice, parallel_id):
    """Pass: training.nodes = 3 is stored; running, the job waits for "nodes: 1 of 3 joined", then 2, then nothing;
    a later attempt counts its own hosts only."""
    from sqlalchemy import update

    from app.db import node_rows
    from app.db.session import session_scope
    from app.db.tables import Job

    body = _job(parallel_id, training={"max_steps": 50, "nodes": 3, "max_restarts": 2})
    job = client.post("/v1/jobs", json=body, headers=alice).json()
    assert (job["training"]["nodes"], job["training"]["max_restarts"], job["training"]["devices"]) == (3, 2, 1)
    with session_scope() as session:
        session.execute(update(Job).where(Job.id == job["id"]).values(status="running", attempt=1, worker="a@h/1"))
    waiting = []
    for node, worker in ((0, "a@h/1"), (1, "b@h/2"), (2, "c@h/3")):
        with session_scope() as session:
            assert node_rows.join(session, job["id"], 1, node, worker)
        waiting.append(client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["waiting_for"])
    assert waiting == ["nodes: 1 of 3 joined", "nodes: 2 of 3 joined", None]
    with session_scope() as session:
        session.execute(update(Job).where(Job.id == job["id"]).values(attempt=2))
    listed = client.get("/v1/jobs", headers=alice).json()["data"]
    assert [j["waiting_for"] for j in listed if j["id"] == job["id"]] == ["nodes: 0 of 3 joined"]
