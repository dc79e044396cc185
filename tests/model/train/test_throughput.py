"""Timing a few real training steps (model/train/throughput.py) without changing how the job then trains."""

from __future__ import annotations

import time

import pytest
import torch

from model.data.demo import reverse_task
from model.train.config import TrainConfig
from model.train.loop import train
from model.train.prepare import prepare
from model.train.settings import MAX_KEEP_CHECKPOINTS, DataSettings
from model.train.throughput import measure_throughput, steady_step_seconds


@pytest.fixture(scope="module")
def data():
    return prepare(
        "translation",
        reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0),
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=16),
        seed=0,
    )


def _config(**overrides) -> TrainConfig:
    return TrainConfig(
        **{
            **dict(
                max_steps=4,
                max_tokens_per_batch=256,
                warmup_steps=10,
                eval_every=1000,
                checkpoint_every=1000,
                eval_max_sentences=8,
                keep_checkpoints=MAX_KEEP_CHECKPOINTS,  # every checkpoint these short runs write
                seed=0,
                eval_budget=None,
            ),
            **overrides,
        }
    )


def test_throughput_is_batch_tokens_per_second_and_leaves_the_rng_alone(data):
    torch.manual_seed(5)
    before = torch.get_rng_state()
    tokens_per_second = measure_throughput(data, _config(), max_tokens=256, steps=2)
    assert torch.equal(torch.get_rng_state(), before)
    assert 0 < tokens_per_second < 1e9 and tokens_per_second != float("inf")
    with pytest.raises(ValueError, match="steps=0"):
        measure_throughput(data, _config(), max_tokens=256, steps=0)


def test_a_job_trains_the_same_with_or_without_the_measurement(data):
    plain = train(data, _config()).losses
    measure_throughput(data, _config(), max_tokens=256, steps=1)
    assert train(data, _config()).losses == plain


def test_a_shapes_first_step_is_not_timed():
    """Each batch is stepped once untimed, then timed: what a new shape costs once (on a GPU, cuDNN building an
    attention plan: hundreds of milliseconds) stays out of the steady rate, however many shapes there are."""
    seen, calls = set(), []

    def step(batch: str) -> None:
        calls.append(("step", batch))
        time.sleep(0.3 if batch not in seen else 0.01)
        seen.add(batch)

    seconds = steady_step_seconds(step, ["a", "b", "c"], lambda: calls.append(("sync", None)))
    assert len(seconds) == 3 and all(s < 0.2 for s in seconds), seconds
    steps = [b for kind, b in calls if kind == "step"]
    assert steps == ["a", "b", "c", "a", "b", "c"]
    # The device is synchronized before the clock starts and after every timed step.
    assert calls[3:] == [
        ("sync", None),
        ("step", "a"),
        ("sync", None),
        ("step", "b"),
        ("sync", None),
        ("step", "c"),
        ("sync", None),
    ]
