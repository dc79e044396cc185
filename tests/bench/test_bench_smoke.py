"""The two throughput benchmarks end to end at toy sizes on the CPU, in seconds: once as themselves, once with a
fake GPU description (tests/bench/fake_cuda.py) so that the GPU-only branches run (peak lookup by name, MFU,
synchronize and peak-memory calls, bf16 by default). Speeds are not checked, only that the figures hang
together and land in the JSON and its file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench import decode_throughput, dynamics_cost, train_throughput
from bench.ct2_compute import Ct2Plan
from tests.bench.fake_cuda import H100_MEMORY, H100_NAME, FakeCuda

TRAIN_TINY = ["--preset", "tiny", "--vocab", "64", "--batch-tokens", "256", "--max-len", "12", "--threads", "1"]
DECODE_TINY = ["--preset", "tiny", "--sentences", "8", "--batch-size", "4", "--rounds", "1", "--length", "3"]


def last_json_line(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_train_throughput_on_cpu_in_bf16(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "train.json"
    result = train_throughput.main(
        [*TRAIN_TINY, "--rounds", "2", "--steps", "1", "--precision", "bf16", "--out", str(out)]
    )
    assert last_json_line(capsys) == result == json.loads(out.read_text())
    assert result["ratio"] == pytest.approx(result["ours_tokens_per_s"] / result["peer_tokens_per_s"], rel=1e-3)
    assert (result["precision"], result["device"], result["device_kind"]) == ("bf16", "cpu", "cpu")
    assert result["mfu_ours"] is None and result["peak_tflops_bf16"] is None  # no peak for a CPU
    assert result["max_memory_allocated_ours"] is None
    assert result["flops_per_token"] > 6 * 64 * 64  # at least the output projection, 6 d V per token
    assert result["torch"] == torch.__version__ and "ctranslate2" in result and "cuda" in result


def test_dynamics_cost_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dynamics.json"
    argv = ["--preset", "tiny", "--vocab", "64", "--batch-tokens", "256", "--max-len", "12", "--threads", "1"]
    result = dynamics_cost.main([*argv, "--every", "3", "--rounds", "1", "--out", str(out)])
    assert last_json_line(capsys) == result == json.loads(out.read_text())
    plain, recorded = result["tokens_per_second"]["plain"], result["tokens_per_second"]["recorded"]
    assert result["ratio"] == pytest.approx(recorded / plain) and result["record_ms"] > 0
    assert result["overhead_direct"] == pytest.approx(result["record_ms"] / (3 * result["step_ms"]))
    assert result["groups"] == 1 + 8 * 2 + 13 * 2  # tiny: 2 + 2 layers


def test_train_throughput_with_a_fake_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeCuda()
    probe = fake.install(monkeypatch)
    out = tmp_path / "train.json"
    argv = [*TRAIN_TINY, "--rounds", "1", "--steps", "2", "--compile", "--compile-backend", "eager", "--out", str(out)]
    result = train_throughput.main(argv, probe=probe)
    assert last_json_line(capsys) == result == json.loads(out.read_text())
    assert result["precision"] == "bf16"  # the default on a GPU
    assert result["compile"] == "step"  # ours as training.compile runs it
    assert (result["device_name"], result["device_memory_total"]) == (H100_NAME, H100_MEMORY)
    assert result["peak_tflops_bf16"] == 989.0
    for side in ("ours", "peer"):
        achieved = result[f"{side}_tokens_per_s"] * result["flops_per_token"]
        assert result[f"mfu_{side}"] == pytest.approx(achieved / 989e12, abs=1e-4)
    # two timed rounds per side (warm-up + 1), each between two barriers, each with its own peak reading
    assert fake.calls.count("synchronize") == 2 * 2 * 2
    assert fake.calls.count("reset_peak_memory_stats") == fake.calls.count("max_memory_allocated") == 4
    assert result["max_memory_allocated_ours"] == max(fake.peaks[0::2])  # ours runs first in every round
    assert result["max_memory_allocated_peer"] == max(fake.peaks[1::2])


def test_train_throughput_peak_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = FakeCuda(name="NVIDIA L40S").install(monkeypatch)  # not in the table
    out = tmp_path / "train.json"  # never the default bench/results/: that folder holds real GPU figures only
    argv = [*TRAIN_TINY, "--rounds", "1", "--steps", "1", "--precision", "fp32", "--peak-tflops", "362"]
    result = train_throughput.main([*argv, "--out", str(out)], probe=probe)
    assert json.loads(out.read_text()) == result
    assert result["precision"] == "fp32" and result["peak_tflops_bf16"] == 362.0
    assert result["mfu_ours"] == pytest.approx(
        result["ours_tokens_per_s"] * result["flops_per_token"] / 362e12, abs=1e-4
    )


def test_decode_throughput_on_cpu_in_bf16(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "decode.json"
    result = decode_throughput.main([*DECODE_TINY, "--train-steps", "2", "--precision", "bf16", "--out", str(out)])
    assert last_json_line(capsys) == result == json.loads(out.read_text())
    assert result["workload"] == "trained" and "fixed_length" in result
    assert result["ratio"] == pytest.approx(result["ours_sent_per_s"] / result["hf_sent_per_s"], rel=1e-2)
    assert result["ct2_compute_types"] == ["float32", "int8"] and result["ct2_skipped"] is None
    assert result["ct2_fp32_sent_per_s"] > 0 and "ratio_vs_ct2_int8" in result
    assert result["fixed_length"]["agreement_with_ours"]["hf"] == 1.0  # same weights, fixed length
    assert result["max_memory_allocated"] is None and result["device_kind"] == "cpu"


def test_decode_throughput_with_a_fake_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeCuda()
    probe = fake.install(monkeypatch)
    skipped = Ct2Plan((), "CTranslate2 sees no CUDA device (ctranslate2.get_cuda_device_count() == 0)")
    out = tmp_path / "decode.json"
    argv = [*DECODE_TINY, "--workloads", "fixed", "--out", str(out)]
    result = decode_throughput.main(argv, probe=probe, ct2=skipped)
    assert last_json_line(capsys) == result == json.loads(out.read_text())
    assert result["precision"] == "bf16"  # the default on a GPU
    assert result["ct2_skipped"] == skipped.skipped and result["ct2_compute_types"] == []
    assert not any(key.startswith("ct2_") and key.endswith("_sent_per_s") for key in result)
    assert (result["device_name"], result["device_memory_total"]) == (H100_NAME, H100_MEMORY)
    assert fake.calls.count("synchronize") == 2 * 2  # one round, two engines, a barrier either side
    assert set(result["max_memory_allocated"]) == {"ours", "hf"}
    assert set(result["max_memory_allocated"].values()) <= set(fake.peaks)


def test_decode_throughput_leaves_out_a_ctranslate2_engine_that_cannot_translate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on an H200 with CUDA 13 alone: CTranslate2 counts the GPU and lists float16, then its first translation
    fails for want of libcublas.so.12. The engine is left out with that reason; ours and generate() still run."""
    import ctranslate2

    missing = "Library libcublas.so.12 is not found or cannot be loaded"

    class WithoutCublas:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def translate_batch(self, *args: object, **kwargs: object) -> list:
            raise RuntimeError(missing)

    monkeypatch.setattr(ctranslate2, "Translator", WithoutCublas)
    probe = FakeCuda().install(monkeypatch)
    out = tmp_path / "decode.json"
    argv = [*DECODE_TINY, "--workloads", "fixed", "--out", str(out)]
    result = decode_throughput.main(argv, probe=probe, ct2=Ct2Plan(("float16",), None))
    assert last_json_line(capsys) == result == json.loads(out.read_text())
    assert result["ct2_failed"] == {"ct2_fp16": missing}
    assert not any(key.startswith("ct2_") and key.endswith("_sent_per_s") for key in result)
    assert result["ratio"] == pytest.approx(result["ours_sent_per_s"] / result["hf_sent_per_s"], rel=1e-2)


def test_decode_shapes_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every case runs and lands in the JSON; each fresh size is new to the whole run."""
    from bench import decode_shapes

    out = tmp_path / "shapes.json"
    result = decode_shapes.main(["--preset", "tiny", "--rounds", "1", "--fresh", "2", "--out", str(out)])
    assert last_json_line(capsys) == result == json.loads(out.read_text())
    assert set(result["cases"]) == {f"{k}/{g}" for k in ("decoders", "pytorch_default") for g in ("graphs", "eager")}
    sizes = [n for case in result["cases"].values() for n in case["fresh_sizes_first_ms"]]
    assert len(sizes) == len(set(sizes)) == 8
    assert all(case[label]["median_ms"] > 0 for case in result["cases"].values() for label in ("one", "b32", "b256"))
    assert result["ratio"] > 0
