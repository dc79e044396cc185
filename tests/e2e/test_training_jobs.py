"""Training jobs end to end over HTTP: real uvicorn, real Celery workers, PostgreSQL and Redis."""

from __future__ import annotations

import pytest

from bench.harness.stack import (
    START_TIMEOUT_S,
    Processes,
    create_key,
    free_port,
    healthy_with_workers,
    run_cli,
    service_env,
    wait_for,
)
from tests.support.client import Api
from tests.support.training import FAST_LEASES, metric_duplicates, numbers_files, numbers_job


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    return numbers_files(tmp_path_factory.mktemp("data"))


@pytest.fixture
def stack(tmp_path, fresh_postgres_url, redis_url):
    """API + migrations against a fresh PostgreSQL database and Redis; workers started by each test."""
    env = service_env(
        DATABASE_URL=fresh_postgres_url,
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp_path / "var"),
        ARTIFACT_ROOT=str(tmp_path / "artifacts"),
        **FAST_LEASES,
    )
    run_cli(env, "migrate")
    processes = Processes(tmp_path)
    url = processes.start_api(env, free_port())
    try:
        yield url, env, processes
    finally:
        processes.stop(timeout=30)


def _start_training_worker(processes, env, url, name):
    processes.start_worker(env, "training,data", name)
    wait_for(healthy_with_workers(url, 1), timeout=START_TIMEOUT_S, what=f"worker {name}")


def test_upload_train_and_get_a_model_that_learned(stack, data_files):
    url, env, processes = stack
    _start_training_worker(processes, env, url, "trainer-1")
    api = Api(url, create_key(env, "alice"))
    train = api.upload(data_files["train"], "parallel")
    valid = api.upload(data_files["valid"], "parallel")
    # accelerator "cpu": sent to the training.cpu queue, which only a worker computing on the CPU consumes
    job = api.submit(
        numbers_job(train["id"], valid["id"], max_steps=400, eval_every=100, checkpoint_every=100, accelerator="cpu")
    )
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=400)
    assert done["status"] == "succeeded", done["error"]
    assert done["device"] == "cpu" and done["waiting_for"] is None
    assert done["attempt"] == 1 and done["progress"]["step"] == 400 and done["progress"]["fraction"] == 1.0
    # Held-out numbers, never seen in training: the model spells them in German.
    assert done["latest_metrics"]["exact_match"]["value"] >= 0.8, done["latest_metrics"]
    series = api.metrics(job["id"], names="train_loss,valid_loss,lr")
    assert series["train_loss"]["steps"] == list(range(1, 401))
    assert series["valid_loss"]["steps"] == [100, 200, 300, 400]
    assert series["train_loss"]["values"][-1] < series["train_loss"]["values"][0]
    checkpoints = api.checkpoints(job["id"])
    assert [c["step"] for c in checkpoints] == [200, 300, 400]  # keep_checkpoints=3 (the best is among them)
    assert all(len(c["sha256"]) == 64 and c["size_bytes"] > 0 and "path" not in c for c in checkpoints)
    model = api.http.get(f"/v1/models/{done['model_id']}").json()
    assert model["job_id"] == job["id"] and model["objective"] == "translation"
    assert model["config"]["d_model"] == 64 and len(model["tokenizer_fingerprint"]) == 64
    assert model["metrics"]["exact_match"] >= 0.8
    assert api.http.get("/v1/models").json()["total"] == 1
    assert metric_duplicates(env["DATABASE_URL"], job["id"]) == 0
    # The per-component dynamics, at step 1 and every 25 updates (the default), written by the worker; the interval
    # doubles where recording takes more than 3% of the time (model/train/recorders.py: on a loaded host it does)
    dynamics = api.http.get(f"/v1/jobs/{job['id']}/dynamics").json()
    steps = dynamics["steps"]
    gaps = [b - a for a, b in zip(steps[1:], steps[2:])]
    assert steps[:2] == [1, 25] and steps[-1] == 400 and len(steps) >= 6, steps
    assert gaps == sorted(gaps) and all(
        gap in (25, 50, 100, 200) and step % gap == 0 for gap, step in zip(gaps, steps[2:])
    ), steps
    groups = [(g["group"], g["layer"]) for g in dynamics["groups"]]
    assert ("embeddings", None) in groups and ("decoder.encoder_attn.W_Q", 0) in groups
    ratios = dynamics["values"]["update_ratio"]
    assert all(len(row) == len(groups) for row in ratios)
    # Adam's steps shrink as the rate decays after warm-up: the last update moves the weights less than the peak
    assert sum(ratios[-1]) < max(sum(row) for row in ratios) and all(r > 0 for r in ratios[0])
    # and each head's attention on the probe sentences, at every evaluation
    attention = api.http.get(f"/v1/jobs/{job['id']}/dynamics?kind=attention").json()
    assert attention["steps"] == [100, 200, 300, 400]
    heads = {(g["group"], g["layer"], g["head"]) for g in attention["groups"]}
    assert ("cross", 0, 0) in heads and ("encoder_self", 0, 0) in heads
    # and the embedding map and neighbours at each checkpoint, the model keeping the last
    embeddings = api.http.get(f"/v1/jobs/{job['id']}/embeddings").json()
    assert embeddings["steps"] == [100, 200, 300, 400] and len(embeddings["points"][0]) == len(embeddings["tokens"])
    assert embeddings["neighbors"][-1] and all(len(n) == 5 for n in embeddings["neighbors"][-1].values())
    final = api.http.get(f"/v1/models/{done['model_id']}/embeddings").json()
    assert final["steps"] == [400] and final["points"] == embeddings["points"][-1:]
    # The memory of one step, measured by the worker before the first update, beside the estimate
    memory = api.http.get(f"/v1/jobs/{job['id']}/memory").json()
    assert memory["error"] is None and memory["measured"]["device"] == "cpu", memory
    kinds = memory["measured"]["by_kind"]
    assert kinds["weights"] == kinds["gradients"] == memory["estimated"]["weights_bytes"] == model["parameters"] * 4
    assert memory["measured"]["peak_bytes"] > kinds["weights"] + kinds["adam_moments"] and memory["differences"]


