"""What the model's tests share: torch on one thread for the tests that ask for it (`pytestmark =
pytest.mark.usefixtures("one_thread")`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from two threads, and lose a lot when other processes share the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
