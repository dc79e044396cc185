"""The training task: claim a job, train it (resuming from its last good checkpoint), record everything.

The task takes a job id and re-reads the world from the database. Delivered twice, the second delivery
finds the job claimed and returns; a worker that dies mid-run loses its lease, and the reaper re-queues
the job for another worker, which resumes from the newest checkpoint that passes its hash check.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
from celery import current_app, shared_task
from sqlalchemy import delete, select

from app.artifacts import get_store
from app.db import jobs as job_rows
from app.db import metrics as metric_rows
from app.db.base import new_id
from app.db.models import Checkpoint, Dataset, Job, TrainedModel
from app.db.session import session_scope
from app.settings import get_settings
from app.tasks import TRAIN, TRAINING_QUEUE
from model.anatomy import count_parameters
from model.checkpoint import (CheckpointError, checkpoint_sha256, latest_good_checkpoint, list_checkpoints,
                              load_checkpoint, model_from_checkpoint, save_checkpoint)
from model.data import DataError, read_monolingual, read_parallel
from model.tokenizer import Tokenizer
from model.training import (Callbacks, CheckpointInfo, PreparedData, StepInfo, TrainConfig, TrainingError, TrainResult,
                            prepare, train)
from worker.lease import LeaseKeeper, RunState, flush, track, untrack

log = logging.getLogger(__name__)
KEEPER_SECONDS = 2.0  # how often progress is written and cancel is noticed
TRAIN_CONFIG_FIELDS = ("max_steps", "max_minutes", "max_tokens_per_batch", "grad_accum_steps", "warmup_steps",
                       "lr_scale", "label_smoothing", "clip_norm", "seed", "eval_every", "eval_budget", "checkpoint_every",
                       "early_stopping_patience", "keep_checkpoints", "average_last")
EVAL_NAMES = {"loss": "valid_loss", "perplexity": "valid_ppl"}  # the rest keep their names (bleu, chrf, ...)


def eval_metrics(values: dict[str, float]) -> dict[str, float]:
    return {EVAL_NAMES.get(k, k): v for k, v in values.items()}


class LeaseLost(Exception):
    pass


def pick_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def checkpoint_key(job_id: str) -> str:
    return f"jobs/{job_id}/checkpoints"


def _read_rows(dataset: Dataset) -> list:
    path = get_store().fetch(dataset.storage_key)  # a remote store: downloaded once into this host's cache
    return read_parallel(path) if dataset.kind == "parallel" else read_monolingual(path)


def _train_config(job: Job, device: str) -> TrainConfig:
    spec = job.training_config
    # A job submitted before a field existed lacks it and gets TrainConfig's default.
    return TrainConfig(**{name: spec[name] for name in TRAIN_CONFIG_FIELDS if name in spec}, device=device,
                       bf16=device.startswith("cuda"))


def _callbacks(state: RunState, job_id: str, root: Path, lease_seconds: int) -> Callbacks:
    def on_step(info: StepInfo) -> None:
        state.add_metrics(info.step, {"train_loss": info.loss, "train_nll_loss": info.nll_loss, "lr": info.lr,
                                      "tokens_per_second": info.tokens_per_second, "grad_norm": info.grad_norm})
        state.set_progress(step=info.step, total_steps=info.total_steps, tokens_per_second=info.tokens_per_second,
                           eta_seconds=info.eta_seconds, tokens_seen=_tokens_seen(state) + info.tokens)

    def on_eval(step: int, values: dict[str, float]) -> None:
        state.add_metrics(step, eval_metrics(values))
        flush(state, lease_seconds)
        if state.lease_lost:
            raise LeaseLost(job_id)

    def on_checkpoint(info: CheckpointInfo) -> None:
        flush(state, lease_seconds)
        if state.lease_lost:
            raise LeaseLost(job_id)
        if info.kind != "step":
            return
        store, key = get_store(), f"{checkpoint_key(job_id)}/{Path(info.path).name}"
        store.push(info.path, key)  # before its row; a remote store gets the manifest last, so a torn upload is never good
        with session_scope() as session:
            session.execute(delete(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.step == info.step))
            session.add(Checkpoint(job_id=job_id, step=info.step, storage_key=key,
                                   sha256=info.sha256, size_bytes=info.size_bytes, metrics=eval_metrics(info.metrics)))
            kept = {f"{checkpoint_key(job_id)}/{p.name}" for p in list_checkpoints(root)}
            rotated = session.scalars(select(Checkpoint.storage_key).where(
                Checkpoint.job_id == job_id, Checkpoint.storage_key.not_in(kept))).all()
            session.execute(delete(Checkpoint).where(Checkpoint.job_id == job_id, Checkpoint.storage_key.not_in(kept)))
        for old in rotated:  # the trainer removed them here; remove them from the store too
            store.delete(old)

    return Callbacks(on_step=on_step, on_eval=on_eval, on_checkpoint=on_checkpoint,
                     should_stop=lambda: state.should_stop, should_preempt=lambda: state.preempt_requested)


def _tokens_seen(state: RunState) -> int:
    return int(state.progress.get("tokens_seen", 0))


def _publish_model(job: Job, checkpoint_dir: str, source: str) -> TrainedModel:
    """Copy the weights to serve (no optimizer state) to models/<id> and describe them."""
    ckpt = load_checkpoint(checkpoint_dir, with_optimizer=False)
    model_id = new_id()
    key, store = f"models/{model_id}", get_store()
    target = save_checkpoint(store.local_path(key), model_from_checkpoint(ckpt), ckpt.tokenizer, ckpt.objective,
                             step=ckpt.step, metrics=ckpt.meta.get("metrics", {}), kind="model",
                             extra_meta={"job_id": job.id, "source": source})
    store.push(target, key)
    size = sum(f.stat().st_size for f in target.iterdir() if f.is_file())
    return TrainedModel(id=model_id, owner_id=job.owner_id, job_id=job.id, objective=job.objective,
                        config=ckpt.model_config.to_dict(), tokenizer_fingerprint=ckpt.tokenizer.fingerprint,
                        metrics=eval_metrics(ckpt.meta.get("metrics", {})), source=source,
                        parameters=count_parameters(ckpt.model_config)["total"], storage_key=key,
                        sha256=checkpoint_sha256(target), size_bytes=size)


def run(claim: job_rows.Claim, state: RunState) -> None:
    with get_store().in_use(checkpoint_key(claim.job_id)):  # its checkpoints are read again to average and publish
        _run(claim, state)


def _run(claim: job_rows.Claim, state: RunState) -> None:
    settings = get_settings()
    with session_scope() as session:
        job = session.get(Job, claim.job_id)
        datasets = {d.id: d for d in session.scalars(select(Dataset).where(Dataset.id.in_(
            [i for i in (job.dataset_id, job.valid_dataset_id) if i])))}
        session.expunge_all()
    if job.dataset_id not in datasets:
        raise TrainingError(f"dataset {job.dataset_id} no longer exists")
    device = pick_device()
    root = get_store().fetch(checkpoint_key(job.id), missing_ok=True)  # a remote store: this job's checkpoints, here
    resume_from = latest_good_checkpoint(root)
    tokenizer = Tokenizer.load(resume_from) if resume_from else None
    spec, model_spec = job.training_config, job.model_config
    valid_rows = _read_rows(datasets[job.valid_dataset_id]) if job.valid_dataset_id else None
    data = prepare(job.objective, _read_rows(datasets[job.dataset_id]), valid_rows, preset=model_spec["preset"],
                   model_overrides={k: v for k, v in model_spec.items() if k not in ("preset", "vocab_size") and v is not None},
                   vocab_size=model_spec["vocab_size"], max_len=spec["max_length"], seed=spec["seed"],
                   valid_fraction=spec["valid_fraction"], tokenizer=tokenizer, noise=spec["noise"],
                   mask_ratio=spec["mask_ratio"], tokenizer_kind=spec.get("tokenizer", "byte_bpe"),
                   normalization=spec.get("normalization", "nfkc"), prefix_space=spec.get("prefix_space", True))
    state.set_progress(device=device, tokens_seen=job.tokens_seen)
    if resume_from is not None:
        state.progress["step"] = load_checkpoint(resume_from, with_optimizer=False).step
    keeper = LeaseKeeper(state, settings.job_lease_seconds, KEEPER_SECONDS)
    keeper.start()
    try:
        result = _train(job, data, device, root, _callbacks(state, job.id, root, settings.job_lease_seconds), state)
    finally:
        keeper.stop()
    flush(state, settings.job_lease_seconds)
    if state.lease_lost:
        raise LeaseLost(job.id)
    if result.stop_reason == "preempted":
        _hand_back(claim, result.step)
        return
    with session_scope() as session:
        if result.stop_reason == "cancelled":
            job_rows.finish(session, claim, job_rows.CANCELLED, step=result.step)
            return
        source = ("average of last %d" % spec["average_last"] if result.averaged_checkpoint
                  else f"best@{result.best_step}" if result.model_checkpoint == result.best_checkpoint else f"last@{result.step}")
        model = _publish_model(job, result.model_checkpoint, source)
        if not job_rows.finish(session, claim, job_rows.SUCCEEDED, step=result.step):
            session.rollback()
            get_store().delete(model.storage_key)
            raise LeaseLost(job.id)
        session.add(model)
    log.info("job %s succeeded at step %d (%s): model %s", job.id, result.step, result.stop_reason, model.id)


def _train(job: Job, data: PreparedData, device: str, root: Path, callbacks: Callbacks, state: RunState) -> TrainResult:
    """Train here, or with training.devices = N > 1 as rank 0 of N data-parallel processes (worker/ddp_peer.py)."""
    devices = int(job.training_config.get("devices", 1))
    if devices == 1:
        return train(data, _train_config(job, device), root, callbacks, resume=True, meta={"job_id": job.id})
    from worker.ddp_peer import train_data_parallel  # only data-parallel jobs need it

    state.set_progress(device=f"{devices}x {device}")
    return train_data_parallel(job.id, data, _train_config(job, device), devices, root, callbacks, {"job_id": job.id})


def _hand_back(claim: job_rows.Claim, step: int) -> None:
    """The worker is shutting down and step `step` is checkpointed: queue the job again (this attempt does not
    count against max_attempts) and send its message, so a worker that is staying picks it up at once."""
    with session_scope() as session:
        if not job_rows.release(session, claim, f"worker {claim.worker} shut down; resuming from step {step}",
                                refund_attempt=True):
            raise LeaseLost(claim.job_id)
    log.warning("job %s: preempted at step %d (checkpointed); back in the queue", claim.job_id, step)
    try:
        current_app.send_task(TRAIN, args=[claim.job_id], queue=TRAINING_QUEUE)
        with session_scope() as session:
            job_rows.mark_dispatched(session, claim.job_id)
    except Exception:  # the broker is away: the reaper's outbox sweep sends it later
        log.exception("job %s: could not re-send it; the reaper will", claim.job_id)


def _fail_or_retry(claim: job_rows.Claim, message: str, retry: bool) -> None:
    with session_scope() as session:
        job = session.get(Job, claim.job_id)
        if retry and job is not None and claim.attempt < job.max_attempts:
            job_rows.release(session, claim, f"attempt {claim.attempt} crashed: {message}; retrying")
            return
        job_rows.finish(session, claim, job_rows.FAILED, error=message)


@shared_task(name=TRAIN, bind=True, ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def train_job(self, job_id: str) -> None:
    settings = get_settings()
    worker = f"{self.request.hostname or 'worker'}/{os.getpid()}"
    with session_scope() as session:
        claim = job_rows.claim(session, job_id, worker, settings.job_lease_seconds)
    if claim is None:
        log.info("job %s is not queued (done, running elsewhere, cancelled or gone); nothing to do", job_id)
        return
    log.info("job %s: attempt %d on %s", job_id, claim.attempt, worker)
    state = RunState(claim=claim)
    track(state)  # from here a SIGTERM to this process checkpoints and hands the job back
    try:
        run(claim, state)
    except LeaseLost:
        log.warning("job %s: lease lost; another attempt owns it now", job_id)
    except (TrainingError, DataError, CheckpointError) as exc:
        _fail_or_retry(claim, str(exc), retry=False)
    except Exception as exc:
        if _out_of_memory(exc):  # it would run out again: failed now, with what to change
            _fail_or_retry(claim, "out of memory: lower training.max_tokens_per_batch or the model size", retry=False)
        else:  # a bug or a transient fault: retried up to max_attempts, then failed
            log.exception("job %s: attempt %d crashed", job_id, claim.attempt)
            _fail_or_retry(claim, f"{type(exc).__name__}: {exc}", retry=True)
    finally:
        untrack(state)


def _out_of_memory(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, Python's MemoryError, or the CPU allocator's RuntimeError."""
    return (isinstance(exc, (torch.OutOfMemoryError, MemoryError))
            or (isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)))
