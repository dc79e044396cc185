"""Device facts, peak lookup, FLOPs and MFU, CTranslate2 compute types and result paths of the benchmarks."""

from __future__ import annotations

import datetime as dt

import pytest
import torch

from bench.ct2_compute import ct2_plan
from bench.flops import mfu, train_flops, weights_per_token
from bench.gpu_info import CpuProbe, CudaProbe, peak_bf16_tflops, probe_for
from bench.run_record import RESULTS_DIR, result_path
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from tests.bench.fake_cuda import H100_MEMORY, H100_NAME, FakeCuda


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", 989.0),
        ("NVIDIA H100 SXM5 80GB", 989.0),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H200", 989.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A100 80GB PCIe", 312.0),
        ("NVIDIA L4", 121.0),
        ("NVIDIA A10", 125.0),
        ("NVIDIA GeForce RTX 4090", 165.0),
        ("NVIDIA L40S", None),  # not "L4"
        ("NVIDIA H100 NVL", None),  # neither the SXM nor the PCIe figure
        ("Tesla T4", None),
    ],
)
def test_peak_bf16_tflops_by_device_name(name: str, peak: float | None) -> None:
    assert peak_bf16_tflops(name) == peak


def test_peak_override_wins_and_must_be_positive() -> None:
    assert peak_bf16_tflops("Tesla T4", 65.0) == 65.0
    assert peak_bf16_tflops("NVIDIA H100 PCIe", 800.0) == 800.0
    with pytest.raises(ValueError, match="override=0"):
        peak_bf16_tflops("NVIDIA H100 PCIe", 0)


def test_cuda_probe_reads_torch_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCuda()
    probe = fake.install(monkeypatch)
    info = probe.describe()
    assert (info.device_kind, info.device_name, info.device_memory_total) == ("cuda", H100_NAME, H100_MEMORY)
    probe.synchronize()
    probe.reset_peak_memory()
    assert probe.max_memory_allocated() == fake.peaks[-1]
    assert fake.calls == ["get_device_properties", "synchronize", "reset_peak_memory_stats", "max_memory_allocated"]


def test_probe_for_picks_the_device_kind() -> None:
    assert isinstance(probe_for(torch.device("cpu")), CpuProbe)
    assert isinstance(probe_for(torch.device("cuda", 1)), CudaProbe)  # built without touching the GPU
    with pytest.raises(ValueError, match="device=meta"):
        probe_for(torch.device("meta"))
    assert CpuProbe().max_memory_allocated() is None
    assert CpuProbe().describe().device_memory_total is None


def test_weights_per_token_are_the_models_matrices() -> None:
    """Every weight of a matrix product is counted once, on the side whose tokens pass through it."""
    config = ModelConfig.from_preset("tiny", 100, n_encoder_layers=3, d_ff=96)
    matrices = sum(m.weight.numel() for m in Transformer(config).modules() if isinstance(m, torch.nn.Linear))
    assert sum(weights_per_token(config)) == matrices


def test_train_flops_counts_weights_and_attention_pairs() -> None:
    config = ModelConfig.from_preset("tiny", 100)  # d_model 64, 2+2 layers
    per_source, per_target = weights_per_token(config)
    s, t = 5, 7
    # QK^T and AV: 2 products of 2 * d_model FLOPs per (query, key) pair forward, times 3 with the backward
    pairs = 2 * s * s + 2 * (t * t + t * s)
    expected = 6 * (s * per_source + t * per_target) + 3 * 2 * 2 * 64 * pairs
    assert train_flops(config, [s], [t]) == expected
    assert train_flops(config, [s, s], [t, t]) == 2 * expected
    assert train_flops(config, [], []) == 0
    with pytest.raises(ValueError, match="2 source lengths but 1 target"):
        train_flops(config, [s, s], [t])


def test_mfu_is_the_fraction_of_the_peak() -> None:
    assert mfu(494.5e12, 989.0) == pytest.approx(0.5)
    assert mfu(1e12, None) is None
    with pytest.raises(ValueError, match="peak_tflops=-1"):
        mfu(1e12, -1)


def test_ct2_plan_on_a_gpu_takes_float16() -> None:
    plan = ct2_plan("cuda", lambda d: {"float32", "float16", "bfloat16", "int8_float16"}, lambda: 1)
    assert (plan.compute_types, plan.skipped) == (("float16",), None)
    plan = ct2_plan("cuda", lambda d: {"float32", "bfloat16", "int8_bfloat16"}, lambda: 1)
    assert plan.compute_types == ("bfloat16",)


def test_ct2_plan_without_a_usable_gpu_says_why() -> None:
    plan = ct2_plan("cuda", lambda d: {"float16"}, lambda: 0)
    assert plan.compute_types == () and "get_cuda_device_count() == 0" in (plan.skipped or "")

    def driver_too_old(device: str) -> set[str]:
        raise RuntimeError("CUDA failed with error CUDA driver version is insufficient for CUDA runtime version")

    plan = ct2_plan("cuda", driver_too_old, lambda: 1)
    assert plan.compute_types == () and "driver version is insufficient" in (plan.skipped or "")
    with pytest.raises(ValueError, match="device_type='mps'"):
        ct2_plan("mps", lambda d: set(), lambda: 0)


def test_ct2_plan_on_this_cpu_asks_ctranslate2() -> None:
    plan = ct2_plan("cpu")
    assert plan.skipped is None and "float32" in plan.compute_types
    assert ct2_plan("cpu", lambda d: {"float32", "int8_float32"}, lambda: 0).compute_types == ("float32",)


def test_result_path_defaults_to_bench_results_on_a_gpu_only(tmp_path) -> None:
    day = dt.date(2026, 11, 24)
    assert result_path("train_throughput", "cuda", None, day) == RESULTS_DIR / "train_throughput-cuda-2026-11-24.json"
    assert result_path("train_throughput", "cpu", None, day) is None
    assert result_path("decode_throughput", "cpu", tmp_path / "x.json", day) == tmp_path / "x.json"
