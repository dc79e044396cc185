"""A data-parallel job (training.devices = 2) end to end: real uvicorn, a prefork training worker (-c 1) whose task
starts the second training process (gloo on CPU), an inference worker, a fresh PostgreSQL database and Redis."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest

from tests.support import services
from tests.support.client import Api
from tests.support.stack import Processes, create_key, free_port, healthy_with_workers, run_cli, service_env, wait_for
from tests.support.training import FAST_LEASES, numbers_files, numbers_job, query

DONE = ("succeeded", "failed", "cancelled")


@pytest.fixture(scope="module")
def stack(tmp_path_factory, postgres_url, redis_url):
    """API, one training worker (prefork, one slot), one inference worker; two uploaded datasets."""
    tmp = tmp_path_factory.mktemp("ddp")
    name = f"t_{uuid.uuid4().hex[:12]}"
    services.create_database(postgres_url, name)
    env = service_env(
        DATABASE_URL=services.with_database(postgres_url, name),
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp / "var"),
        ARTIFACT_ROOT=str(tmp / "artifacts"),
        MAX_DEVICES_PER_JOB="2",
        **FAST_LEASES,
    )
    run_cli(env, "migrate")
    processes = Processes(tmp)
    url = processes.start_api(env, free_port())
    processes.start_worker(env, "training", "trainer")
    processes.start_worker(env, "inference", "server", pool="threads", concurrency=4)
    try:
        wait_for(healthy_with_workers(url, 2), timeout=90, what="workers")
        api = Api(url, create_key(env, "alice"))
        files = numbers_files(tmp)
        yield {
            "api": api,
            "env": env,
            "processes": processes,
            "train": api.upload(files["train"], "parallel")["id"],
            "valid": api.upload(files["valid"], "parallel")["id"],
        }
    finally:
        processes.stop(timeout=30)
        services.drop_database(postgres_url, name)


def _peer_pids(job_id: str) -> list[int]:
    """Processes running `python -m worker.training.ddp_peer --job-id JOB_ID` (this job's peers only)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"worker.training.ddp_peer" in argv and job_id.encode() in argv:
            pids.append(int(proc.name))
    return pids


def _parent(pid: int) -> int:
    return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_two_device_job_succeeds_with_one_metric_row_per_step_and_a_model_that_serves(stack):
    """Pass: the job trains on 2 processes to max_steps (progress and device say so), writes each (step, name)
    metric once (only rank 0 reports), checkpoints at 10 and 20, and its model translates over HTTP."""
    api = stack["api"]
    job = api.submit(
        numbers_job(
            stack["train"], stack["valid"], max_steps=20, warmup_steps=10, eval_every=10, checkpoint_every=10, devices=2
        )
    )
    assert job["training"]["devices"] == 2
    done = api.wait(job["id"], DONE, timeout=150)
    assert done["status"] == "succeeded", done["error"]
    assert done["device"] == "2x cpu"
    assert done["progress"]["step"] == 20 and done["progress"]["fraction"] == 1.0
    assert done["progress"]["tokens_seen"] > 0
    series = api.metrics(job["id"], names="train_loss,valid_loss,tokens_per_second")
    assert series["train_loss"]["steps"] == list(range(1, 21))
    assert series["valid_loss"]["steps"] == [10, 20]
    duplicates = query(
        stack["env"]["DATABASE_URL"],
        "SELECT step, name FROM metrics WHERE job_id = :j GROUP BY step, name HAVING count(*) > 1",
        j=job["id"],
    )
    assert duplicates == []
    assert [c["step"] for c in api.checkpoints(job["id"])] == [10, 20]
    assert "started data-parallel peers" in stack["processes"].log("trainer")
    assert _peer_pids(job["id"]) == []  # the peer left with the job
    response = api.http.post(f"/v1/models/{done['model_id']}/translate", json={"texts": ["forty two"]})
    assert response.status_code == 200, response.text
    (translation,) = response.json()["translations"]  # 20 steps teach little: any text, a finite score
    assert isinstance(translation["text"], str) and translation["score"] > float("-inf")
    assert response.json()["model_id"] == done["model_id"]


def test_more_devices_than_max_devices_per_job_is_refused_with_422(stack):
    """Pass: devices=3 over MAX_DEVICES_PER_JOB=2 gets 422 naming training.devices and the limit; devices=0 too."""
    api = stack["api"]
    for devices, message in ((3, "MAX_DEVICES_PER_JOB"), (0, "greater than or equal to 1")):
        response = api.http.post("/v1/jobs", json=numbers_job(stack["train"], devices=devices))
        assert response.status_code == 422, response.text
        error = response.json()["detail"][0]
        assert error["loc"] == ["body", "training", "devices"] and message in error["msg"]


def test_a_dead_peer_fails_the_job_with_a_readable_error(stack):
    """Fault: the rank-1 process is SIGKILLed mid-run. Pass: the job fails within seconds (no retry) with an error
    naming rank 1 and the signal, and the same worker then runs another 2-device job to the end."""
    api = stack["api"]
    job = api.submit(numbers_job(stack["train"], max_steps=100_000, eval_every=1000, checkpoint_every=1000, devices=2))
    wait_for(lambda: api.job(job["id"])["progress"]["step"] >= 2, timeout=90, what="training to start")
    (peer,) = _peer_pids(job["id"])
    os.kill(peer, signal.SIGKILL)
    failed = api.wait(job["id"], DONE, timeout=30)
    assert failed["status"] == "failed" and failed["attempt"] == 1
    assert "rank 1" in failed["error"] and "SIGKILL" in failed["error"], failed["error"]
    again = api.submit(numbers_job(stack["train"], max_steps=4, eval_every=4, checkpoint_every=4, devices=2))
    assert api.wait(again["id"], DONE, timeout=90)["status"] == "succeeded"


def test_peers_exit_when_rank_0_dies(stack):
    """Fault: the task's process (rank 0) is SIGKILLed. Pass: its peer notices and exits within seconds instead of
    training on alone."""
    api = stack["api"]
    job = api.submit(numbers_job(stack["train"], max_steps=100_000, eval_every=1000, checkpoint_every=1000, devices=2))
    wait_for(lambda: api.job(job["id"])["progress"]["step"] >= 2, timeout=90, what="training to start")
    (peer,) = _peer_pids(job["id"])
    os.kill(_parent(peer), signal.SIGKILL)
    wait_for(lambda: not _alive(peer), timeout=10, what=f"peer {peer} to exit")


def test_a_host_with_fewer_gpus_than_devices_fails_the_job_with_a_clear_message(tmp_path):
    """Pass: asking this host for one GPU more than it has raises TrainingError naming devices and the GPU count,
    before any process starts (the task fails the job with it)."""
    import torch

    from model.train.config import TrainConfig, TrainingError
    from model.train.events import Callbacks
    from worker.training.ddp_peer import train_data_parallel

    gpus = torch.cuda.device_count()
    devices = max(2, gpus + 1)
    with pytest.raises(
        TrainingError,
        match=rf"training.devices={devices} needs {devices} GPUs, but this worker has "
        rf"{gpus}; lower training.devices",
    ):
        train_data_parallel("job", None, TrainConfig(device="cuda"), devices, tmp_path, Callbacks(), {})
