"""cuBLAS 12 from the nvidia-cublas-cu12 wheel, preloaded for CTranslate2 on a GPU host: found inside
site-packages, loaded Lt first with RTLD_GLOBAL, and every way it can be missing logged. No GPU here: a fake
package folder with empty files named as the wheel's, and a loader that records instead of loading."""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

from worker.serving import cuda_libs


def _wheel(root: Path, names=cuda_libs.LIBRARIES) -> Path:
    """site-packages/nvidia/cublas as the wheel lays it out (lib/ with its libraries); returns the package folder."""
    package = root / "nvidia" / "cublas"
    (package / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in names:
        (package / "lib" / name).write_bytes(b"")
    return package


def _spec(package: Path):
    def find_spec(name: str) -> ModuleSpec | None:
        assert name == "nvidia.cublas"
        spec = ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(package)]
        return spec

    return find_spec


class Loader:
    def __init__(self, fails: str | None = None) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fails = fails

    def __call__(self, path: str, mode: int = 0) -> object:
        if self.fails and path.endswith(self.fails):
            raise OSError(f"{path}: undefined symbol: cublasLtGetVersion")
        self.calls.append((path, mode))
        return object()


def test_the_wheels_libraries_are_loaded_lt_first_and_global(tmp_path, caplog):
    package, load = _wheel(tmp_path), Loader()
    with caplog.at_level(logging.INFO, logger="worker.serving.cuda_libs"):
        preloaded = cuda_libs.preload_cublas(_spec(package), load)
    lib = package / "lib"
    assert load.calls == [
        (str(lib / "libcublasLt.so.12"), ctypes.RTLD_GLOBAL),
        (str(lib / "libcublas.so.12"), ctypes.RTLD_GLOBAL),
    ]
    assert preloaded == cuda_libs.Preloaded((str(lib / "libcublasLt.so.12"), str(lib / "libcublas.so.12")), None)
    assert f"loaded {lib / 'libcublasLt.so.12'}, {lib / 'libcublas.so.12'} for CTranslate2 on the GPU" in caplog.text


def test_the_folder_is_found_by_the_real_import_system_in_a_site_folder(tmp_path, monkeypatch):
    """nvidia/ is a namespace package (no __init__.py) spread over site-packages; find_spec finds cublas in it."""
    package = _wheel(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "nvidia" or m.startswith("nvidia.")]:
        monkeypatch.delitem(sys.modules, name)
    importlib.invalidate_caches()
    assert cuda_libs.cublas_dir() == package / "lib"


@pytest.mark.parametrize(
    "find_spec",
    [lambda name: None, lambda name: (_ for _ in ()).throw(ModuleNotFoundError("No module named 'nvidia'"))],
    ids=["no cublas package", "no nvidia namespace"],
)
def test_without_the_wheel_nothing_is_loaded_and_the_log_says_how_to_install_it(find_spec, caplog):
    load = Loader()
    with caplog.at_level(logging.WARNING, logger="worker.serving.cuda_libs"):
        preloaded = cuda_libs.preload_cublas(find_spec, load)
    assert load.calls == [] and preloaded == cuda_libs.Preloaded((), cuda_libs.NOT_INSTALLED)
    assert "cuBLAS for CUDA 12 not preloaded: nvidia-cublas-cu12 is not installed" in caplog.text
    assert "pip install -e '.[worker,gpu]'" in caplog.text


def test_a_wheel_for_another_cuda_is_named_and_not_loaded(tmp_path, caplog):
    package, load = _wheel(tmp_path, names=("libcublas.so.13", "libcublasLt.so.13")), Loader()
    with caplog.at_level(logging.WARNING, logger="worker.serving.cuda_libs"):
        preloaded = cuda_libs.preload_cublas(_spec(package), load)
    assert load.calls == [] and preloaded.paths == ()
    assert preloaded.why_not is not None and "has no libcublasLt.so.12, libcublas.so.12" in preloaded.why_not
    assert "libcublas.so.13" in caplog.text


def test_a_library_that_fails_to_load_stops_there_saying_why(tmp_path, caplog):
    package, load = _wheel(tmp_path), Loader(fails="libcublas.so.12")
    with caplog.at_level(logging.WARNING, logger="worker.serving.cuda_libs"):
        preloaded = cuda_libs.preload_cublas(_spec(package), load)
    assert preloaded.paths == (str(package / "lib" / "libcublasLt.so.12"),)
    assert preloaded.why_not is not None and "undefined symbol" in preloaded.why_not
    assert "loading " in caplog.text and "libcublas.so.12 failed" in caplog.text


def test_a_process_preloads_once(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(cuda_libs, "_preloaded", None)
    monkeypatch.setattr(cuda_libs, "preload_cublas", lambda: calls.append(1) or cuda_libs.Preloaded((), "x"))
    assert cuda_libs.preload_cublas_once() is cuda_libs.preload_cublas_once()
    assert calls == [1]
