"""Which CTranslate2 compute types the decoding benchmark runs, from what CTranslate2 says the device supports.

On a CPU: float32 and int8 (what the inference workers use). On a GPU: float16, the usual GPU inference type
(bfloat16, then float32, where the device lacks it). CTranslate2 answers for itself: a wheel without CUDA, or
one whose CUDA runtime the driver cannot run, sees no GPU even when torch does; the engines are then left
out with that reason rather than failing the whole run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

ENGINE_NAMES = {"float32": "ct2_fp32", "int8": "ct2_int8", "float16": "ct2_fp16", "bfloat16": "ct2_bf16"}
WANTED = {"cpu": ("float32", "int8"), "cuda": ("float16",)}
GPU_FALLBACKS = ("bfloat16", "float32")


@dataclass(frozen=True)
class Ct2Plan:
    compute_types: tuple[str, ...]  # in the order the engines are listed
    skipped: str | None  # why no CTranslate2 engine runs, when none does


def ct2_plan(
    device_type: str,
    supported_compute_types: Callable[[str], set[str]] | None = None,
    cuda_device_count: Callable[[], int] | None = None,
) -> Ct2Plan:
    """The compute types to benchmark on `device_type` ("cpu" | "cuda"); the two CTranslate2 queries can be
    passed in (defaults: ctranslate2.get_supported_compute_types and ctranslate2.get_cuda_device_count)."""
    if device_type not in WANTED:
        raise ValueError(f"device_type={device_type!r} must be one of {sorted(WANTED)}")
    if supported_compute_types is None or cuda_device_count is None:
        import ctranslate2

        supported_compute_types = supported_compute_types or ctranslate2.get_supported_compute_types
        cuda_device_count = cuda_device_count or ctranslate2.get_cuda_device_count
    if device_type == "cuda" and cuda_device_count() == 0:
        return Ct2Plan((), "CTranslate2 sees no CUDA device (ctranslate2.get_cuda_device_count() == 0)")
    try:
        supported = set(supported_compute_types(device_type))
    except (RuntimeError, ValueError) as e:  # e.g. "CUDA driver version is insufficient for CUDA runtime version"
        return Ct2Plan((), f"ctranslate2.get_supported_compute_types({device_type!r}) failed: {e}")
    chosen = tuple(t for t in WANTED[device_type] if t in supported)
    if device_type == "cuda" and not chosen:
        chosen = next(((t,) for t in GPU_FALLBACKS if t in supported), ())
    if not chosen:
        return Ct2Plan((), f"none of {WANTED[device_type]} in CTranslate2's supported types {sorted(supported)}")
    return Ct2Plan(chosen, None)
