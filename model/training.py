"""Training as in the paper (Sec. 5): Adam (0.9, 0.98, 1e-9), warm-up then inverse-sqrt learning rate (Eq. 3),
label smoothing 0.1 (Sec. 5.4), token-count batches, gradient accumulation, clipping, validation loss and
BLEU/chrF, early stopping, checkpoint averaging (Sec. 6.1).

Pure pieces (label_smoothed_loss, accumulate_gradients, train_step, evaluate) and one thin loop (Trainer) that
only decides when to stop, evaluate and checkpoint. Progress leaves through Callbacks with plain dataclasses,
so a caller (the Celery worker) can write them to a database. Typical use:

    data = prepare("translation", pairs, preset="small", vocab_size=8000)
    result = train(data, TrainConfig(max_steps=20000), checkpoint_root, Callbacks(on_step=...))

train() resumes from the newest good checkpoint under checkpoint_root; on CPU the resumed run is bit-identical
to an uninterrupted one (weights, Adam moments, schedule, batch position and RNG states are all restored).
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import sacrebleu
import torch
from torch import Tensor

from model.batching import Batch, Example, Overlong, TokenBatcher, collate
from model.checkpoint import (OBJECTIVES, Checkpoint, average_checkpoints, capture_rng_state, checkpoint_sha256,
                              latest_good_checkpoint, list_checkpoints, load_checkpoint, load_optimizer_state,
                              remove_stale_temp_dirs, restore_rng_state, save_checkpoint, step_dir)
from model.config import ModelConfig
from model.decoding import greedy_decode
from model.loss import label_smoothed_loss
from model.objectives import MaskMode, encode_sentences, make_translation_examples, noise_examples, renoising
from model.schedule import InverseSqrtSchedule
from model.tokenizer import MIN_VOCAB_SIZE, Tokenizer
from model.transformer import Transformer

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

    from model.distributed import DistContext

logger = logging.getLogger(__name__)

Objective = Literal["translation", "denoising"]
# preempted: the worker is shutting down; a checkpoint of the current step is written so another resumes it.
StopReason = Literal["max_steps", "max_minutes", "early_stopping", "cancelled", "preempted"]


class TrainingError(ValueError):
    """A problem the user can fix (too little data, sequences too long, a diverging learning rate, ...)."""


# -- configuration --------------------------------------------------------------------------------------------

@dataclass
class TrainConfig:
    """Hyper-parameters of one training run; paper defaults (Sec. 5.3, 5.4) unless noted."""

    max_steps: int = 100_000  # optimizer updates (the paper trains base for 100k)
    max_minutes: float | None = None  # wall-clock budget for training steps, summed over resumed attempts
    max_tokens_per_batch: int = 4096  # padded tokens per micro-batch (the paper: ~25k source + 25k target)
    grad_accum_steps: int = 1  # micro-batches per update: effective batch = max_tokens_per_batch * this
    warmup_steps: int = 4000
    lr_scale: float | None = None  # Eq. 3 multiplier; None = 1.0 (the paper) unless peak_lr is given
    peak_lr: float | None = None  # alternative: the rate reached at step warmup_steps
    label_smoothing: float = 0.1
    clip_norm: float | None = 1.0  # max global grad norm; None = no clipping (the norm is still reported)
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    seed: int = 0
    eval_every: int = 1000  # steps; the last step is always evaluated, and checkpoints are when the budget allows
    # Most of wall-clock time evaluation may take (0.05 = 5%): an evaluation due by eval_every is skipped while
    # the evaluations so far plus one more would exceed it. None = evaluate every eval_every steps and at every
    # checkpoint, whatever it costs.
    eval_budget: float | None = None
    checkpoint_every: int = 1000
    early_stopping_patience: int | None = None  # evaluations without a lower validation loss before stopping
    keep_checkpoints: int | None = 5  # newest step checkpoints kept (plus the best); None = keep all
    average_last: int = 0  # average the last N checkpoints at the end (Sec. 6.1 uses 5); 0 or 1 = off
    device: str = "cpu"
    bf16: bool = True  # bf16 autocast, on CUDA only; CPU always runs fp32
    eval_max_sentences: int = 200  # validation sentences greedy-decoded for BLEU/chrF (decoding is slow)

    def __post_init__(self) -> None:
        self.adam_betas = tuple(self.adam_betas)  # a JSON round trip gives a list
        _positive_int(self, "max_steps", "max_tokens_per_batch", "grad_accum_steps", "warmup_steps",
                      "eval_every", "checkpoint_every", "eval_max_sentences")
        _int(self, "seed", "average_last")
        if self.average_last < 0:
            raise ValueError(f"average_last={self.average_last} must be >= 0")
        for name in ("early_stopping_patience", "keep_checkpoints"):
            if getattr(self, name) is not None:
                _positive_int(self, name)
        if self.eval_budget is not None and not (_number(self.eval_budget) and 0 < self.eval_budget <= 1):
            raise ValueError(f"eval_budget={self.eval_budget!r} must be a fraction in (0, 1] or None")
        for name in ("max_minutes", "lr_scale", "peak_lr", "clip_norm"):
            value = getattr(self, name)
            if value is not None and not (_number(value) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name}={value!r} must be a positive number or None")
        if self.lr_scale is not None and self.peak_lr is not None:
            raise ValueError(f"give lr_scale={self.lr_scale} or peak_lr={self.peak_lr}, not both")
        if not (_number(self.label_smoothing) and 0.0 <= self.label_smoothing < 1.0):
            raise ValueError(f"label_smoothing={self.label_smoothing!r} must be in [0, 1)")
        if len(self.adam_betas) != 2 or not all(_number(b) and 0.0 <= b < 1.0 for b in self.adam_betas):
            raise ValueError(f"adam_betas={self.adam_betas!r} must be two numbers in [0, 1)")
        if not (_number(self.adam_eps) and self.adam_eps > 0):
            raise ValueError(f"adam_eps={self.adam_eps!r} must be a positive number")
        if not (_number(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay={self.weight_decay!r} must be a number >= 0")
        if not isinstance(self.device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?|mps", self.device):
            raise ValueError(f"device={self.device!r} must be 'cpu', 'cuda', 'cuda:N' or 'mps'")
        if not isinstance(self.bf16, bool):
            raise ValueError(f"bf16={self.bf16!r} must be a bool")
        if self.keep_checkpoints is not None and self.average_last > self.keep_checkpoints:
            raise ValueError(f"average_last={self.average_last} needs keep_checkpoints >= {self.average_last}, "
                             f"got {self.keep_checkpoints}")

    def schedule(self, d_model: int) -> InverseSqrtSchedule:
        if self.peak_lr is not None:
            return InverseSqrtSchedule.from_peak_lr(self.peak_lr, d_model, self.warmup_steps)
        return InverseSqrtSchedule(d_model, self.warmup_steps, 1.0 if self.lr_scale is None else self.lr_scale)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """Inverse of to_dict; unknown keys are refused."""
        unknown = sorted(set(d) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown TrainConfig key(s) {unknown}")
        return cls(**d)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(obj: Any, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name}={value!r} must be an int")


def _positive_int(obj: Any, *names: str) -> None:
    _int(obj, *names)
    for name in names:
        if getattr(obj, name) < 1:
            raise ValueError(f"{name}={getattr(obj, name)} must be >= 1")


# -- data -----------------------------------------------------------------------------------------------------

@dataclass
class PreparedData:
    """Everything train() needs besides the TrainConfig; stats is plain numbers for the job record."""

    objective: str
    tokenizer: Tokenizer
    model_config: ModelConfig
    train_examples: list[Example] | Callable[[int], list[Example]]  # denoising: fresh noise every epoch
    valid_examples: list[Example]
    stats: dict[str, int]


def split_validation(rows: Sequence[Any], fraction: float, max_rows: int, seed: int) -> tuple[list[Any], list[Any]]:
    """(train, valid): a random fraction of rows (at least 1, at most max_rows) held out, fixed by seed."""
    n = len(rows)
    if n < 2:
        raise TrainingError(f"need at least 2 rows to hold out a validation set, got {n}; add data or pass "
                            f"validation rows")
    k = min(n - 1, max_rows, max(1, round(n * fraction)))
    held = set(random.Random(f"valid:{seed}").sample(range(n), k))
    return [r for i, r in enumerate(rows) if i not in held], [r for i, r in enumerate(rows) if i in held]


def prepare(
    objective: str,
    train_rows: Sequence[tuple[str, str]] | Sequence[str],
    valid_rows: Sequence[tuple[str, str]] | Sequence[str] | None = None,
    *,
    preset: str = "small",
    model_overrides: dict[str, Any] | None = None,
    vocab_size: int = 8000,
    max_len: int = 128,
    seed: int = 0,
    valid_fraction: float = 0.05,
    max_valid_rows: int = 1000,
    tokenizer: Tokenizer | None = None,
    noise: MaskMode = "span",
    mask_ratio: float = 0.15,
    mean_span: float = 3.0,
    overlong: Overlong = "drop",
    min_frequency: int = 2,
    tokenizer_kind: str = "byte_bpe",
    normalization: str = "nfkc",
    prefix_space: bool = True,
) -> PreparedData:
    """Tokenizer, model config and examples from raw rows: (source, target) pairs for "translation",
    sentences for "denoising" (BART-style infilling: `noise` "span" or "token" masks, redrawn every epoch).

    Without valid_rows, a validation set is held out of train_rows (deterministic by seed). The tokenizer is
    trained on the training rows only, unless one is given (pass the checkpoint's when resuming): tokenizer_kind,
    normalization and prefix_space as in Tokenizer.train. Sequences
    longer than max_len tokens are dropped or truncated (`overlong`). User errors raise TrainingError.
    """
    if objective not in OBJECTIVES:
        raise TrainingError(f"objective={objective!r} must be one of {OBJECTIVES}")
    _check_rows(objective, train_rows, "train_rows")
    if valid_rows is None:
        if not 0.0 < valid_fraction < 1.0 or max_valid_rows < 1:
            raise TrainingError(f"need 0 < valid_fraction={valid_fraction} < 1 and "
                                f"max_valid_rows={max_valid_rows} >= 1")
        train_rows, valid_rows = split_validation(train_rows, valid_fraction, max_valid_rows, seed)
    else:
        _check_rows(objective, valid_rows, "valid_rows")
    if not isinstance(max_len, int) or max_len < 1:
        raise TrainingError(f"max_len={max_len!r} must be an int >= 1")
    if objective == "denoising":
        if noise not in ("span", "token"):
            raise TrainingError(f"noise={noise!r} must be 'span' or 'token'")
        if not 0.0 < mask_ratio <= 1.0 or mean_span <= 0:
            raise TrainingError(f"need 0 < mask_ratio={mask_ratio} <= 1 and mean_span={mean_span} > 0")
    if tokenizer is None:
        if vocab_size < MIN_VOCAB_SIZE:
            raise TrainingError(f"vocab_size={vocab_size} is below the minimum {MIN_VOCAB_SIZE}")
        texts = [t for row in train_rows for t in row] if objective == "translation" else list(train_rows)
        try:
            tokenizer = Tokenizer.train(texts, vocab_size, min_frequency, tokenizer_kind, normalization, prefix_space)
        except ValueError as e:
            raise TrainingError(f"invalid tokenizer settings: {e}") from e
    try:
        config = ModelConfig.from_preset(preset, tokenizer.vocab_size, **(model_overrides or {}))
    except ValueError as e:
        raise TrainingError(f"invalid model config: {e}") from e
    if max_len + 1 > config.max_positions:
        raise TrainingError(f"max_len={max_len} needs max_positions >= {max_len + 1}, got {config.max_positions}")

    if objective == "translation":
        train, report = make_translation_examples(train_rows, tokenizer, max_len, overlong)
        valid, valid_report = make_translation_examples(valid_rows, tokenizer, max_len, overlong)
        n_train: int = len(train)
        train_examples: list[Example] | Callable[[int], list[Example]] = train
    else:
        ids, report = encode_sentences(train_rows, tokenizer, max_len, overlong)
        valid_ids, valid_report = encode_sentences(valid_rows, tokenizer, max_len, overlong)
        ids, valid_ids = [t for t in ids if t], [t for t in valid_ids if t]
        n_train = len(ids)
        train_examples = renoising(ids, seed, noise, mask_ratio, mean_span)
        # Validation noise is drawn once (epoch -1 never occurs in training), so every evaluation is comparable.
        valid = noise_examples(valid_ids, seed, -1, noise, mask_ratio, mean_span)
    _require_examples("training", n_train, len(train_rows), report.dropped, max_len)
    _require_examples("validation", len(valid), len(valid_rows), valid_report.dropped, max_len)
    stats = {"train_examples": n_train, "valid_examples": len(valid), "dropped": report.dropped,
             "truncated": report.truncated, "valid_dropped": valid_report.dropped, "vocab_size": tokenizer.vocab_size}
    return PreparedData(objective, tokenizer, config, train_examples, valid, stats)


def _require_examples(what: str, n: int, n_rows: int, dropped: int, max_len: int) -> None:
    if n == 0:
        raise TrainingError(f"no {what} examples left: {dropped} of {n_rows} rows are longer than max_len={max_len} "
                            f"tokens; raise max_len or use overlong='truncate'")


def _check_rows(objective: str, rows: Any, name: str) -> None:
    if not isinstance(rows, Sequence) or isinstance(rows, str) or len(rows) == 0:
        raise TrainingError(f"{name} is empty")
    for i, row in enumerate(rows):
        ok = (isinstance(row, (tuple, list)) and len(row) == 2 and all(isinstance(s, str) and s.strip() for s in row)
              if objective == "translation" else isinstance(row, str) and row.strip())
        if not ok:
            shape = ("a (source, target) pair of non-empty strings" if objective == "translation"
                     else "a non-empty string")
            raise TrainingError(f"{name}[{i}] must be {shape}, got {row!r:.80}")


# -- loss and one optimizer update ----------------------------------------------------------------------------

def batch_logits(model: Transformer, batch: Batch) -> tuple[Tensor, Tensor]:
    """(logits (N, V), targets (N,)) at the N non-pad target positions only.

    Same as model(batch.src, batch.tgt_in)[non-pad], but the pre-softmax projection, usually the largest
    matrix, never runs on padding.
    """
    pad = model.config.pad_id
    src_key_padding_mask = batch.src == pad  # (B, S)
    memory = model.encode(batch.src, src_key_padding_mask)  # (B, S, d_model)
    hidden = model.decode(batch.tgt_in, memory, src_key_padding_mask)  # (B, T, d_model)
    keep = batch.tgt_out != pad  # (B, T)
    return model.project(hidden[keep]), batch.tgt_out[keep]  # (N, V), (N,)


def autocast_for(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA when asked; fp32 everywhere else."""
    if bf16 and device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def accumulate_gradients(model: Transformer | DistributedDataParallel, micro_batches: Sequence[Batch],
                         smoothing: float, autocast: contextlib.AbstractContextManager | None = None,
                         dist: DistContext | None = None) -> tuple[float, float, int]:
    """Backward over micro-batches, each scaled by the total target tokens of all of them, so the gradient
    equals that of one batch holding them all. Returns (smoothed loss sum, NLL sum, target tokens).

    Data-parallel (dist, and model = dist.wrap(...)): micro_batches are this rank's share of the update; the token
    count and the sums are over all ranks, and as DDP averages the ranks' gradients each loss is scaled by
    world_size / tokens, so the gradient is again the one per target token of the whole update."""
    n_tokens = sum(b.n_tgt_tokens for b in micro_batches)
    if dist is not None:
        n_tokens = int(dist.all_reduce_sum([n_tokens])[0])
    scale = n_tokens / (dist.world_size if dist is not None else 1)
    device = next(model.parameters()).device
    loss_sum = nll_sum = 0.0
    for i, b in enumerate(micro_batches):
        b = b.to(device)
        last = i == len(micro_batches) - 1  # DDP all-reduces the gradients during the last backward only
        with dist.gradient_sync(model, last) if dist is not None else contextlib.nullcontext():
            with autocast if autocast is not None else contextlib.nullcontext():
                logits, target = model(b) if dist is not None else batch_logits(model, b)
            loss, nll = label_smoothed_loss(logits, target, smoothing)
            (loss / scale).backward()
        loss_sum += loss.item()
        nll_sum += nll.item()
    if dist is not None:
        loss_sum, nll_sum = dist.all_reduce_sum([loss_sum, nll_sum])
    return loss_sum, nll_sum, n_tokens


@dataclass
class StepResult:
    loss: float  # label-smoothed cross entropy per target token
    nll_loss: float  # cross entropy per target token without smoothing
    grad_norm: float  # global L2 norm before clipping
    n_tokens: int


def build_optimizer(model: Transformer, config: TrainConfig) -> torch.optim.Adam:
    """Adam with the paper's beta1=0.9, beta2=0.98, eps=1e-9 (Sec. 5.3); lr is set per step by the schedule."""
    fused = next(model.parameters()).device.type == "cuda"  # one kernel for all parameters
    return torch.optim.Adam(model.parameters(), lr=0.0, betas=config.adam_betas, eps=config.adam_eps,
                            weight_decay=config.weight_decay, fused=fused or None)


def train_step(model: Transformer | DistributedDataParallel, optimizer: torch.optim.Optimizer,
               micro_batches: Sequence[Batch], lr: float, config: TrainConfig,
               autocast: contextlib.AbstractContextManager | None = None, dist: DistContext | None = None) -> StepResult:
    """One optimizer update: accumulate gradients over micro_batches, clip, Adam step at learning rate lr."""
    optimizer.zero_grad(set_to_none=True)
    loss_sum, nll_sum, n_tokens = accumulate_gradients(model, micro_batches, config.label_smoothing, autocast, dist)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm or math.inf)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.step()
    return StepResult(loss_sum / n_tokens, nll_sum / n_tokens, float(grad_norm), n_tokens)


