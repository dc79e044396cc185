"""The pieces of a data-parallel group around PyTorch's elastic agent, in process: where each rank stands, the
launcher's settings, the relay of the agent's output to the job's log, the messages a failed group leaves, node 0's
watch (lease, cancel, hosts that never join) and the rows of a multi-host job's nodes, on a migrated SQLite database.
tests/e2e/test_ddp_job.py runs real groups through Celery workers."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import deque
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import OperationalError

from app.db import job_rows, node_rows
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import Job
from tests.support.api_app import migrated_client
from tests.worker.test_job_log import new_job
from worker.tasks import training_node
from worker.training import agent, group, lead, rendezvous
from worker.training.lease import RunState
from worker.training.rank import place

JOB = "0b5c3a52-0000-4000-8000-000000000001"


def _node(**values) -> group.Node:
    base = dict(
        job_id=JOB, attempt=1, worker="host-a@vm/1", node_rank=1, nodes=2, devices=2, endpoint="10.0.0.1:29400",
        max_restarts=0, join_timeout=660, local_addr="10.0.0.2", launch=Path("/l"), workdir=Path("/w"),
        checkpoint_root=Path("/c"),
    )  # fmt: skip
    return group.Node(**{**base, **values})


def test_a_rank_is_numbered_by_its_host_in_the_job_not_by_the_launchers_order():
    """Pass: node 1's local rank 1 of 2 is rank 3 of 4 whatever RANK the launcher gave it; the restart count is read."""
    env = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "4", "RANK": "0"}
    env["TORCHELASTIC_RESTART_COUNT"] = "2"
    where = place(1, env)
    assert (where.rank, where.local_rank, where.world_size, where.restart) == (3, 1, 4, 2)


def test_the_launch_config_waits_for_every_host_restarts_as_asked_and_prefixes_each_line_with_its_local_rank():
    args = agent.arguments(
        ["--job-id", JOB, "--attempt", "2", "--worker", "w", "--node-rank", "0", "--nodes", "3", "--devices", "2",
         "--endpoint", "10.0.0.1:29400", "--host", "--max-restarts", "1", "--join-timeout", "660",
         "--local-addr", "10.0.0.1", "--launch", "/l", "--workdir", "/w", "--checkpoint-root", "/c"]
    )  # fmt: skip
    config = agent.launch_config(args)
    assert (config.min_nodes, config.max_nodes, config.nproc_per_node, config.max_restarts) == (3, 3, 2, 1)
    # Several hosts: c10d's rendezvous at the endpoint, its state signed with the attempt's key from the launch files.
    assert config.rdzv_backend == rendezvous.SIGNED and config.rdzv_endpoint == "10.0.0.1:29400"
    assert config.rdzv_configs["key_file"] == "/l/rendezvous.key"
    assert config.rdzv_configs["is_host"] is True and config.rdzv_configs["join_timeout"] == 660
    assert config.run_id == f"{JOB}-2" and config.local_addr == "10.0.0.1"
    assert config.log_line_prefix_template == "[${local_rank}]:"
    argv = agent.rank_argv(args)
    assert argv[:2] == ["-m", "worker.training.rank"] and argv[argv.index("--node-rank") + 1] == "0"
    assert argv[argv.index("--nodes") + 1] == "3"


def test_one_hosts_launch_config_meets_through_a_file_in_its_workdir():
    """Pass: one host's agent uses c10d's rendezvous on a FileStore in the job's private workdir, not a TCPStore."""
    args = agent.arguments(
        ["--job-id", JOB, "--attempt", "1", "--worker", "w", "--node-rank", "0", "--nodes", "1", "--devices", "2",
         "--endpoint", "127.0.0.1:29400", "--host", "--join-timeout", "60", "--launch", "/w", "--workdir", "/w",
         "--checkpoint-root", "/c"]
    )  # fmt: skip
    config = agent.launch_config(args)
    assert (config.rdzv_backend, config.rdzv_endpoint) == ("c10d", "/w/rendezvous.store")
    assert config.rdzv_configs["store_type"] == "file" and "key_file" not in config.rdzv_configs


