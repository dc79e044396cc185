"""Node 0 of a data-parallel group: the task that claimed the job (`lead`). It writes the launch files (node 0's
tokenizer and training config; in the artifact store when other hosts need them), sends the join tasks of a
multi-host job, hosts the c10d rendezvous through its agent (worker/training/group.py), keeps renewing the lease
while the group forms or restarts, and after the group ends hands rank 0's TrainResult back to the task, which
concludes the job as for one process. A group that fails without rank 0's result fails the job with what its first
failed rank, or another host, reported.
"""

from __future__ import annotations

import json
import logging
import socket
import tempfile
import time
from pathlib import Path

from celery import current_app
from sqlalchemy.exc import SQLAlchemyError

from app.artifacts import get_store
from app.core.settings import get_settings
from app.core.task_names import JOIN_TRAINING, NODE_QUEUES
from app.db import job_rows, node_rows
from app.db.session import session_scope
from app.db.tables import Job
from app.schemas.jobs import TrainingSpec
from model.data.tokenizer import Tokenizer
from model.train.config import StopReason, TrainConfig, TrainingError
from model.train.events import TrainResult
from worker.training import rendezvous
from worker.training.callbacks import LeaseLost
from worker.training.group import POLL_SECONDS, Node, Outcome, describe, launch_key, run_agent
from worker.training.lease import RunState
from worker.training.rank import FAILURE, TRAIN_CONFIG, read_result

log = logging.getLogger(__name__)
NODES_POLL_SECONDS = 2.0  # how often node 0 counts the hosts that joined
CANCEL_GRACE_SECONDS = 60.0  # after a cancel, for rank 0 to stop the group itself
REPORT_WAIT_SECONDS = 10.0  # for the other hosts to say why they failed


class GroupFailed(TrainingError):
    """The job's data-parallel group failed; the message says which process or host, and why."""


class GroupCrashed(RuntimeError):
    """Rank 0 crashed on its own (not because another rank died): retried, as a crash of one process is."""


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def rendezvous_address(nodes: int) -> tuple[str, int]:
    """Where node 0 hosts the rendezvous: loopback for one host; else WORKER_RENDEZVOUS_HOST (or this host's name)
    and WORKER_RENDEZVOUS_PORT (or a free port)."""
    settings = get_settings()
    host = "127.0.0.1" if nodes == 1 else settings.worker_rendezvous_host or socket.getfqdn()
    port = settings.worker_rendezvous_port if nodes > 1 and settings.worker_rendezvous_port else free_port(host)
    return host, port


def node_kind(device_type: str) -> str:
    return "gpu" if device_type == "cuda" else "cpu"


class _Lead:
    """Node 0's watch over its agent: stop it when the lease is lost, on a shutdown of this worker (rank 0 then
    checkpoints), on a cancel while the hosts are still gathering (after it, rank 0 stops the group itself; given
    CANCEL_GRACE_SECONDS), or when not every host joined within JOB_NODES_TIMEOUT_SECONDS."""

    def __init__(self, claim: job_rows.Claim, state: RunState, nodes: int, timeout: float) -> None:
        self.claim, self.state, self.nodes, self.timeout = claim, state, nodes, timeout
        self.started = time.monotonic()
        self.joined = 1 if nodes == 1 else 0
        self.counted_at = 0.0
        self.cancelled_at: float | None = None
        self.timed_out = False

    def gathered(self) -> bool:
        if self.joined < self.nodes and time.monotonic() - self.counted_at > NODES_POLL_SECONDS:
            self.counted_at = time.monotonic()
            try:
                with session_scope() as session:
                    joined = len(node_rows.nodes(session, self.claim.job_id, self.claim.attempt))
            except SQLAlchemyError as exc:  # a blip of the database: count again at the next poll
                log.warning("job %s: could not count the hosts that joined (%s)", self.claim.job_id, exc)
                return False
            if joined != self.joined:
                log.info("job %s: %d of %d hosts joined", self.claim.job_id, joined, self.nodes)
            self.joined = joined
        return self.joined >= self.nodes

    def __call__(self) -> bool:
        if self.state.lease_lost or self.state.preempt_requested:
            return True
        gathered = self.gathered()
        if not gathered and time.monotonic() - self.started > self.timeout:
            self.timed_out = True
            return True
        if self.state.cancel_requested:
            self.cancelled_at = self.cancelled_at or time.monotonic()
            return not gathered or time.monotonic() - self.cancelled_at > CANCEL_GRACE_SECONDS
        return False