# -- evaluation -----------------------------------------------------------------------------------------------

def masked_positions(src_ids: Sequence[int], tgt_ids: Sequence[int], mask_id: int) -> list[int]:
    """Positions of tgt_ids hidden behind the <mask> tokens of a denoising source (token or span noise).

    Each <mask> stands for one or more target tokens and the unmasked pieces are copied in order; a piece is
    matched at its earliest possible place (the last one at the end), which is exact for token noise.
    """
    pieces: list[list[int]] = [[]]
    for t in src_ids:
        if t == mask_id:
            pieces.append([])
        else:
            pieces[-1].append(t)
    positions: list[int] = []
    pos = len(pieces[0])
    for k, piece in enumerate(pieces[1:], start=1):
        n = len(piece)
        if k == len(pieces) - 1:
            end = len(tgt_ids) - n
        else:
            end = next((p for p in range(pos + 1, len(tgt_ids) - n + 1) if list(tgt_ids[p : p + n]) == piece),
                       pos + 1)
        positions.extend(range(pos, max(end, pos + 1)))
        pos = max(end, pos + 1) + n
    return [p for p in positions if p < len(tgt_ids)]


@torch.no_grad()
def evaluate(model: Transformer, objective: str, valid_batches: Sequence[Batch], tokenizer: Tokenizer,
             decode_examples: Sequence[Example] = (), bf16: bool = True) -> dict[str, float]:
    """Validation metrics: loss (NLL per target token), perplexity, token_accuracy; for translation BLEU, chrF
    and exact_match of greedy outputs on decode_examples; for denoising masked_token_accuracy (teacher-forced
    top-1 at the target positions hidden behind <mask>)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    autocast = autocast_for(device, bf16)
    nll_sum, n_tokens, correct, masked_correct, n_masked = 0.0, 0, 0, 0, 0
    try:
        for batch in valid_batches:
            b = batch.to(device)
            with autocast:
                logits = model(b.src, b.tgt_in)  # (B, T, V)
            keep = b.tgt_out != model.config.pad_id
            _, nll = label_smoothed_loss(logits[keep], b.tgt_out[keep], 0.0)
            nll_sum += nll.item()
            n_tokens += int(keep.sum())
            predicted = logits.argmax(dim=-1)  # (B, T)
            correct += int(((predicted == b.tgt_out) & keep).sum())
            if objective == "denoising":
                pad = model.config.pad_id
                for src, pred, tgt in zip(batch.src.tolist(), predicted.tolist(), batch.tgt_out.tolist()):
                    src, tgt = [t for t in src if t != pad], [t for t in tgt if t != pad]  # right padding only
                    for p in masked_positions(src, tgt, model.config.mask_id):
                        masked_correct += int(pred[p] == tgt[p])
                        n_masked += 1
        loss = nll_sum / max(n_tokens, 1)
        metrics = {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "token_accuracy": correct / max(n_tokens, 1)}
        if objective == "denoising":
            metrics["masked_token_accuracy"] = masked_correct / max(n_masked, 1)
        elif decode_examples:
            metrics.update(translation_metrics(model, decode_examples, tokenizer, bf16))
    finally:
        model.train(was_training)
    return metrics


def translate_examples(model: Transformer, examples: Sequence[Example], batch_size: int = 64,
                       bf16: bool = True) -> list[list[int]]:
    """Greedy outputs (token ids) for examples' sources, in the given order; batched by similar length."""
    device = next(model.parameters()).device
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].src_ids))
    out: list[list[int]] = [[] for _ in examples]
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        src = collate([examples[i] for i in idx]).src.to(device)
        with autocast_for(device, bf16):
            hyps = greedy_decode(model, src)
        for i, hyp in zip(idx, hyps):
            out[i] = hyp
    return out


