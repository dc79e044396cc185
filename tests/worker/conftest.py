"""Fixtures of the tests of the worker's automatic settings: a corpus of number words (and a larger one), and
worker settings from the environment."""

from __future__ import annotations

import pytest

from app.core.settings import get_settings
from model.data.demo import numbers_to_words_task, split_numbers


@pytest.fixture(scope="module")
def corpus():
    train, held_out = split_numbers(0, 999, held_out=0.1, seed=0)
    return numbers_to_words_task(len(train), numbers=train), numbers_to_words_task(len(held_out), numbers=held_out)


@pytest.fixture
def worker_env(monkeypatch):
    def apply(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()

    yield apply
    get_settings.cache_clear()


@pytest.fixture(scope="module")
def larger_corpus(corpus):
    """Enough tokens (8,000 pairs drawn from the training numbers) for batches of 8,192 tokens and more."""
    train, _ = split_numbers(0, 999, held_out=0.1, seed=0)
    return numbers_to_words_task(8000, numbers=train), corpus[1]
