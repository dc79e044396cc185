"""Data-parallel training of one job over N processes of this host (the job option training.devices = N).

The Celery task's process is rank 0: it keeps the lease keeper, the callbacks and every database write. It opens
the rendezvous on a free port and starts ranks 1..N-1 as `python -m worker.training.ddp_peer` subprocesses (a prefork
pool child is daemonic and may not start multiprocessing children). Each peer re-reads the job, prepares the same
data with rank 0's tokenizer and config, and trains with model/train/distributed.py (cuda:r and NCCL on a GPU host,
gloo on CPU). A peer exits when rank 0 goes away (it watches rank 0's pid) and ignores SIGINT/SIGTERM: rank 0
decides when every rank stops. When a peer dies, rank 0 fails the job with the peer's last words.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from app.core import logs
from app.core.settings import get_settings
from model.data.tokenizer import Tokenizer
from model.train.config import TrainConfig, TrainingError
from model.train.distributed import destroy_process_group, device_for, init_process_group, rendezvous_store
from model.train.events import Callbacks, TrainResult
from model.train.loop import train
from model.train.prepare import PreparedData
from worker.training.job_data import load_job, prepare_job

log = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[1]
WATCH_SECONDS = 0.5  # how often a peer checks rank 0, and rank 0 its peers
EXIT_WAIT_SECONDS = 60.0  # how long rank 0 waits for the peers to leave after the last update


class PeerFailed(TrainingError):
    """A peer process of a data-parallel job died; the message says which and why."""


# -- rank 0 ---------------------------------------------------------------------------------------------------


class Peers:
    """Ranks 1..N-1 as subprocesses, each with its output in workdir/rank<r>.log."""

    def __init__(self, job_id: str, world_size: int, port: int, workdir: Path, checkpoint_root: Path) -> None:
        self.job_id, self.world_size, self.port = job_id, world_size, port
        self.workdir, self.checkpoint_root = workdir, checkpoint_root
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._why: dict[int, str] = {}

    def start(self) -> None:
        pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        for rank in range(1, self.world_size):
            env = {
                **os.environ,
                "PYTHONPATH": pythonpath,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": str(self.world_size),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(self.port),
            }
            with open(self.workdir / f"rank{rank}.log", "wb") as out:
                self.procs[rank] = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "worker.training.ddp_peer",
                        "--job-id",
                        self.job_id,
                        "--parent-pid",
                        str(os.getpid()),
                        "--workdir",
                        str(self.workdir),
                        "--checkpoint-root",
                        str(self.checkpoint_root),
                    ],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
        log.info("job %s: started data-parallel peers %s", self.job_id, {r: p.pid for r, p in self.procs.items()})

    def failure(self, wait: float = 0.0) -> str | None:
        """Why the first peer that exited with an error did, or None; waits up to `wait` s for one to exit."""
        deadline = time.monotonic() + wait
        while True:
            for rank, proc in self.procs.items():
                code = proc.poll()
                if code is not None and code != 0:
                    return self._describe(rank, proc, code)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.1)

    def check(self) -> None:
        """Raise PeerFailed if a peer has died."""
        if (why := self.failure()) is not None:
            raise PeerFailed(why)

    def _describe(self, rank: int, proc: subprocess.Popen[bytes], code: int) -> str:
        if rank in self._why:
            return self._why[rank]
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        lines = [ln for ln in self.log(rank).splitlines() if ln.strip()]
        if lines:
            log.error(
                "job %s: data-parallel rank %d %s; its last output:\n%s", self.job_id, rank, how, "\n".join(lines[-20:])
            )
        self._why[rank] = f"data-parallel training process of rank {rank} (pid {proc.pid}) {how}" + (
            f": {lines[-1].strip()[:500]}" if code > 0 and lines else ""
        )
        return self._why[rank]

    def log(self, rank: int) -> str:
        path = self.workdir / f"rank{rank}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait(self, timeout: float) -> None:
        """Wait for every peer to exit; PeerFailed if one failed or did not leave in time."""
        deadline = time.monotonic() + timeout
        for rank, proc in self.procs.items():
            try:
                code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise PeerFailed(
                    f"data-parallel training process of rank {rank} (pid {proc.pid}) did not exit "
                    f"within {timeout:g} s after the last update"
                ) from None
            if code != 0:
                raise PeerFailed(self._describe(rank, proc, code))

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()  # they ignore SIGTERM
            proc.wait()


class _Watchdog(threading.Thread):
    """Beside rank 0's training: when a peer dies, abort the collectives rank 0 may be blocked in (NCCL would
    wait for the dead rank until its timeout; gloo fails by itself once the peer's sockets close)."""

    def __init__(self, peers: Peers, abort: Callable[[], None]) -> None:
        super().__init__(name="ddp-watchdog", daemon=True)
        self.peers, self.abort, self.stopped = peers, abort, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(WATCH_SECONDS):
            if self.peers.failure() is not None:
                self.abort()
                return


