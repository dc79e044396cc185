"""The CTranslate2 backend's device and compute type come from what CTranslate2 reports, and whatever it cannot
do falls back to the CPU with the reason logged. No GPU here: CTranslate2's answers are injected."""

from __future__ import annotations

import logging

import pytest
import torch

from worker.serving import ct2
from worker.serving.ct2_device import Ct2Placement, place
from worker.serving.model_cache import LoadedModel

GPU_TYPES = {"float32", "float16", "int8_float16", "int8", "bfloat16", "int8_float32"}
CPU_TYPES = {"float32", "int8", "int8_float32"}


def types(device: str) -> set[str]:
    return GPU_TYPES if device == "cuda" else CPU_TYPES


def test_a_gpu_worker_decodes_in_float16_on_its_own_gpu():
    assert place(torch.device("cuda", 1), "auto", lambda: 2, types) == Ct2Placement("cuda", 1, "float16", None)


def test_a_gpu_without_fast_float16_takes_int8_float16():
    chosen = place(torch.device("cuda", 0), "auto", lambda: 1, lambda d: {"float32", "int8_float16", "int8"})
    assert chosen.compute_type == "int8_float16"


def test_a_cpu_worker_decodes_in_int8_on_intel_float32_on_amd_and_honours_an_explicit_type():
    assert place(torch.device("cpu"), "auto", lambda: 0, types) == Ct2Placement("cpu", 0, "int8", None)
    assert place(torch.device("cpu"), "auto", lambda: 0, types, amd_cpu=True).compute_type == "float32"
    assert place(torch.device("cpu"), "int8", lambda: 0, types, amd_cpu=True).compute_type == "int8"
    assert place(torch.device("cuda", 0), "auto", lambda: 1, types, amd_cpu=True).compute_type == "float16"
    assert place(torch.device("cpu"), "float32", lambda: 0, types).compute_type == "float32"
    assert place(torch.device("cpu"), "default", lambda: 0, types).compute_type == "default"


