"""Settings a job left to the worker, chosen by the worker that first runs it: those left to its time budget (the
rule: model/train/budget.py), the preset when it left model.preset to the worker (model/train/size_choice.py, timed
by worker/training/throughput_probe.py) with the dropout that follows it, and whether its steps are compiled when it
left training.compile out (model/train/compile_choice.py).

The worker measures what the rules need (the corpus, the longest example, what fits in memory, its own
throughput) and the task records the choice in the job once; a later attempt finds it and trains with it. On a GPU
the throughput is timed at several batch sizes (CURVE_FACTORS), as it grows steeply with the batch there; on a CPU
at one (WORKER_THROUGHPUT_CURVE changes where).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import torch

from app.core.settings import get_settings
from app.db.tables import Job
from app.schemas.jobs import ModelSpec, TrainingSpec
from app.services.job_submission import BATCH_ADVICE, PRESET_ADVICE, candidate_configs
from model.data.batching import example_sizes
from model.data.mixing import distinct_len
from model.data.tokenizer import Tokenizer
from model.probes.anatomy import estimate_memory
from model.train.budget import (
    AUTO_FIELDS,
    MIN_BATCH_TOKENS,
    REFERENCE_BATCH,
    BudgetInputs,
    Curve,
    batch_lr_scale,
    choose,
    choose_vocabulary,
    largest_batch,
)
from model.train.compile_choice import choose_compile, graphs_for
from model.train.config import TrainingError
from model.train.prepare import PreparedData
from model.train.size_choice import PRESET_FIELD, choose_dropout
from model.train.step_graph import bucket_length
from model.train.throughput import measure_throughput
from worker.device import memory_limit_bytes
from worker.training.job_data import JobRows, prepare_job, train_config
from worker.training.throughput_probe import (
    PresetProbe,
    choose_preset,
    examples_of,
    measure_curve,
    memory_needs,
    probe_sizes,
)

log = logging.getLogger(__name__)
COMPILE = "compile"  # training.compile left out: chosen here too, recorded beside the budget's choices
DROPOUT = "dropout"  # model.dropout left out by a job whose preset the worker chooses: it follows the choice
LR_SCALE = "lr_scale"  # training.lr_scale left out by a job whose batch the worker chooses: it follows the batch


def preset_pending(job: Job) -> bool:
    """The job leaves its preset to the worker and it is not chosen yet (a job starting from a model has that
    model's architecture)."""
    return ModelSpec.stored(job.model_config).auto and job.init_model_id is None


def pending(rows: JobRows) -> list[str]:
    """The fields still to choose: none once the choice is recorded (preset and compile: once the job's model and
    training sections hold them)."""
    auto = rows.job.auto_settings or {}
    budget = [] if "chosen" in auto else [f for f in auto.get("fields", []) if f in AUTO_FIELDS]
    preset = [PRESET_FIELD] if preset_pending(rows.job) else []
    return budget + preset + ([COMPILE] if TrainingSpec.stored(rows.job.training_config).compile is None else [])


def choose_settings(rows: JobRows, device: str, tokenizer: Tokenizer | None = None) -> PreparedData:
    """Choose the pending settings of rows.job (detached): its configs get the values and auto_settings the
    record (the caller writes them to the database); returns its data, prepared with the chosen vocabulary (or
    `tokenizer`, a resumed run's, when only compile is left to choose)."""
    fields = pending(rows)
    if fields == [COMPILE]:
        data, record, tokens_per_second = prepare_job(rows, tokenizer), dict(rows.job.auto_settings or {}), 0.0
        record.setdefault("fields", [])
    else:
        data, record, tokens_per_second = _choose_budget(
            rows, device, [f for f in fields if f in AUTO_FIELDS], PRESET_FIELD in fields
        )
    check_memory(rows.job, data, device)  # before timing its steps to weigh compiling them
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


def _choose_budget(
    rows: JobRows, device: str, fields: list[str], preset: bool
) -> tuple[PreparedData, dict[str, Any], float]:
    """The budget's settings (and the preset, when `preset`): the data prepared with the chosen vocabulary (and
    model), the record, the tokens/s it used."""
    settings, job = get_settings(), rows.job
    model_spec, spec = dict(job.model_config), dict(job.training_config)
    training = TrainingSpec.stored(spec)
    pairs = distinct_len(rows.train_rows)  # a mixed job's repeats once: the vocabulary fits the data, not its repeats
    if "vocab_size" in fields:  # the tokenizer is trained with it, so it is chosen before preparing
        model_spec["vocab_size"] = choose_vocabulary(pairs, rows.languages)[0]
    job.model_config = model_spec
    data = prepare_job(rows, preset=candidate_configs(ModelSpec.stored(model_spec))[0][0] if preset else None)
    examples = examples_of(data)
    longest = int(example_sizes(examples).max())
    limit = memory_limit_bytes(torch.device(device))  # the GPU's memory on a GPU worker
    precision = train_config(job, device).resolved_precision
    record: dict[str, Any] = {"fields": [*fields, *([PRESET_FIELD] if preset else [])], "chosen": {}, "reasons": {}}
    measured, probe_seconds = 0.0, None
    curve: Curve = ()
    if preset:
        probe = choose_preset(rows, device, data, limit, precision, fixed_batch="max_tokens_per_batch" not in fields)
        data, curve, probe_seconds = _record_preset(job, probe, record), probe.curve, probe.probe_seconds
        model_spec = job.model_config  # with the preset (and dropout) chosen
        measured = curve[0][1] if curve else 0.0
    smallest = max(MIN_BATCH_TOKENS, longest) if "max_tokens_per_batch" in fields else training.max_tokens_per_batch
    if refusal := memory_needs(data.model_config, smallest, precision, limit, _model_named(job)):
        raise TrainingError(f"{refusal}; {PRESET_ADVICE if not job.init_model_id else BATCH_ADVICE}")
    fits = largest_batch(
        lambda tokens: estimate_memory(data.model_config, tokens, precision=precision)["training_total_bytes"] <= limit
    )
    if not fields:  # the preset alone (a job bounded by its steps, or one that gives every budget setting)
        return data, record, measured
    if measured:
        tokens_per_second = measured
    elif settings.worker_tokens_per_second:
        tokens_per_second = settings.worker_tokens_per_second
    elif {"max_tokens_per_batch", "warmup_steps"} & set(fields):
        t0 = time.monotonic()
        sizes = probe_sizes(device, longest, fits, examples)
        curve = measure_curve(data, train_config(job, device), sizes)
        tokens_per_second = measured = curve[0][1]
        probe_seconds = round(time.monotonic() - t0, 2)
    else:
        tokens_per_second = 0.0
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
        languages=rows.languages,
    )
    choice = choose(fields, inputs, fixed={"max_tokens_per_batch": training.max_tokens_per_batch})
    for name, value in choice.chosen.items():
        (model_spec if AUTO_FIELDS[name] == "model" else spec)[name] = value
    budget = choice.to_dict()
    if "max_tokens_per_batch" in choice.chosen and spec.get(LR_SCALE) is None:  # left out: it follows the batch
        update_tokens = choice.chosen["max_tokens_per_batch"] * training.grad_accum_steps
        spec[LR_SCALE] = batch_lr_scale(update_tokens)
        record["fields"].append(LR_SCALE)
        budget["chosen"][LR_SCALE] = spec[LR_SCALE]
        budget["reasons"][LR_SCALE] = (
            f"{spec[LR_SCALE]:g}: updates of {update_tokens:,} tokens"
            + (f", below {REFERENCE_BATCH:,}: the rate scaled by the square root of the ratio" if spec[LR_SCALE] < 1
               else f", at least {REFERENCE_BATCH:,}: the paper's rate")
        )  # fmt: skip
    job.training_config = spec
    record.update(
        {
            **budget,
            "chosen": {**record["chosen"], **budget["chosen"]},
            "reasons": {**record["reasons"], **budget["reasons"]},
            "throughput": "measured" if measured else ("pinned" if tokens_per_second else None),
            "probe_seconds": probe_seconds,
        }
    )
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


