"""How a job's training section becomes the TrainConfig its worker trains with, and its data settings prepare()'s."""

from __future__ import annotations

from app.db.tables import Job
from app.schemas.jobs import TrainingSpec
from model.train.settings import DataSettings, TrainSettings
from worker.training import job_data
from worker.training.job_data import JobRows, dropped_line, train_config


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
    assert train_config(Job(training_config={"compile": False}), "cpu").compile is False
    assert train_config(Job(training_config={}), "cpu").compile is None  # left to the worker (auto_settings.py)


def test_log_every_follows_the_job_or_else_the_worker_device():
    assert train_config(Job(training_config={"log_every": 25}), "cpu").resolved_log_every == 25
    assert train_config(Job(training_config={"log_every": None}), "cuda:1").resolved_log_every == 10
    assert train_config(Job(training_config={}), "cpu").resolved_log_every == 1


def test_the_watched_tokens_reach_the_training_config():
    assert train_config(Job(training_config={"probe_tokens": ["the", "Ġcat"]}), "cpu").probe_tokens == ["the", "Ġcat"]
    assert train_config(Job(training_config={}), "cpu").probe_tokens is None  # the most frequent words


def test_every_training_setting_reaches_the_trainer_under_its_own_name():
    stored = TrainingSpec(
        max_steps=7, warmup_steps=3, seed=9, eval_budget=None, keep_checkpoints=4, average_last=2, probe_tokens=["x"]
    ).model_dump(mode="json")
    config = train_config(Job(training_config=stored), "cuda:1")
    assert {name: getattr(config, name) for name in TrainSettings.model_fields} == {
        name: stored[name] for name in TrainSettings.model_fields
    }
    assert config.device == "cuda:1"


def test_a_job_stored_before_a_field_existed_gets_its_default():
    config = train_config(Job(training_config={"max_steps": 5}), "cpu")
    defaults = TrainSettings().model_dump()
    assert {name: getattr(config, name) for name in TrainSettings.model_fields} == {**defaults, "max_steps": 5}


def test_the_data_settings_and_model_overrides_reach_prepare(monkeypatch):
    seen = {}
    monkeypatch.setattr(job_data, "prepare", lambda *args, **kwargs: seen.update(kwargs))
    training = {"max_length": 40, "tokenizer": "unigram", "noise": "token", "mask_ratio": 0.3, "seed": 4}
    model = {"preset": "small", "vocab_size": 900, "d_model": 128, "dropout": None}
    job = Job(objective="denoising", training_config=training, model_config=model)
    job_data._prepare(JobRows(job, ["a sentence"], None), None)
    settings = seen["settings"]
    assert isinstance(settings, DataSettings)
    assert {name: getattr(settings, name) for name in DataSettings.model_fields} == {
        **DataSettings().model_dump(),
        **{k: v for k, v in training.items() if k != "seed"},
    }
    assert (seen["preset"], seen["vocab_size"], seen["seed"]) == ("small", 900, 4)
    assert seen["model_overrides"] == {"d_model": 128}  # ModelSpec.overrides(): the fields given, null left out


def test_dropped_sentences_get_a_line_of_their_own_with_how_many_and_why():
    stats = {"dropped": 3, "valid_dropped": 1, "truncated": 0, "empty": 2, "valid_empty": 0}
    assert dropped_line("job-1", "denoising", stats, 64) == (
        "job job-1: 6 sentences dropped, not trained or evaluated on: 4 longer than max_length=64 tokens "
        "(3 training, 1 validation); 2 empty once tokenized (2 training, 0 validation)"
    )
    too_long = {"dropped": 0, "valid_dropped": 2, "empty": 0, "valid_empty": 0}
    assert dropped_line("job-2", "translation", too_long, 32) == (
        "job job-2: 2 sentence pairs dropped, not trained or evaluated on: 2 longer than max_length=32 tokens "
        "(0 training, 2 validation)"
    )
    assert dropped_line("job-3", "translation", {"dropped": 0, "valid_dropped": 0, "truncated": 0}, 32) is None


def test_the_dropped_count_is_what_prepare_dropped():
    from model.train.prepare import prepare
    from model.train.settings import DataSettings

    short = [f"sentence number {n} is short" for n in range(40)]
    long = [" ".join(f"word{n}" for n in range(60))] * 5
    data = prepare(
        "denoising",
        short + long,
        short[:8] + long[:2],
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=24),
    )
    assert (data.stats["dropped"], data.stats["valid_dropped"], data.stats["empty"]) == (5, 2, 0)
    line = dropped_line("job-4", data.objective, data.stats, 24)
    assert (
        line is not None and line.startswith("job job-4: 7 sentences dropped") and "(5 training, 2 validation)" in line
    )
