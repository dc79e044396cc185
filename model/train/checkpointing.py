"""The step checkpoints of one training run: written with the trainer's progress so that the run can resume from
any of them, the oldest rotated away, the last few averaged at the end (Sec. 6.1), each reported to the caller
(Callbacks.on_checkpoint). The files themselves are model/io/'s; the loop (model/train/trainer.py) decides when.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from model.data.tokenizer import Tokenizer
from model.io.averaging import write_averaged_checkpoint
from model.io.checkpoint import Checkpoint, save_checkpoint
from model.io.checkpoint_files import checkpoint_sha256, list_checkpoints, rotate_checkpoints, step_dir, step_of
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train.config import TrainConfig, TrainingError
from model.train.events import Callbacks, CheckpointInfo
from model.train.pair_validation import metric_key


def criterion(metrics: dict[str, float], best_metric: str, best_pair: str | None = None) -> float | None:
    """What orders evaluations (lower is better): the validation loss, or minus its BLEU or chrF, of one language
    pair (best_pair) or of the run (a model of several pairs: their mean); None when the evaluation did not
    measure it."""
    value = metrics.get(metric_key(best_metric, best_pair))
    if value is None:
        return None
    return float(value) if best_metric == "loss" else -float(value)


class Checkpoints:
    """The checkpoints of a run under root/step-NNNNNNNN (root None: the run writes none, e.g. on a data-parallel
    rank other than 0). Keeps the paths of the best (the lowest validation loss among those evaluated at their own
    step) and the last one written or resumed from.

    The best is chosen among the checkpoints, not the evaluations: evaluations fall between checkpoints (every 200
    updates against every 500 by default), and a run whose best evaluation had no checkpoint of its own once served
    an older checkpoint that had been the best when written (step 500 at loss 2.95 where step 1000, written later,
    had 2.65).
    """

    def __init__(
        self,
        root: Path | None,
        model: Transformer,
        tokenizer: Tokenizer,
        objective: str,
        optimizer: torch.optim.Optimizer,
        config: TrainConfig,
        callbacks: Callbacks,
        meta: dict[str, Any],
    ) -> None:
        self.root = root
        self.model, self.tokenizer, self.objective, self.optimizer = model, tokenizer, objective, optimizer
        self.config, self.callbacks, self.meta = config, callbacks, meta
        self.best: str | None = None
        self.best_loss: float | None = None  # the best one's criterion (its validation loss, or minus its BLEU)
        self.last: str | None = None
        self.last_step = 0  # the step of the last one

    def due(self, step: int) -> bool:
        """Whether a checkpoint is due after `step` (every checkpoint_every steps)."""
        return self.root is not None and step % self.config.checkpoint_every == 0

    def lacks(self, step: int) -> bool:
        """Whether this run writes checkpoints and has none of `step` yet (the end of a run writes one)."""
        return self.root is not None and self.last_step != step

    def write(
        self, step: int, metrics: dict[str, float], evaluated: bool, trainer_state: Callable[[], dict[str, Any]]
    ) -> None:
        """Checkpoint the model and optimizer at `step`, then delete the oldest beyond keep_checkpoints (never the
        best one). `evaluated`: metrics are this step's evaluation, so the checkpoint may be the best. trainer_state
        is called once this checkpoint is the best, if it is, so that it names itself."""
        assert self.root is not None
        path = step_dir(self.root, step)
        loss = criterion(metrics, self.config.best_metric, self.config.best_pair) if evaluated else None
        if loss is not None and (self.best_loss is None or loss < self.best_loss):
            self.best, self.best_loss = str(path), float(loss)
        save_checkpoint(
            path,
            self.model,
            self.tokenizer,
            self.objective,
            step=step,
            metrics=metrics,
            optimizer=self.optimizer,
            trainer_state=trainer_state(),
            extra_meta={"train_config": self.config.to_dict(), **self.meta},
        )
        self.last, self.last_step = str(path), step
        if self.config.keep_checkpoints is not None:
            rotate_checkpoints(self.root, self.config.keep_checkpoints, keep=self.best)
        self._report(step, path, metrics, "step")

    @property
    def best_step(self) -> int | None:
        """The best checkpoint's step."""
        return step_of(self.best) if self.best is not None else None

    def average(self, step: int, score: Callable[[Transformer], dict[str, float]], device: torch.device) -> str | None:
        """The average of the last average_last step checkpoints (Sec. 6.1), written as averaged-NNNNNNNN with
        the metrics score() gives it; None when there are fewer than two to average."""
        n = self.config.average_last
        if n < 2 or self.root is None:
            return None
        dirs = list_checkpoints(self.root)[-n:]
        if len(dirs) < 2:
            return None
        measured: dict[str, float] = {}

        def keep_score(averaged: Transformer) -> dict[str, float]:
            measured.update(score(averaged))
            return measured

        path = write_averaged_checkpoint(dirs, self.root / f"averaged-{step:08d}", keep_score, device)
        self._report(step, path, measured, "averaged")
        return str(path)

    def resumed(self, checkpoint: Path, step: int, best_name: str | None, best_loss: float | None) -> None:
        """The run continues from `checkpoint`; best_name is the best one's directory name, as trainer_state
        records it (a name, not a path: another worker may mount the artifact store elsewhere), best_loss its
        validation loss."""
        root = self.root
        self.best = str(root / best_name) if best_name and root is not None and (root / best_name).is_dir() else None
        self.best_loss = best_loss if self.best is not None else None
        self.last, self.last_step = str(checkpoint), step

    def _report(self, step: int, path: Path, metrics: dict[str, float], kind: str) -> None:
        if self.callbacks.on_checkpoint is not None:
            size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
            self.callbacks.on_checkpoint(
                CheckpointInfo(step, str(path), checkpoint_sha256(path), size, dict(metrics), kind)
            )


def resumable_state(
    ckpt: Checkpoint, objective: str, model_config: ModelConfig, tokenizer: Tokenizer
) -> dict[str, Any]:
    """The trainer state of `ckpt`; TrainingError unless it is a step checkpoint of a run with this objective,
    model and tokenizer."""
    state = ckpt.trainer_state
    if state is None or ckpt.optimizer_state is None:
        raise TrainingError(f"{ckpt.path} is a weights-only ({ckpt.meta.get('kind')}) checkpoint; it cannot be resumed")
    if ckpt.objective != objective:
        raise TrainingError(f"{ckpt.path} was trained for {ckpt.objective!r}, not {objective!r}")
    if ckpt.model_config != model_config:
        raise TrainingError(f"{ckpt.path} has model config {ckpt.model_config}, not {model_config}")
    if ckpt.tokenizer.fingerprint != tokenizer.fingerprint:
        raise TrainingError(f"{ckpt.path} has another tokenizer; prepare the data with the checkpoint's tokenizer")
    return state
