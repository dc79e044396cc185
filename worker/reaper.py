"""The reaper: re-queues jobs whose lease expired, (re)sends jobs whose message was never sent or lost, sends again
or fails datasets stuck in processing and background work (evaluations, file and dataset translations) whose worker
died, moves running sweeps and pipelines on, sends the messages of webhook
deliveries that are due with none on its way, removes uploads staged for an import that no worker will ever read and
webhook deliveries that ended long ago, and sends the collector the files of deleted rows whose grace period has
passed (worker/collector.py).

Every worker runs it from its heartbeat thread; the conditional UPDATEs in app.db.job_rows make concurrent
reapers harmless, and a duplicate message is a no-op for the training task. Two reapers deleting the same stale
upload is harmless too: deleting a missing key is fine in every store.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from celery import Celery

from app.artifacts import ArtifactStore, ArtifactStoreError, get_store
from app.core.settings import Settings, get_settings
from app.core.task_names import (
    COLLECT_ARTIFACTS,
    DATA_QUEUE,
    EVALUATE,
    FILTER_DATASET,
    INFERENCE_QUEUE,
    PROCESS_DATASET,
    TRANSLATE_DATASET,
    TRANSLATE_FILE,
)
from app.db import dataset_rows, job_rows, task_rows, webhook_rows
from app.db.background_tables import Evaluation, FileTranslation
from app.db.dataset_translation_tables import DatasetTranslation
from app.db.session import session_scope
from app.db.tables import Job
from app.services import pipeline_runner, sweep_runner, webhooks
from app.services.queueing import dispatch_training
from worker import collector
from worker.data import ingest

log = logging.getLogger(__name__)

STAGING_PREFIX = "imports"  # app/api/model_imports.py stages each upload as imports/<model id>.tar.gz
# How long an import may run once a worker took its message: minutes for the largest OPUS-MT model; an hour
# leaves room for a slow host and for clocks that disagree between the API's host and the store.
IMPORT_RUN_SECONDS = 3600
STAGING_SWEEP_SECONDS = 300  # list the staging folder at most this often (a LIST request on S3, per worker)
_next_staging_sweep = 0.0  # time.monotonic() of this process's next staging sweep
SWEEP_ADVANCE_SECONDS = 30  # move running sweeps on at most this often (a replay of each one's study)
_next_sweep_advance = 0.0
STALL_SWEEP_SECONDS = 30  # look for stalled background work at most this often, per process
_next_stall_sweep = 0.0
BACKGROUND_TASKS: tuple[tuple[task_rows.Table, str, str], ...] = (
    (Evaluation, EVALUATE, "evaluation"),
    (FileTranslation, TRANSLATE_FILE, "file translation"),
    (DatasetTranslation, TRANSLATE_DATASET, "dataset translation"),
)
PIPELINE_ADVANCE_SECONDS = 5  # move running pipelines on at most this often (a few reads each: a step's end is seen)
_next_pipeline_advance = 0.0
DELIVERY_RETENTION = timedelta(days=30)  # webhook deliveries that ended are kept this long
DELIVERY_PRUNE_SECONDS = 3600  # remove them at most this often, per process
_next_delivery_prune = 0.0
COLLECT_SWEEP_SECONDS = 300  # send the collector the tombstones that are due at most this often, per process
RESULTS_SWEEP_SECONDS = 600  # remove unread inference answers past result_expires at most this often, per process
COLLECT_BATCH = 200  # tombstone ids per message
_next_collect = 0.0
_next_results = 0.0


def sweep(celery: Celery) -> tuple[list[str], list[str], list[str]]:
    """One pass. Returns (requeued, failed, dispatched) job ids."""
    settings = get_settings()
    with session_scope() as session:
        requeued, failed = job_rows.reap_expired(session)
        to_send = job_rows.undispatched(session, timedelta(seconds=settings.job_redispatch_seconds))
    for job_id in requeued:
        log.warning("job %s: lease expired; back in the queue", job_id)
    for job_id in failed:
        log.error("job %s: lease expired on its last attempt, or with a cancel asked for; ended", job_id)
        _report_failed(job_id)
    dispatched = []
    for job_id in to_send:
        dispatch_training(job_id, celery)
        dispatched.append(job_id)
    sweep_staging(settings)
    sweep_datasets(celery, settings)
    sweep_stalled(celery, settings)
    dispatched += advance_sweeps(celery, settings)
    advance_pipelines(celery, settings)
    send_due_deliveries(settings)
    send_due_collections(celery, settings)
    clean_results(celery)
    return requeued, failed, dispatched


def clean_results(celery: Celery, force: bool = False) -> None:
    """Answers older than result_expires that no API read (their request timed out), at most every
    RESULTS_SWEEP_SECONDS: files of the embedded default's result folder, rows of a database backend (Redis expires
    its own). Celery's `backend_cleanup` does this from a beat this service does not run."""
    global _next_results
    if not force and time.monotonic() < _next_results:
        return
    _next_results = time.monotonic() + RESULTS_SWEEP_SECONDS
    celery.backend.cleanup()


