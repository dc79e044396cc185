"""Spec of the training loop: stopping, callbacks, evaluation within its budget, checkpoints kept, best and
averaged."""

import json
import math
import random
from dataclasses import asdict

import pytest
import torch

from model.data.batching import Example, collate
from model.data.demo import grammar_sentences
from model.data.objectives import mask_spans
from model.data.special_tokens import EOS_ID, MASK_ID, PAD_ID
from model.io.checkpoint import load_checkpoint
from model.io.checkpoint_files import list_checkpoints, step_dir
from model.nn.config import ModelConfig
from model.train import trainer
from model.train import validation as evaluation
from model.train.config import TrainConfig
from model.train.events import Callbacks, CheckpointInfo, StepInfo
from model.train.loop import train
from model.train.prepare import prepare
from model.train.settings import DataSettings
from model.train.validation import masked_positions
from tests.model.train.support import quick_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py


# -- stopping and callbacks -----------------------------------------------------------------------------------


def test_max_steps_is_respected_and_step_reports_are_plain(reverse_data):
    infos: list[StepInfo] = []
    result = train(reverse_data, quick_config(max_steps=7), callbacks=Callbacks(on_step=infos.append))
    assert result.stop_reason == "max_steps" and result.step == 7
    assert [i.step for i in infos] == list(range(1, 8))
    assert all(i.total_steps == 7 for i in infos)
    assert infos[-1].eta_seconds == 0.0 and infos[0].eta_seconds > 0
    assert infos[4].lr == pytest.approx(TrainConfig(peak_lr=1e-3, warmup_steps=10).schedule(64).lr(5))
    for info in infos:
        assert info.tokens_per_second > 0 and info.grad_norm > 0 and math.isfinite(info.loss)
        json.dumps(asdict(info))  # plain numbers, ready for a database row
    assert result.losses == [i.loss for i in infos]


def test_should_stop_stops_within_one_step(reverse_data):
    steps: list[int] = []
    result = train(
        reverse_data,
        quick_config(max_steps=100),
        callbacks=Callbacks(on_step=lambda i: steps.append(i.step), should_stop=lambda: len(steps) >= 3),
    )
    assert result.stop_reason == "cancelled"
    assert steps == [1, 2, 3] and result.step == 3
    assert result.model_checkpoint is None  # a cancelled run spends no time on a final checkpoint


def test_max_minutes_is_respected(reverse_data):
    result = train(reverse_data, quick_config(max_steps=100_000, max_minutes=0.5 / 60))
    assert result.stop_reason == "max_minutes"
    assert 0 < result.step < 100_000
    assert result.elapsed < 0.5 + 10  # the last step and the final evaluation finish after the limit


def test_early_stopping_after_patience_evaluations_without_improvement(reverse_data, monkeypatch):
    losses = iter([3.0, 2.0, 2.5, 2.1, 2.0, 1.0])  # best at the 2nd evaluation, then 3 without improvement
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {"loss": next(losses)})
    evals: list[tuple[int, dict]] = []
    result = train(
        reverse_data,
        quick_config(max_steps=100, eval_every=2, early_stopping_patience=3),
        callbacks=Callbacks(on_eval=lambda step, m: evals.append((step, m))),
    )
    assert result.stop_reason == "early_stopping"
    assert result.step == 10 and [s for s, _ in evals] == [2, 4, 6, 8, 10]
    assert result.best_valid_loss == 2.0 and result.best_step == 4


def test_eval_every_minutes_evaluates_by_training_time_whatever_the_pace(reverse_data, monkeypatch):
    """A clock where each step takes 25 s of training: with eval_every_minutes=1 and eval_every out of reach, an
    evaluation falls on the first step at least 60 s after the last one (steps 3, 6, 9), and the last step is
    still evaluated; without it, only the last."""
    updates = [0]
    real_step = trainer.Trainer._step

    def counted_step(self, *args, **kwargs):
        updates[0] += 1
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(trainer.Trainer, "_step", counted_step)
    monkeypatch.setattr(trainer, "elapsed_clock", lambda before: lambda: before + 25.0 * updates[0])
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {"loss": 1.0})
    steps: list[int] = []
    train(
        reverse_data,
        quick_config(max_steps=10, eval_every_minutes=1),
        callbacks=Callbacks(on_eval=lambda s, m: steps.append(s)),
    )
    assert steps == [3, 6, 9, 10]
    steps.clear()
    updates[0] = 0
    train(reverse_data, quick_config(max_steps=10), callbacks=Callbacks(on_eval=lambda s, m: steps.append(s)))
    assert steps == [10]


def test_evaluation_reports_validation_loss_perplexity_bleu_and_chrf(reverse_data):
    evals: list[tuple[int, dict]] = []
    train(
        reverse_data,
        quick_config(max_steps=4, eval_every=2),
        callbacks=Callbacks(on_eval=lambda s, m: evals.append((s, m))),
    )
    assert [s for s, _ in evals] == [2, 4]
    metrics = evals[-1][1]
    assert {"loss", "perplexity", "token_accuracy", "bleu", "chrf", "exact_match"} <= set(metrics)
    assert metrics["perplexity"] == pytest.approx(math.exp(metrics["loss"]))
    assert 0 <= metrics["bleu"] <= 100 and 0 <= metrics["chrf"] <= 100


