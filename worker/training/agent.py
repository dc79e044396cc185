"""The elastic agent of one host of a data-parallel job, in a process of its own (worker/training/group.py starts
it from the task that claimed the job, node 0, or from a join task, node k):

    python -m worker.training.agent --job-id J --attempt A --worker W --node-rank K --nodes N --devices D
        --endpoint HOST:PORT [--host] --max-restarts R --join-timeout S --launch L --workdir W --checkpoint-root C

PyTorch's launcher (torch.distributed.launcher.api.elastic_launch) does the work: a c10d rendezvous at the endpoint
(hosted by node 0's agent: --host) that waits for all N hosts, D rank processes `python -m worker.training.rank` on
this host, their health watched, and the whole group restarted up to R times when a rank fails (every host's agent
restarts its ranks, the group meets again and resumes from the last checkpoint). Each rank's output is kept in the
workdir and copied to this process's stdout and stderr, each line behind "[<local rank>]:", for the host to relay
to the job's log. What became of the group goes to agent.json; the exit code is 0 when every rank succeeded.

A process of its own rather than a call in the Celery task: the agent installs handlers for SIGTERM, SIGINT, SIGHUP
and SIGQUIT, which in the pool process would replace those that checkpoint a run when the worker shuts down, and a
rendezvous still waiting for hosts cannot be interrupted from another thread, while a process can be told to stop.
SIGTERM makes it pass SIGTERM to the ranks (rank 0 checkpoints, and every rank stops at the same step) and wait up to
SHUTDOWN_SECONDS for them. It stops the same way when its parent goes away.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.elastic.rendezvous.api import RendezvousClosedError, RendezvousTimeoutError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from worker.training import rendezvous

OUTCOME = "agent.json"
SHUTDOWN_SECONDS = 120  # for the ranks to stop after SIGTERM: rank 0 writes a checkpoint first
MONITOR_SECONDS = 0.5  # how often the agent looks at its ranks
PREFIX = "[${local_rank}]:"  # before each line of a rank's output (the host reads the local rank from it)
WATCH_SECONDS = 0.5


def launch_config(args: argparse.Namespace) -> LaunchConfig:
    """The launcher's settings for this host of the job's group (its rendezvous: worker/training/rendezvous.py)."""
    backend, endpoint, configs = rendezvous.agent_rendezvous(args.nodes, args.endpoint, args.workdir, args.launch)
    return LaunchConfig(
        min_nodes=args.nodes,
        max_nodes=args.nodes,
        nproc_per_node=args.devices,
        run_id=f"{args.job_id}-{args.attempt}",
        rdzv_backend=backend,
        rdzv_endpoint=endpoint,
        rdzv_configs={"is_host": args.host, "join_timeout": args.join_timeout, **configs},
        max_restarts=args.max_restarts,
        monitor_interval=MONITOR_SECONDS,
        local_addr=args.local_addr or None,
        log_line_prefix_template=PREFIX,
        logs_specs=DefaultLogsSpecs(log_dir=str(args.workdir / "ranks"), redirects=Std.ALL, tee=Std.ALL),
        shutdown_timeout=SHUTDOWN_SECONDS,
    )


def rank_argv(args: argparse.Namespace) -> list[str]:
    return [
        "-m",
        "worker.training.rank",
        "--job-id",
        args.job_id,
        "--attempt",
        str(args.attempt),
        "--worker",
        args.worker,
        "--node-rank",
        str(args.node_rank),
        "--nodes",
        str(args.nodes),
        "--launch",
        str(args.launch),
        "--workdir",
        str(args.workdir),
        "--checkpoint-root",
        str(args.checkpoint_root),
    ]


def failure(item: ProcessFailure) -> dict[str, Any]:
    """A failed rank as agent.json keeps it: its local rank, pid, exit code or signal, and its exception's message
    (from the error file torch.distributed.elastic's @record writes, if it got that far)."""
    signal_name = item.signal_name() if item.exitcode < 0 else None
    message = item.message if isinstance(item.message, str) else ""
    return {
        "local_rank": item.local_rank,
        "pid": item.pid,
        "exitcode": item.exitcode,
        "signal": signal_name if signal_name and signal_name != "<N/A>" else None,
        "message": "" if message.startswith("To enable traceback") else message,
        "timestamp": item.timestamp,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Launch this host's ranks and wait for the group; what became of it."""
    try:
        elastic_launch(launch_config(args), sys.executable)(*rank_argv(args))
    except ChildFailedError as exc:
        failures = sorted((failure(f) for f in exc.failures.values()), key=lambda f: (f["timestamp"], f["local_rank"]))
        return {"outcome": "failed", "message": str(exc).strip().splitlines()[0], "failures": failures}
    except RendezvousTimeoutError as exc:
        return {"outcome": "timeout", "message": str(exc), "failures": []}
    except RendezvousClosedError as exc:
        return {"outcome": "closed", "message": str(exc) or "the group's rendezvous was closed", "failures": []}
    except SignalException as exc:
        return {"outcome": "signal", "message": f"stopped by {exc.sigval.name}", "failures": []}
    except Exception as exc:
        return {"outcome": "error", "message": f"{type(exc).__name__}: {exc}", "failures": []}
    return {"outcome": "succeeded", "message": "", "failures": []}


def _stop_with_parent(parent: int) -> None:
    """When the process that started the agent is gone, stop as on SIGTERM."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="the elastic agent of one host of a data-parallel training job")
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--worker", required=True, help="the worker holding the job's claim (node 0's)")
    parser.add_argument("--node-rank", type=int, required=True)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--devices", type=int, required=True, help="rank processes on this host")
    parser.add_argument("--endpoint", required=True, help="HOST:PORT of the c10d rendezvous")
    parser.add_argument("--host", action="store_true", help="this agent hosts the rendezvous (node 0)")
    parser.add_argument("--max-restarts", type=int, default=0)
    parser.add_argument("--join-timeout", type=int, required=True, help="seconds to wait for every host")
    parser.add_argument("--local-addr", default="", help="the address other hosts reach this one at")
    parser.add_argument("--launch", type=Path, required=True, help="node 0's tokenizer.json and train_config.json")
    parser.add_argument("--workdir", type=Path, required=True, help="rank 0's result, the ranks' output")
    parser.add_argument("--checkpoint-root", type=Path, required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    rendezvous.register()
    _stop_with_parent(os.getppid())
    outcome = run(args)
    (args.workdir / OUTCOME).write_text(json.dumps(outcome))
    return 0 if outcome["outcome"] == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