def lead(
    claim: job_rows.Claim, state: RunState, job: Job, tokenizer: Tokenizer, config: TrainConfig, root: Path
) -> TrainResult:
    """Train the job as node 0 of its group (training.nodes hosts x training.devices processes); rank 0's result."""
    spec, settings = TrainingSpec.stored(job.training_config), get_settings()
    kind = node_kind(config.device.split(":")[0])
    start_step = int(state.progress.get("step", job.step))
    with tempfile.TemporaryDirectory(prefix=f"group-{job.id[:8]}-") as tmp:
        workdir = Path(tmp)
        tokenizer.save(workdir)
        (workdir / TRAIN_CONFIG).write_text(json.dumps(config.to_dict()))
        host, port = rendezvous_address(spec.nodes)
        node = Node(
            job_id=job.id,
            attempt=claim.attempt,
            worker=claim.worker,
            node_rank=0,
            nodes=spec.nodes,
            devices=spec.devices,
            endpoint=f"{host}:{port}",
            max_restarts=spec.max_restarts,
            join_timeout=settings.job_nodes_timeout_seconds + 60,  # node 0 gives up first, naming what is missing
            local_addr=host,
            launch=workdir,
            workdir=workdir,
            checkpoint_root=root,
        )
        if spec.nodes > 1:
            _invite(node, kind)
        with state.lock:  # from now on rank 0 writes the progress; this process only renews the lease
            state.progress.clear()
        watch = _Lead(claim, state, spec.nodes, settings.job_nodes_timeout_seconds)
        outcome = run_agent(node, watch)
        done = read_result(workdir)
        if done is not None:
            result, state.prune_reason = done  # a sweep's pruner stopped it: rank 0's state knew, this one learns
            return result
        if state.lease_lost:
            raise LeaseLost(job.id)
        if watch.timed_out:
            raise GroupFailed(_missing(node, kind, settings.job_nodes_timeout_seconds))
        if state.preempt_requested or state.cancel_requested:  # before rank 0 trained a step
            reason: StopReason = "preempted" if state.preempt_requested else "cancelled"
            return TrainResult(reason, start_step, 0.0, {}, None, None, None, None, None, None)
        _fail(node, outcome, workdir)
    raise AssertionError("unreachable: _fail raises")


def _invite(node: Node, kind: str) -> None:
    """Publish the launch files, take node 0, and send a join task for each other node."""
    store, key = get_store(), launch_key(node.job_id, node.attempt)
    rendezvous.write_key(node.launch)  # for this attempt's hosts alone: their agents sign the rendezvous state with it
    for name in ("tokenizer.json", TRAIN_CONFIG, rendezvous.KEY_FILE):
        store.push(node.launch / name, f"{key}/{name}")
    with session_scope() as session:
        if not node_rows.join(session, node.job_id, node.attempt, 0, node.worker):
            raise LeaseLost(node.job_id)
    for rank in range(1, node.nodes):
        current_app.send_task(
            JOIN_TRAINING, args=[node.job_id, node.attempt, rank, node.endpoint], queue=NODE_QUEUES[kind]
        )
    log.info(
        "job %s: waiting for %d more %s host(s) (queue %s); rendezvous at %s",
        node.job_id,
        node.nodes - 1,
        kind.upper(),
        NODE_QUEUES[kind],
        node.endpoint,
    )


def _missing(node: Node, kind: str, timeout: int) -> str:
    with session_scope() as session:
        joined = node_rows.nodes(session, node.job_id, node.attempt)
    ranks = {row.node_rank for row in joined}
    missing = [r for r in range(node.nodes) if r not in ranks]
    present = ", ".join(f"node {row.node_rank} on {row.worker}" for row in joined)
    return (
        f"training.nodes={node.nodes}: only {len(joined)} of {node.nodes} hosts joined within {timeout} s "
        f"({present}); missing node(s) {', '.join(map(str, missing))}: no {kind.upper()} training worker took "
        f"their join task from queue {NODE_QUEUES[kind]}. Start more {kind.upper()} training workers, or lower "
        "training.nodes (JOB_NODES_TIMEOUT_SECONDS sets the wait)"
    )


def _fail(node: Node, outcome: Outcome, workdir: Path) -> None:
    """Raise what the job fails (or, for a crash of rank 0 alone, is retried) with."""
    rank0 = json.loads((workdir / FAILURE).read_text()) if (workdir / FAILURE).exists() else None
    first_local = int(outcome.failures[0]["local_rank"]) if outcome.failures else None
    if rank0 is not None and rank0["kind"] == "lease_lost":
        raise LeaseLost(node.job_id)
    others = _other_hosts_errors(node) if node.nodes > 1 else []
    if others and (rank0 is None or rank0["kind"] == "crash"):  # rank 0 failed because another host did
        raise GroupFailed("; ".join(others))
    if rank0 is not None and first_local == 0:
        if rank0["kind"] == "training":
            raise GroupFailed(rank0["message"])
        if rank0["kind"] == "out_of_memory":
            raise GroupFailed("out of memory: lower training.max_tokens_per_batch or the model size")
        raise GroupCrashed(rank0["message"])
    raise GroupFailed(describe(node, outcome))


def _other_hosts_errors(node: Node) -> list[str]:
    """What the other hosts reported, waiting up to REPORT_WAIT_SECONDS for those still running to leave."""
    deadline = time.monotonic() + REPORT_WAIT_SECONDS
    while True:
        with session_scope() as session:
            rows = [r for r in node_rows.nodes(session, node.job_id, node.attempt) if r.node_rank > 0]
        errors = [f"host {r.node_rank} ({r.worker}): {r.error}" for r in rows if r.error]
        if errors or all(r.left_at is not None for r in rows) or time.monotonic() > deadline:
            return errors
        time.sleep(POLL_SECONDS)