def test_evaluation_stays_within_its_budget_of_wall_clock_time(reverse_data, monkeypatch):
    """An evaluation longer than a step, due every step: with a 20% budget some are skipped, the time spent
    stays within the budget (the first evaluation aside), the last step is still evaluated, and eval_seconds is
    the running total reported with each evaluation. How many fit depends on the step's time on this machine
    (a loaded one fits more), so the count is bounded by the budget over the measured time."""
    import time as time_module

    def slow_evaluate(*args, **kwargs):
        time_module.sleep(0.05)
        return {"loss": 1.0}

    monkeypatch.setattr(trainer, "evaluate", slow_evaluate)
    evals: list[tuple[int, dict]] = []
    result = train(
        reverse_data,
        quick_config(max_steps=60, eval_every=1, eval_budget=0.2),
        callbacks=Callbacks(on_eval=lambda s, m: evals.append((s, dict(m)))),
    )
    steps = [s for s, _ in evals]
    assert steps[0] == 1 and steps[-1] == 60 and 2 < len(steps) < 60
    assert len(steps) <= 2 + 0.2 * result.elapsed / 0.05
    spent = evals[-1][1]["eval_seconds"]
    assert spent == pytest.approx(0.05 * len(steps), rel=0.5)
    assert spent <= 0.2 * result.elapsed + 0.05 + 0.02
    assert [m["eval_seconds"] for _, m in evals] == sorted(m["eval_seconds"] for _, m in evals)


def test_without_a_budget_every_due_evaluation_runs(reverse_data, monkeypatch):
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {"loss": 1.0})
    evals: list[int] = []
    train(
        reverse_data,
        quick_config(max_steps=12, eval_every=3, eval_budget=None),
        callbacks=Callbacks(on_eval=lambda s, m: evals.append(s)),
    )
    assert evals == [3, 6, 9, 12]


def test_denoising_evaluation_reports_masked_token_accuracy():
    data = prepare(
        "denoising",
        grammar_sentences(200, seed=0),
        preset="tiny",
        vocab_size=450,
        settings=DataSettings(max_length=16, noise="token"),
        seed=0,
    )
    evals: list[dict] = []
    train(data, quick_config(max_steps=2, eval_every=2), callbacks=Callbacks(on_eval=lambda s, m: evals.append(m)))
    assert "masked_token_accuracy" in evals[0] and "bleu" not in evals[0]


class WrongAtMasks(torch.nn.Module):
    """Predicts every next target token, except at the positions hidden behind <mask>: there it says <mask>."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.config = ModelConfig.from_preset("tiny", vocab_size)
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        B, T = tgt_in.shape
        logits = torch.zeros(B, T, self.config.vocab_size)
        for b in range(B):
            tgt = [t for t in tgt_in[b, 1:].tolist() if t != PAD_ID] + [EOS_ID]  # tgt_out without padding
            hidden = masked_positions([t for t in src[b].tolist() if t != PAD_ID], tgt, MASK_ID)
            for j, t in enumerate(tgt):
                logits[b, j, MASK_ID if j in hidden else t] = 1.0
        return logits


def test_masked_token_accuracy_counts_exactly_the_hidden_positions():
    rng = random.Random(0)
    examples = [
        Example(*mask_spans([rng.randint(5, 30) for _ in range(rng.randint(2, 15))], MASK_ID, rng, 0.3))
        for _ in range(20)
    ]
    metrics = evaluation.evaluate(WrongAtMasks(32), "denoising", [collate(examples[:9]), collate(examples[9:])], None)
    n_tokens = sum(len(e.tgt_ids) + 1 for e in examples)
    n_hidden = sum(len(e.tgt_ids) - len(e.src_ids) + e.src_ids.count(MASK_ID) for e in examples)
    assert metrics["masked_token_accuracy"] == 0.0
    assert metrics["token_accuracy"] == pytest.approx(1 - n_hidden / n_tokens)


def test_checkpoints_rotate_keep_the_best_and_average_the_last(reverse_data, tmp_path, monkeypatch):
    losses = iter([1.0, 2.0, 3.0, 4.0, 5.0])  # the first checkpoint stays the best
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {"loss": next(losses, 9.0)})
    infos: list[CheckpointInfo] = []
    result = train(
        reverse_data,
        quick_config(max_steps=10, checkpoint_every=2, keep_checkpoints=2, average_last=2),
        tmp_path,
        Callbacks(on_checkpoint=infos.append),
    )
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000002", "step-00000008", "step-00000010"]
    assert [(i.step, i.kind) for i in infos] == [
        (2, "step"),
        (4, "step"),
        (6, "step"),
        (8, "step"),
        (10, "step"),
        (10, "averaged"),
    ]
    assert result.best_checkpoint == str(step_dir(tmp_path, 2))
    assert result.averaged_checkpoint == result.model_checkpoint == str(tmp_path / "averaged-00000010")
    assert load_checkpoint(result.averaged_checkpoint).meta["averaged_from"] == ["step-00000008", "step-00000010"]
    for info in infos:
        json.dumps(asdict(info))
        assert len(info.sha256) == 64 and info.size_bytes > 0
