"""The worker's choice of the settings a job left to its time budget: recorded inputs, reproducible."""

from __future__ import annotations

import pytest

from app.core.settings import get_settings
from app.db.tables import Job
from app.schemas.jobs import ModelSpec, TrainingSpec
from model.data.demo import numbers_to_words_task, split_numbers
from worker.training.auto_settings import choose_settings, pending
from worker.training.job_data import JobRows

ALL = ["vocab_size", "max_tokens_per_batch", "warmup_steps", "max_steps"]


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


def _rows(corpus, fields: list[str], **training) -> JobRows:
    job = Job(
        id="job-1",
        objective="translation",
        model_config=ModelSpec(preset="tiny").model_dump(mode="json"),
        training_config=TrainingSpec(max_minutes=2, max_length=40, seed=3, **training).model_dump(mode="json"),
        auto_settings={"fields": fields},
    )
    return JobRows(job, list(corpus[0]), list(corpus[1]))


def test_same_corpus_budget_and_throughput_give_the_same_recorded_choice(corpus, worker_env):
    worker_env(WORKER_TOKENS_PER_SECOND="3000")
    first, second = _rows(corpus, ALL), _rows(corpus, ALL)
    data_1, data_2 = choose_settings(first, "cpu"), choose_settings(second, "cpu")
    auto = first.job.auto_settings
    assert auto == second.job.auto_settings
    assert data_1.tokenizer.fingerprint == data_2.tokenizer.fingerprint
    assert set(auto["chosen"]) == set(ALL) and set(auto["reasons"]) == set(ALL)
    assert (auto["throughput"], auto["probe_seconds"]) == ("pinned", None)
    assert auto["inputs"]["tokens_per_second"] == 3000 and auto["inputs"]["training_pairs"] == len(corpus[0])
    assert auto["inputs"]["longest_example"] == max(e.size for e in data_1.train_examples)
    # The values are the job's settings now: a later attempt trains with them and chooses nothing.
    assert first.job.model_config["vocab_size"] == auto["chosen"]["vocab_size"] == 2000  # 900 pairs
    assert data_1.stats["vocab_size"] <= 2000
    for name in ("max_tokens_per_batch", "warmup_steps", "max_steps"):
        assert first.job.training_config[name] == auto["chosen"][name]
    assert pending(first) == []


def test_without_a_pinned_throughput_the_worker_measures_its_own(corpus, worker_env):
    worker_env(WORKER_TOKENS_PER_SECOND="0")
    rows = _rows(corpus, ["max_tokens_per_batch", "warmup_steps"])
    choose_settings(rows, "cpu")
    auto = rows.job.auto_settings
    assert auto["throughput"] == "measured" and auto["probe_seconds"] > 0
    assert auto["inputs"]["tokens_per_second"] > 0
    assert set(auto["chosen"]) == {"max_tokens_per_batch", "warmup_steps"}
    assert rows.job.model_config["vocab_size"] == ModelSpec().vocab_size  # given (by default), not chosen
    assert rows.job.training_config["max_steps"] == TrainingSpec().max_steps
