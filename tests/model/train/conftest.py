"""Fixtures the training loop's spec files share (tests/model/train/test_{training,schedule,data_preparation,
resume}.py ask for them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from model.data.demo import reverse_task
from model.train.prepare import PreparedData, prepare
from model.train.settings import DataSettings


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from two threads, and lose a lot when other processes share the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def reverse_data() -> PreparedData:
    return prepare(
        "translation",
        reverse_task(300, vocab=12, min_len=2, max_len=8, seed=0),
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=16),
        seed=0,
    )
