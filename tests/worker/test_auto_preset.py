"""The worker's choice of the preset a job left to it: from candidates timed on its device (injected rates here),
the dropout following, a preset the device cannot hold refused and never chosen, and a chosen preset trained
exactly as a named one."""

from __future__ import annotations

import json

import pytest
import torch

from app.schemas.jobs import ModelSpec
from model.train.size_choice import SizeInputs, choose_dropout, choose_size
from tests.worker.auto_jobs import ALL, job_rows
from worker.training import auto_settings, throughput_probe
from worker.training.auto_settings import choose_settings, pending
from worker.training.job_data import JobRows

CPU_RATES = {64: 17_800.0, 256: 2_745.0, 512: 1_050.0, 1024: 290.0}


@pytest.fixture
def preset_rates(monkeypatch):
    """Each preset's tokens/s, injected: the (d_model, batch tokens) timed, in order."""
    timed: list[tuple[int, int]] = []

    def measure(data, config, max_tokens, steps=3):
        timed.append((data.model_config.d_model, max_tokens))
        return CPU_RATES[data.model_config.d_model]

    monkeypatch.setattr(throughput_probe, "measure_throughput", measure)
    monkeypatch.setattr(auto_settings, "measure_throughput", measure)
    return timed


def _auto(corpus, fields: list[str], model: dict | None = None, **training) -> JobRows:
    """A job leaving its preset to the worker (ModelSpec's default), and `fields` to its 20-minute budget."""
    rows = job_rows(corpus, fields, max_minutes=20, **training)
    rows.job.model_config = ModelSpec(**(model or {})).model_dump(mode="json")
    rows.job.auto_settings = {"fields": [*fields, "preset"]}
    return rows


def test_a_job_that_leaves_its_preset_to_the_worker_gets_it_chosen_from_timed_candidates(
    larger_corpus, worker_env, preset_rates
):
    """Pass: tiny then small are timed (each once: the budget reuses the chosen one's timing), base is not (it could
    not win even 4 times faster than small's tokens/s suggest), big not (its steps would take over 5% of the budget);
    small is chosen and recorded, with the candidates' tokens/s, the predictions and why; the dropout follows it
    (many epochs over 8,000 pairs); the job's model section holds both, and nothing is left to choose."""
    worker_env(WORKER_TOKENS_PER_SECOND="0")
    rows = _auto(larger_corpus, ALL)
    assert pending(rows) == [*ALL, "preset"]
    data = choose_settings(rows, "cpu")
    auto = json.loads(json.dumps(rows.job.auto_settings))  # as the job's JSON column keeps it
    assert preset_rates == [(64, 2048), (256, 2048)]
    assert auto["chosen"]["preset"] == rows.job.model_config["preset"] == "small" and data.model_config.d_model == 256
    candidates = {c["preset"]: c for c in auto["preset_inputs"]["candidates"]}
    assert [candidates[p]["tokens_per_second"] for p in ("tiny", "small")] == [17_800.0, 2_745.0]
    assert candidates["base"]["throughput"] == candidates["big"]["throughput"] == "not timed"
    assert "even at 4x" in candidates["base"]["note"] and "over 5% of the budget" in candidates["big"]["note"]
    assert [p["preset"] for p in auto["preset_inputs"]["predictions"]] == ["tiny", "small"]
    assert (
        auto["reasons"]["preset"].startswith("small: predicted loss") and "base not timed" in auto["reasons"]["preset"]
    )
    assert auto["probe_seconds"] is not None and auto["inputs"]["tokens_per_second"] == 2_745.0  # small's, reused
    # The recorded inputs give the same choice again.
    recorded = {k: v for k, v in auto["preset_inputs"].items() if k != "predictions"}
    assert choose_size(SizeInputs(**recorded)).preset == "small"
    # Many epochs of 8,000 short pairs: small's 0.1 raised by the rule (past 11 epochs, toward 0.3 at 101).
    epochs = next(p["epochs"] for p in auto["preset_inputs"]["predictions"] if p["preset"] == "small")
    corpus_tokens = auto["preset_inputs"]["corpus_tokens"]
    dropout, _ = choose_dropout(0.1, candidates["small"]["parameters"], corpus_tokens, epochs)
    assert 0.1 < dropout < 0.3 and 11 < epochs < 101
    assert auto["chosen"]["dropout"] == rows.job.model_config["dropout"] == data.model_config.dropout == dropout
    assert "epochs" in auto["reasons"]["dropout"] and set(auto["fields"]) == {*ALL, "preset", "dropout", "lr_scale"}
    assert pending(rows) == []


def test_a_mixed_jobs_preset_and_dropout_see_its_distinct_rows(larger_corpus, worker_env, preset_rates):
    """A mix repeats its rows: the size law and the dropout rule must weigh the corpus behind them (its tokens
    once), as for the same rows given plainly, or 4 repeats look like 4 times the data and fewer epochs."""
    from model.data.mixing import Chain

    worker_env(WORKER_TOKENS_PER_SECOND="0")
    plain = _auto(larger_corpus, ["warmup_steps"])
    choose_settings(plain, "cpu")
    mixed = _auto(larger_corpus, ["warmup_steps"])
    mixed = JobRows(mixed.job, Chain([mixed.train_rows] * 4), mixed.valid_rows)
    choose_settings(mixed, "cpu")
    inputs = {name: rows.job.auto_settings["preset_inputs"] for name, rows in (("plain", plain), ("mixed", mixed))}
    assert inputs["mixed"]["training_pairs"] == inputs["plain"]["training_pairs"] == len(larger_corpus[0])
    assert inputs["mixed"]["corpus_tokens"] == inputs["plain"]["corpus_tokens"] > 0
    assert mixed.job.model_config["dropout"] == plain.job.model_config["dropout"]


