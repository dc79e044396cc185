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