def train_data_parallel(
    job_id: str,
    data: PreparedData,
    config: TrainConfig,
    devices: int,
    checkpoint_root: Path,
    callbacks: Callbacks,
    meta: dict[str, Any],
) -> TrainResult:
    """Train as rank 0 of `devices` processes (config.device "cuda" or "cpu"); returns rank 0's TrainResult.

    Raises TrainingError when this host has fewer GPUs than devices and PeerFailed when a peer dies.
    """
    device_type = torch.device(config.device).type
    if device_type == "cuda" and torch.cuda.device_count() < devices:
        raise TrainingError(
            f"training.devices={devices} needs {devices} GPUs, but this worker has "
            f"{torch.cuda.device_count()}; lower training.devices or run it on a bigger host"
        )
    if device_type not in ("cuda", "cpu"):
        raise TrainingError(f"training.devices={devices} needs CUDA GPUs or the CPU, not {config.device!r}")
    config = config.model_copy(update={"device": str(device_for(0, device_type))})
    with tempfile.TemporaryDirectory(prefix=f"ddp-{job_id[:8]}-") as tmp:
        workdir = Path(tmp)
        data.tokenizer.save(workdir)
        (workdir / "train_config.json").write_text(json.dumps(config.to_dict()))
        store = rendezvous_store(devices)
        peers = Peers(job_id, devices, store.port, workdir, checkpoint_root)
        watchdog: _Watchdog | None = None
        try:
            peers.start()
            ctx = init_process_group(0, devices, device_type, store=store, poll=peers.check)
            watchdog = _Watchdog(peers, ctx.abort)
            watchdog.start()
            try:
                result = train(data, config, checkpoint_root, callbacks, resume=True, meta=meta, dist=ctx)
            except Exception as exc:  # a dead peer surfaces here as a failed collective (a RuntimeError)
                ctx.abort()  # NCCL: never wait on ranks that are gone or about to be killed
                if (why := peers.failure(wait=2.0 if isinstance(exc, RuntimeError) else 0.0)) is not None:
                    raise PeerFailed(why) from exc
                raise
            peers.wait(EXIT_WAIT_SECONDS)
            return result
        finally:
            if watchdog is not None:
                watchdog.stopped.set()
            peers.kill()
            destroy_process_group()


# -- ranks 1..N-1 ---------------------------------------------------------------------------------------------


def _watch_parent(parent_pid: int) -> None:
    """Exit at once when rank 0 is gone (this process is re-parented)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WATCH_SECONDS)
        print(f"rank 0 (pid {parent_pid}) is gone; exiting", file=sys.stderr, flush=True)
        os._exit(3)

    threading.Thread(target=watch, name="watch-rank-0", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="a data-parallel peer (rank >= 1) of a training job; started by "
        "rank 0 with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set"
    )
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--parent-pid", type=int, required=True, help="rank 0's pid: exit when it is gone")
    parser.add_argument("--workdir", type=Path, required=True, help="rank 0's tokenizer.json and train_config.json")
    parser.add_argument("--checkpoint-root", type=Path, required=True)
    args = parser.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGTERM):  # rank 0 decides when every rank stops (cancel, shutdown)
        signal.signal(sig, signal.SIG_IGN)
    _watch_parent(args.parent_pid)
    logs.configure(get_settings())  # the worker's JSON lines; the pid field tells the ranks apart
    logs.bind(job_id=args.job_id)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if get_settings().torch_threads:
        torch.set_num_threads(get_settings().torch_threads)
    data = prepare_job(load_job(args.job_id), Tokenizer.load(args.workdir))  # rank 0's tokenizer
    rank0_config = TrainConfig.from_dict(json.loads((args.workdir / "train_config.json").read_text()))
    device_type = torch.device(rank0_config.device).type
    config = rank0_config.model_copy(update={"device": str(device_for(rank, device_type))})
    ctx = init_process_group(
        rank, world_size, device_type, master_addr=os.environ["MASTER_ADDR"], master_port=int(os.environ["MASTER_PORT"])
    )
    try:
        result = train(data, config, args.checkpoint_root, None, resume=True, dist=ctx)
    finally:
        destroy_process_group()
    log.info("job %s: rank %d stopped at step %d (%s)", args.job_id, rank, result.step, result.stop_reason)
    return 0


if __name__ == "__main__":
    code = main()
    # Leave without running C++ destructors: torch.distributed's gloo threads can still be winding down after
    # destroy_process_group(), and tearing them down at interpreter exit aborts ("terminate called without an
    # active exception"), which rank 0 would report as a crashed peer.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
