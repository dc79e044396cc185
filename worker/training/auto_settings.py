"""Settings a job left to its time budget, chosen by the worker that first runs it (the rule: model/train/budget.py),
and whether its steps are compiled when it left training.compile out (model/train/compile_choice.py).

The worker measures what the rule needs (the corpus, the longest example, what fits in memory, its own
throughput) and the task records the choice in the job once; a later attempt finds it and trains with it. On a GPU
the throughput is timed at several batch sizes (CURVE_FACTORS), as it grows steeply with the batch there; on a CPU
at one (WORKER_THROUGHPUT_CURVE changes where).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import torch

from app.core.settings import get_settings
from app.schemas.jobs import TrainingSpec
from model.data.batching import Example, example_sizes
from model.data.tokenizer import Tokenizer
from model.probes.anatomy import estimate_memory
from model.train.budget import (
    AUTO_FIELDS,
    BATCH_MULTIPLE,
    BudgetInputs,
    Curve,
    choose,
    choose_vocabulary,
    largest_batch,
)
from model.train.compile_choice import choose_compile, graphs_for
from model.train.config import TrainConfig
from model.train.prepare import PreparedData
from model.train.step_graph import bucket_length
from model.train.throughput import measure_throughput
from worker.device import memory_limit_bytes
from worker.training.job_data import JobRows, prepare_job, train_config

log = logging.getLogger(__name__)
PROBE_TOKENS = 2048  # batch size of the timed steps
CURVE_FACTORS = (1, 4, 16)  # a curve times PROBE_TOKENS and these multiples of it, each within memory and the corpus
PROBE_STEPS = 3  # batches timed at each batch size, each stepped once untimed first
COMPILE = "compile"  # training.compile left out: chosen here too, recorded beside the budget's choices


def curve_sizes(probe: int, fits: int, examples: Sequence[Example]) -> list[int]:
    """The batch sizes a curve is timed at: the probe and its CURVE_FACTORS multiples, each within memory (`fits`)
    and within an epoch's share of the PROBE_STEPS batches (a larger nominal batch would time the whole corpus and
    credit it the nominal size), rounded down to BATCH_MULTIPLE; never smaller than the probe."""
    corpus_share = int(example_sizes(examples).sum()) // PROBE_STEPS // BATCH_MULTIPLE * BATCH_MULTIPLE
    multiples = (probe * factor // BATCH_MULTIPLE * BATCH_MULTIPLE for factor in CURVE_FACTORS[1:])
    return sorted({probe, *(max(probe, min(size, fits, corpus_share)) for size in multiples)})


def measure_curve(data: PreparedData, config: TrainConfig, sizes: list[int]) -> Curve:
    """(batch tokens, batch tokens/s) at each size, ascending."""
    return tuple((size, measure_throughput(data, config, size, PROBE_STEPS)) for size in sizes)


def wants_curve(device: str) -> bool:
    setting = get_settings().worker_throughput_curve
    return setting == "always" or (setting == "gpu" and torch.device(device).type == "cuda")


def pending(rows: JobRows) -> list[str]:
    """The fields still to choose: none once the choice is recorded (compile: once training_config holds it)."""
    auto = rows.job.auto_settings or {}
    budget = [] if "chosen" in auto else [f for f in auto.get("fields", []) if f != COMPILE]
    return budget + ([COMPILE] if TrainingSpec.stored(rows.job.training_config).compile is None else [])


def choose_settings(rows: JobRows, device: str, tokenizer: Tokenizer | None = None) -> PreparedData:
    """Choose the pending settings of rows.job (detached): its configs get the values and auto_settings the
    record (the caller writes them to the database); returns its data, prepared with the chosen vocabulary (or
    `tokenizer`, a resumed run's, when only compile is left to choose)."""
    fields = pending(rows)
    if fields == [COMPILE]:
        data, record, tokens_per_second = prepare_job(rows, tokenizer), dict(rows.job.auto_settings or {}), 0.0
        record.setdefault("fields", [])
    else:
        data, record, tokens_per_second = _choose_budget(rows, device, [f for f in fields if f != COMPILE])
    if COMPILE in fields:
        _choose_compile(rows, device, data, tokens_per_second, record)
    rows.job.auto_settings = record
    return data


def _choose_compile(
    rows: JobRows, device: str, data: PreparedData, tokens_per_second: float, record: dict[str, Any]
) -> None:
    """Decide training.compile: the job's training_config gets it, `record` the choice, its reason and inputs."""
    spec = TrainingSpec.stored(rows.job.training_config)
    examples = data.train_examples(0) if callable(data.train_examples) else data.train_examples
    graphs = graphs_for(
        (bucket_length(int(size)) for size in example_sizes(examples)), data_parallel=spec.devices * spec.nodes > 1
    )
    seconds: list[float] = [spec.max_minutes * 60] if spec.max_minutes is not None else []
    if torch.device(device).type == "cuda":
        if tokens_per_second <= 0:  # no budget choice timed the steps: time them at the job's batch
            tokens_per_second = measure_throughput(data, train_config(rows.job, device), spec.max_tokens_per_batch)
        seconds.append(spec.max_steps * spec.grad_accum_steps * spec.max_tokens_per_batch / tokens_per_second)
    choice = choose_compile(torch.device(device).type, min(seconds) if seconds else None, graphs)
    rows.job.training_config = {**rows.job.training_config, COMPILE: choice.compile}
    record["fields"] = [*record["fields"], COMPILE]
    record["chosen"] = {**(record.get("chosen") or {}), COMPILE: choice.compile}
    record["reasons"] = {**(record.get("reasons") or {}), COMPILE: choice.reason}
    record["compile_inputs"] = {"graphs": choice.graphs, "training_seconds": choice.training_seconds}
    log.info("job %s: training.compile %s", rows.job.id, choice.reason)


def _choose_budget(rows: JobRows, device: str, fields: list[str]) -> tuple[PreparedData, dict[str, Any], float]:
    """The budget's settings: the data prepared with the chosen vocabulary, the record, the tokens/s it used."""
    settings, job = get_settings(), rows.job
    model_spec, spec = dict(job.model_config), dict(job.training_config)
    pairs = len(rows.train_rows)
    if "vocab_size" in fields:  # the tokenizer is trained with it, so it is chosen before preparing
        model_spec["vocab_size"] = choose_vocabulary(pairs)[0]
    job.model_config = model_spec
    data = prepare_job(rows)
    examples = data.train_examples(0) if callable(data.train_examples) else data.train_examples
    longest = int(example_sizes(examples).max())
    limit = memory_limit_bytes(torch.device(device))  # the GPU's memory on a GPU worker
    precision = train_config(job, device).resolved_precision
    fits = largest_batch(
        lambda tokens: estimate_memory(data.model_config, tokens, precision=precision)["training_total_bytes"] <= limit
    )
    measured, probe_seconds = 0.0, None
    curve: Curve = ()
    if settings.worker_tokens_per_second:
        tokens_per_second = settings.worker_tokens_per_second
    elif {"max_tokens_per_batch", "warmup_steps"} & set(fields):
        t0 = time.monotonic()
        probe = min(max(PROBE_TOKENS, longest), fits)
        sizes = curve_sizes(probe, fits, examples) if wants_curve(device) else [probe]
        curve = tuple((b, round(t, 1)) for b, t in measure_curve(data, train_config(job, device), sizes))
        tokens_per_second = measured = curve[0][1]
        probe_seconds = round(time.monotonic() - t0, 2)
    else:
        tokens_per_second = 0.0
    training = TrainingSpec.stored(spec)
    assert training.max_minutes is not None  # a job leaves settings to the budget only with max_minutes
    inputs = BudgetInputs(
        max_minutes=training.max_minutes,
        training_pairs=pairs,
        longest_example=longest,
        tokens_per_second=round(tokens_per_second, 1),
        devices=training.devices,
        grad_accum_steps=training.grad_accum_steps,
        eval_budget=training.eval_budget,
        max_batch_tokens=fits,
        throughput_curve=curve if len(curve) > 1 else (),
    )
    choice = choose(fields, inputs, fixed={"max_tokens_per_batch": training.max_tokens_per_batch})
    for name, value in choice.chosen.items():
        (model_spec if AUTO_FIELDS[name] == "model" else spec)[name] = value
    job.training_config = spec
    record = {
        "fields": fields,
        **choice.to_dict(),
        "throughput": "measured" if measured else ("pinned" if tokens_per_second else None),
        "probe_seconds": probe_seconds,
    }
    log.info(
        "job %s: chose %s from a budget of %g minutes (%d pairs, longest example %d tokens, batches fit %d tokens, "
        "%.0f tokens/s %s%s)",
        job.id,
        choice.chosen,
        training.max_minutes,
        pairs,
        longest,
        fits,
        tokens_per_second,
        record["throughput"] or "not needed",
        f"; (batch tokens, tokens/s): {list(inputs.throughput_curve)}" if inputs.throughput_curve else "",
    )
    return data, record, tokens_per_second