def translation_metrics(model: Transformer, examples: Sequence[Example], tokenizer: Tokenizer,
                        bf16: bool = True) -> dict[str, float]:
    """Corpus BLEU and chrF (sacrebleu, on detokenized text) and the exact-match rate of greedy outputs."""
    hyps = tokenizer.decode_batch(translate_examples(model, examples, bf16=bf16))
    refs = tokenizer.decode_batch([e.tgt_ids for e in examples])
    return {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score, "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
            "exact_match": sum(h == r for h, r in zip(hyps, refs)) / len(refs)}


# -- progress reports -----------------------------------------------------------------------------------------

@dataclass
class StepInfo:
    step: int
    total_steps: int
    loss: float  # label-smoothed training loss per target token
    lr: float
    tokens_per_second: float  # target tokens per second (moving average over steps)
    grad_norm: float  # before clipping
    elapsed: float  # seconds of training, summed over resumed attempts
    eta_seconds: float
    nll_loss: float = 0.0  # training cross entropy without smoothing (compare with the validation loss)
    tokens: int = 0  # target tokens in this update
    epoch: int = 0


@dataclass
class CheckpointInfo:
    step: int
    path: str
    sha256: str  # checkpoint_sha256(path)
    size_bytes: int
    metrics: dict[str, float]
    kind: str = "step"  # "step" (resumable) or "averaged" (weights only)


