"""A data-parallel job on a worker pinned to one GPU fails at once, saying how to give a worker several GPUs;
ranks take cuda:0..N-1 of the GPUs the worker sees, so a pinned worker would take its neighbours' GPUs."""

from __future__ import annotations

import pytest

from model.train.config import TrainingError
from worker.device import check_data_parallel


@pytest.mark.parametrize("setting", ["cuda:1", "cuda:0"])
def test_a_worker_pinned_to_one_gpu_refuses_a_data_parallel_job(setting):
    with pytest.raises(TrainingError) as refused:
        check_data_parallel(setting, devices=2)
    message = str(refused.value)
    assert "training.devices=2" in message and repr(setting) in message and "CUDA_VISIBLE_DEVICES" in message


@pytest.mark.parametrize(("setting", "devices"), [("cuda", 2), ("", 4), ("cpu", 2), ("cuda:1", 1)])
def test_workers_with_their_gpus_or_a_cpu_or_one_device_jobs_go_ahead(setting, devices):
    check_data_parallel(setting, devices)
