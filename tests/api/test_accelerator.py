"""training.accelerator: a job for GPU (or CPU) workers goes to their own queue, and while no such worker is alive
it is accepted, queued and shown as waiting for one. No GPU here: a GPU worker is a heartbeat that says so."""

from __future__ import annotations

from app.core.task_names import ACCELERATOR_QUEUES
from app.services.queueing import read_depth
from tests.api.test_datasets import _jsonl, _ready
from worker.device import DeviceInfo
from worker.heartbeat import beat


def _submit(client, key, accelerator: str) -> dict:
    dataset = _ready(client, key, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]
    body = {"objective": "translation", "dataset_id": dataset, "training": {"max_steps": 5, "accelerator": accelerator}}
    response = client.post("/v1/jobs", json=body, headers=key)
    assert response.status_code == 201, response.text
    return response.json()


def test_a_gpu_job_without_a_gpu_worker_is_queued_waiting_for_one_on_the_gpu_queue(client, make_key):
    alice = make_key("alice")
    beat("training@cpu-host", ["training", "training.cpu"], starting=True, info=DeviceInfo("cpu", "x", 1, 1))
    before = read_depth(ACCELERATOR_QUEUES["gpu"])
    job = _submit(client, alice, "gpu")
    assert (job["status"], job["training"]["accelerator"], job["waiting_for"]) == ("queued", "gpu", "a GPU worker")
    assert read_depth(ACCELERATOR_QUEUES["gpu"]) == before + 1  # only GPU workers consume it
    listed = client.get("/v1/jobs", headers=alice).json()["data"][0]
    assert listed["waiting_for"] == "a GPU worker"

    h100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", 80 * 2**30, 79 * 2**30)
    beat("training-gpu@gpu-host", ["training", "training.gpu"], starting=True, info=h100)
    assert client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["waiting_for"] is None


def test_cpu_and_any_jobs_do_not_wait_when_a_cpu_worker_is_alive(client, make_key):
    alice = make_key("alice")
    beat("training@cpu-host", ["training", "training.cpu"], starting=True, info=DeviceInfo("cpu", "x", 1, 1))
    assert _submit(client, alice, "cpu")["waiting_for"] is None
    assert _submit(client, alice, "any")["waiting_for"] is None


def test_an_unknown_accelerator_is_422_naming_it(client, make_key):
    alice = make_key("alice")
    dataset = _ready(client, alice, _jsonl([("one", "eins")]))["id"]
    body = {"objective": "translation", "dataset_id": dataset, "training": {"accelerator": "tpu"}}
    response = client.post("/v1/jobs", json=body, headers=alice)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "training", "accelerator"]
