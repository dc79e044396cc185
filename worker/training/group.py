"""A data-parallel job's hosts: each runs PyTorch's elastic agent in a process of its own (worker/training/agent.py)
and relays what its ranks print to the job's log.

Node 0 is the task that claimed the job (`lead`): it writes the launch files (node 0's tokenizer and training
config; in the artifact store when other hosts need them), sends the join tasks of a multi-host job, hosts the c10d
rendezvous, keeps renewing the lease while the group forms or restarts, and after the group ends hands rank 0's
TrainResult back to the task, which concludes the job as for one process. A join task (worker/tasks/training_node.py)
runs the same agent as node k. A group that fails without rank 0's result fails the job with what its first failed
rank, or another host, reported.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from celery import current_app

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
from worker.training import job_log
from worker.training.agent import OUTCOME
from worker.training.callbacks import LeaseLost
from worker.training.lease import RunState
from worker.training.rank import FAILURE, TRAIN_CONFIG, read_result

log = logging.getLogger(__name__)
relay_log = logging.getLogger("worker.ranks")  # a rank's lines, as the job's log keeps them
ROOT = Path(__file__).resolve().parents[2]
POLL_SECONDS = 0.5
NODES_POLL_SECONDS = 2.0  # how often node 0 counts the hosts that joined
CANCEL_GRACE_SECONDS = 60.0  # after a cancel, for rank 0 to stop the group itself
KILL_AFTER_SECONDS = 150.0  # after SIGTERM, before the agent is killed (its ranks get agent.SHUTDOWN_SECONDS)
REPORT_WAIT_SECONDS = 10.0  # for the other hosts to say why they failed
LAST_LINES = 20
RANK_LINE = re.compile(r"^\[(\d+)\]:(.*)$")
TORCH_LINE = re.compile(r"^(?:([IWEF])\d{4} [\d:.]+ \d+ \S+\] ?(.*)|\[([IWEF])[^\]]*\] ?(.*))$")
NOISE = ("USDT:",)  # Kineto's profiler start/stop notes on stderr, around the step-memory probe
TORCH_LEVELS = {"I": logging.INFO, "W": logging.WARNING, "E": logging.ERROR, "F": logging.CRITICAL}
# What the agent (torch.distributed.elastic) says at INFO that a job's owner wants to read: restarts and rendezvous.
AGENT_NEWS = ("will restart worker group", "Rendezvous complete", "new nodes")
# The C++ stack of an exception the agent logs (a host gone from the rendezvous): the message before it says enough.
AGENT_NOISE = ("frame #", "<omitting python frames>", "Exception raised from")


class GroupFailed(TrainingError):
    """The job's data-parallel group failed; the message says which process or host, and why."""


class GroupCrashed(RuntimeError):
    """Rank 0 crashed on its own (not because another rank died): retried, as a crash of one process is."""


@dataclass(frozen=True)
class Node:
    """One host's place in the job's group."""

    job_id: str
    attempt: int
    worker: str  # the claim's worker (node 0's)
    node_rank: int
    nodes: int
    devices: int
    endpoint: str  # HOST:PORT of the rendezvous
    max_restarts: int
    join_timeout: int
    local_addr: str
    launch: Path  # tokenizer.json and train_config.json
    workdir: Path
    checkpoint_root: Path

    def agent_argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "worker.training.agent",
            "--job-id",
            self.job_id,
            "--attempt",
            str(self.attempt),
            "--worker",
            self.worker,
            "--node-rank",
            str(self.node_rank),
            "--nodes",
            str(self.nodes),
            "--devices",
            str(self.devices),
            "--endpoint",
            self.endpoint,
            *(["--host"] if self.node_rank == 0 else []),
            "--max-restarts",
            str(self.max_restarts),
            "--join-timeout",
            str(self.join_timeout),
            "--local-addr",
            self.local_addr,
            "--launch",
            str(self.launch),
            "--workdir",
            str(self.workdir),
            "--checkpoint-root",
            str(self.checkpoint_root),
        ]


@dataclass
class Outcome:
    """What became of one host's agent: agent.json's outcome, failures and message, and each local rank's last
    lines of output."""

    outcome: str
    message: str
    failures: list[dict[str, Any]]
    last_lines: dict[int, deque[str]] = field(default_factory=dict)


