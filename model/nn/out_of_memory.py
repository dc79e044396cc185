"""What counts as running out of memory, on any device: the one test the step's batch splitting, the compile
fallback and the worker's error message share."""

from __future__ import annotations

import torch


def is_out_of_memory(exc: BaseException) -> bool:
    """A device out-of-memory error (CUDA's OutOfMemoryError), Python's MemoryError, or the CPU allocator's."""
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)
    )
