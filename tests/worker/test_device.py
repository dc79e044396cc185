"""WORKER_DEVICE: which device a worker computes on, checked against the GPUs the host has. No GPU here: the
GPU count is injected, as torch.cuda.device_count() would report it on a GPU host."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from app.core.settings import Settings
from bench.harness.stack import ROOT, service_env
from worker import device
from worker.device import CUDA_ALLOC_CONF, DeviceError, DeviceInfo, device_info, resolve_device
from worker.serving.model_cache import serving_dtype


@pytest.mark.parametrize(
    ("setting", "gpus", "expected"),
    [
        ("", 0, torch.device("cpu")),  # default: the GPU if there is one
        ("", 2, torch.device("cuda", 0)),
        ("cpu", 4, torch.device("cpu")),  # a CPU worker on a GPU host
        ("cuda", 1, torch.device("cuda", 0)),
        ("cuda:1", 2, torch.device("cuda", 1)),  # the second worker of a two-GPU host
    ],
)
def test_the_device_is_the_setting_or_the_first_gpu(setting, gpus, expected):
    assert resolve_device(setting, gpus) == expected


def test_a_device_the_host_lacks_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    with pytest.raises(DeviceError, match=r"WORKER_DEVICE='cuda:1' but this host has 1 visible CUDA device\(s\)"):
        resolve_device("cuda:1", 1)
    with pytest.raises(DeviceError, match=r"'cuda'.*no CUDA device.*CUDA_VISIBLE_DEVICES='2'"):
        resolve_device("cuda", 0)


def test_a_malformed_setting_is_refused_naming_it():
    for bad in ("gpu", "cuda:x", "mps", "cuda:0,1"):
        with pytest.raises(ValidationError, match="worker_device"):
            Settings(worker_device=bad)


def test_a_gpu_worker_configures_the_allocator_and_takes_only_its_own_gpu(monkeypatch, settings_env):
    settings_env(WORKER_DEVICE="cuda:1")
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    current = []
    monkeypatch.setattr(torch.cuda, "set_device", current.append)
    assert device.prepare_process() == torch.device("cuda", 1)
    assert current == [torch.device("cuda", 1)]
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == CUDA_ALLOC_CONF


def test_an_operator_allocator_setting_is_kept(monkeypatch, settings_env):
    settings_env(WORKER_DEVICE="cpu")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
    assert device.prepare_process() == torch.device("cpu")
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:128"


def test_a_worker_given_a_gpu_this_host_lacks_refuses_to_start(tmp_path):
    """The real Celery worker, started with WORKER_DEVICE=cuda:3 on this GPU-less host, exits with the reason."""
    env = service_env(DATA_DIR=str(tmp_path / "var"), WORKER_DEVICE="cuda:3")
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "-P", "solo", "-Q", "training"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "worker not started: WORKER_DEVICE='cuda:3'" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("setting", "gpus", "queue", "consumed"),
    [
        # a GPU worker of the compose gpu profile; its kind's join tasks of multi-host jobs too
        ("cuda", 1, "training", ["training", "training.gpu", "training.nodes.gpu"]),
        ("", 2, "training", ["training", "training.gpu", "training.nodes.gpu"]),  # the default on a GPU host
        ("cpu", 2, "training", ["training", "training.cpu", "training.nodes.cpu"]),  # a CPU worker on a GPU host
        ("cuda", 1, "inference", ["data", "inference", "webhooks"]),  # no training queue; datasets and webhooks
    ],
)
def test_a_training_worker_consumes_the_queue_of_its_device_kind(
    monkeypatch, settings_env, setting, gpus, queue, consumed
):
    """The queue subscription as Celery runs it (celeryd_after_setup, after `-Q`). The GPU branch is reached on this
    CPU host by injecting the GPU count a GPU host reports."""
    from celery.signals import celeryd_after_setup

    from app.services.queueing import make_celery
    from worker import celery_app  # noqa: F401  (connects the receiver)

    settings_env(WORKER_DEVICE=setting)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    app = make_celery("worker")
    app.amqp.queues.select([queue])  # -Q
    celeryd_after_setup.send(sender=f"{queue}@gpu-host", instance=SimpleNamespace(app=app), conf=app.conf)
    assert sorted(app.amqp.queues.consume_from) == consumed


def test_a_worker_given_a_gpu_the_host_lacks_takes_no_device_queue(monkeypatch, settings_env):
    """worker_init refuses to start it, naming the device; the subscription leaves its queues as they are."""
    from app.services.queueing import make_celery
    from worker.celery_app import _consume_the_device_queue

    settings_env(WORKER_DEVICE="cuda:3")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    app = make_celery("worker")
    app.amqp.queues.select(["training"])
    _consume_the_device_queue(sender="training@host", instance=SimpleNamespace(app=app))
    assert sorted(app.amqp.queues.consume_from) == ["training"]


def test_inference_workers_serve_in_bf16_on_a_gpu_and_fp32_on_a_cpu_unless_told():
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert serving_dtype("auto", cuda) == torch.bfloat16 and serving_dtype("auto", cpu) == torch.float32
    assert serving_dtype("fp16", cuda) == torch.float16 and serving_dtype("bf16", cpu) == torch.bfloat16
    assert serving_dtype("fp32", cuda) == torch.float32
    with pytest.raises(ValidationError, match="serving_dtype"):
        Settings(serving_dtype="int8")


def test_serving_compile_compiles_the_layers_of_a_loaded_model():
    from model.nn.compile import is_compiled
    from model.nn.config import ModelConfig
    from model.nn.transformer import Transformer
    from worker.serving.model_cache import prepare_for_serving

    cpu = torch.device("cpu")
    plain = prepare_for_serving(Transformer(ModelConfig.from_preset("tiny", 40)), cpu, Settings())
    compiled = prepare_for_serving(
        Transformer(ModelConfig.from_preset("tiny", 40)), cpu, Settings(serving_compile=True)
    )
    assert not is_compiled(plain) and is_compiled(compiled)
    assert next(compiled.parameters()).dtype == torch.float32


def test_a_gpu_is_described_by_nvidia_smi_through_cuda_visible_devices(monkeypatch):
    """No CUDA context in the worker's main process (its pool forks from it): nvidia-smi answers instead."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    asked = []

    def nvidia_smi(argv: list[str]) -> str:
        asked.append(argv)
        return "NVIDIA H100 80GB HBM3, 81559, 80100\n"

    info = device_info(torch.device("cuda", 1), run=nvidia_smi)
    assert asked[0][-2:] == ["-i", "5"]  # visible cuda:1 is physical GPU 5
    assert info == DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", 81559 * 2**20, 80100 * 2**20)


def test_a_gpu_nvidia_smi_cannot_describe_is_still_reported(monkeypatch, caplog):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def missing(argv: list[str]) -> str:
        raise FileNotFoundError("nvidia-smi")

    assert device_info(torch.device("cuda", 0), run=missing) == DeviceInfo("cuda", "cuda:0", None, None)
    assert "nvidia-smi could not describe cuda:0" in caplog.text


def test_the_cpu_is_described_from_proc(tmp_path):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n")
    (tmp_path / "meminfo").write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n")
    info = device_info(torch.device("cpu"), proc=tmp_path)
    assert info.kind == "cpu" and info.name.startswith("AMD EPYC 7B13 (")
    assert (info.memory_total, info.memory_free) == (24_000_000 * 1024, 20_000_000 * 1024)
    assert device_info(torch.device("cpu")).memory_total > 0  # this machine's own /proc
