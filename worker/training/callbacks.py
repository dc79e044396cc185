"""A training run's hooks: what the trainer's callbacks write about a job (progress, metrics, evaluations,
checkpoints) through its RunState and lease, used by the task's process or a data-parallel group's rank 0."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import delete, select

from app.artifacts import get_store
from app.db.run_record_tables import JobCheckpoint
from app.db.session import session_scope
from model.io.checkpoint_files import list_checkpoints
from model.train.events import Callbacks, CheckpointInfo, StepInfo
from worker.training.lease import RunState, flush
from worker.training.step_memory import memory_callback
from worker.training.sweep_trial import report_to_sweep

log = logging.getLogger(__name__)
EVAL_NAMES = {"loss": "valid_loss", "perplexity": "valid_ppl"}  # the rest keep their names (bleu, chrf, ...)


def eval_metrics(values: dict[str, float]) -> dict[str, float]:
    """The trainer's evaluation under the job's series names; a pair's keeps its suffix ("valid_loss/en-fr")."""
    out = {}
    for key, value in values.items():
        name, slash, pair = key.partition("/")
        out[EVAL_NAMES.get(name, name) + slash + pair] = value
    return out


class LeaseLost(Exception):
    pass


def checkpoint_key(job_id: str) -> str:
    return f"jobs/{job_id}/checkpoints"


def job_callbacks(state: RunState, job_id: str, root: Path, lease_seconds: int, trial: bool = False) -> Callbacks:
    """The trainer's hooks for job `job_id`; a sweep's trial (`trial`) also reports each evaluation to its sweep."""

    def on_step(info: StepInfo) -> None:
        state.train_seconds = info.elapsed
        values = {
            "train_loss": info.loss,
            "train_nll_loss": info.nll_loss,
            "lr": info.lr,
            "tokens_per_second": info.tokens_per_second,
            "grad_norm": info.grad_norm,
        }
        padding = {"target_padding": info.target_padding, "source_padding": info.source_padding}
        state.add_metrics(info.step, values | {name: v for name, v in padding.items() if v is not None})
        state.set_progress(
            step=info.step,
            total_steps=info.total_steps,
            tokens_per_second=info.tokens_per_second,
            eta_seconds=info.eta_seconds,
            tokens_seen=_tokens_seen(state) + info.tokens,
        )

    def on_eval(step: int, values: dict[str, float]) -> None:
        state.add_metrics(step, eval_metrics(values))
        shown = ", ".join(f"{name}={value:.4g}" for name, value in eval_metrics(values).items())
        log.info("job %s: evaluation at step %d: %s", job_id, step, shown)
        flush(state, lease_seconds)
        if state.lease_lost:
            raise LeaseLost(job_id)
        if trial:
            report_to_sweep(state, job_id, step, eval_metrics(values))

    def on_checkpoint(info: CheckpointInfo) -> None:
        flush(state, lease_seconds)
        if state.lease_lost:
            raise LeaseLost(job_id)
        if info.kind != "step":
            log.info("job %s: %s checkpoint written (%s)", job_id, info.kind, _size(info.size_bytes))
            return
        store, key = get_store(), f"{checkpoint_key(job_id)}/{Path(info.path).name}"
        store.push(
            info.path, key
        )  # before its row; a remote store gets the manifest last, so a torn upload is never good
        with session_scope() as session:
            session.execute(
                delete(JobCheckpoint).where(JobCheckpoint.job_id == job_id, JobCheckpoint.step == info.step)
            )
            session.add(
                JobCheckpoint(
                    job_id=job_id,
                    step=info.step,
                    storage_key=key,
                    sha256=info.sha256,
                    size_bytes=info.size_bytes,
                    metrics=eval_metrics(info.metrics),
                )
            )
            kept = {f"{checkpoint_key(job_id)}/{p.name}" for p in list_checkpoints(root)}
            rotated = session.scalars(
                select(JobCheckpoint.storage_key).where(
                    JobCheckpoint.job_id == job_id, JobCheckpoint.storage_key.not_in(kept)
                )
            ).all()
            session.execute(
                delete(JobCheckpoint).where(JobCheckpoint.job_id == job_id, JobCheckpoint.storage_key.not_in(kept))
            )
        for old in rotated:  # the trainer removed them here; remove them from the store too
            store.delete(old)
        log.info(
            "job %s: checkpoint at step %d written (%s, sha256 %s…)%s",
            job_id,
            info.step,
            _size(info.size_bytes),
            info.sha256[:12],
            f"; {len(rotated)} older removed" if rotated else "",
        )

    return Callbacks(
        on_step=on_step,
        on_eval=on_eval,
        on_checkpoint=on_checkpoint,
        on_dynamics=lambda record: state.add_dynamics(record.to_json()),
        on_memory=memory_callback(job_id),
        should_stop=lambda: state.should_stop,
        should_preempt=lambda: state.preempt_requested,
        should_finish=state.minutes_spent,
    )


def _size(size_bytes: int) -> str:
    return f"{size_bytes / 1e6:.1f} MB"


def _tokens_seen(state: RunState) -> int:
    return int(state.progress.get("tokens_seen", 0))