def _model_named(job: Job) -> str:
    spec = ModelSpec.stored(job.model_config)
    return f"model {job.init_model_id}" if job.init_model_id else f"preset {spec.preset!r}"


def check_memory(job: Job, data: PreparedData, device: str) -> None:
    """TrainingError naming the memory the job's model needs at its batch and this device's, when it does not fit
    (the API refuses such a job when it knows the device; a job that may run anywhere can land on a smaller one)."""
    spec = TrainingSpec.stored(job.training_config)
    precision = train_config(job, device).resolved_precision
    limit = memory_limit_bytes(torch.device(device))
    if refusal := memory_needs(data.model_config, spec.max_tokens_per_batch, precision, limit, _model_named(job)):
        raise TrainingError(f"{refusal}; {PRESET_ADVICE if not job.init_model_id else BATCH_ADVICE}")


def _record_preset(job: Job, probe: PresetProbe, record: dict[str, Any]) -> PreparedData:
    """The chosen preset (and the dropout that follows it, unless the job gives one) into the job's model section
    and the record; the data with that model."""
    spec, choice = ModelSpec.stored(job.model_config), probe.choice
    model_spec = {**job.model_config, PRESET_FIELD: choice.preset}
    record["chosen"][PRESET_FIELD], record["reasons"][PRESET_FIELD] = choice.preset, choice.reason
    record["preset_inputs"] = {**choice.inputs, "predictions": choice.to_dict()["predictions"]}
    record["probe_seconds"] = probe.probe_seconds
    config = probe.data.model_config
    if spec.dropout is None:
        parameters = next(c["parameters"] for c in choice.inputs["candidates"] if c["preset"] == choice.preset)
        dropout, why = choose_dropout(config.dropout, parameters, choice.inputs["corpus_tokens"], choice.epochs)
        model_spec[DROPOUT] = dropout
        record["fields"].append(DROPOUT)
        record["chosen"][DROPOUT], record["reasons"][DROPOUT] = dropout, why
        config = dataclasses.replace(config, dropout=dropout)
    job.model_config = model_spec
    return dataclasses.replace(probe.data, model_config=config)