@pytest.fixture
def relayed():
    """The records the relay logs, as the job's log handler would see them."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    logger = logging.getLogger("worker.ranks")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.DEBUG
    yield records
    logger.removeHandler(handler)
    logger.level = level


def _json(level: str, logger: str, message: str) -> str:
    return json.dumps({"time": "t", "level": level, "logger": logger, "pid": 7, "message": message})


def test_every_ranks_lines_and_warnings_reach_the_job_log_under_its_rank_and_the_agents_noise_does_not(relayed):
    """Pass: node 1's local rank 1 is "rank 3"; its INFO line, its Python warning and a C++ warning keep their
    levels and the job's id; the trainer's path-naming lines, Kineto's notes, the agent's INFO chatter and C++ stack
    frames are left out; the agent's warnings and its restarts are kept."""
    relay = group.Relay(_node())
    lines = [
        ("[1]:" + _json("INFO", "worker.training.rank", "rank 3 of 4 joined"), "stderr"),
        ("[1]:" + _json("WARNING", "worker.warnings", "UserWarning: careful (model/nn/x.py:3)"), "stderr"),
        ("[0]:" + _json("INFO", "model.train.trainer", "resuming from /var/cache/jobs/x"), "stderr"),
        ("[1]:[W1127 socket.cpp:12] connect timed out", "stderr"),
        ("[0]:USDT:2026-11-27 14:33:04 8453:8453 SyncActivityProfilerHandler.cpp:52] profiler_start", "stderr"),
        ("I1127 14:32:57.490000 8445 api.py:254]   max_restarts             : 1", "stderr"),
        ("I1127 14:35:16.898000 8721 api.py:951] [default_role] Worker group FAILED. 1/1 attempts left; "
         "will restart worker group", "stderr"),
        ("W1127 14:33:07.253000 8445 api.py:753] Received 15 death signal, shutting down workers", "stderr"),
        ("W1127 14:33:07.253000 8445 api.py:753] frame #3: <unknown function> + 0x674777d", "stderr"),
        ("", "stdout"),
    ]  # fmt: skip
    for text, stream in lines:
        relay.line(text, stream)
    kept = [(r.levelname, r.getMessage()) for r in relayed if r.levelno >= logging.INFO]
    assert kept == [
        ("INFO", "rank 3: rank 3 of 4 joined"),
        ("WARNING", "rank 3: UserWarning: careful (model/nn/x.py:3)"),
        ("WARNING", "rank 3: connect timed out"),
        ("INFO", "host 1 (agent): [default_role] Worker group FAILED. 1/1 attempts left; will restart worker group"),
        ("WARNING", "host 1 (agent): Received 15 death signal, shutting down workers"),
    ]
    assert all(getattr(r, "job_id", None) == JOB for r in relayed)
    assert list(relay.last_lines[1])[-1] == "[W1127 socket.cpp:12] connect timed out"


def test_a_failed_rank_is_named_by_its_rank_in_the_job_with_its_signal_or_its_last_words():
    node = _node(max_restarts=2)
    killed = group.Outcome("failed", "", [{"local_rank": 1, "pid": 42, "exitcode": -9, "signal": "SIGKILL"}])
    assert group.describe(node, killed) == (
        "data-parallel training process of rank 3 (pid 42) was killed by SIGKILL (after 2 restart(s))"
    )
    last = deque([_json("ERROR", "worker.training.rank", "RuntimeError: boom\nTraceback ...\nRuntimeError: boom")])
    crashed = group.Outcome("failed", "", [{"local_rank": 0, "pid": 7, "exitcode": 1, "signal": None}], {0: last})
    assert group.describe(_node(), crashed) == (
        "data-parallel training process of rank 2 (pid 7) exited with code 1: RuntimeError: boom"
    )
    timeout = group.Outcome("timeout", "The node did not join the rendezvous in time", [])
    assert "failed on host 1: The node did not join" in group.describe(_node(), timeout)


@pytest.fixture
def job_id(settings_env):
    with migrated_client():
        job = new_job()
        with session_scope() as session:
            session.execute(update(Job).where(Job.id == job).values(status="running", attempt=1, worker="a@h/1"))
        yield job


def test_a_node_is_taken_once_per_attempt_and_only_while_that_attempt_runs(job_id):
    """Pass: node 1 is taken by the first join task; a second delivery, a later attempt's node taken for an attempt
    no longer running, and a job that ended all get False."""
    with session_scope() as session:
        assert node_rows.join(session, job_id, 1, 1, "b@h/2")
    with session_scope() as session:
        assert not node_rows.join(session, job_id, 1, 1, "c@h/3")  # delivered twice
        assert not node_rows.join(session, job_id, 2, 1, "c@h/3")  # not the attempt running
        assert [(n.node_rank, n.worker) for n in node_rows.nodes(session, job_id, 1)] == [(1, "b@h/2")]
        node_rows.leave(session, job_id, 1, 1, "rank 1 was killed by SIGKILL")
    with session_scope() as session:
        (node,) = node_rows.nodes(session, job_id, 1)
        assert node.left_at is not None and node.error == "rank 1 was killed by SIGKILL"
        session.execute(update(Job).where(Job.id == job_id).values(status="failed"))
    with session_scope() as session:
        assert not node_rows.join(session, job_id, 1, 0, "a@h/1") and not node_rows.still_running(session, job_id, 1)