@dataclass
class Callbacks:
    """Hooks for the caller; each may be None. should_stop and should_preempt are polled once per step, so keep
    them cheap. should_stop (cancel) ends the run without a final checkpoint; should_preempt (the process is
    going away) ends it right after a checkpoint of the current step, skipping the final evaluation."""

    on_step: Callable[[StepInfo], None] | None = None
    on_eval: Callable[[int, dict[str, float]], None] | None = None
    on_checkpoint: Callable[[CheckpointInfo], None] | None = None
    should_stop: Callable[[], bool] | None = None
    should_preempt: Callable[[], bool] | None = None


@dataclass
class TrainResult:
    stop_reason: StopReason
    step: int
    elapsed: float
    metrics: dict[str, float]  # the last evaluation
    best_valid_loss: float | None
    best_step: int | None
    last_checkpoint: str | None
    best_checkpoint: str | None
    averaged_checkpoint: str | None
    model_checkpoint: str | None  # the one to serve: averaged, else best by validation loss, else last
    losses: list[float] = field(default_factory=list)  # training loss of every step of this attempt


# -- the loop -------------------------------------------------------------------------------------------------

class Trainer:
    """Runs updates until max_steps, max_minutes, early stopping or should_stop(); evaluates and checkpoints.

    Steps count optimizer updates from 1. Evaluation runs every eval_every steps, at every checkpoint and at the
    end; checkpoints go to checkpoint_root/step-NNNNNNNN every checkpoint_every steps and at the end.
    """

    def __init__(self, model: Transformer, tokenizer: Tokenizer, objective: str,
                 train_examples: Sequence[Example] | Callable[[int], Sequence[Example]],
                 valid_examples: Sequence[Example], config: TrainConfig, checkpoint_root: str | Path | None = None,
                 callbacks: Callbacks | None = None, meta: dict[str, Any] | None = None,
                 dist: DistContext | None = None) -> None:
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
        self.meta = meta or {}
        self.checkpoint_root = Path(checkpoint_root) if checkpoint_root is not None and self.is_main else None
        self.optimizer = build_optimizer(model, config)
        self.schedule = config.schedule(model.config.d_model)
        self.autocast = autocast_for(self.device, config.bf16)
        self.batcher = TokenBatcher(train_examples, config.max_tokens_per_batch, shuffle=True, seed=config.seed)
        try:
            if len(self.batcher) == 0:
                raise TrainingError("there are no training examples")
        except ValueError as e:  # an example larger than max_tokens_per_batch
            raise TrainingError(f"max_tokens_per_batch={config.max_tokens_per_batch} is too small: {e}") from e
        self.valid_examples = list(valid_examples)
        if not self.valid_examples:
            raise TrainingError("there are no validation examples")
        self.valid_batches = list(TokenBatcher(self.valid_examples, max(config.max_tokens_per_batch,
                                               max(e.size for e in self.valid_examples)), shuffle=False))
        self.decode_examples = self.valid_examples[: config.eval_max_sentences] if objective == "translation" else []
        # Progress: everything below goes into trainer_state.json.
        self.step = 0
        self.elapsed = 0.0
        self.best_valid_loss: float | None = None
        self.best_step: int | None = None
        self.bad_evals = 0
        self.last_eval_step = 0
        self.eval_seconds = 0.0  # wall-clock spent evaluating, summed over resumed attempts (part of elapsed)
        self._last_eval_seconds: float | None = None
        self.metrics: dict[str, float] = {}
        self.best_checkpoint: str | None = None
        self.last_checkpoint: str | None = None
        self._last_checkpoint_step = 0
        self._iterator = None
        self.ddp: DistributedDataParallel | None = None
        if dist is not None:
            if dist.device != self.device:
                raise TrainingError(f"device={config.device!r} is not rank {dist.rank}'s device {dist.device}")
            dist.check_same("model, tokenizer, training data or settings", {
                "model": model.config.to_dict(), "tokenizer": tokenizer.fingerprint, "objective": objective,
                "config": {k: v for k, v in config.to_dict().items() if k != "device"},
                "batches": self.batcher.batch_indices(0), "valid": len(self.valid_examples),
                "sample": [(e.src_ids, e.tgt_ids) for e in self.batcher.examples(0)[:64]]})
            self.ddp = dist.wrap(self.model, batch_logits)

    # -- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "elapsed_seconds": self.elapsed, "best_valid_loss": self.best_valid_loss,
                "best_step": self.best_step, "bad_evals": self.bad_evals, "last_eval_step": self.last_eval_step,
                "eval_seconds": self.eval_seconds, "metrics": self.metrics,
                # A name, not a path: another worker may mount the artifact store elsewhere.
                "best_checkpoint": Path(self.best_checkpoint).name if self.best_checkpoint else None,
                "batcher": self.batcher.state_dict(), "schedule": self.schedule.state_dict(),
                "train_config": self.config.to_dict(), "rng": capture_rng_state()}

    def restore(self, checkpoint: str | Path | Checkpoint) -> None:
        """Continue from a step checkpoint: weights, optimizer, schedule, batch position, RNG, counters."""
        ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
        state = ckpt.trainer_state
        if state is None or ckpt.optimizer_state is None:
            raise TrainingError(f"{ckpt.path} is a weights-only ({ckpt.meta.get('kind')}) checkpoint; "
                                f"it cannot be resumed")
        if ckpt.objective != self.objective:
            raise TrainingError(f"{ckpt.path} was trained for {ckpt.objective!r}, not {self.objective!r}")
        if ckpt.model_config != self.model.config:
            raise TrainingError(f"{ckpt.path} has model config {ckpt.model_config}, not {self.model.config}")
        if ckpt.tokenizer.fingerprint != self.tokenizer.fingerprint:
            raise TrainingError(f"{ckpt.path} has another tokenizer; prepare the data with the checkpoint's tokenizer")
        self.model.load_state_dict(ckpt.model_state)
        load_optimizer_state(self.optimizer, self.model, ckpt.optimizer_state)
        try:
            self.batcher.load_state_dict(state["batcher"])
        except ValueError as e:
            raise TrainingError(f"{ckpt.path}: the batch position does not fit this run: {e}") from e
        self.step, self.elapsed = int(state["step"]), float(state["elapsed_seconds"])
        self.best_valid_loss, self.best_step = state["best_valid_loss"], state["best_step"]
        self.bad_evals, self.last_eval_step = int(state["bad_evals"]), int(state["last_eval_step"])
        self.eval_seconds = float(state.get("eval_seconds", 0.0))  # absent in checkpoints of older versions
        self.metrics, best = dict(state["metrics"]), state["best_checkpoint"]
        root = self.checkpoint_root
        self.best_checkpoint = str(root / best) if best and root is not None and (root / best).is_dir() else None
        self.last_checkpoint, self._last_checkpoint_step = str(ckpt.path), self.step
        self._iterator = None
        restore_rng_state(state["rng"])
        logger.info("resumed from %s at step %d", ckpt.path, self.step)

    # -- loop -------------------------------------------------------------------------------------------------
    def _next_batch(self) -> Batch:
        for _ in range(2):  # at most one epoch boundary per batch
            if self._iterator is None:
                self._iterator = iter(self.batcher)
            try:
                return next(self._iterator)
            except StopIteration:
                self._iterator = None
        raise TrainingError("the training data yields no batches")

    STOP_ORDER: tuple[StopReason, ...] = ("early_stopping", "max_steps", "cancelled", "preempted", "max_minutes")

    def _stop_reason(self, start: float, elapsed0: float) -> StopReason | None:
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
        if cfg.max_minutes is not None and elapsed0 + time.monotonic() - start >= cfg.max_minutes * 60:
            return "max_minutes"
        return None

    def _agreed(self, reason: StopReason | None) -> StopReason | None:
        """Data-parallel: every rank stops at the same step, for the first reason in STOP_ORDER that any rank saw
        (rank 0 alone polls the callbacks and evaluates for early stopping)."""
        return reason if self.dist is None else self.dist.agree(reason, self.STOP_ORDER)

    def fit(self) -> TrainResult:
        cfg, cb = self.config, self.callbacks
        start, elapsed0 = time.monotonic(), self.elapsed
        step_seconds: float | None = None  # moving average
        tokens_per_second: float | None = None
        losses: list[float] = []
        while (reason := self._agreed(self._stop_reason(start, elapsed0))) is None:
            t0 = time.monotonic()
            batches = [self._next_batch() for _ in range(cfg.grad_accum_steps * self.world_size)]
            self.step += 1
            if self.dist is not None:  # rank r takes micro-batches r, r + N, ...: one process's global batch
                batches = self.dist.shard(batches)
                self.dist.seed_step(cfg.seed, self.step)
            lr = self.schedule.lr(self.step)
            result = train_step(self.ddp if self.ddp is not None else self.model, self.optimizer, batches, lr, cfg,
                                self.autocast, self.dist)
            if not math.isfinite(result.loss):
                raise TrainingError(f"the training loss became {result.loss} at step {self.step}; lower the "
                                    f"learning rate (peak_lr / lr_scale) or raise warmup_steps")
            losses.append(result.loss)
            dt = max(time.monotonic() - t0, 1e-9)
            step_seconds = dt if step_seconds is None else 0.9 * step_seconds + 0.1 * dt
            tps = result.n_tokens / dt
            tokens_per_second = tps if tokens_per_second is None else 0.9 * tokens_per_second + 0.1 * tps
            self.elapsed = elapsed0 + time.monotonic() - start
            eta = (cfg.max_steps - self.step) * step_seconds
            if cfg.max_minutes is not None:
                eta = max(0.0, min(eta, cfg.max_minutes * 60 - self.elapsed))
            if cb.on_step is not None:
                cb.on_step(StepInfo(self.step, cfg.max_steps, result.loss, lr, tokens_per_second, result.grad_norm,
                                    self.elapsed, eta, result.nll_loss, result.n_tokens, self.batcher.epoch))
            checkpoint_due = self.checkpoint_root is not None and self.step % cfg.checkpoint_every == 0
            if (self.step % cfg.eval_every == 0 or checkpoint_due) and self._eval_affordable():
                self._evaluate()
            if checkpoint_due:
                self._checkpoint()
        self.elapsed = elapsed0 + time.monotonic() - start
        averaged = None
        if reason == "preempted":
            if self.checkpoint_root is not None and self._last_checkpoint_step != self.step:
                self._checkpoint()
        elif reason != "cancelled" and self.step > 0:
            if self.last_eval_step != self.step:
                self._evaluate()
            if self.checkpoint_root is not None and self._last_checkpoint_step != self.step:
                self._checkpoint()
            averaged = self._average()
        logger.info("training stopped at step %d: %s", self.step, reason)
        return TrainResult(reason, self.step, self.elapsed, dict(self.metrics), self.best_valid_loss, self.best_step,
                           self.last_checkpoint, self.best_checkpoint, averaged,
                           averaged or self.best_checkpoint or self.last_checkpoint, losses)

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
        self.metrics = evaluate(self.model, self.objective, self.valid_batches, self.tokenizer,
                                self.decode_examples, self.config.bf16)
        self._last_eval_seconds = time.monotonic() - t0
        self.eval_seconds += self._last_eval_seconds
        self.elapsed += self._last_eval_seconds
        self.metrics["eval_seconds"] = self.eval_seconds
        self.last_eval_step = self.step
        loss = self.metrics["loss"]
        if not math.isfinite(loss):
            raise TrainingError(f"the validation loss became {loss} at step {self.step}; lower the learning rate "
                                f"(peak_lr / lr_scale) or raise warmup_steps")
        if self.best_valid_loss is None or loss < self.best_valid_loss:
            self.best_valid_loss, self.best_step, self.bad_evals = loss, self.step, 0
        else:
            self.bad_evals += 1
        if self.callbacks.on_eval is not None:
            self.callbacks.on_eval(self.step, dict(self.metrics))

    def _checkpoint(self) -> None:
        assert self.checkpoint_root is not None
        path = step_dir(self.checkpoint_root, self.step)
        if self.best_step == self.step:
            self.best_checkpoint = str(path)
        save_checkpoint(path, self.model, self.tokenizer, self.objective, step=self.step, metrics=self.metrics,
                        optimizer=self.optimizer, trainer_state=self.state_dict(),
                        extra_meta={"train_config": self.config.to_dict(), **self.meta})
        self.last_checkpoint, self._last_checkpoint_step = str(path), self.step
        self._rotate()
        self._report_checkpoint(path, self.metrics, "step")

    def _report_checkpoint(self, path: Path, metrics: dict[str, float], kind: str) -> None:
        if self.callbacks.on_checkpoint is not None:
            size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
            self.callbacks.on_checkpoint(CheckpointInfo(self.step, str(path), checkpoint_sha256(path), size,
                                                        dict(metrics), kind))

    def _rotate(self) -> None:
        """Delete the oldest step checkpoints beyond keep_checkpoints; the best one is always kept."""
        if self.config.keep_checkpoints is None or self.checkpoint_root is None:
            return
        old = list_checkpoints(self.checkpoint_root)[: -self.config.keep_checkpoints]
        for path in old:
            if str(path) != self.best_checkpoint:
                shutil.rmtree(path, ignore_errors=True)

    def _average(self) -> str | None:
        n = self.config.average_last
        if n < 2 or self.checkpoint_root is None:
            return None
        dirs = list_checkpoints(self.checkpoint_root)[-n:]
        if len(dirs) < 2:
            return None
        averaged = Transformer(self.model.config).to(self.device)
        averaged.load_state_dict(average_checkpoints(dirs))
        metrics = evaluate(averaged, self.objective, self.valid_batches, self.tokenizer, self.decode_examples,
                           self.config.bf16)
        path = self.checkpoint_root / f"averaged-{self.step:08d}"
        save_checkpoint(path, averaged, self.tokenizer, self.objective, step=self.step, metrics=metrics,
                        kind="averaged", extra_meta={"train_config": self.config.to_dict(), **self.meta,
                                                     "averaged_from": [d.name for d in dirs]})
        self._report_checkpoint(path, metrics, "averaged")
        return str(path)


