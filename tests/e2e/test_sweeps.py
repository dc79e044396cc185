"""A sweep end to end over HTTP: real uvicorn, a real Celery training worker, PostgreSQL and Redis. Its trials
train the numbers task (English number words to German); the pruner stops the hopeless one at its first
evaluation, and the best trial's model is registered and translates as name@best."""

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
from tests.support.training import FAST_LEASES, numbers_files, numbers_job

ENDED = ("succeeded", "failed", "cancelled")


@pytest.fixture
def stack(tmp_path, fresh_postgres_url, redis_url):
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
    processes.start_worker(env, "training", "trainer")
    processes.start_worker(env, "inference", "server", pool="threads", concurrency=4)
    try:
        wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="workers")
        yield Api(url, create_key(env, "alice")), tmp_path
    finally:
        processes.stop(timeout=30)


def _wait_sweep(api: Api, sweep_id: str, timeout: float) -> dict:
    def ended() -> dict | None:
        sweep = api.http.get(f"/v1/sweeps/{sweep_id}").json()
        return sweep if sweep["status"] in ENDED else None

    return wait_for(ended, timeout=timeout, what=f"sweep {sweep_id} to end")


def test_a_sweep_trains_its_trials_prunes_the_hopeless_one_and_registers_the_best(stack):
    api, tmp = stack
    (tmp / "data").mkdir()
    files = numbers_files(tmp / "data")
    train, valid = api.upload(files["train"], "parallel"), api.upload(files["valid"], "parallel")
    job = numbers_job(train["id"], valid["id"], max_steps=120, eval_every=20, checkpoint_every=60, warmup_steps=40)
    body = {
        "name": "numbers",
        "job": job,
        # a learning rate a thousand times too small barely moves the loss: the first rung (120/9 = 13 steps) shows it
        "space": {"training.lr_scale": {"type": "choice", "values": [1.0, 0.001]}},
        "objective": {"metric": "valid_loss"},
        "budget": {"trials": 2},
        "sampler": "grid",
        "seed": 1,  # the grid's order for this seed: 1.0 first, so the second trial has a bar to fall below
        "max_concurrent_trials": 1,
    }
    response = api.http.post("/v1/sweeps", json=body)
    assert response.status_code == 201, response.text
    sweep = response.json()
    assert [t["params"] for t in sweep["trials"]] == [{"training.lr_scale": 1.0}]
    done = _wait_sweep(api, sweep["id"], timeout=600)
    assert done["status"] == "succeeded", done
    first, second = done["trials"]
    assert (first["status"], second["status"]) == ("succeeded", "pruned"), done["trials"]
    assert second["stop_reason"].startswith("pruned by asha after 20 steps: valid_loss ")
    assert second["curve"]["at"] == [20] and first["curve"]["at"] == [20, 40, 60, 80, 100, 120]
    assert second["curve"]["values"][0] > first["curve"]["values"][0]
    pruned_job = api.job(second["job_id"])
    assert pruned_job["status"] == "pruned" and pruned_job["progress"]["step"] == 20
    assert done["best"]["job_id"] == first["job_id"] and done["best"]["model_ref"] == "numbers@best"
    assert done["best"]["value"] == first["value"] == pytest.approx(min(first["curve"]["values"]), rel=0.2)
    # name@best is the best trial's model, and it serves translations
    model = api.http.get("/v1/models/numbers@best").json()
    assert model["id"] == done["best"]["model_id"] and model["job_id"] == first["job_id"]
    answer = api.http.post("/v1/models/numbers@best/translate", json={"texts": ["twenty-one"]}, timeout=60)
    assert answer.status_code == 200, answer.text
    # the trials are jobs: listed by sweep, with the settings the study gave them
    jobs = api.http.get("/v1/jobs", params={"sweep_id": sweep["id"]}).json()
    assert sorted(j["training"]["lr_scale"] for j in jobs["data"]) == [0.001, 1.0]
