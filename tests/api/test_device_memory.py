"""A job is checked against the memory of the devices it may run on, in the precision it will train in: a CPU's
WORKER_MEMORY_LIMIT_GB in fp32, the largest GPU a training worker reported in bf16. No GPU here: a GPU worker is
a heartbeat that says so."""

from __future__ import annotations

import pytest

from model.nn.config import ModelConfig
from model.probes.anatomy import estimate_memory
from tests.api.test_datasets import _jsonl, _ready
from worker.device import DeviceInfo, memory_limit_bytes
from worker.heartbeat import beat

GIB = 2**30
BASE_25K = {"model": {"preset": "base", "vocab_size": 32000}, "training": {"max_tokens_per_batch": 25000}}


def _job(client, key, accelerator: str, **training):
    dataset = _ready(client, key, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]
    body = {"objective": "translation", "dataset_id": dataset, **BASE_25K}
    body["training"] = {**body["training"], "accelerator": accelerator, **training}
    return client.post("/v1/jobs", json=body, headers=key)


def _gpu_worker(memory_gib: int) -> None:
    info = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", memory_gib * GIB, memory_gib * GIB)
    beat("training-gpu@gpu-host", ["training", "training.gpu"], starting=True, info=info)


def test_bf16_mixed_precision_needs_less_memory_than_fp32():
    config = ModelConfig.from_preset("base", 32000)
    fp32 = estimate_memory(config, 25000)
    bf16 = estimate_memory(config, 25000, precision="bf16")
    assert bf16["weights_bytes"] == fp32["weights_bytes"] and bf16["adam_bytes"] == fp32["adam_bytes"]  # fp32 master
    assert bf16["activations_bytes"] < 0.7 * fp32["activations_bytes"]
    assert 8 * GIB < bf16["training_total_bytes"] < fp32["training_total_bytes"]
    with pytest.raises(ValueError, match="'fp16'"):
        estimate_memory(config, 25000, precision="fp16")


def test_a_base_job_too_big_for_the_cpu_limit_fits_a_registered_80_gb_gpu(client, make_key, settings_env):
    settings_env(WORKER_MEMORY_LIMIT_GB="8")
    alice = make_key("alice")
    refused = _job(client, alice, "any")
    assert refused.status_code == 422
    message = refused.json()["detail"][0]["msg"]
    assert "on a CPU (limit 8.0 GB, WORKER_MEMORY_LIMIT_GB)" in message and "max_tokens_per_batch" in message
    assert _job(client, alice, "cpu").status_code == 422

    _gpu_worker(80)
    assert _job(client, alice, "any").status_code == 201
    assert _job(client, alice, "gpu").status_code == 201
    assert _job(client, alice, "cpu").status_code == 422  # the CPU limit still holds for CPU-only jobs
    # fp32 on the GPU: 18 GB also fits 80 GB, but not a 16 GB GPU
    assert _job(client, alice, "gpu", precision="fp32").status_code == 201
    _gpu_worker(16)
    too_big = _job(client, alice, "gpu", precision="fp32")
    assert too_big.status_code == 422 and "in fp32 on a GPU (limit 16.0 GB" in too_big.json()["detail"][0]["msg"]


def test_a_gpu_job_is_not_refused_while_no_gpu_worker_has_registered(client, make_key, settings_env):
    settings_env(WORKER_MEMORY_LIMIT_GB="8")
    response = _job(client, make_key("alice"), "gpu")
    assert response.status_code == 201 and response.json()["waiting_for"] == "a GPU worker"


def test_the_estimate_answers_for_the_device_and_precision(client, make_key, settings_env):
    settings_env(WORKER_MEMORY_LIMIT_GB="8")
    alice = make_key("alice")
    body = {"model": BASE_25K["model"], "tokens_per_batch": 25000}
    cpu = client.post("/v1/estimate", json=body, headers=alice).json()
    assert (cpu["precision"], cpu["worker_memory_limit_bytes"], cpu["fits_worker_memory"]) == ("fp32", 8 * GIB, False)
    unknown = client.post("/v1/estimate", json={**body, "accelerator": "gpu"}, headers=alice).json()
    assert (unknown["precision"], unknown["worker_memory_limit_bytes"]) == ("bf16", None)
    _gpu_worker(80)
    gpu = client.post("/v1/estimate", json={**body, "accelerator": "gpu"}, headers=alice).json()
    assert (gpu["worker_memory_limit_bytes"], gpu["fits_worker_memory"]) == (80 * GIB, True)
    assert gpu["memory"]["training_total_bytes"] < cpu["memory"]["training_total_bytes"]


