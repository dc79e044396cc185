"""Settings a job left to its time budget, chosen by the worker that first runs it (the rule: model/train/budget.py).

The worker measures what the rule needs (the corpus, the longest example, what fits in memory, its own
throughput) and the task records the choice in the job once; a later attempt finds it and trains with it.
"""

from __future__ import annotations

import logging
import time

import torch

from app.core.settings import get_settings
from app.schemas.jobs import TrainingSpec
from model.probes.anatomy import estimate_memory
from model.train.budget import AUTO_FIELDS, BudgetInputs, choose, choose_vocabulary, largest_batch
from model.train.prepare import PreparedData
from model.train.throughput import measure_throughput
from worker.device import memory_limit_bytes
from worker.training.job_data import JobRows, prepare_job, train_config

log = logging.getLogger(__name__)
PROBE_TOKENS = 2048  # batch size of the timed steps


def pending(rows: JobRows) -> list[str]:
    """The fields still to choose: none once the choice is recorded."""
    auto = rows.job.auto_settings or {}
    return [] if "chosen" in auto else list(auto.get("fields", []))


def choose_settings(rows: JobRows, device: str) -> PreparedData:
    """Choose the pending settings of rows.job (detached): its configs get the values and auto_settings the
    record (the caller writes them to the database); returns its data, prepared with the chosen vocabulary."""
    settings, fields, job = get_settings(), pending(rows), rows.job
    model_spec, spec = dict(job.model_config), dict(job.training_config)
    pairs = len(rows.train_rows)
    if "vocab_size" in fields:  # the tokenizer is trained with it, so it is chosen before preparing
        model_spec["vocab_size"] = choose_vocabulary(pairs)[0]
    job.model_config = model_spec
    data = prepare_job(rows)
    examples = data.train_examples(0) if callable(data.train_examples) else data.train_examples
    longest = max(e.size for e in examples)
    limit = memory_limit_bytes(torch.device(device))  # the GPU's memory on a GPU worker
    precision = train_config(job, device).resolved_precision
    fits = largest_batch(
        lambda tokens: estimate_memory(data.model_config, tokens, precision=precision)["training_total_bytes"] <= limit
    )
    measured, probe_seconds = 0.0, None
    if settings.worker_tokens_per_second:
        tokens_per_second = settings.worker_tokens_per_second
    elif {"max_tokens_per_batch", "warmup_steps"} & set(fields):
        t0 = time.monotonic()
        probe = min(max(PROBE_TOKENS, longest), fits)
        tokens_per_second = measured = measure_throughput(data, train_config(job, device), probe)
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
    )
    choice = choose(fields, inputs, fixed={"max_tokens_per_batch": training.max_tokens_per_batch})
    for name, value in choice.chosen.items():
        (model_spec if AUTO_FIELDS[name] == "model" else spec)[name] = value
    job.training_config = spec
    job.auto_settings = {
        "fields": fields,
        **choice.to_dict(),
        "throughput": "measured" if measured else ("pinned" if tokens_per_second else None),
        "probe_seconds": probe_seconds,
    }
    log.info(
        "job %s: chose %s from a budget of %g minutes (%d pairs, longest example %d tokens, batches fit %d tokens, "
        "%.0f tokens/s %s)",
        job.id,
        choice.chosen,
        training.max_minutes,
        pairs,
        longest,
        fits,
        tokens_per_second,
        job.auto_settings["throughput"] or "not needed",
    )
    return data
