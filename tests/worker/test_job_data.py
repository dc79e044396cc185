"""How a job's training section becomes the TrainConfig its worker trains with."""

from __future__ import annotations

from app.db.models import Job
from worker.job_data import train_config


def test_precision_follows_the_job_or_else_the_worker_device():
    asked = Job(training_config={"max_steps": 5, "precision": "bf16"})
    assert train_config(asked, "cpu").resolved_precision == "bf16"  # asked for: kept, even on a CPU
    default = Job(training_config={"max_steps": 5, "precision": None})
    assert train_config(default, "cpu").resolved_precision == "fp32"
    assert train_config(default, "cuda:0").resolved_precision == "bf16"
    before = Job(training_config={"max_steps": 5})  # submitted before the field existed
    assert train_config(before, "cuda").resolved_precision == "bf16"


def test_compile_reaches_the_training_config():
    assert train_config(Job(training_config={"compile": True}), "cpu").compile is True
    assert train_config(Job(training_config={}), "cpu").compile is False


def test_log_every_follows_the_job_or_else_the_worker_device():
    assert train_config(Job(training_config={"log_every": 25}), "cpu").resolved_log_every == 25
    assert train_config(Job(training_config={"log_every": None}), "cuda:1").resolved_log_every == 10
    assert train_config(Job(training_config={}), "cpu").resolved_log_every == 1


def test_the_watched_tokens_reach_the_training_config():
    assert train_config(Job(training_config={"probe_tokens": ["the", "Ġcat"]}), "cpu").probe_tokens == ["the", "Ġcat"]
    assert train_config(Job(training_config={}), "cpu").probe_tokens is None  # the most frequent words