def test_a_gpu_workers_limit_is_its_gpus_memory(monkeypatch, settings_env):
    settings_env(WORKER_MEMORY_LIMIT_GB="8")
    import torch

    class Properties:
        total_memory = 80 * GIB

    asked = []
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: asked.append(device) or Properties())
    assert memory_limit_bytes(torch.device("cuda", 1)) == 80 * GIB and asked == [torch.device("cuda", 1)]
    assert memory_limit_bytes(torch.device("cpu")) == 8 * GIB


def test_a_preset_too_large_for_every_device_is_refused_at_submit_naming_both_memories(client, make_key, settings_env):
    """A CPU of 3 GB (WORKER_MEMORY_LIMIT_GB) holds base but not big, even at the smallest batch. Pass: a job naming
    big is 422 on model.preset with the memory big needs and the device's; left to the worker (auto) it is taken
    (the worker chooses among the presets that fit); with a 3 GB GPU registered, a GPU job naming big is refused
    naming that GPU."""
    settings_env(WORKER_MEMORY_LIMIT_GB="3")
    alice = make_key("alice")
    dataset = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]

    def submit(model: dict, accelerator: str = "cpu"):
        body = {
            "objective": "translation",
            "dataset_id": dataset,
            "model": model,
            "training": {"accelerator": accelerator},
        }
        return client.post("/v1/jobs", json=body, headers=alice)

    big = estimate_memory(ModelConfig.from_preset("big", 8000), 1536)["training_total_bytes"]
    refused = submit({"preset": "big"})
    assert refused.status_code == 422
    detail = refused.json()["detail"][0]
    assert detail["loc"] == ["body", "model", "preset"]
    assert detail["msg"].startswith("preset 'big' needs more memory to train than any device this job may run on has")
    assert f"{big / GIB:.1f} GB in fp32 on a CPU (limit 3.0 GB, WORKER_MEMORY_LIMIT_GB)" in detail["msg"]
    assert "at 1536 tokens per batch" in detail["msg"] and "choose a smaller preset, or auto" in detail["msg"]
    assert submit({"preset": "base"}).status_code == 201
    auto = submit({})
    assert auto.status_code == 201 and auto.json()["model"]["preset"] == "auto"
    _gpu_worker(3)
    on_gpu = submit({"preset": "big"}, "gpu")
    assert on_gpu.status_code == 422 and "on a GPU (limit 3.0 GB" in on_gpu.json()["detail"][0]["msg"]


def test_a_preset_the_worker_cannot_hold_fails_the_job_at_once_naming_both_memories(client, make_key, settings_env):
    """Fault: a job naming big that may run anywhere passes for a registered 80 GB GPU, and a CPU worker of 2 GB
    claims it. Pass: the training task fails it at once (no retry, not left running), saying what big needs and
    what this worker's device has."""
    from app.core import logs
    from worker.tasks import training

    settings_env(WORKER_MEMORY_LIMIT_GB="2")
    alice = make_key("alice")
    _gpu_worker(80)
    dataset = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei"), ("three", "drei")]))["id"]
    body = {"objective": "translation", "dataset_id": dataset, "model": {"preset": "big"}, "training": {"max_steps": 5}}
    job = client.post("/v1/jobs", json=body, headers=alice)
    assert job.status_code == 201, job.text
    training.train_job.push_request(
        hostname="cpu-host", id="task-1", retries=0, delivery_info={}, called_directly=False
    )
    try:
        training.train_job.run(job.json()["id"])
    finally:
        training.train_job.pop_request()
        logs.unbind_task()  # as Celery's task_postrun does: the task bound its organisation to this thread's lines
    done = client.get(f"/v1/jobs/{job.json()['id']}", headers=alice).json()
    assert (done["status"], done["attempt"]) == ("failed", 1)
    assert done["error"].startswith("preset 'big' needs an estimated ")
    assert "GB to train in fp32 at 4096 tokens per batch; this worker's device has 2.0 GB" in done["error"]