class Relay:
    """The agent's output, line by line: a rank's lines go to the job's log as `rank R: ...` at their own level, the
    agent's own at WARNING and above (and its restarts and rendezvous at INFO)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.last_lines: dict[int, deque[str]] = {}
        self.lock = threading.Lock()

    def rank_of(self, local_rank: int) -> int:
        return self.node.node_rank * self.node.devices + local_rank

    def line(self, text: str, stream: str) -> None:
        text = text.rstrip("\n")
        if not text.strip():
            return
        match = RANK_LINE.match(text)
        if match is None:
            self._agent_line(text)
            return
        local_rank, payload = int(match.group(1)), match.group(2)
        with self.lock:
            self.last_lines.setdefault(local_rank, deque(maxlen=LAST_LINES)).append(payload)
        level, logger, message = _parse(payload, logging.INFO)
        if logger in job_log.NOT_KEPT or message.startswith(NOISE):  # the trainer's lines name local paths
            return
        relay_log.log(level, "rank %d: %s", self.rank_of(local_rank), message, extra={"job_id": self.node.job_id})

    def _agent_line(self, text: str) -> None:
        level, logger, message = _parse(text, logging.WARNING)
        if message.startswith(AGENT_NOISE):
            log.debug("agent of job %s: %s", self.node.job_id, message)
        elif level >= logging.WARNING or (level >= logging.INFO and any(news in message for news in AGENT_NEWS)):
            relay_log.log(
                level, "host %d (agent): %s", self.node.node_rank, message, extra={"job_id": self.node.job_id}
            )
        else:
            log.debug("agent of job %s: %s", self.node.job_id, message)

    def follow(self, stream: IO[str], name: str) -> threading.Thread:
        def read() -> None:
            for text in stream:
                try:
                    self.line(text, name)
                except Exception:  # a line that cannot be relayed never stops the others
                    log.exception("job %s: could not relay an agent's line", self.node.job_id)

        thread = threading.Thread(target=read, name=f"relay-{name}", daemon=True)
        thread.start()
        return thread


def _parse(text: str, default: int) -> tuple[int, str, str]:
    """(level, logger, message) of a line: a JSON log line (app/core/logs.py), PyTorch's C++ and elastic lines
    ("W1127 14:33:07.25 8445 file.py:753] ...", "[W socket.cpp:...] ..."), else the text itself at `default`."""
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict) or "message" not in record:
        match = TORCH_LINE.match(text.strip())
        if match is None:
            return default, "", text.strip()
        letter, message = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        return TORCH_LEVELS[letter], "torch", (message or "").strip()
    level = logging.getLevelName(str(record.get("level", "INFO")).upper())
    message = str(record["message"])
    if record.get("exc_info"):
        message += "\n" + str(record["exc_info"])
    return level if isinstance(level, int) else default, str(record.get("logger", "")), message


StopCheck = Callable[[], bool]  # called every POLL_SECONDS while the agent runs: True to stop it (SIGTERM)


def run_agent(node: Node, stop: StopCheck) -> Outcome:
    """Start this host's agent, relay its output, and wait for it (stopping it when `stop()` says so); its outcome."""
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": pythonpath,
        "LOGLEVEL": "INFO",  # torch.distributed.elastic's own lines: restarts and rendezvous (Relay keeps those)
        "PYTHONUNBUFFERED": "1",
        # A new store for each round of the rendezvous, so a restarted group never reads the last one's addresses
        # (the agents' shared store keeps them: rank.py's store lives as long as its round).
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }
    (node.workdir / OUTCOME).unlink(missing_ok=True)
    proc = subprocess.Popen(
        node.agent_argv(),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    log.info(
        "job %s: host %d started its agent (pid %d) for %d process(es)",
        node.job_id,
        node.node_rank,
        proc.pid,
        node.devices,
    )
    relay = Relay(node)
    assert proc.stdout is not None and proc.stderr is not None  # both piped above
    readers = [relay.follow(proc.stdout, "stdout"), relay.follow(proc.stderr, "stderr")]
    stopped_at: float | None = None
    while proc.poll() is None:
        if stopped_at is None and stop():
            proc.send_signal(signal.SIGTERM)
            stopped_at = time.monotonic()
        elif stopped_at is not None and time.monotonic() - stopped_at > KILL_AFTER_SECONDS:
            proc.kill()
        try:
            proc.wait(timeout=POLL_SECONDS)
        except subprocess.TimeoutExpired:
            pass
    for reader in readers:
        reader.join(timeout=10)
    path = node.workdir / OUTCOME
    agent: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return Outcome(
        outcome=agent.get("outcome", "died"),
        message=agent.get("message", f"the agent exited with code {proc.returncode}"),
        failures=agent.get("failures", []),
        last_lines=relay.last_lines,
    )


def describe(node: Node, outcome: Outcome) -> str:
    """Why this host's part of the group failed, in the job's rank numbers, with the failed rank's last words."""
    restarts = f" (after {node.max_restarts} restart(s))" if node.max_restarts else ""
    if not outcome.failures:
        return f"the data-parallel group failed on host {node.node_rank}{restarts}: {outcome.message}"
    first = outcome.failures[0]
    rank = node.node_rank * node.devices + int(first["local_rank"])
    how = f"was killed by {first['signal']}" if first.get("signal") else f"exited with code {first['exitcode']}"
    words = first.get("message") or next(
        (ln.strip() for ln in reversed(outcome.last_lines.get(int(first["local_rank"]), [])) if ln.strip()), ""
    )
    last = f": {_parse(words, logging.INFO)[2].splitlines()[-1][:500]}" if words and not first.get("signal") else ""
    return f"data-parallel training process of rank {rank} (pid {first['pid']}) {how}{restarts}{last}"


# -- node 0 ---------------------------------------------------------------------------------------------------


def launch_key(job_id: str, attempt: int) -> str:
    """Where node 0 leaves the launch files for the other hosts."""
    return f"jobs/{job_id}/launch/attempt-{attempt}"


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
            with session_scope() as session:
                joined = len(node_rows.nodes(session, self.claim.job_id, self.claim.attempt))
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
    for name in ("tokenizer.json", TRAIN_CONFIG):
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