def send_due_collections(celery: Celery, settings: Settings, force: bool = False) -> list[int]:
    """Send the ids of tombstones older than ARTIFACT_GRACE_SECONDS to the collector (worker/tasks/collect.py) on
    the data queue, at most every COLLECT_SWEEP_SECONDS. Returns the ids sent."""
    global _next_collect
    if not force and time.monotonic() < _next_collect:
        return []
    _next_collect = time.monotonic() + COLLECT_SWEEP_SECONDS
    ids = collector.due_ids(timedelta(seconds=settings.artifact_grace_seconds))
    for start in range(0, len(ids), COLLECT_BATCH):
        celery.send_task(COLLECT_ARTIFACTS, args=[ids[start : start + COLLECT_BATCH]], queue=DATA_QUEUE)
    return ids


def sweep_datasets(celery: Celery, settings: Settings) -> tuple[list[str], list[str]]:
    """Datasets processing for longer than DATASET_PROCESSING_TIMEOUT_SECONDS since their task was sent: sent again,
    or failed once sent DATASET_MAX_ATTEMPTS times (app/db/dataset_rows.py). Returns (sent again, failed) ids."""
    timeout = settings.dataset_processing_timeout_seconds
    with session_scope() as session:
        stuck = dataset_rows.stuck(session, timedelta(seconds=timeout))
    sent: list[str] = []
    failed: list[str] = []
    for dataset in stuck:
        if dataset.attempt >= settings.dataset_max_attempts:
            error = (
                f"its processing was sent to the data queue {dataset.attempt} times and none finished within "
                f"DATASET_PROCESSING_TIMEOUT_SECONDS={timeout} (a worker died, or none reads the queue); "
                + ("filter its parent again" if dataset.filtered else "upload it again")
            )
            if ingest.finish(dataset.id, status="failed", error=error):
                log.error("dataset %s: still processing after %d sends; failed", dataset.id, dataset.attempt)
                failed.append(dataset.id)
            continue
        with session_scope() as session:
            if not dataset_rows.mark_sent_again(session, dataset):
                continue
        task = FILTER_DATASET if dataset.filtered else PROCESS_DATASET
        celery.send_task(task, args=[dataset.id], queue=DATA_QUEUE)
        log.warning("dataset %s: still processing after %d s; its task sent again", dataset.id, timeout)
        sent.append(dataset.id)
    return sent, failed


def sweep_stalled(celery: Celery, settings: Settings, force: bool = False) -> tuple[list[str], list[str]]:
    """Background rows running with no progress for BACKGROUND_STALL_SECONDS (their worker died): sent again to the
    inference queue, where a worker claims the row and resumes it (a dataset translation after its parts, the others
    from the start), or failed once sent BACKGROUND_MAX_ATTEMPTS times. At most every STALL_SWEEP_SECONDS (or
    BACKGROUND_STALL_SECONDS, if shorter) unless `force`. Returns (sent again, failed) ids."""
    global _next_stall_sweep
    if not force and time.monotonic() < _next_stall_sweep:
        return [], []
    _next_stall_sweep = time.monotonic() + min(STALL_SWEEP_SECONDS, settings.background_stall_seconds)
    stall = timedelta(seconds=settings.background_stall_seconds)
    sent: list[str] = []
    failed: list[str] = []
    for table, task, what in BACKGROUND_TASKS:
        with session_scope() as session:
            stalled = task_rows.stalled(session, table, stall)
        for row_id, attempt in stalled:
            if attempt >= settings.background_max_attempts:
                error = (
                    f"its task was sent {attempt} times and each time its progress stopped for "
                    f"BACKGROUND_STALL_SECONDS={settings.background_stall_seconds} (its worker died); ask again"
                )
                with session_scope() as session:
                    if task_rows.fail(session, table, row_id, error):
                        if table is Evaluation:
                            webhooks.emit_evaluation(session, row_id)  # evaluation.failed
                        log.error("%s %s: stalled after %d sends; failed", what, row_id, attempt)
                        failed.append(row_id)
                continue
            with session_scope() as session:
                if not task_rows.sent_again(session, table, row_id, attempt):
                    continue
            celery.send_task(task, args=[row_id], queue=INFERENCE_QUEUE)
            log.warning("%s %s: no progress for %s; its task sent again", what, row_id, stall)
            sent.append(row_id)
    return sent, failed


