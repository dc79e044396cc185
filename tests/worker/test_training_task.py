"""The training task's classification of failures: out of memory fails at once, other crashes are retried."""

from __future__ import annotations

import pytest
import torch

from worker.tasks.training import _out_of_memory


def test_a_real_cpu_allocation_failure_counts_as_out_of_memory():
    """Fault: the CPU allocator cannot satisfy a request. Pass: classified as out of memory (the job fails at
    once with advice instead of being retried into the same wall)."""
    with pytest.raises(RuntimeError) as failure:
        torch.empty(2**62, dtype=torch.uint8)
    assert _out_of_memory(failure.value)
    assert _out_of_memory(MemoryError())


def test_other_runtime_errors_are_not_out_of_memory():
    with pytest.raises(RuntimeError) as failure:
        torch.zeros(2, 3) @ torch.zeros(2, 3)
    assert not _out_of_memory(failure.value)
    assert not _out_of_memory(ValueError("can't allocate memory"))


def test_a_job_waits_for_its_dataset_however_many_looks_it_takes(monkeypatch):
    """Waiting for a dataset is a retry every DATASET_WAIT_SECONDS: Celery's default (3 retries) would give up on a
    large corpus after 6 s, and the job would sit undispatched until the reaper resent it."""
    from celery.exceptions import MaxRetriesExceededError, Retry

    from worker.tasks import training

    assert training.train_job.max_retries is None
    monkeypatch.setattr(training, "datasets_pending", lambda job_id: ["d1"])
    sent = []
    monkeypatch.setattr(training.train_job, "apply_async", lambda *a, **k: sent.append(k))
    monkeypatch.setattr(training.train_job, "signature_from_request", lambda *a, **k: training.train_job)
    training.train_job.push_request(retries=1000, called_directly=False, hostname="w", id="t", delivery_info={})
    try:
        with pytest.raises(Retry):
            training.train_job.run("job-1")
    except MaxRetriesExceededError:  # pragma: no cover - what the test guards against
        pytest.fail("the job gave up waiting for its dataset")
    finally:
        training.train_job.pop_request()
    assert len(sent) == 1  # the retry message, sent again
