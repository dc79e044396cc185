"""Spec of resuming: a resumed run is identical to an uninterrupted one, a preemption loses no step, a checkpoint of
another objective is refused."""

import shutil

import pytest
import torch

from model.data.demo import grammar_sentences, reverse_task
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import load_checkpoint
from model.io.checkpoint_files import list_checkpoints, step_dir
from model.train.config import TrainingError
from model.train.events import Callbacks, StepInfo
from model.train.loop import train
from model.train.prepare import PreparedData, prepare
from model.train.settings import DataSettings
from tests.model.train.support import quick_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py


# -- exact resume ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("objective", ["translation", "denoising"])
def test_resumed_training_is_identical_to_an_uninterrupted_run(objective, tmp_path):
    """Train 12 steps with a checkpoint at 5; a fresh run resumed from it repeats steps 6-12 bit for bit.

    Dropout is on, epochs end mid-run and updates accumulate two micro-batches, so the batch position,
    the per-epoch noise and the RNG states must all be restored.
    """
    if objective == "translation":
        rows = reverse_task(120, vocab=12, min_len=2, max_len=8, seed=0)
    else:
        rows = grammar_sentences(120, seed=0)
    overrides = {"dropout": 0.2, "attention_dropout": 0.1}

    def data(tokenizer: Tokenizer | None = None) -> PreparedData:
        return prepare(
            objective,
            rows,
            preset="tiny",
            model_overrides=overrides,
            vocab_size=300,
            settings=DataSettings(max_length=40),
            seed=1,
            tokenizer=tokenizer,
        )

    cfg = quick_config(max_steps=12, checkpoint_every=5, eval_every=5, grad_accum_steps=2, max_tokens_per_batch=128)
    first: list[StepInfo] = []
    train(data(), cfg, tmp_path / "a", Callbacks(on_step=first.append))
    assert first[-1].epoch >= 1  # the run crossed an epoch boundary

    shutil.copytree(step_dir(tmp_path / "a", 5), step_dir(tmp_path / "b", 5))
    second: list[StepInfo] = []
    result = train(
        data(Tokenizer.load(step_dir(tmp_path / "b", 5))), cfg, tmp_path / "b", Callbacks(on_step=second.append)
    )
    assert [i.step for i in second] == list(range(6, 13))
    assert [i.loss for i in second] == [i.loss for i in first[5:]]
    assert [i.grad_norm for i in second] == [i.grad_norm for i in first[5:]]
    a = load_checkpoint(step_dir(tmp_path / "a", 12)).model_state
    b = load_checkpoint(result.last_checkpoint).model_state
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_preemption_checkpoints_the_current_step_and_the_resumed_run_loses_no_step(tmp_path):
    """Fault: the process is told to go away at step 7 (checkpoints every 5). Pass: a checkpoint of step 7 is
    written at once (no final evaluation, no averaging), and a run resumed from it repeats steps 8-12 exactly
    as an uninterrupted run does: no step is lost or repeated."""
    rows = reverse_task(120, vocab=12, min_len=2, max_len=8, seed=0)

    def data(tokenizer: Tokenizer | None = None) -> PreparedData:
        return prepare(
            "translation",
            rows,
            preset="tiny",
            model_overrides={"dropout": 0.2},
            vocab_size=300,
            settings=DataSettings(max_length=40),
            seed=1,
            tokenizer=tokenizer,
        )

    cfg = quick_config(max_steps=12, checkpoint_every=5, eval_every=5, max_tokens_per_batch=128, average_last=2)
    whole: list[StepInfo] = []
    train(data(), cfg, tmp_path / "whole", Callbacks(on_step=whole.append))

    first: list[StepInfo] = []
    evals: list[int] = []
    result = train(
        data(),
        cfg,
        tmp_path / "cut",
        Callbacks(on_step=first.append, on_eval=lambda s, _: evals.append(s), should_preempt=lambda: len(first) >= 7),
    )
    assert result.stop_reason == "preempted" and result.step == 7
    assert evals == [5] and result.averaged_checkpoint is None
    assert [p.name for p in list_checkpoints(tmp_path / "cut")] == [
        step_dir(tmp_path, 5).name,
        step_dir(tmp_path, 7).name,
    ]
    assert result.last_checkpoint == str(step_dir(tmp_path / "cut", 7))

    second: list[StepInfo] = []
    train(data(Tokenizer.load(result.last_checkpoint)), cfg, tmp_path / "cut", Callbacks(on_step=second.append))
    assert [i.step for i in second] == list(range(8, 13))
    assert [i.loss for i in first + second] == [i.loss for i in whole]


def test_resume_refuses_a_checkpoint_of_another_objective(reverse_data, tmp_path):
    train(reverse_data, quick_config(max_steps=2, checkpoint_every=2), tmp_path)
    data = prepare("denoising", grammar_sentences(50), preset="tiny", tokenizer=reverse_data.tokenizer)
    with pytest.raises(TrainingError, match="translation"):
        train(data, quick_config(max_steps=4), tmp_path)
