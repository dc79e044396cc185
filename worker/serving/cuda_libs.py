"""cuBLAS for CUDA 12 from NVIDIA's `nvidia-cublas-cu12` wheel, loaded before CTranslate2 looks for it.

The CTranslate2 wheel from PyPI links the CUDA runtime statically but opens `libcublas.so.12` with dlopen at its
first matrix product on a GPU (`strings` on its library shows libcublas.so.12 and libcudart_static, no cudnn for
translation). A host with CUDA 13 alone (an H200 with torch cu130) has no such file: every translation failed with
"Library libcublas.so.12 is not found or cannot be loaded". The `gpu` extra (`pip install -e '.[worker,gpu]'`)
installs NVIDIA's cuBLAS 12 wheel into site-packages/nvidia/cublas/lib, a folder no loader path names. Loading its
two libraries here with RTLD_GLOBAL, before CTranslate2 translates on the GPU, makes CTranslate2's
dlopen("libcublas.so.12") find the copy already in the process: the dynamic loader matches a loaded library by its
soname. libcublasLt.so.12 first, as libcublas.so.12 needs it and finds it the same way.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CUBLAS_PACKAGE = "nvidia.cublas"  # the import name of the nvidia-cublas-cu12 wheel's folder
LIBRARIES = ("libcublasLt.so.12", "libcublas.so.12")  # in load order: libcublas.so.12 needs libcublasLt.so.12
NOT_INSTALLED = (
    "nvidia-cublas-cu12 is not installed (pip install -e '.[worker,gpu]'); CTranslate2 looks for libcublas.so.12 on "
    "the system's library path"
)


@dataclass(frozen=True)
class Preloaded:
    paths: tuple[str, ...]  # the libraries loaded, in order
    why_not: str | None  # why not all of LIBRARIES were, if they were not


def cublas_dir(find_spec: Callable[[str], ModuleSpec | None] = importlib.util.find_spec) -> Path | None:
    """site-packages/nvidia/cublas/lib of the nvidia-cublas-cu12 wheel; None where it is not installed."""
    try:
        spec = find_spec(CUBLAS_PACKAGE)
    except ImportError:  # no `nvidia` namespace at all
        return None
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        folder = Path(location) / "lib"
        if folder.is_dir():
            return folder
    return None


def preload_cublas(
    find_spec: Callable[[str], ModuleSpec | None] = importlib.util.find_spec,
    load: Callable[..., Any] = ctypes.CDLL,
) -> Preloaded:
    """Load the wheel's LIBRARIES with RTLD_GLOBAL, in order, logging what was loaded or why not. Never raises:
    without them CTranslate2 still tries the system's libcublas.so.12, and its load-time probe on the GPU
    (worker/serving/ct2.py) moves the model to the CPU if that fails too."""
    folder = cublas_dir(find_spec)
    if folder is None:
        return _not_all((), NOT_INSTALLED)
    missing = [name for name in LIBRARIES if not (folder / name).is_file()]
    if missing:
        found = sorted(p.name for p in folder.iterdir())
        return _not_all((), f"{folder} has no {', '.join(missing)} (found {found}): not a CUDA 12 cuBLAS")
    paths: list[str] = []
    for name in LIBRARIES:
        path = str(folder / name)
        try:
            load(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:  # a truncated file, a driver too old for this cuBLAS
            return _not_all(tuple(paths), f"loading {path} failed: {exc}")
        paths.append(path)
    log.info("loaded %s for CTranslate2 on the GPU", ", ".join(paths))
    return Preloaded(tuple(paths), None)


def _not_all(paths: tuple[str, ...], why: str) -> Preloaded:
    log.warning("cuBLAS for CUDA 12 not preloaded: %s", why)
    return Preloaded(paths, why)


_lock = threading.Lock()
_preloaded: Preloaded | None = None


def preload_cublas_once() -> Preloaded:
    """preload_cublas() the first time a process asks (the libraries stay loaded); its answer after that."""
    global _preloaded
    with _lock:
        if _preloaded is None:
            _preloaded = preload_cublas()
        return _preloaded
