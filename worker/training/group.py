"""A data-parallel job's hosts: each runs PyTorch's elastic agent in a process of its own (worker/training/agent.py)
and relays what its ranks print to the job's log. Node 0 is the task that claimed the job (worker/training/lead.py);
a join task (worker/tasks/training_node.py) runs the same agent as node k.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from worker.training import job_log, rendezvous
from worker.training.agent import OUTCOME

log = logging.getLogger(__name__)
relay_log = logging.getLogger("worker.ranks")  # a rank's lines, as the job's log keeps them
ROOT = Path(__file__).resolve().parents[2]
POLL_SECONDS = 0.5
KILL_AFTER_SECONDS = 150.0  # after SIGTERM, before the agent is killed (its ranks get agent.SHUTDOWN_SECONDS)
LAST_LINES = 20
RANK_LINE = re.compile(r"^\[(\d+)\]:(.*)$")
TORCH_LINE = re.compile(r"^(?:([IWEF])\d{4} [\d:.]+ \d+ \S+\] ?(.*)|\[([IWEF])[^\]]*\] ?(.*))$")
NOISE = ("USDT:",)  # Kineto's profiler start/stop notes on stderr, around the step-memory probe
TORCH_LEVELS = {"I": logging.INFO, "W": logging.WARNING, "E": logging.ERROR, "F": logging.CRITICAL}
# What the agent (torch.distributed.elastic) says at INFO that a job's owner wants to read: restarts and rendezvous.
AGENT_NEWS = ("will restart worker group", "Rendezvous complete", "new nodes")
# The C++ stack of an exception the agent logs (a host gone from the rendezvous): the message before it says enough.
AGENT_NOISE = ("frame #", "<omitting python frames>", "Exception raised from")


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
        **(rendezvous.LOOPBACK_ENV if node.nodes == 1 else {}),  # one host's ranks connect over loopback only
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
    try:
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
    except BaseException:
        _end(proc)  # the task is leaving: its agent must not go on in the group without it (or join it twice)
        raise
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


def _end(proc: subprocess.Popen[str]) -> None:
    """Stop the agent as a stop() would (SIGTERM: rank 0 checkpoints), and kill it if it outstays KILL_AFTER_SECONDS."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=KILL_AFTER_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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


def launch_key(job_id: str, attempt: int) -> str:
    """Where node 0 leaves the launch files for the other hosts."""
    return f"jobs/{job_id}/launch/attempt-{attempt}"