def _report_failed(job_id: str) -> None:
    """job.failed (or job.cancelled) for a job the reaper ended (webhooks.emit logs its own errors; the row's are
    logged here)."""
    try:
        with session_scope() as session:
            job = session.get(Job, job_id)
            if job is not None:
                webhooks.emit_job(session, job, job.status, error=job.error if job.status == job_rows.FAILED else None)
    except Exception:
        log.exception("job %s: its job.failed event was not emitted", job_id)


def send_due_deliveries(settings: Settings) -> list[str]:
    """Send the message of every webhook delivery that is due with none on its way: a retry too far off for a
    countdown, a delivery whose message the broker lost or never got, or one whose worker died mid-attempt (its lock
    expired). Also removes, at most every DELIVERY_PRUNE_SECONDS, deliveries that ended over DELIVERY_RETENTION ago.
    Returns the ids sent."""
    global _next_delivery_prune
    with session_scope() as session:
        due = webhook_rows.take_unsent(session, timedelta(seconds=settings.webhook_redispatch_seconds))
    webhooks.send(due)
    if time.monotonic() >= _next_delivery_prune:
        _next_delivery_prune = time.monotonic() + DELIVERY_PRUNE_SECONDS
        with session_scope() as session:
            removed = webhook_rows.delete_finished(session, DELIVERY_RETENTION)
        if removed:
            log.info("removed %d webhook deliveries that ended over %d days ago", removed, DELIVERY_RETENTION.days)
    return due


def advance_sweeps(celery: Celery, settings: Settings) -> list[str]:
    """Move every running sweep on, at most every SWEEP_ADVANCE_SECONDS in this process: a trial's end whose
    call was lost (its worker died after the job's last write), or a restart of everything, starts the next trials
    here. Returns the jobs it started (their messages sent)."""
    global _next_sweep_advance
    if time.monotonic() < _next_sweep_advance:
        return []
    _next_sweep_advance = time.monotonic() + SWEEP_ADVANCE_SECONDS
    started = []
    with session_scope() as session:
        sweep_ids = sweep_runner.running_sweeps(session)
    for sweep_id in sweep_ids:
        try:
            with session_scope() as session:
                jobs = sweep_runner.advance(session, settings, sweep_id)
        except Exception:
            log.exception("sweep %s: not moved on; tried again on the next pass", sweep_id)
            continue
        for job_id in jobs:
            dispatch_training(job_id, celery)
        started += jobs
    return started


def advance_pipelines(celery: Celery, settings: Settings, force: bool = False) -> list[pipeline_runner.Started]:
    """Move every running pipeline on, at most every PIPELINE_ADVANCE_SECONDS in this process: a step that ended
    starts the next one here. Returns the objects it started (their messages sent)."""
    global _next_pipeline_advance
    if not force and time.monotonic() < _next_pipeline_advance:
        return []
    _next_pipeline_advance = time.monotonic() + PIPELINE_ADVANCE_SECONDS
    started: list[pipeline_runner.Started] = []
    with session_scope() as session:
        pipeline_ids = pipeline_runner.running_pipelines(session)
    for pipeline_id in pipeline_ids:
        try:
            with session_scope() as session:
                now = pipeline_runner.advance(session, settings, pipeline_id)
        except Exception:
            log.exception("pipeline %s: not moved on; tried again on the next pass", pipeline_id)
            continue
        pipeline_runner.send(now, celery)
        started += now
    return started


def staging_max_age(settings: Settings) -> timedelta:
    """Past this age a staged upload is no import's: the API sends its message with EXPORT_TIMEOUT_SECONDS as
    the expiry, so no worker starts it later than that, and one that started it in time has long finished (it
    deletes the upload itself, imported or refused). Only an expired message or a crash leaves one behind."""
    return timedelta(seconds=settings.export_timeout_seconds + IMPORT_RUN_SECONDS)


def sweep_staging(settings: Settings) -> list[str]:
    """Remove stale staged uploads, at most every STAGING_SWEEP_SECONDS in this process; returns their keys.
    A store that is away is logged and tried again on the next pass."""
    global _next_staging_sweep
    if time.monotonic() < _next_staging_sweep:
        return []
    _next_staging_sweep = time.monotonic() + STAGING_SWEEP_SECONDS
    try:
        removed = remove_stale_staging(get_store(), staging_max_age(settings))
    except ArtifactStoreError as exc:
        log.warning("stale uploads under %s/ not swept: %s", STAGING_PREFIX, exc)
        return []
    for key in removed:
        log.warning("removed %s: an upload no import will read (its message expired, or its worker died)", key)
    return removed


def remove_stale_staging(store: ArtifactStore, max_age: timedelta, now: datetime | None = None) -> list[str]:
    """Delete every upload under imports/ last written more than max_age before now; returns their keys."""
    now = now or datetime.now(UTC)
    removed = []
    for key, written in store.list_files(STAGING_PREFIX):
        if now - written > max_age:
            store.delete(key)
            removed.append(key)
    return sorted(removed)
