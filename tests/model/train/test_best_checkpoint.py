"""Which checkpoint a run serves: the best evaluation's. An evaluation that beats every earlier one between
checkpoints writes a checkpoint at once (model/train/trainer.py, as Marian's --keep-best), so the best measured is
the one kept (model/train/checkpointing.py); kept across a resume; named in the model's source by its own step."""

from __future__ import annotations

import pytest

from model.data.demo import reverse_task
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import load_checkpoint
from model.io.checkpoint_files import step_dir
from model.train import trainer
from model.train.config import TrainConfig
from model.train.events import Callbacks, StepInfo
from model.train.loop import train
from model.train.prepare import PreparedData, prepare
from model.train.settings import MAX_KEEP_CHECKPOINTS, DataSettings

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py


@pytest.fixture(scope="module")
def data() -> PreparedData:
    pairs = reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0)
    return prepare("translation", pairs, preset="tiny", vocab_size=300, settings=DataSettings(max_length=16), seed=0)


def config(**overrides) -> TrainConfig:
    base = dict(
        max_steps=8,
        max_tokens_per_batch=256,
        warmup_steps=10,
        peak_lr=1e-3,
        eval_every=2,
        checkpoint_every=4,
        eval_max_sentences=8,
        keep_checkpoints=MAX_KEEP_CHECKPOINTS,
        seed=0,
        eval_budget=None,
    )
    return TrainConfig(**{**base, **overrides})


def losses_by_step(monkeypatch: pytest.MonkeyPatch, by_step: dict[int, float]) -> None:
    """Each evaluation's loss, by the step it runs at."""

    def evaluate(model, objective, batches, tokenizer, examples, precision):
        return {"loss": by_step[evaluations.pop(0)]}

    evaluations = sorted(by_step)
    monkeypatch.setattr(trainer, "evaluate", evaluate)


def test_a_best_evaluation_between_checkpoints_is_written_and_served(data, tmp_path, monkeypatch):
    """Fault: the best evaluation (step 6) falls between checkpoints (every 4 updates), after a checkpoint that was
    the best when written (step 4, loss 2.5), and the last (step 8, 1.5) is better than step 4 but not step 6. Pass:
    step 6 is written when evaluated and served; step 2 (the first evaluation, a best too) was written at once."""
    losses_by_step(monkeypatch, {2: 3.0, 4: 2.5, 6: 1.0, 8: 1.5})
    result = train(data, config(), tmp_path)
    assert result.best_step == 6 and result.best_valid_loss == 1.0
    assert result.best_checkpoint == result.model_checkpoint == str(step_dir(tmp_path, 6))
    assert result.best_checkpoint_step == 6
    assert all(step_dir(tmp_path, step).is_dir() for step in (2, 4, 6, 8))
    state = load_checkpoint(step_dir(tmp_path, 8)).trainer_state
    assert state is not None and state["best_checkpoint"] == "step-00000006" and state["best_checkpoint_loss"] == 1.0


def test_an_evaluation_that_is_no_better_writes_no_checkpoint(data, tmp_path, monkeypatch):
    """Only a new best is written between checkpoints: steps 2 and 6 (losses rising after step 2) leave none."""
    losses_by_step(monkeypatch, {2: 1.0, 4: 2.0, 6: 3.0, 8: 4.0})
    result = train(data, config(), tmp_path)
    assert result.best_checkpoint == result.model_checkpoint == str(step_dir(tmp_path, 2))
    assert step_dir(tmp_path, 2).is_dir() and not step_dir(tmp_path, 6).exists()


def test_a_later_checkpoint_with_a_higher_loss_leaves_the_best_and_a_resume_keeps_it(tmp_path, monkeypatch):
    """Evaluations every 3 updates, checkpoints every 4: step 3 (loss 1.0, written as it is evaluated) is the best
    checkpoint; step 4's (2.0) does not replace it, nor does the evaluation of step 6 (1.5, no checkpoint). The run
    is preempted after step 7, whose checkpoint has no evaluation of its own. Resumed in a new run, the best stays
    step 3 at 1.0, so step 8 (2.2) does not replace it."""
    rows = reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0)

    def data(tokenizer: Tokenizer | None = None) -> PreparedData:
        return prepare(
            "translation", rows, preset="tiny", vocab_size=300, settings=DataSettings(max_length=16), seed=0,
            tokenizer=tokenizer,
        )  # fmt: skip

    losses_by_step(monkeypatch, {3: 1.0, 4: 2.0, 6: 1.5})
    steps: list[StepInfo] = []
    preempt = Callbacks(on_step=steps.append, should_preempt=lambda: len(steps) >= 7)
    first = train(data(), config(eval_every=3), tmp_path, preempt)
    assert first.stop_reason == "preempted" and first.last_checkpoint == str(step_dir(tmp_path, 7))
    assert first.best_checkpoint == str(step_dir(tmp_path, 3)) and first.best_checkpoint_step == 3
    assert not step_dir(tmp_path, 6).exists()
    losses_by_step(monkeypatch, {8: 2.2})
    resumed = train(data(Tokenizer.load(first.last_checkpoint)), config(eval_every=3), tmp_path)
    assert resumed.step == 8 and resumed.best_step == 3 and resumed.best_valid_loss == 1.0
    assert resumed.best_checkpoint == resumed.model_checkpoint == str(step_dir(tmp_path, 3))
    assert resumed.best_checkpoint_step == 3


def test_best_metric_chrf_serves_the_highest_chrf_and_early_stopping_follows_it(data, tmp_path, monkeypatch):
    """Fault: the loss keeps rising while the translations get better (what adapting to corrections does: the mix's
    loss rises from the first evaluation). Pass: with best_metric chrf the run serves the checkpoint of the highest
    chrF (step 8), not the lowest loss (step 4); the loss alone would have stopped it early."""
    scores = {2: (2.0, 30.0), 4: (1.9, 35.0), 6: (2.2, 38.0), 8: (2.4, 41.0), 10: (2.6, 40.0), 12: (2.8, 39.0)}

    def evaluate(model, objective, batches, tokenizer, examples, precision):
        loss, chrf = scores[evaluations.pop(0)]
        return {"loss": loss, "chrf": chrf, "bleu": chrf / 2}

    evaluations = sorted(scores)
    monkeypatch.setattr(trainer, "evaluate", evaluate)
    result = train(data, config(max_steps=12, best_metric="chrf", early_stopping_patience=2), tmp_path)
    assert result.stop_reason == "early_stopping" and result.step == 12  # chrF fell twice after step 8
    assert result.model_checkpoint == result.best_checkpoint == str(step_dir(tmp_path, 8))
    assert result.best_valid_loss == 1.9 and result.best_step == 4  # the loss is still reported as it was
    evaluations[:] = sorted(scores)
    by_loss = train(data, config(max_steps=12, early_stopping_patience=2), tmp_path / "loss")
    assert by_loss.stop_reason == "early_stopping" and by_loss.step == 8
    assert by_loss.model_checkpoint == str(step_dir(tmp_path / "loss", 4))
