"""A data-parallel job on a worker pinned to one GPU fails at once, saying how to give a worker several GPUs;
ranks take cuda:0..N-1 of the GPUs the worker sees, so a pinned worker would take its neighbours' GPUs."""

from __future__ import annotations

import pytest

from model.train.config import TrainingError
from worker.device import check_data_parallel, check_gpus


@pytest.mark.parametrize("setting", ["cuda:1", "cuda:0"])
def test_a_worker_pinned_to_one_gpu_refuses_a_data_parallel_job(setting):
    with pytest.raises(TrainingError) as refused:
        check_data_parallel(setting, devices=2)
    message = str(refused.value)
    assert "training.devices=2" in message and repr(setting) in message and "CUDA_VISIBLE_DEVICES" in message


@pytest.mark.parametrize(("setting", "devices"), [("cuda", 2), ("", 4), ("cpu", 2), ("cuda:1", 1)])
def test_workers_with_their_gpus_or_a_cpu_or_one_device_jobs_go_ahead(setting, devices):
    check_data_parallel(setting, devices)


@pytest.mark.parametrize(("device", "devices", "gpus"), [("cuda", 4, 2), ("cuda:0", 2, 1)])
def test_a_host_with_fewer_gpus_than_devices_refuses_the_job_before_starting_a_process(device, devices, gpus):
    """The GPU branch, reached on this CPU host by injecting the GPU count a GPU host reports."""
    with pytest.raises(TrainingError) as refused:
        check_gpus(device, devices, count=lambda: gpus)
    assert str(refused.value).startswith(f"training.devices={devices} needs {devices} GPUs, but this worker has {gpus}")


@pytest.mark.parametrize(("device", "devices", "gpus"), [("cuda", 2, 2), ("cpu", 8, 0)])
def test_a_host_with_enough_gpus_or_a_cpu_goes_ahead(device, devices, gpus):
    check_gpus(device, devices, count=lambda: gpus)