def test_node_0_stops_its_agent_on_a_lost_lease_a_cancel_while_gathering_and_hosts_that_never_join(job_id, monkeypatch):
    monkeypatch.setattr(lead, "NODES_POLL_SECONDS", 0.0)
    claim = job_rows.Claim(job_id=job_id, worker="a@h/1", attempt=1)
    state = RunState(claim=claim)
    watch = lead._Lead(claim, state, nodes=2, timeout=3600)
    assert not watch() and watch.joined == 0
    with session_scope() as session:
        node_rows.join(session, job_id, 1, 0, "a@h/1")
    state.cancel_requested = True
    assert watch() and watch.joined == 1  # a cancel while a host is missing: nothing to wait for
    with session_scope() as session:
        node_rows.join(session, job_id, 1, 1, "b@h/2")
    watch = lead._Lead(claim, state, nodes=2, timeout=3600)
    assert not watch()  # every host is there: rank 0 stops the group itself, given CANCEL_GRACE_SECONDS
    watch.cancelled_at = time.monotonic() - lead.CANCEL_GRACE_SECONDS - 1
    assert watch()
    late = lead._Lead(claim, RunState(claim=claim), nodes=3, timeout=0)
    assert late() and late.timed_out
    lost = RunState(claim=claim, lease_lost=True)
    assert lead._Lead(claim, lost, nodes=2, timeout=3600)()


def test_an_expired_lease_of_a_job_asked_to_cancel_is_cancelled_not_queued_again(job_id):
    """Fault: a job's worker died after its owner asked to cancel it. Pass: the reaper cancels it (nothing would
    claim a queued job asked to cancel) and reports it ended."""
    with session_scope() as session:
        session.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(cancel_requested=True, lease_expires_at=utcnow() - timedelta(seconds=1))
        )
    with session_scope() as session:
        assert job_rows.reap_expired(session) == ([], [job_id])
    with session_scope() as session:
        status, error = session.execute(select(Job.status, Job.error).where(Job.id == job_id)).one()
    assert status == "cancelled" and "cancelled as asked" in error


def test_the_watches_ride_out_a_database_blip(job_id, monkeypatch):
    """Fault: the database fails once while a join task and node 0 look at the job. Pass: neither watch raises (a
    join task that did left its agent in the group and took the next join task too: 3 hosts from 2); the next look
    sees the attempt end and the hosts that joined."""
    monkeypatch.setattr(training_node, "CHECK_SECONDS", 0.0)
    monkeypatch.setattr(lead, "NODES_POLL_SECONDS", 0.0)
    real_still_running, real_nodes = node_rows.still_running, node_rows.nodes
    blip = OperationalError("SELECT jobs.id", {}, Exception("server closed the connection unexpectedly"))

    def once(real):
        calls = []

        def flaky(*args):
            calls.append(args)
            if len(calls) == 1:
                raise blip
            return real(*args)

        return flaky

    monkeypatch.setattr(node_rows, "still_running", once(real_still_running))
    monkeypatch.setattr(node_rows, "nodes", once(real_nodes))
    follow = training_node._Follow(job_id, 1)
    assert not follow() and not follow.over
    claim = job_rows.Claim(job_id=job_id, worker="a@h/1", attempt=1)
    watch = lead._Lead(claim, RunState(claim=claim), nodes=2, timeout=3600)
    assert not watch() and watch.joined == 0
    with session_scope() as session:
        node_rows.join(session, job_id, 1, 0, "a@h/1")
        node_rows.join(session, job_id, 1, 1, "b@h/2")
        session.execute(update(Job).where(Job.id == job_id).values(status="failed"))
    assert watch.gathered() and watch.joined == 2
    assert follow() and follow.over


def test_a_watch_that_raises_ends_the_agent_before_the_error_leaves(tmp_path, monkeypatch):
    """Fault: the stop check raises while the agent runs. Pass: the error propagates and the agent process is gone
    (SIGTERM, as for a stop), instead of staying in the group after its task left."""
    pid_file = tmp_path / "agent.pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    monkeypatch.setattr(group.Node, "agent_argv", lambda self: [sys.executable, "-c", script])
    monkeypatch.setattr(group, "POLL_SECONDS", 0.05)

    def stop() -> bool:
        if not pid_file.exists():
            return False
        raise RuntimeError("the watch failed")

    with pytest.raises(RuntimeError, match="the watch failed"):
        group.run_agent(_node(workdir=tmp_path, node_rank=0, nodes=1), stop)
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists(), f"agent {pid} outlived its task"
