"""The device a worker process computes on (WORKER_DEVICE), checked against the devices the host really has.

Training and serving both ask worker_device(); nothing else picks a GPU. CUDA numbers the GPUs that
CUDA_VISIBLE_DEVICES leaves visible from 0, and so does WORKER_DEVICE=cuda:N.
"""

from __future__ import annotations

import logging
import os
import platform
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from app.core.settings import get_settings
from model.train.config import TrainingError

log = logging.getLogger(__name__)

# Lets the caching allocator grow segments instead of reserving new ones for every new batch shape: less
# fragmentation with length-bucketed batches (PyTorch's advice for variable-size inputs). Set before CUDA starts.
CUDA_ALLOC_CONF = "expandable_segments:True"


class DeviceError(RuntimeError):
    """WORKER_DEVICE names a device this host does not have."""


def resolve_device(setting: str, cuda_count: int) -> torch.device:
    """The torch.device for a WORKER_DEVICE value on a host with cuda_count visible GPUs."""
    if not setting:
        return torch.device("cuda", 0) if cuda_count > 0 else torch.device("cpu")
    device = torch.device(setting)
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise DeviceError(f"WORKER_DEVICE={setting!r} must be cpu, cuda or cuda:N")
    index = 0 if device.index is None else device.index
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    seen = f"CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else "CUDA_VISIBLE_DEVICES unset"
    if cuda_count == 0:
        raise DeviceError(f"WORKER_DEVICE={setting!r} but this host has no CUDA device that PyTorch can use ({seen})")
    if index >= cuda_count:
        raise DeviceError(
            f"WORKER_DEVICE={setting!r} but this host has {cuda_count} visible CUDA device(s), "
            f"cuda:0 to cuda:{cuda_count - 1} ({seen})"
        )
    return torch.device("cuda", index)


def check_data_parallel(setting: str, devices: int) -> None:
    """A data-parallel job's ranks take cuda:0 to cuda:devices-1 of the GPUs this process sees. A worker pinned to
    one of them (WORKER_DEVICE=cuda:N) would spread onto the GPUs of the workers beside it: refuse, saying how to
    give a worker several GPUs of its own."""
    if devices < 2 or not setting or torch.device(setting).type != "cuda" or torch.device(setting).index is None:
        return
    raise TrainingError(
        f"training.devices={devices} needs {devices} GPUs, but this worker is pinned to one "
        f"(WORKER_DEVICE={setting!r}); give each worker its own GPUs with CUDA_VISIBLE_DEVICES and "
        "WORKER_DEVICE=cuda, or lower training.devices"
    )


def check_gpus(device: str, devices: int, count: Callable[[], int] = torch.cuda.device_count) -> None:
    """A data-parallel job's host runs one process per GPU: refuse before starting any when it has too few."""
    if torch.device(device).type == "cuda" and count() < devices:
        raise TrainingError(
            f"training.devices={devices} needs {devices} GPUs, but this worker has {count()}; "
            "lower training.devices or run it on a bigger host"
        )


def worker_device() -> torch.device:
    """This process's device, from WORKER_DEVICE and torch.cuda.device_count()."""
    return resolve_device(get_settings().worker_device, torch.cuda.device_count())


def check_device() -> torch.device:
    """In the worker's main process, at start: resolve the device (DeviceError if the host lacks it) and configure
    CUDA's allocator for the processes that will use it. Starts no CUDA context: a prefork pool forks from this
    process, and CUDA does not survive a fork (torch.cuda.device_count() is fork-safe)."""
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", CUDA_ALLOC_CONF)
    return worker_device()


def prepare_process() -> torch.device:
    """In a pool process, before its first task: make the worker's GPU current, so no library touches another."""
    device = check_device()
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def memory_limit_bytes(device: torch.device) -> int:
    """The memory a job on `device` may use: the GPU's total memory, or WORKER_MEMORY_LIMIT_GB on a CPU. Called
    in the process that trains (a GPU's properties start CUDA there, which that process uses anyway)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return int(get_settings().worker_memory_limit_gb * 1024**3)


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # cpu | cuda
    name: str
    memory_total: int | None  # bytes
    memory_free: int | None  # bytes


Runner = Callable[[list[str]], str]


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True).stdout


def device_info(device: torch.device, run: Runner = _run, proc: Path = Path("/proc")) -> DeviceInfo:
    """What the heartbeat reports of `device`, without starting CUDA in this process: a GPU's name and memory from
    nvidia-smi (its index mapped through CUDA_VISIBLE_DEVICES), the CPU's from /proc. Unknown parts are None."""
    if device.type == "cuda":
        index = device.index or 0
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        physical = visible[index] if index < len(visible) else str(index)
        query = ["nvidia-smi", "--query-gpu=name,memory.total,memory.free", "--format=csv,noheader,nounits"]
        try:
            name, total_mib, free_mib = (f.strip() for f in run([*query, "-i", physical]).strip().split(","))
            return DeviceInfo("cuda", name, int(total_mib) * 2**20, int(free_mib) * 2**20)  # nvidia-smi counts MiB
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            log.warning("nvidia-smi could not describe cuda:%d (%s): %s", index, physical, exc)
            return DeviceInfo("cuda", f"cuda:{index}", None, None)
    name = platform.machine() or "cpu"
    total: int | None = None
    free: int | None = None
    try:
        for line in (proc / "cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
        meminfo = dict(line.split(":", 1) for line in (proc / "meminfo").read_text().splitlines() if ":" in line)
        total = int(meminfo["MemTotal"].split()[0]) * 1024  # kB
        free = int(meminfo["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError) as exc:
        log.warning("could not read the CPU's name or memory from %s: %s", proc, exc)
    return DeviceInfo("cpu", f"{name} ({os.cpu_count()} cores)", total, free)