def test_duplicate_delivery_runs_once_and_cancel_stops_within_seconds(stack, data_files):
    from celery import Celery

    url, env, processes = stack
    _start_training_worker(processes, env, url, "trainer-2")
    api = Api(url, create_key(env, "carol"))
    train = api.upload(data_files["train"], "parallel")
    job = api.submit(numbers_job(train["id"], max_steps=100_000, eval_every=1000, checkpoint_every=1000))
    wait_for(lambda: api.job(job["id"])["progress"]["step"] >= 5, timeout=120, what="training to start")
    # The same message again, while the job runs: a second worker process must not start it twice.
    Celery("dup", broker=env["CELERY_BROKER_URL"]).send_task("service.train", args=[job["id"]], queue="training")
    response = api.http.post(f"/v1/jobs/{job['id']}/cancel")
    assert response.status_code == 202 and response.json()["cancel_requested"] is True
    cancelled = api.wait(job["id"], ("cancelled", "succeeded", "failed"), timeout=15)
    assert cancelled["status"] == "cancelled" and cancelled["attempt"] == 1
    last = max(api.metrics(job["id"], names="train_loss")["train_loss"]["steps"])
    assert last <= cancelled["progress"]["step"] + 1
    wait_for(lambda: "is not queued" in processes.log("trainer-2"), timeout=60, what="the duplicate to be a no-op")
    assert api.job(job["id"])["attempt"] == 1
    assert max(api.metrics(job["id"], names="train_loss")["train_loss"]["steps"]) == last