def test_a_given_dropout_stays_and_a_given_preset_is_not_chosen(larger_corpus, worker_env, preset_rates):
    worker_env(WORKER_TOKENS_PER_SECOND="0")
    rows = _auto(larger_corpus, ["warmup_steps"], model={"dropout": 0.05})
    data = choose_settings(rows, "cpu")
    assert rows.job.model_config["dropout"] == data.model_config.dropout == 0.05
    assert "dropout" not in rows.job.auto_settings["chosen"] and "preset" in rows.job.auto_settings["chosen"]
    named = job_rows(larger_corpus, ["warmup_steps"])  # preset tiny, given
    assert "preset" not in pending(named)
    choose_settings(named, "cpu")
    assert "preset" not in named.job.auto_settings["chosen"] and named.job.model_config["preset"] == "tiny"


def test_a_job_bounded_by_steps_gets_its_preset_without_timing_anything(corpus, worker_env, preset_rates):
    """No max_minutes: the rule weighs the steps' tokens (2,000 of 4,096 by default), times nothing, and keeps the
    smallest preset on 900 pairs; without budget settings, the record holds the preset and its dropout alone."""
    rows = job_rows(corpus, [], max_minutes=None)
    rows.job.model_config = ModelSpec().model_dump(mode="json")
    assert pending(rows) == ["preset"]
    choose_settings(rows, "cpu")
    auto = rows.job.auto_settings
    assert preset_rates == [] and auto["chosen"]["preset"] == "tiny" and auto["probe_seconds"] is None
    assert "bounded by steps" in auto["reasons"]["preset"] and auto["fields"] == ["preset", "dropout"]
    assert auto.get("inputs") is None  # nothing chosen from a time budget


def test_a_pinned_throughput_is_the_smallest_presets_and_the_others_are_estimated(
    larger_corpus, worker_env, preset_rates
):
    worker_env(WORKER_TOKENS_PER_SECOND="3000")
    rows = _auto(larger_corpus, ALL)
    choose_settings(rows, "cpu")
    candidates = rows.job.auto_settings["preset_inputs"]["candidates"]
    assert preset_rates == []
    assert [c["throughput"] for c in candidates] == ["pinned", "estimated", "estimated", "estimated"]
    assert candidates[0]["tokens_per_second"] == 3000 > candidates[1]["tokens_per_second"]


def test_a_preset_the_device_cannot_hold_is_refused_by_the_worker_and_never_chosen(
    larger_corpus, worker_env, preset_rates, monkeypatch
):
    """Fault: a device of 1 GB. Pass: a job naming big fails before anything is timed, saying the memory big needs
    and the device's; one leaving the preset to the worker never considers big and base, which do not fit."""
    from model.train.config import TrainingError

    worker_env(WORKER_TOKENS_PER_SECOND="0")
    monkeypatch.setattr(auto_settings, "memory_limit_bytes", lambda device: 1024**3)
    named = job_rows(larger_corpus, ["warmup_steps"])
    named.job.model_config = ModelSpec(preset="big").model_dump(mode="json")
    with pytest.raises(
        TrainingError,
        match=r"preset 'big' needs an estimated \d+\.\d GB to train in fp32 at 4096 "
        r"tokens per batch; this worker's device has 1\.0 GB; choose a smaller preset",
    ):
        choose_settings(named, "cpu")
    assert preset_rates == []
    rows = _auto(larger_corpus, ALL)
    choose_settings(rows, "cpu")
    reason = rows.job.auto_settings["reasons"]["preset"]
    assert "base does not fit" in reason and "big does not fit" in reason
    assert {d_model for d_model, _ in preset_rates} <= {64, 256}


def test_a_job_whose_preset_the_worker_chose_trains_exactly_as_one_that_names_it(
    larger_corpus, worker_env, preset_rates, tmp_path
):
    """The preset the worker chose (small) gives the job the model section, budget settings, tokenizer, examples and
    weights, step for step, of the same job naming small: timing the candidates changes nothing the job trains
    (the probes' models are thrown away and the RNG is left as it was)."""
    from model.io.checkpoint import load_model
    from model.train.loop import train
    from worker.training.job_data import train_config

    worker_env(WORKER_TOKENS_PER_SECOND="0")
    chosen = _auto(larger_corpus, ALL, model={"dropout": 0.1})
    named = _auto(larger_corpus, ALL, model={"preset": "small", "dropout": 0.1})
    named.job.auto_settings = {"fields": ALL}
    data = {name: choose_settings(rows, "cpu") for name, rows in (("chosen", chosen), ("named", named))}
    assert chosen.job.auto_settings["chosen"]["preset"] == "small" and "preset" not in pending(named)
    assert chosen.job.model_config == named.job.model_config
    assert chosen.job.training_config == named.job.training_config
    assert data["chosen"].model_config == data["named"].model_config
    assert data["chosen"].tokenizer.fingerprint == data["named"].tokenizer.fingerprint
    assert [e.size for e in data["chosen"].train_examples] == [e.size for e in data["named"].train_examples]
    weights = {}
    for name, rows in (("chosen", chosen), ("named", named)):
        config = train_config(rows.job, "cpu")
        short = {"max_steps": 6, "max_minutes": None, "eval_every_minutes": None}
        config = type(config)(**{**config.model_dump(), **short})
        result = train(data[name], config, tmp_path / name)
        weights[name] = load_model(result.model_checkpoint)[0].state_dict()
    assert weights["chosen"].keys() == weights["named"].keys()
    assert all(torch.equal(weights["chosen"][k], weights["named"][k]) for k in weights["named"])
