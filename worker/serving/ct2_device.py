"""Where the CTranslate2 backend runs and in which compute type, from what CTranslate2 itself reports.

CTranslate2 carries its own CUDA runtime: a wheel built without CUDA, or whose runtime the driver cannot run,
sees no GPU although torch does. So the device comes from ctranslate2.get_cuda_device_count() and the compute
type from ctranslate2.get_supported_compute_types(device); anything CTranslate2 cannot do falls back (to the
CPU, to the default type) with the reason logged, never to an error for every request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

# CT2_COMPUTE_TYPE=auto: the first one CTranslate2 supports. float16 on a GPU (what CTranslate2 recommends
# there; int8_float16 where the GPU lacks fast float16); int8 on an Intel CPU with VNNI (weights quantized when
# loaded). float32 on an AMD CPU, where int8 is either inexact (oneDNN's GEMM, see worker.serving.ct2) or, with
# the MKL GEMM the workers choose, slower than float32 (docs/gpu.md, "Serving on a GPU"), and on a CPU without
# VNNI, where int8 sums saturate (worker.serving.ct2.cpu_int8_exact).
AUTO = {"cuda": ("float16", "int8_float16", "bfloat16", "float32"), "cpu": ("int8", "float32")}
AUTO_EXACT_CPU = ("float32",)


@dataclass(frozen=True)
class Ct2Placement:
    device: str  # "cuda" | "cpu", as ctranslate2.Translator takes it
    device_index: int
    compute_type: str
    fallback: str | None  # why it is not what was asked for, if it is not


def place(
    worker: torch.device,
    requested: str,
    cuda_device_count: Callable[[], int],
    supported_compute_types: Callable[[str], Iterable[str]],
    amd_cpu: bool = False,
    int8_exact: bool = True,
) -> Ct2Placement:
    """The device and compute type for a worker computing on `worker` with CT2_COMPUTE_TYPE=`requested`;
    amd_cpu: the host's CPU is an AMD one, int8_exact: its int8 products do not saturate (where either says no
    int8, the CPU's auto type is float32)."""
    reasons: list[str] = []
    device, index = "cpu", 0
    if worker.type == "cuda":
        wanted = worker.index or 0
        try:
            count = cuda_device_count()
        except Exception as exc:  # noqa: BLE001  # a broken CUDA install must not stop serving on the CPU
            count, why = 0, f"ctranslate2.get_cuda_device_count() failed: {exc}"
        else:
            why = f"CTranslate2 sees {count} CUDA device(s), not cuda:{wanted}"
        if count > wanted:
            device, index = "cuda", wanted
        else:
            reasons.append(f"{why}; serving on the CPU")
    try:
        supported = set(supported_compute_types(device))
    except Exception as exc:  # noqa: BLE001  # e.g. "CUDA driver version is insufficient for CUDA runtime version"
        if device == "cpu":
            raise
        reasons.append(f"ctranslate2.get_supported_compute_types('cuda') failed: {exc}; serving on the CPU")
        device, index = "cpu", 0
        supported = set(supported_compute_types("cpu"))
    if requested not in ("auto", "default") and requested not in supported:
        reasons.append(f"CT2_COMPUTE_TYPE={requested!r} is not supported on {device} ({sorted(supported)}); using auto")
        requested = "auto"
    preferred = AUTO_EXACT_CPU if device == "cpu" and (amd_cpu or not int8_exact) else AUTO[device]
    compute = requested if requested != "auto" else next((t for t in preferred if t in supported), "default")
    return Ct2Placement(device, index, compute, "; ".join(reasons) or None)
