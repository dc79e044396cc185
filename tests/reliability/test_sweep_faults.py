"""A sweep through faults on a real stack (uvicorn, Celery prefork workers, PostgreSQL, Redis): its worker killed
mid-trial and its API killed too. Pass: the trial resumes from its checkpoint like any job, the sweep starts its
next trial when that one ends, and ends with its best registered, nothing started twice."""

from __future__ import annotations

import os
import signal

from bench.harness.stack import free_port, wait_for
from tests.support.client import Api
from tests.support.training import numbers_job, query

ENDED = ("succeeded", "failed", "cancelled")


def test_a_worker_and_the_api_killed_mid_trial_and_the_sweep_still_ends_with_its_best(stack, data_files):
    first = stack.start_trainer("doomed")
    api = stack.api("erin")
    train = api.upload(data_files["train"], "parallel")
    body = {
        "name": "survivor",
        "job": numbers_job(train["id"], max_steps=160, checkpoint_every=40, eval_every=40),
        "space": {"training.warmup_steps": {"type": "int", "low": 20, "high": 80}},
        "objective": {"metric": "valid_loss"},
        "budget": {"trials": 2},
        "pruner": "none",
        "sampler": "random",
    }
    response = api.http.post("/v1/sweeps", json=body)
    assert response.status_code == 201, response.text
    sweep_id, first_job = response.json()["id"], response.json()["trials"][0]["job_id"]
    wait_for(lambda: any(c["step"] >= 40 for c in api.checkpoints(first_job)), timeout=240, what="a checkpoint")
    for name in ("doomed", "api"):  # the worker mid-trial, and the API with it
        os.killpg(stack.processes.children[name].pid, signal.SIGKILL)
        stack.processes.children[name].wait()
    first.wait()
    stack.url = stack.processes.start_api(stack.env, free_port())
    api = Api(stack.url, api.http.headers["Authorization"].removeprefix("Bearer "))
    stack.start_trainer("rescuer")

    def ended() -> dict | None:
        response = api.http.get(f"/v1/sweeps/{sweep_id}")
        return response.json() if response.status_code == 200 and response.json()["status"] in ENDED else None

    done = wait_for(ended, timeout=480, what="the sweep to end")
    assert done["status"] == "succeeded", done
    assert [t["status"] for t in done["trials"]] == ["succeeded", "succeeded"]
    assert api.job(first_job)["attempt"] == 2  # resumed after the kill, not started over as a new trial
    assert done["best"]["model_ref"] == "survivor@best"
    assert api.http.get("/v1/models/survivor@best").json()["id"] == done["best"]["model_id"]
    jobs = query(stack.env["DATABASE_URL"], "SELECT count(*) FROM jobs WHERE sweep_id = :s", s=sweep_id)[0][0]
    assert jobs == 2