def test_a_time_budget_alone_gets_its_settings_chosen_recorded_and_reproduced(stack, data_files):
    """A job that gives only max_minutes: its worker chooses vocabulary, batch, warm-up, step limit and preset from
    the corpus and its throughput (pinned here, as an operator pins it for the same choice on every host: the
    smallest preset's, the others' estimated from it), records them with their reasons, and trains with them; the
    same corpus and budget get the same choice."""
    url, env, processes = stack
    _start_training_worker(processes, {**env, "WORKER_TOKENS_PER_SECOND": "3000"}, url, "trainer-budget")
    api = Api(url, create_key(env, "alice"))
    train = api.upload(data_files["train"], "parallel")
    valid = api.upload(data_files["valid"], "parallel")
    body = {
        "objective": "translation",
        "dataset_id": train["id"],
        "valid_dataset_id": valid["id"],
        "training": {"max_minutes": 0.1, "max_length": 40, "seed": 3},
    }
    jobs = [api.submit(body) for _ in range(2)]
    assert jobs[0]["model"]["preset"] == "auto"
    assert jobs[0]["auto_settings"]["fields"] == [
        "vocab_size",
        "max_tokens_per_batch",
        "warmup_steps",
        "max_steps",
        "preset",
    ]
    done = [api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300) for job in jobs]
    assert [d["status"] for d in done] == ["succeeded", "succeeded"], [d["error"] for d in done]
    first, second = (d["auto_settings"] for d in done)
    assert first["chosen"] == second["chosen"] and first["inputs"] == second["inputs"]
    assert first["inputs"]["tokens_per_second"] == 3000 and first["throughput"] == "pinned"
    assert first["probe_seconds"] is None  # pinned: nothing timed, so nothing a host's load can change
    chosen = first["chosen"]
    assert done[0]["model"]["vocab_size"] == chosen["vocab_size"]
    assert {k: done[0]["training"][k] for k in ("max_tokens_per_batch", "warmup_steps", "max_steps")} == {
        k: chosen[k] for k in ("max_tokens_per_batch", "warmup_steps", "max_steps")
    }
    assert all(first["reasons"][k] for k in chosen)
    # The preset: the smallest at the pinned tokens/s, the others estimated from it; tiny wins 6 seconds.
    assert chosen["preset"] == done[0]["model"]["preset"] == "tiny"
    assert first["reasons"]["preset"].startswith("tiny: predicted loss")
    throughput = {c["preset"]: (c["throughput"], c["tokens_per_second"]) for c in first["preset_inputs"]["candidates"]}
    assert throughput["tiny"] == ("pinned", 3000) and throughput["small"][0] == "estimated"
    assert chosen["dropout"] == done[0]["model"]["dropout"] and first["preset_inputs"] == second["preset_inputs"]
    # The time budget bound, not the step limit set out of its way; progress says done.
    assert done[0]["progress"]["total_steps"] == chosen["max_steps"] > done[0]["progress"]["step"] > 0
    assert done[0]["progress"]["fraction"] == 1.0


def test_a_time_budget_that_binds_reports_progress_by_time(stack, data_files):
    """max_minutes 0.3 before 10,000,000 steps: while the job trains its progress is the share of the minutes spent
    (bound_by "time"), far ahead of step / 10,000,000, and the CLI's status line shows the minutes; at the end, 1."""
    from app.client.progress import status_line

    url, env, processes = stack
    _start_training_worker(processes, env, url, "trainer-time")
    api = Api(url, create_key(env, "alice"))
    train = api.upload(data_files["train"], "parallel")
    valid = api.upload(data_files["valid"], "parallel")
    job = api.submit(numbers_job(train["id"], valid["id"], max_steps=10_000_000, max_minutes=0.3, eval_every=10**6))
    assert job["auto_settings"] is None  # every setting given: nothing is chosen from the budget
    running = wait_for(
        lambda: (j := api.job(job["id"]))["progress"]["bound_by"] == "time" and j["status"] == "running" and j,
        timeout=120,
        what="progress by time while the job runs",
        interval=0.3,
    )
    p = running["progress"]
    assert 0 < p["elapsed_seconds"] <= p["budget_seconds"] == 18
    assert p["fraction"] == pytest.approx(p["elapsed_seconds"] / 18) and p["fraction"] > 100 * p["step"] / 10_000_000
    assert p["eta_seconds"] == pytest.approx(18 - p["elapsed_seconds"])
    assert "/0.3 min (step " in status_line(running)
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert done["status"] == "succeeded", done["error"]
    assert done["progress"]["fraction"] == 1.0 and done["progress"]["step"] < 10_000_000
