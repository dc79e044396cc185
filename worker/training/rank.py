"""One process (rank) of a data-parallel job, as PyTorch's elastic agent starts it (worker/training/agent.py):

    python -m worker.training.rank --job-id J --attempt A --worker W --node-rank K --nodes N
        --launch L --workdir W --checkpoint-root C

The agent sets LOCAL_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Its rendezvous orders the
hosts its own way; the job numbers them itself (node 0 is the worker that claimed it), so this process is rank
node_rank x LOCAL_WORLD_SIZE + LOCAL_RANK, and rank 0 runs beside the task that holds the job's claim.

Every rank re-reads the job and prepares the same data with node 0's tokenizer and training config (in --launch),
then trains with model/train/distributed.py. Rank 0 keeps a lease keeper and the callbacks (progress, metrics,
checkpoints: every database write of the run), takes SIGTERM as "checkpoint and stop", and leaves its TrainResult
(result.json) or what went wrong (failure.json) in the workdir, for the task's process to conclude the job with.
The other ranks write nothing, ignore SIGINT and SIGTERM (rank 0 decides when every rank stops) and exit
when their agent is gone. Every rank logs JSON lines to stderr, which the agent passes on and the host relays to
the job's log (worker/training/group.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from app.artifacts import get_store
from app.core import logs
from app.core.settings import get_settings
from app.db import job_rows
from model.data.corpus import DataError
from model.data.tokenizer import Tokenizer
from model.io.checkpoint_files import CheckpointError
from model.nn.out_of_memory import is_out_of_memory
from model.train.config import TrainConfig, TrainingError
from model.train.distributed import (
    destroy_process_group,
    device_for,
    file_store,
    init_process_group,
    launcher_store,
)
from model.train.events import TrainResult
from model.train.loop import train
from worker.training import job_log
from worker.training.callbacks import LeaseLost, checkpoint_key, job_callbacks
from worker.training.job_data import load_job, prepare_job
from worker.training.lease import KEEPER_SECONDS, LeaseKeeper, RunState
from worker.training.rendezvous import ranks_store_path

log = logging.getLogger(__name__)
WATCH_SECONDS = 0.5  # how often a rank checks that its agent is still there
RESULT, FAILURE = "result.json", "failure.json"  # rank 0's, in the workdir
TRAIN_CONFIG = "train_config.json"


@dataclasses.dataclass(frozen=True)
class Place:
    rank: int
    local_rank: int
    world_size: int
    restart: int  # the agent's restarts of this host's ranks so far


def place(node_rank: int, env: dict[str, str]) -> Place:
    """This process's rank in the job's numbering, from the agent's environment and the host's node rank."""
    local_rank, local_world = int(env["LOCAL_RANK"]), int(env["LOCAL_WORLD_SIZE"])
    return Place(
        node_rank * local_world + local_rank,
        local_rank,
        int(env["WORLD_SIZE"]),
        int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
    )


def write_json(path: Path, value: Any) -> None:
    """Whole or not at all: written beside, then renamed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(value))
    tmp.replace(path)


def read_result(workdir: Path) -> tuple[TrainResult, str | None] | None:
    """Rank 0's TrainResult, and why a sweep pruned the trial (if it did), once rank 0 finished training."""
    path = workdir / RESULT
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    return TrainResult(**saved["result"]), saved["prune_reason"]


def describe_failure(exc: BaseException) -> dict[str, str]:
    """What the task's process needs to conclude the job after rank 0 failed: a kind and a message. A training
    error (bad settings, data, checkpoint) and running out of memory would happen again: the job fails; a lost
    lease stops it without a word; anything else is a crash, which the task retries as for one process."""
    if isinstance(exc, LeaseLost):
        return {"kind": "lease_lost", "message": str(exc)}
    if isinstance(exc, (TrainingError, DataError, CheckpointError)):
        return {"kind": "training", "message": str(exc)}
    if is_out_of_memory(exc):
        return {"kind": "out_of_memory", "message": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    return {"kind": "crash", "message": f"{type(exc).__name__}: {exc}"}


def _watch_agent(agent_pid: int) -> None:
    """Exit at once when the agent is gone (this process is re-parented)."""

    def watch() -> None:
        while os.getppid() == agent_pid:
            time.sleep(WATCH_SECONDS)
        print(f"the agent (pid {agent_pid}) is gone; exiting", file=sys.stderr, flush=True)
        os._exit(3)

    threading.Thread(target=watch, name="watch-agent", daemon=True).start()


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="a rank of a data-parallel training job, started by its agent")
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--worker", required=True, help="the worker holding the job's claim (node 0's)")
    parser.add_argument("--node-rank", type=int, required=True)
    parser.add_argument("--nodes", type=int, required=True, help="hosts in the group: one meets through a file")
    parser.add_argument("--launch", type=Path, required=True, help="node 0's tokenizer.json and train_config.json")
    parser.add_argument("--workdir", type=Path, required=True, help="where rank 0 leaves its result")
    parser.add_argument("--checkpoint-root", type=Path, required=True)
    return parser.parse_args(argv)


