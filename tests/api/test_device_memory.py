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