def train(data: PreparedData, config: TrainConfig, checkpoint_root: str | Path | None = None,
          callbacks: Callbacks | None = None, resume: bool = True, meta: dict[str, Any] | None = None,
          dist: DistContext | None = None) -> TrainResult:
    """Build the model (seeded by config.seed) and train it; with resume, continue from the newest good step
    checkpoint under checkpoint_root (newer, corrupted ones are deleted, as the run will rewrite them).

    To resume a job, call prepare() with the same rows and seed and tokenizer=Tokenizer.load(checkpoint), then
    train() with the same config and checkpoint_root. Data-parallel (dist, see model/distributed.py): every rank
    calls it with the same arguments but its own config.device; rank 0 picks the checkpoint all resume from.
    """
    torch.manual_seed(config.seed)
    model = Transformer(data.model_config)
    trainer = Trainer(model, data.tokenizer, data.objective, data.train_examples, data.valid_examples, config,
                      checkpoint_root, callbacks, meta, dist)
    if checkpoint_root is not None:
        good = None
        if trainer.is_main:
            remove_stale_temp_dirs(checkpoint_root)
            good = latest_good_checkpoint(checkpoint_root) if resume else None
            for path in list_checkpoints(checkpoint_root) if good is not None else []:
                if path.name > good.name:
                    logger.warning("deleting %s: newer than the last good checkpoint %s", path, good)
                    shutil.rmtree(path, ignore_errors=True)
        if dist is not None:
            good = dist.broadcast(good)
        if good is not None:
            trainer.restore(good)
    return trainer.fit()
