"""The training task: claim a job, train it (resuming from its last good checkpoint), record everything.

The task takes a job id and re-reads the world from the database. Delivered twice, the second delivery
finds the job claimed and returns; a worker that dies mid-run loses its lease, and the reaper re-queues
the job for another worker, which resumes from the newest checkpoint that passes its hash check.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

from celery import Task, current_app, shared_task
from sqlalchemy.orm import Session

from app.artifacts import get_store
from app.core import logs
from app.core.settings import get_settings
from app.core.task_names import TRAIN
from app.db import job_rows
from app.db.access_tables import ApiKey
from app.db.base import new_id
from app.db.keys import Caller
from app.db.session import session_scope
from app.db.tables import Job, TrainedModel
from app.schemas.evaluations import EvaluationCreate
from app.schemas.jobs import TrainingSpec
from app.services import evaluations, registry, webhooks
from app.services.queueing import dispatch_training
from model.data.corpus import DataError
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import latest_good_checkpoint, load_checkpoint, model_from_checkpoint, save_checkpoint
from model.io.checkpoint_files import CheckpointError, checkpoint_sha256
from model.nn.out_of_memory import is_out_of_memory
from model.probes.anatomy import count_parameters
from model.train.config import TrainingError
from model.train.events import Callbacks, TrainResult
from model.train.loop import train
from model.train.prepare import PreparedData
from worker.device import check_data_parallel, check_gpus, worker_device
from worker.training import job_log
from worker.training.auto_settings import check_memory, choose_settings, pending
from worker.training.calibration import calibrate_checkpoint, held_out
from worker.training.callbacks import LeaseLost, checkpoint_key, eval_metrics, job_callbacks
from worker.training.job_data import datasets_pending, load_job, prepare_job, train_config
from worker.training.lead import lead
from worker.training.lease import KEEPER_SECONDS, MINUTES_SPENT, LeaseKeeper, RunState, flush, track, untrack
from worker.training.sweep_trial import advance_sweep_of

log = logging.getLogger(__name__)


def model_pairs(job: Job) -> list[list[str]]:
    """A job of several pairs: [[source, target], ...] in its order (its pair_rows are loaded with it)."""
    return [[p.source_language, p.target_language] for p in job.pair_rows]


def _publish_model(job: Job, checkpoint_dir: str, source: str) -> TrainedModel:
    """Copy the weights to serve (no optimizer state) to models/<id> and describe them."""
    ckpt = load_checkpoint(checkpoint_dir, with_optimizer=False)
    pairs = model_pairs(job)
    model_id = new_id()
    key, store = f"models/{model_id}", get_store()
    target = save_checkpoint(
        store.local_path(key),
        model_from_checkpoint(ckpt),
        ckpt.tokenizer,
        ckpt.objective,
        step=ckpt.step,
        metrics=ckpt.meta.get("metrics", {}),
        kind="model",
        # noise: how a denoising model fills a <mask> (one token or a span), kept with the weights for an import
        extra_meta={
            "job_id": job.id,
            "source": source,
            "noise": TrainingSpec.stored(job.training_config).noise,
            **({"pairs": pairs} if pairs else {}),  # an import of its export keeps them
        },
    )
    store.push(target, key)
    size = sum(f.stat().st_size for f in target.iterdir() if f.is_file())
    return TrainedModel(
        id=model_id,
        owner_id=job.owner_id,
        job_id=job.id,
        objective=job.objective,
        config=ckpt.model_config.to_dict(),
        tokenizer_fingerprint=ckpt.tokenizer.fingerprint,
        metrics=eval_metrics(ckpt.meta.get("metrics", {})),
        source=source,
        parameters=count_parameters(ckpt.model_config)["total"],
        storage_key=key,
        sha256=checkpoint_sha256(target),
        size_bytes=size,
        parent_model_id=job.init_model_id,
        source_language=job.source_language,
        target_language=job.target_language,
        pairs=pairs or None,
    )


def run(claim: job_rows.Claim, state: RunState) -> None:
    with get_store().in_use(checkpoint_key(claim.job_id)):  # its checkpoints are read again to average and publish
        _run(claim, state)


def _prepare(claim: job_rows.Claim, state: RunState) -> tuple[Job, PreparedData, str, Path]:
    """The job (with the settings its time budget chose, recorded once), its data, the device, its checkpoints."""
    rows = load_job(claim.job_id)
    logs.bind(owner_id=rows.job.owner_id)  # the task's lines already carry its job id (app/core/logs.bind_task)
    device = str(worker_device())
    root = get_store().fetch(checkpoint_key(claim.job_id), missing_ok=True)  # a remote store: its checkpoints, here
    resume_from = latest_good_checkpoint(root)
    if pending(rows):  # settings left to the time budget, chosen once; a later attempt trains with them
        data = choose_settings(rows, device, Tokenizer.load(resume_from) if resume_from else None)
        chosen = rows.job.auto_settings
        assert chosen is not None  # choose_settings recorded its choice in the job
        with session_scope() as session:
            if not job_rows.record_auto_settings(
                session, claim, rows.job.model_config, rows.job.training_config, chosen
            ):
                raise LeaseLost(claim.job_id)
    else:
        data = prepare_job(rows, Tokenizer.load(resume_from) if resume_from else None)
    check_memory(rows.job, data, device)  # failed now, naming the memory it needs, not out of memory later
    state.set_progress(device=device, tokens_seen=rows.job.tokens_seen)
    if rows.sampled_rows:  # a job of several pairs: each pair's training rows as temperature sampling drew them
        state.add_metrics(0, {f"pair_rows/{pair}": float(n) for pair, n in rows.sampled_rows.items()})
    start = f"model {rows.job.init_model_id}'s weights" if rows.job.init_model_id else "scratch"
    if resume_from is not None:
        state.progress["step"] = load_checkpoint(resume_from, with_optimizer=False).step
        start = f"checkpoint {resume_from.name} (step {state.progress['step']})"
    log.info("job %s: attempt %d trains on %s from %s", claim.job_id, claim.attempt, device, start)
    return rows.job, data, device, root


def _run(claim: job_rows.Claim, state: RunState) -> None:
    settings = get_settings()
    # The lease is renewed from the claim on: preparing a large corpus or timing steps can outlast a short lease.
    keeper = LeaseKeeper(state, settings.job_lease_seconds, KEEPER_SECONDS)
    keeper.start()
    try:
        job, data, device, root = _prepare(claim, state)
        flush(state, settings.job_lease_seconds)  # its progress so far, and the organisation's minutes left today
        if state.lease_lost:
            raise LeaseLost(job.id)
        if state.out_of_minutes() and not state.progress.get("step"):  # nothing trained to keep
            raise TrainingError(f"{MINUTES_SPENT}: the job did not start; submit it again after midnight UTC")
        spec = TrainingSpec.stored(job.training_config)
        if spec.devices == 1 and spec.nodes == 1:
            callbacks = job_callbacks(state, job.id, root, settings.job_lease_seconds, trial=job.sweep_id is not None)
            result = _train(job, data, device, root, callbacks, state)
        else:  # the ranks prepare the data themselves: this process keeps the tokenizer and the pairs to calibrate on
            data = replace(data, train_examples=[], valid_examples=held_out(data), init_state=None)
            result = _train_group(claim, state, job, data.tokenizer, device, root)
        calibration = None
        if result.stop_reason not in ("cancelled", "preempted") and result.model_checkpoint is not None:
            calibration = calibrate_checkpoint(job.id, result.model_checkpoint, held_out(data), data.tokenizer, device)
    finally:
        keeper.stop()
    flush(state, settings.job_lease_seconds)
    if state.lease_lost:
        raise LeaseLost(job.id)
    if result.stop_reason == "preempted":
        _hand_back(claim, result.step)
        return
    pruned = result.stop_reason == "cancelled" and state.prune_reason is not None and not state.cancel_requested
    if result.stop_reason == "cancelled":
        log.info("job %s: %s at step %d", job.id, "pruned" if pruned else "cancelled", result.step)
    job_log.write(job.id)  # before the job's final status (on SQLite, not inside its transaction)
    with session_scope() as session:
        if result.stop_reason == "cancelled":
            status = job_rows.PRUNED if pruned else job_rows.CANCELLED
            if job_rows.finish(session, claim, status, step=result.step):
                webhooks.emit_job(session, job, status)  # job.cancelled (a pruned trial has no event)
            return
        source = (
            f"average of last {spec.average_last}"
            if result.averaged_checkpoint
            else f"best@{result.best_checkpoint_step}"
            if result.model_checkpoint == result.best_checkpoint
            else f"last@{result.step}"
        )
        assert result.model_checkpoint is not None  # a run that trained a step checkpointed it
        model = _publish_model(job, result.model_checkpoint, source)
        model.confidence_calibration = calibration
        caller = _registering_caller(session, job)
        unregistered = caller if isinstance(caller, str) else None
        if not job_rows.finish(session, claim, job_rows.SUCCEEDED, error=unregistered, step=result.step):
            session.rollback()
            get_store().delete(model.storage_key)
            raise LeaseLost(job.id)
        session.add(model)
        if job.register_as and isinstance(caller, Caller):
            session.flush()
            registry.register(session, caller, model, job.register_as)
        webhooks.emit_job(session, job, job_rows.SUCCEEDED, model_id=model.id)
    why = state.minutes_stop or result.stop_reason
    log.info("job %s succeeded at step %d (%s): model %s", job.id, result.step, why, model.id)
    if job.test_dataset_id:
        _evaluate_on_test_set(job, model.id)


def _registering_caller(session: Session, job: Job) -> Caller | str | None:
    """For a job with register_as, the key that submitted it if it may still register models, else why its model
    is left unregistered (kept as the succeeded job's error); None without register_as."""
    if not job.register_as:
        return None
    key = session.get(ApiKey, job.key_id) if job.key_id else None
    caller = registry.registering_caller(
        session, job.owner_id, job.key_id or "", key.prefix if key else "?", "submitted the job"
    )
    if isinstance(caller, str):
        log.warning("job %s: its model is not registered as %s: %s", job.id, job.register_as, caller)
        return f"succeeded, but its model was not registered as {job.register_as}: {caller}"
    return caller


def _evaluate_on_test_set(job: Job, model_id: str) -> None:
    """The job's test_dataset_id: an evaluation of its new model, queued for an inference worker. The job has
    succeeded already: a test set deleted meanwhile, or a broker away, is logged and leaves a failed evaluation
    at most (the owner can ask again with POST /v1/models/{id}/evaluations)."""
    try:
        with session_scope() as session:
            model = session.get(TrainedModel, model_id)
            assert model is not None  # committed just before
            body = EvaluationCreate(dataset_id=job.test_dataset_id)  # type: ignore[arg-type]  # str, as JSON gives it
            evaluation_id = evaluations.create(session, get_settings(), model, body, job_id=job.id).id
        evaluations.dispatch(evaluation_id, current_app)
    except Exception:
        log.exception(
            "job %s: the evaluation of model %s on test set %s was not queued", job.id, model_id, job.test_dataset_id
        )


def _train(job: Job, data: PreparedData, device: str, root: Path, callbacks: Callbacks, state: RunState) -> TrainResult:
    """Train in this process (one device, one host)."""
    return train(data, train_config(job, device), root, callbacks, resume=True, meta={"job_id": job.id})


def _train_group(
    claim: job_rows.Claim, state: RunState, job: Job, tokenizer: Tokenizer, device: str, root: Path
) -> TrainResult:
    """training.devices or training.nodes above 1: node 0 of a data-parallel group launched by PyTorch's elastic
    agent (worker/training/group.py); rank 0's TrainResult."""
    spec = TrainingSpec.stored(job.training_config)
    check_data_parallel(get_settings().worker_device, spec.devices)
    check_gpus(device, spec.devices)
    label = f"{spec.devices}x {device}" if spec.nodes == 1 else f"{spec.nodes}x{spec.devices} {device}"
    state.set_progress(device=label)
    flush(state, get_settings().job_lease_seconds)  # before rank 0 takes over the progress
    log.info("job %s: data-parallel on %d host(s) x %d × %s", job.id, spec.nodes, spec.devices, device)
    return lead(claim, state, job, tokenizer, train_config(job, device), root)


def _hand_back(claim: job_rows.Claim, step: int) -> None:
    """The worker is shutting down and step `step` is checkpointed: queue the job again (this attempt does not
    count against max_attempts) and send its message, so a worker that is staying picks it up at once."""
    with session_scope() as session:
        if not job_rows.release(
            session, claim, f"worker {claim.worker} shut down; resuming from step {step}", refund_attempt=True
        ):
            raise LeaseLost(claim.job_id)
    log.warning("job %s: preempted at step %d (checkpointed); back in the queue", claim.job_id, step)
    try:
        dispatch_training(claim.job_id, current_app)
    except Exception:  # the broker is away: the reaper's outbox sweep sends it later
        log.exception("job %s: could not re-send it; the reaper will", claim.job_id)


def _fail_or_retry(claim: job_rows.Claim, message: str, retry: bool) -> None:
    job_log.write(claim.job_id)  # the failure's lines before its status: a reader who stops there has them
    with session_scope() as session:
        job = session.get(Job, claim.job_id)
        if retry and job is not None and claim.attempt < job.max_attempts:
            job_rows.release(session, claim, f"attempt {claim.attempt} crashed: {message}; retrying")
            return
        if job_rows.finish(session, claim, job_rows.FAILED, error=message) and job is not None:
            webhooks.emit_job(session, job, job_rows.FAILED, error=message)


DATASET_WAIT_SECONDS = 2  # between two looks at a dataset still being parsed


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no types
    name=TRAIN, bind=True, ignore_result=True, acks_late=True, reject_on_worker_lost=True, max_retries=None
)
def train_job(self: Task, job_id: str) -> None:
    settings = get_settings()
    worker = f"{self.request.hostname or 'worker'}/{os.getpid()}"
    waiting = datasets_pending(job_id)
    if waiting:  # uploaded a moment ago: the job waits, queued, without holding this worker
        log.info("job %s waits for dataset(s) %s to be parsed", job_id, ", ".join(waiting))
        job_log.discard(job_id)  # about this delivery, not the job's run (the job shows waiting_for meanwhile)
        raise self.retry(countdown=DATASET_WAIT_SECONDS)  # as often as it takes: the task's max_retries is None
    with session_scope() as session:
        claim = job_rows.claim(session, job_id, worker, settings.job_lease_seconds)
    if claim is None:
        log.info("job %s is not queued (done, running elsewhere, cancelled or gone); nothing to do", job_id)
        job_log.discard(job_id)  # about this delivery, not the job's run
        return
    job_log.begin(job_id, claim.attempt)
    log.info("job %s: attempt %d on %s", job_id, claim.attempt, worker)
    state = RunState(claim=claim)
    track(state)  # from here a SIGTERM to this process checkpoints and hands the job back
    try:
        run(claim, state)
    except LeaseLost:
        state.lease_lost = True  # also when a conditional write found the job taken, before the keeper did
        log.warning("job %s: lease lost; another attempt owns it now", job_id)
    except (TrainingError, DataError, CheckpointError) as exc:
        log.error("job %s: failed: %s", job_id, exc)
        _fail_or_retry(claim, str(exc), retry=False)
    except Exception as exc:
        if _out_of_memory(exc):  # it would run out again: failed now, with what to change
            log.error("job %s: out of memory", job_id, exc_info=exc)
            _fail_or_retry(claim, "out of memory: lower training.max_tokens_per_batch or the model size", retry=False)
        else:  # a bug or a transient fault: retried up to max_attempts, then failed
            log.exception("job %s: attempt %d crashed", job_id, claim.attempt)
            _fail_or_retry(claim, f"{type(exc).__name__}: {exc}", retry=True)
    finally:
        untrack(state)
        # A worker that lost the lease writes nothing more for the job (worker/training/lease.py); else its last lines.
        if state.lease_lost:
            job_log.discard(job_id)
        else:
            job_log.write(job_id, final=True)
    if not state.lease_lost:
        advance_sweep_of(job_id)


_out_of_memory = is_out_of_memory  # outside a step (data, evaluation): failed at once, with what to change
