"""Timing a job's models on this worker: the batch sizes a model is timed at (one, or a curve on a GPU), and, for a
job that leaves model.preset to the worker, each candidate preset in turn (the rule: model/train/size_choice.py).

Candidates are timed smallest first, each at the batch sizes the budget's probe uses, each built with the job's
overrides and the vocabulary its data was prepared with. A larger one is timed only when the rule says it could
still win (worth_timing); one that does not fit the device's memory at the smallest batch is not timed at all. The
seconds all this takes are recorded and taken off the minutes the rule plans with.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from app.core.settings import get_settings
from app.schemas.jobs import ModelSpec, TrainingSpec
from model.data.batching import Example, example_sizes
from model.data.mixing import distinct_len
from model.nn.config import ModelConfig
from model.probes.anatomy import estimate_memory, non_embedding_parameters
from model.train.budget import BATCH_MULTIPLE, MIN_BATCH_TOKENS, Curve, largest_batch
from model.train.config import TrainingError
from model.train.prepare import PreparedData
from model.train.size_choice import (
    PRESET_ORDER,
    Candidate,
    SizeChoice,
    SizeInputs,
    choose_size,
    estimated,
    predict,
    worth_timing,
)
from model.train.throughput import measure_throughput
from worker.training.job_data import JobRows, train_config

log = logging.getLogger(__name__)
PROBE_TOKENS = 2048  # batch size of the timed steps
CURVE_FACTORS = (1, 4, 16)  # a curve times PROBE_TOKENS and these multiples of it, each within memory and the corpus
PROBE_STEPS = 3  # batches timed at each batch size, each stepped once untimed first
GB = 1024**3


def examples_of(data: PreparedData) -> Sequence[Example]:
    return data.train_examples(0) if callable(data.train_examples) else data.train_examples


def curve_sizes(probe: int, fits: int, examples: Sequence[Example]) -> list[int]:
    """The batch sizes a curve is timed at: the probe and its CURVE_FACTORS multiples, each within memory (`fits`)
    and within an epoch's share of the PROBE_STEPS batches (a larger nominal batch would time the whole corpus and
    credit it the nominal size), rounded down to BATCH_MULTIPLE; never smaller than the probe."""
    corpus_share = int(example_sizes(examples).sum()) // PROBE_STEPS // BATCH_MULTIPLE * BATCH_MULTIPLE
    multiples = (probe * factor // BATCH_MULTIPLE * BATCH_MULTIPLE for factor in CURVE_FACTORS[1:])
    return sorted({probe, *(max(probe, min(size, fits, corpus_share)) for size in multiples)})


def probe_sizes(device: str, longest: int, fits: int, examples: Sequence[Example]) -> list[int]:
    """The batch sizes a model that fits `fits` batch tokens is timed at on this device."""
    probe = min(max(PROBE_TOKENS, longest), fits)
    return curve_sizes(probe, fits, examples) if wants_curve(device) else [probe]


def measure_curve(data: PreparedData, config: Any, sizes: list[int]) -> Curve:
    """(batch tokens, batch tokens/s) at each size, ascending."""
    return tuple((size, round(measure_throughput(data, config, size, PROBE_STEPS), 1)) for size in sizes)


def wants_curve(device: str) -> bool:
    setting = get_settings().worker_throughput_curve
    return setting == "always" or (setting == "gpu" and torch.device(device).type == "cuda")


def memory_needs(config: ModelConfig, batch: int, precision: str, limit: int, what: str) -> str | None:
    """Why `what` cannot train on this device at `batch` tokens per batch (the memory it needs and the device's), or
    None when it fits."""
    need = estimate_memory(config, batch, precision=precision)["training_total_bytes"]
    if need <= limit:
        return None
    return (
        f"{what} needs an estimated {need / GB:.1f} GB to train in {precision} at {batch} tokens per batch; this "
        f"worker's device has {limit / GB:.1f} GB"
    )


@dataclass
class PresetProbe:
    """The choice, the data prepared for the chosen preset, its timed curve (empty: not timed), the probe's seconds."""

    choice: SizeChoice
    data: PreparedData
    curve: Curve
    probe_seconds: float | None


def candidate(name: str, config: ModelConfig, batch: int, fixed: bool, precision: str, limit: int) -> Candidate:
    """A preset's size, memory at the smallest batch it would use and the largest batch that fits (0: none)."""
    parameters = non_embedding_parameters(config)
    fits = memory_needs(config, batch, precision, limit, name) is None
    largest = largest_batch(
        lambda tokens: estimate_memory(config, tokens, precision=precision)["training_total_bytes"] <= limit
    )
    return Candidate(
        preset=name,
        parameters=parameters,
        compute_parameters=parameters + config.vocab_size * config.d_model,
        memory_bytes=estimate_memory(config, batch, precision=precision)["training_total_bytes"],
        max_batch_tokens=(batch if fixed else max(batch, largest)) if fits else 0,
    )


def choose_preset(
    rows: JobRows, device: str, data: PreparedData, limit: int, precision: str, fixed_batch: bool
) -> PresetProbe:
    """Time the candidate presets (unless the job is bounded by steps, or WORKER_TOKENS_PER_SECOND is pinned: then
    the first candidate runs at that rate and the others at the rate the compute ratio gives) and choose one.
    fixed_batch: the job gives max_tokens_per_batch (else the budget chooses it)."""
    job, settings = rows.job, get_settings()
    spec, training = ModelSpec.stored(job.model_config), TrainingSpec.stored(job.training_config)
    examples = examples_of(data)
    sizes = example_sizes(examples)
    longest = int(sizes.max())
    configs: dict[str, ModelConfig] = {}
    for name in PRESET_ORDER:
        try:
            configs[name] = ModelConfig.from_preset(name, data.tokenizer.vocab_size, **spec.overrides())
        except ValueError:
            continue  # the overrides do not make a valid model of this preset (checked for one at submit)
    fixed = fixed_batch or training.max_minutes is None
    batch = training.max_tokens_per_batch if fixed else max(MIN_BATCH_TOKENS, longest)
    candidates = [candidate(n, c, batch, fixed, precision, limit) for n, c in configs.items()]
    pairs = distinct_len(rows.train_rows)  # a mixed job's repeated rows once: the law sizes by the data, not repeats
    inputs = SizeInputs(
        candidates=tuple(candidates),
        corpus_tokens=int(sizes.sum()) * pairs // max(1, len(rows.train_rows)),  # rows of the mean length
        training_pairs=pairs,
        max_minutes=training.max_minutes,
        memory_limit_bytes=limit,
        longest_example=longest,
        devices=training.devices * training.nodes,
        grad_accum_steps=training.grad_accum_steps,
        eval_budget=training.eval_budget,
        max_tokens_per_batch=training.max_tokens_per_batch if fixed else None,
        max_steps=training.max_steps if training.max_minutes is None else None,
    )
    if not any(c.max_batch_tokens for c in candidates):
        needs = memory_needs(
            configs[candidates[0].preset], batch, precision, limit, f"the smallest preset, {candidates[0].preset},"
        )
        raise TrainingError(f"{needs}: no preset fits; lower max_tokens_per_batch or train on a larger device")
    seconds: float | None = None
    if training.max_minutes is not None and settings.worker_tokens_per_second:
        inputs = _pinned(inputs, settings.worker_tokens_per_second)  # nothing timed: the same choice on every host
    elif training.max_minutes is not None:
        t0 = time.monotonic()
        inputs = _timed(inputs, configs, data, train_config(job, device), device, t0)
        seconds = round(time.monotonic() - t0, 2)
        inputs = replace(inputs, probe_seconds=seconds)
    try:
        choice = choose_size(inputs)
    except ValueError as exc:
        raise TrainingError(str(exc)) from exc
    chosen = next(c for c in inputs.candidates if c.preset == choice.preset)
    log.info("job %s: preset %s", job.id, choice.reason)
    return PresetProbe(choice, replace(data, model_config=configs[choice.preset]), chosen.throughput_curve, seconds)


def _pinned(inputs: SizeInputs, tokens_per_second: float) -> SizeInputs:
    """The first candidate that fits at WORKER_TOKENS_PER_SECOND, the others estimated from it."""
    fitting = [c for c in inputs.candidates if c.max_batch_tokens]
    first = replace(fitting[0], tokens_per_second=tokens_per_second, throughput="pinned")
    others = {c.preset: estimated(first, c) for c in fitting[1:]}
    return replace(
        inputs, candidates=tuple(first if c is fitting[0] else others.get(c.preset, c) for c in inputs.candidates)
    )


def _timed(
    inputs: SizeInputs, configs: dict[str, ModelConfig], data: PreparedData, config: Any, device: str, t0: float
) -> SizeInputs:
    """The candidates, each timed (smallest first) or marked why not."""
    examples = examples_of(data)
    timed: list[Candidate] = []
    result: dict[str, Candidate] = {}
    for c in inputs.candidates:
        if not c.max_batch_tokens:
            continue
        sizes = probe_sizes(device, inputs.longest_example, c.max_batch_tokens, examples)
        if inputs.max_tokens_per_batch is not None:
            sizes = [inputs.max_tokens_per_batch]
        if timed:
            so_far = replace(inputs, candidates=tuple(timed), probe_seconds=time.monotonic() - t0)
            best = min((predict(so_far, t) for t in timed), key=lambda p: p.loss)
            worth, why = worth_timing(so_far, best, timed[-1], c, [s for s in sizes for _ in range(2 * PROBE_STEPS)])
            if not worth:
                result[c.preset] = replace(c, throughput="not timed", note=why)
                continue
        curve = measure_curve(replace(data, model_config=configs[c.preset]), config, sizes)
        result[c.preset] = replace(c, tokens_per_second=curve[0][1], throughput_curve=curve)
        timed.append(result[c.preset])
        log.info("preset %s: (batch tokens, tokens/s) %s", c.preset, list(curve))
    return replace(inputs, candidates=tuple(result.get(c.preset, c) for c in inputs.candidates))
