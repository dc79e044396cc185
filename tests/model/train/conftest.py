"""Fixtures the training loop's spec files share (tests/model/train/test_{training,schedule,data_preparation,
resume}.py ask for them; one_thread is tests/model/conftest.py's)."""

from __future__ import annotations

import pytest

from model.data.demo import reverse_task
from model.train.prepare import PreparedData, prepare
from model.train.settings import DataSettings


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
