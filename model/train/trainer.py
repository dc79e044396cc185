"""The training loop as in the paper (Sec. 5): updates until a step, time or early-stopping limit, with
validation loss and BLEU/chrF, checkpoints and checkpoint averaging (Sec. 6.1).

The pieces it runs are elsewhere: the batches, made ready ahead in a thread, in model/train/loader.py; one update
in model/train/step.py (Adam, the schedule of Eq. 3, label smoothing, accumulation, clipping), evaluation in
model/train/validation.py, the run's checkpoints in model/train/checkpointing.py. Trainer only decides when to
stop, evaluate and checkpoint; progress leaves through Callbacks with plain dataclasses (model/train/events.py),
so a caller (the Celery worker) can write them to a database. model/train/loop.py (train) builds one and runs it.

Trainer.restore continues a run from a step checkpoint; on CPU the resumed run is bit-identical to an uninterrupted
one (weights, Adam moments, schedule, batch position and RNG states are all restored).
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from model.data.batching import Batch, Example, TokenBatcher, ids_list
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import OBJECTIVES, Checkpoint, load_checkpoint
from model.io.checkpoint_tensors import load_optimizer_state
from model.nn.compile import compile_layers, eager_on_failure
from model.nn.transformer import Transformer
from model.train.checkpointing import Checkpoints, criterion, resumable_state
from model.train.config import StopReason, TrainConfig, TrainingError
from model.train.events import Callbacks, TrainResult
from model.train.loader import Loader, pin_for
from model.train.pair_validation import evaluate_sets, validation_sets
from model.train.recorders import TrainingProbes
from model.train.rng_state import capture_rng_state, restore_rng_state
from model.train.step import (
    PendingStep,
    autocast_for,
    build_optimizer,
    eager_batch_loss,
    enable_tf32,
    update_on_device,
)
from model.train.step_graph import StepGraph, compile_step, run_or_eager
from model.train.step_log import StepLog
from model.train.validation import evaluate

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

    from model.train.distributed import DistContext

logger = logging.getLogger(__name__)


def elapsed_clock(before: float) -> Callable[[], float]:
    """Seconds of training so far: `before` (the attempts this one resumes) plus the wall-clock time since now."""
    start = time.monotonic()
    return lambda: before + time.monotonic() - start


class Trainer:
    """Runs updates until max_steps, max_minutes, early stopping or should_stop(); evaluates and checkpoints.

    Steps count optimizer updates from 1. Evaluation runs every eval_every steps, at every checkpoint and at the
    end; checkpoints go to checkpoint_root/step-NNNNNNNN every checkpoint_every steps and at the end.
    """

    def __init__(
        self,
        model: Transformer,
        tokenizer: Tokenizer,
        objective: str,
        train_examples: Sequence[Example] | Callable[[int], Sequence[Example]],
        valid_examples: Sequence[Example],
        config: TrainConfig,
        checkpoint_root: str | Path | None = None,
        callbacks: Callbacks | None = None,
        meta: dict[str, Any] | None = None,
        dist: DistContext | None = None,
        valid_groups: Sequence[str] = (),
    ) -> None:
        if objective not in OBJECTIVES:
            raise TrainingError(f"objective={objective!r} must be one of {OBJECTIVES}")
        self.device = torch.device(config.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise TrainingError(f"device={config.device!r} but no CUDA device is available")
        self.model = model.to(self.device).train()
        self.tokenizer, self.objective, self.config = tokenizer, objective, config
        self.dist, self.world_size = dist, dist.world_size if dist is not None else 1
        self.is_main = dist is None or dist.is_main  # data-parallel: rank 0 alone evaluates, checkpoints, calls back
        self.callbacks = (callbacks or Callbacks()) if self.is_main else Callbacks()
        self.optimizer = build_optimizer(model, config)
        self.checkpoints = Checkpoints(
            Path(checkpoint_root) if checkpoint_root is not None and self.is_main else None,
            self.model,
            tokenizer,
            objective,
            self.optimizer,
            config,
            self.callbacks,
            meta or {},
        )
        self.schedule = config.schedule(model.config.d_model)
        self.precision = config.resolved_precision
        # training.compile: each micro-batch as one compiled graph; data-parallel, each layer compiled (DDP's
        # gradient buckets would split the whole graph). The validation decoding runs compiled layers only then.
        self.step_graph: StepGraph | None = None
        if config.compile and dist is None:
            self.step_graph = compile_step(self.model, config.label_smoothing, self.precision)
        elif config.compile:
            compile_layers(self.model)
        enable_tf32(self.device)
        self.autocast = autocast_for(self.device, self.precision)
        self.batcher = TokenBatcher(train_examples, config.max_tokens_per_batch, shuffle=True, seed=config.seed)
        try:
            if len(self.batcher) == 0:
                raise TrainingError("there are no training examples")
        except ValueError as e:  # an example larger than max_tokens_per_batch
            raise TrainingError(f"max_tokens_per_batch={config.max_tokens_per_batch} is too small: {e}") from e
        self.valid_examples = list(valid_examples)
        if not self.valid_examples:
            raise TrainingError("there are no validation examples")
        # Several pairs (valid_groups names each example's): each pair's metrics and their mean (pair_validation.py).
        try:
            self.valid_sets = validation_sets(
                self.valid_examples,
                valid_groups,
                config.max_tokens_per_batch,
                config.eval_max_sentences,
                translate=objective == "translation",
            )
        except ValueError as e:
            raise TrainingError(str(e)) from e
        if config.best_pair is not None and config.best_pair not in self.valid_sets:
            raise TrainingError(
                f"best_pair={config.best_pair!r} is not one of the pairs validated: {sorted(self.valid_sets)}"
            )
        # Progress: everything below goes into trainer_state.json.
        self.step = 0
        self.elapsed = 0.0
        self.best_valid_loss: float | None = None
        self.best_step: int | None = None
        self.best_score: float | None = None  # the best evaluation by best_metric (lower is better): early stopping
        self.new_best = False  # the latest evaluation set best_score (rank 0 alone evaluates)
        self.bad_evals = 0
        self.last_eval_step = 0
        self.eval_seconds = 0.0  # wall-clock spent evaluating, summed over resumed attempts (part of elapsed)
        self._last_eval_seconds: float | None = None
        self._last_eval_elapsed = 0.0  # training seconds at the last evaluation (eval_every_minutes counts from it)
        self.metrics: dict[str, float] = {}
        self.ddp: DistributedDataParallel | None = None
        self.probes = TrainingProbes(
            self.model, tokenizer, config, self.callbacks, lambda: self.batcher.examples(0), self.valid_examples
        )
        if dist is not None:
            if dist.device != self.device:
                raise TrainingError(f"device={config.device!r} is not rank {dist.rank}'s device {dist.device}")
            dist.check_same(
                "model, tokenizer, training data or settings",
                {
                    "model": model.config.to_dict(),
                    "tokenizer": tokenizer.fingerprint,
                    "objective": objective,
                    "config": {k: v for k, v in config.to_dict().items() if k != "device"},
                    "batches": self.batcher.batch_indices(0),
                    "valid": len(self.valid_examples),
                    "sample": [(ids_list(e.src_ids), ids_list(e.tgt_ids)) for e in self.batcher.examples(0)[:64]],
                },
            )
            self.ddp = dist.wrap(self.model, functools.partial(eager_batch_loss, smoothing=config.label_smoothing))

    # -- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "elapsed_seconds": self.elapsed,
            "best_valid_loss": self.best_valid_loss,
            "best_step": self.best_step,
            "best_score": self.best_score,
            "bad_evals": self.bad_evals,
            "last_eval_step": self.last_eval_step,
            "eval_seconds": self.eval_seconds,
            "metrics": self.metrics,
            # A name, not a path: another worker may mount the artifact store elsewhere.
            "best_checkpoint": Path(self.checkpoints.best).name if self.checkpoints.best else None,
            "best_checkpoint_loss": self.checkpoints.best_loss,
            "batcher": self.batcher.state_dict(),
            "schedule": self.schedule.state_dict(),
            "train_config": self.config.to_dict(),
            "rng": capture_rng_state(),
        }

    def restore(self, checkpoint: str | Path | Checkpoint) -> None:
        """Continue from a step checkpoint: weights, optimizer, schedule, batch position, RNG, counters."""
        ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
        state = resumable_state(ckpt, self.objective, self.model.config, self.tokenizer)
        assert ckpt.optimizer_state is not None  # resumable_state checked
        self.model.load_state_dict(ckpt.model_state)
        load_optimizer_state(self.optimizer, self.model, ckpt.optimizer_state)
        try:
            self.batcher.load_state_dict(state["batcher"])
        except ValueError as e:
            raise TrainingError(f"{ckpt.path}: the batch position does not fit this run: {e}") from e
        self.step, self.elapsed = int(state["step"]), float(state["elapsed_seconds"])
        self.best_valid_loss, self.best_step = state["best_valid_loss"], state["best_step"]
        self.best_score = state.get("best_score", self.best_valid_loss)  # older checkpoints: the loss decided
        self.bad_evals, self.last_eval_step = int(state["bad_evals"]), int(state["last_eval_step"])
        self.eval_seconds = float(state.get("eval_seconds", 0.0))  # absent in checkpoints of older versions
        self._last_eval_elapsed = self.elapsed  # a resumed run's clock for eval_every_minutes starts here
        self.metrics = dict(state["metrics"])
        # Checkpoints of older versions lack the best one's loss: it was the best evaluation's when written.
        best_loss = state.get("best_checkpoint_loss", state["best_valid_loss"])
        self.checkpoints.resumed(ckpt.path, self.step, state["best_checkpoint"], best_loss)
        restore_rng_state(state["rng"])
        logger.info("resumed from %s at step %d", ckpt.path, self.step)

    # -- loop -------------------------------------------------------------------------------------------------
    STOP_ORDER: tuple[StopReason, ...] = ("early_stopping", "max_steps", "cancelled", "preempted", "max_minutes")

    def _stop_reason(self, elapsed: Callable[[], float]) -> StopReason | None:
        """The first reason to stop now, in STOP_ORDER."""
        cfg = self.config
        if cfg.early_stopping_patience is not None and self.bad_evals >= cfg.early_stopping_patience:
            return "early_stopping"
        if self.step >= cfg.max_steps:
            return "max_steps"
        if self.callbacks.should_stop is not None and self.callbacks.should_stop():
            return "cancelled"
        if self.callbacks.should_preempt is not None and self.callbacks.should_preempt():
            return "preempted"
        if cfg.max_minutes is not None and elapsed() >= cfg.max_minutes * 60:
            return "max_minutes"
        if self.step > 0 and self.callbacks.should_finish is not None and self.callbacks.should_finish():
            return "max_minutes"  # a budget outside the run, spent: it ends as its own would
        return None

    def _agreed(self, reason: StopReason | None) -> StopReason | None:
        """Data-parallel: every rank stops at the same step, for the first reason in STOP_ORDER that any rank saw
        (rank 0 alone polls the callbacks and evaluates for early stopping)."""
        return reason if self.dist is None else self.dist.agree(reason, self.STOP_ORDER)

    def _step(self, batches: list[Batch], lr: float) -> PendingStep:
        """One update; with a compiled step graph or compiled layers, a compiler failure (at any step: shapes can
        be new) falls back to eager and the same update again."""
        model = self.ddp if self.ddp is not None else self.model
        weights_before = self.probes.before_update(self.step)

        def update(graph: StepGraph | None) -> PendingStep:
            return update_on_device(model, self.optimizer, batches, lr, self.config, self.autocast, self.dist, graph)

        if self.step_graph is not None:
            pending, self.step_graph = run_or_eager(self.step_graph, update, keep=(TrainingError,))
        else:
            pending = eager_on_failure(self.model, lambda: update(None), keep=(TrainingError,))
        self.probes.after_update(self.step, weights_before, pending)
        return pending

    def fit(self) -> TrainResult:
        cfg = self.config
        elapsed = elapsed_clock(self.elapsed)
        log = StepLog(cfg.resolved_log_every, cfg.max_steps, cfg.max_minutes, self.callbacks.on_step)
        self.probes.measure_memory(self.batcher)
        with self._loader() as loader:
            reason = self._run_updates(loader, log, elapsed)
        log.flush(elapsed)
        self.elapsed = elapsed()
        averaged = None
        if reason == "preempted":
            if self.checkpoints.lacks(self.step):
                self._checkpoint()
        elif reason != "cancelled" and self.step > 0:
            if self.last_eval_step != self.step:
                self._evaluate()
            if self.checkpoints.lacks(self.step):
                self._checkpoint()
            averaged = self.checkpoints.average(self.step, self._validate, self.device)
        logger.info("training stopped at step %d: %s", self.step, reason)
        best, last = self.checkpoints.best, self.checkpoints.last
        return TrainResult(
            stop_reason=reason,
            step=self.step,
            elapsed=self.elapsed,
            metrics=dict(self.metrics),
            best_valid_loss=self.best_valid_loss,
            best_step=self.best_step,
            last_checkpoint=last,
            best_checkpoint=best,
            averaged_checkpoint=averaged,
            model_checkpoint=averaged or best or last,
            losses=log.losses,
            best_checkpoint_step=self.checkpoints.best_step,
        )

    def _loader(self) -> Loader:
        """The next updates' micro-batches, prepared on the host and copied to the device ahead of the step."""
        return Loader(
            self.batcher,
            self.config.grad_accum_steps * self.world_size,
            self.device,
            self.dist.shard if self.dist is not None else None,
            pin_for(self.device),
        )

    def _run_updates(self, loader: Loader, log: StepLog, elapsed: Callable[[], float]) -> StopReason:
        """Updates, with the evaluations and checkpoints due, until a reason to stop."""
        cfg = self.config
        while (reason := self._agreed(self._stop_reason(elapsed))) is None:
            started = elapsed()
            update = loader.next()
            self.step += 1
            if self.dist is not None:
                self.dist.seed_step(cfg.seed, self.step)
            lr = self.schedule.lr(self.step)
            log.add(self.step, lr, self.batcher.epoch, self._step(update.batches, lr), started, update.counts)
            self.elapsed = elapsed()
            checkpoint_due = self.checkpoints.due(self.step)
            evaluate_due = (
                self.step % cfg.eval_every == 0 or checkpoint_due or self._eval_time_due()
            ) and self._eval_affordable()
            if log.due or evaluate_due or checkpoint_due:
                log.flush(elapsed)  # before evaluating or saving: a diverged step fails the run first
            if evaluate_due:
                self._evaluate()
            # A new best evaluation between checkpoints is written at once (Marian's --keep-best): the model served
            # is the best one measured, not the best of the checkpoints that happened to fall on checkpoint_every.
            if checkpoint_due or (evaluate_due and self.new_best and self.checkpoints.lacks(self.step)):
                self._checkpoint()
        return reason

    def _eval_time_due(self) -> bool:
        """Whether eval_every_minutes of training have passed since the last evaluation (or the run's start)."""
        minutes = self.config.eval_every_minutes
        return minutes is not None and self.elapsed - self._last_eval_elapsed >= minutes * 60

    def _eval_affordable(self) -> bool:
        """Whether one more evaluation, as long as the last one, keeps evaluation within eval_budget of the
        wall-clock time (always true without a budget, and before the first evaluation)."""
        budget, last = self.config.eval_budget, self._last_eval_seconds
        if budget is None or last is None:
            return True
        return self.eval_seconds + last <= budget * (self.elapsed + last)

    def _evaluate(self) -> None:
        if not self.is_main:
            return
        t0 = time.monotonic()
        # The validation decoding runs compiled layers too (data-parallel training compiles them).
        self.metrics = eager_on_failure(self.model, lambda: self._validate(self.model))
        self.probes.at_evaluation(self.step)
        self._last_eval_seconds = time.monotonic() - t0
        self.eval_seconds += self._last_eval_seconds
        self.elapsed += self._last_eval_seconds
        self.metrics["eval_seconds"] = self.eval_seconds
        self.last_eval_step = self.step
        self._last_eval_elapsed = self.elapsed
        loss = self.metrics["loss"]
        if not math.isfinite(loss):
            raise TrainingError(
                f"the validation loss became {loss} at step {self.step}; lower the learning rate "
                f"(peak_lr / lr_scale) or raise warmup_steps"
            )
        if self.best_valid_loss is None or loss < self.best_valid_loss:
            self.best_valid_loss, self.best_step = loss, self.step
        score = criterion(self.metrics, self.config.best_metric, self.config.best_pair)  # the loss unless told
        self.new_best = score is not None and (self.best_score is None or score < self.best_score)
        if self.new_best:
            self.best_score, self.bad_evals = score, 0
        else:
            self.bad_evals += 1
        if self.callbacks.on_eval is not None:
            self.callbacks.on_eval(self.step, dict(self.metrics))

    def _validate(self, model: Transformer) -> dict[str, float]:
        return evaluate_sets(
            self.valid_sets,
            lambda s: evaluate(model, self.objective, s.batches, self.tokenizer, s.decode, self.precision),
        )

    def _checkpoint(self) -> None:
        evaluated = self.last_eval_step == self.step
        self.checkpoints.write(self.step, self.metrics, evaluated=evaluated, trainer_state=self.state_dict)
        self.probes.at_checkpoint(self.step)