def test_a_cpu_whose_int8_sums_saturate_decodes_in_float32_unless_int8_is_named():
    assert place(torch.device("cpu"), "auto", lambda: 0, types, int8_exact=False).compute_type == "float32"
    assert place(torch.device("cpu"), "int8", lambda: 0, types, int8_exact=False).compute_type == "int8"
    assert place(torch.device("cuda", 0), "auto", lambda: 1, types, int8_exact=False).compute_type == "float16"


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor @ 2.00GHz
flags\t\t: fpu sse sse2 avx avx2 avx512f avx512bw{extra}
"""


@pytest.mark.parametrize(
    ("extra", "exact"),
    [("", False), (" avx512_vnni", True), (" avx_vnni", True), (" amx_int8 amx_tile", True), (" avx512_vnnix", False)],
)
def test_int8_is_exact_on_a_cpu_with_vnni(monkeypatch, extra, exact):
    monkeypatch.setattr(ct2, "_x86_cpuinfo", lambda: CPUINFO.format(extra=extra))
    assert ct2.cpu_int8_exact() is exact
    assert ct2.amd_cpu() is False


def test_off_x86_or_without_cpuinfo_int8_counts_as_exact(monkeypatch):
    monkeypatch.setattr(ct2.platform, "machine", lambda: "aarch64")
    assert ct2.cpu_int8_exact() is True and ct2.amd_cpu() is False
    monkeypatch.setattr(ct2.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(ct2.Path, "read_text", lambda *a, **k: (_ for _ in ()).throw(OSError("no /proc")))
    assert ct2.cpu_int8_exact() is True and ct2.amd_cpu() is False


def test_when_ctranslate2_sees_no_gpu_the_worker_serves_on_the_cpu_saying_why():
    chosen = place(torch.device("cuda", 0), "auto", lambda: 0, types)
    assert (chosen.device, chosen.compute_type) == ("cpu", "int8")
    assert chosen.fallback == "CTranslate2 sees 0 CUDA device(s), not cuda:0; serving on the CPU"


def test_a_broken_cuda_runtime_falls_back_to_the_cpu():
    def supported(device: str) -> set[str]:
        if device == "cuda":
            raise RuntimeError("CUDA driver version is insufficient for CUDA runtime version")
        return CPU_TYPES

    chosen = place(torch.device("cuda", 0), "auto", lambda: 1, supported)
    assert (chosen.device, chosen.compute_type) == ("cpu", "int8")
    assert "CUDA driver version is insufficient" in chosen.fallback


def test_an_unsupported_compute_type_is_replaced_by_auto_saying_why():
    chosen = place(torch.device("cpu"), "float16", lambda: 0, types)
    assert chosen.compute_type == "int8"
    assert "CT2_COMPUTE_TYPE='float16' is not supported on cpu" in chosen.fallback


class FakeTranslator:
    """What ctranslate2.Translator(...) gives: records its arguments and the batches it translates; `fails` is
    the RuntimeError its translations raise (CTranslate2 loads cuBLAS at the first translation)."""

    def __init__(self, kwargs: dict, fails: str | None) -> None:
        self.kwargs = kwargs
        self.fails = fails
        self.batches: list[list[list[str]]] = []

    def translate_batch(self, batch: list[list[str]], **kwargs) -> list:
        self.batches.append(batch)
        if self.fails:
            raise RuntimeError(self.fails)
        return []


def translator_on_a_gpu_host(monkeypatch, tmp_path, settings_env, load_fails=None, translate_fails=None):
    """CT2Translator on a worker of cuda:0 where CTranslate2 reports one GPU; loading a model on the GPU raises
    `load_fails`, translating there raises `translate_fails`. Returns the translator and every load made."""
    import ctranslate2

    settings_env(WORKER_DEVICE="cuda:0")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", types)
    monkeypatch.setattr(ct2, "_converted_dir", lambda loaded: tmp_path)
    monkeypatch.setattr(ct2, "amd_cpu", lambda: False)  # an Intel host with VNNI: int8 on its CPU
    monkeypatch.setattr(ct2, "cpu_int8_exact", lambda: True)
    loads: list[FakeTranslator | str] = []

    def translator(path: str, **kwargs):
        if kwargs["device"] == "cuda":
            assert loads[-1:] == ["cuBLAS preloaded"], "loaded on the GPU before cuBLAS 12 was preloaded"
        if kwargs["device"] == "cuda" and load_fails:
            raise RuntimeError(load_fails)
        loads.append(FakeTranslator(kwargs, translate_fails if kwargs["device"] == "cuda" else None))
        return loads[-1]

    monkeypatch.setattr(ctranslate2, "Translator", translator)
    monkeypatch.setattr(ct2, "preload_cublas_once", lambda: loads.append("cuBLAS preloaded"))
    loaded = LoadedModel("m-1", "translation", None, None, "span", {"sha256": "0" * 64})  # type: ignore[arg-type]
    return ct2.CT2Translator(loaded), [t for t in loads if isinstance(t, FakeTranslator)]


def test_a_model_that_fails_to_load_on_the_gpu_is_served_from_the_cpu(monkeypatch, tmp_path, caplog, settings_env):
    """CTranslate2 reports a GPU, but loading there fails (out of memory): it loads on the CPU instead and logs
    why."""
    with caplog.at_level(logging.WARNING, logger="worker.serving.ct2"):
        backend, loads = translator_on_a_gpu_host(
            monkeypatch, tmp_path, settings_env, load_fails="CUDA failed with error out of memory"
        )
    assert [(t.kwargs["device"], t.kwargs["compute_type"]) for t in loads] == [("cpu", "int8")]
    assert backend.placement.device == "cpu"
    assert "loading on cuda:0 failed: RuntimeError: CUDA failed with error out of memory; serving on the CPU" in (
        caplog.text
    )


def test_a_gpu_that_loads_the_model_but_cannot_translate_is_left_for_the_cpu_at_load_time(
    monkeypatch, tmp_path, caplog, settings_env
):
    """As seen on an H200 with CUDA 13 alone: the CUDA 12 wheel counts the GPU, lists float16 and loads the
    model, then every translation fails for want of libcublas.so.12. One probe translation at load time finds
    it, and the model is served from the CPU instead of answering every request with a 503."""
    missing = "Library libcublas.so.12 is not found or cannot be loaded"
    with caplog.at_level(logging.WARNING, logger="worker.serving.ct2"):
        backend, loads = translator_on_a_gpu_host(monkeypatch, tmp_path, settings_env, translate_fails=missing)
    assert [(t.kwargs["device"], t.kwargs["compute_type"]) for t in loads] == [("cuda", "float16"), ("cpu", "int8")]
    assert loads[0].batches == [[ct2.PROBE_SOURCE]]  # the probe: one source of several tokens
    assert len(ct2.PROBE_SOURCE) >= 5  # one token did not reach cuBLAS on the H200, five did
    assert loads[1].batches == []  # the CPU is not probed
    assert backend.translator is loads[1] and backend.placement.device == "cpu"
    assert f"translating on cuda:0 failed: RuntimeError: {missing}; serving on the CPU" in caplog.text
    assert backend.off_gpu == backend.placement.fallback  # a GPU worker's CTranslate2 on the CPU: auto leaves it


def test_a_gpu_that_translates_keeps_the_model(monkeypatch, tmp_path, settings_env):
    backend, loads = translator_on_a_gpu_host(monkeypatch, tmp_path, settings_env)
    assert [(t.kwargs["device"], t.kwargs["compute_type"]) for t in loads] == [("cuda", "float16")]
    assert backend.translator is loads[0] and backend.placement == Ct2Placement("cuda", 0, "float16", None)
    assert backend.off_gpu is None


def test_a_cpu_host_never_preloads_cublas(monkeypatch, tmp_path, settings_env):
    """cuBLAS 12 is loaded only where CTranslate2 will run on a GPU: a CPU worker, or a GPU worker whose
    CTranslate2 sees no GPU, leaves it alone."""
    import ctranslate2

    settings_env(WORKER_DEVICE="cpu")
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 0)
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", types)
    monkeypatch.setattr(ct2, "_converted_dir", lambda loaded: tmp_path)
    monkeypatch.setattr(ctranslate2, "Translator", lambda path, **kwargs: FakeTranslator(kwargs, None))
    monkeypatch.setattr(ct2, "preload_cublas_once", lambda: pytest.fail("cuBLAS preloaded for a CPU"))
    loaded = LoadedModel("m-1", "translation", None, None, "span", {"sha256": "0" * 64})  # type: ignore[arg-type]
    on_cpu = ct2.CT2Translator(loaded)
    assert on_cpu.placement.device == "cpu" and on_cpu.off_gpu is None  # the CPU is this worker's own device