@record  # a failing rank's exception goes to the agent's error file: the agent reports it with the failure
def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    where = place(args.node_rank, dict(os.environ))
    settings = get_settings()
    _watch_agent(os.getppid())
    logs.configure(settings.model_copy(update={"log_format": "json"}))  # the host parses these lines
    logs.bind(job_id=args.job_id)
    job_log.capture_warnings()  # a warning is a WARNING line, so it reaches the job's log through the host
    if settings.torch_threads:
        torch.set_num_threads(settings.torch_threads)
    state: RunState | None = None
    if where.rank == 0:
        state = RunState(claim=job_rows.Claim(job_id=args.job_id, worker=args.worker, attempt=args.attempt))
        signal.signal(signal.SIGTERM, lambda *_: setattr(state, "preempt_requested", True))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
    try:
        result = _train(args, where, settings.job_lease_seconds, state)
    except BaseException as exc:
        if where.rank == 0:
            log.exception("job %s: rank 0 failed", args.job_id)
            write_json(args.workdir / FAILURE, describe_failure(exc))
        raise
    if result is not None and state is not None:
        write_json(args.workdir / RESULT, {"result": dataclasses.asdict(result), "prune_reason": state.prune_reason})
    return 0


def _train(args: argparse.Namespace, where: Place, lease_seconds: int, state: RunState | None) -> TrainResult | None:
    rows = load_job(args.job_id)
    data = prepare_job(rows, Tokenizer.load(args.launch))  # node 0's tokenizer
    node0 = TrainConfig.from_dict(json.loads((args.launch / TRAIN_CONFIG).read_text()))
    device_type = torch.device(node0.device).type
    config = node0.model_copy(update={"device": str(device_for(where.local_rank, device_type))})
    if where.restart > 0 and args.node_rank > 0 and where.local_rank == 0:  # restarted: rank 0 checkpointed since
        get_store().fetch(checkpoint_key(args.job_id), missing_ok=True)  # (a shared folder: nothing to copy)
    # One host: a file in the private workdir, so nothing listens (worker/training/rendezvous.py).
    path = ranks_store_path(args.workdir, where.restart)
    store = file_store(path, where.world_size) if args.nodes == 1 else launcher_store()
    ctx = init_process_group(where.rank, where.world_size, device_type, local_rank=where.local_rank, store=store)
    log.info(
        "job %s: rank %d of %d (node %d, %s) joined%s",
        args.job_id,
        where.rank,
        where.world_size,
        args.node_rank,
        config.device,
        f" after {where.restart} restart(s)" if where.restart else "",
    )
    try:
        dist.barrier()  # the host's copy of the checkpoints is complete before any rank reads it
        if state is None:
            train(data, config, args.checkpoint_root, None, resume=True, dist=ctx)
            return None
        state.set_progress(tokens_seen=rows.job.tokens_seen)
        keeper = LeaseKeeper(state, lease_seconds, KEEPER_SECONDS)
        keeper.start()
        try:
            trial = rows.job.sweep_id is not None
            callbacks = job_callbacks(state, args.job_id, args.checkpoint_root, lease_seconds, trial=trial)
            meta = {"job_id": args.job_id}
            result = train(data, config, args.checkpoint_root, callbacks, resume=True, meta=meta, dist=ctx)
        finally:
            keeper.stop()
        if state.lease_lost:
            raise LeaseLost(args.job_id)
        return result
    finally:
        destroy_process_group()


if __name__ == "__main__":
    try:
        code = main() or 0
    except BaseException:
        code = 1
    # Leave without running C++ destructors: torch.distributed's gloo threads can still be winding down after
    # destroy_process_group(), and tearing them down at interpreter exit aborts ("terminate called without an
    # active exception"), which the agent would report as a failed rank.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
