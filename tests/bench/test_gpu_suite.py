"""The GPU suite (bench/gpu_suite.sh -> bench/gpu_suite.py) on the CPU: the steps no other test covers run at toy
sizes, each as its own process, and land in one JSON; every step's GPU arguments parse; the deadline skips what no
longer fits; the shell wrapper copies the JSON and the log to $OUT. Speeds are not checked, only that each step
still runs and reports what the GPU run will need."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest

from bench import gpu_suite, profile_step
from bench.profile_step import Span

ROOT = Path(__file__).resolve().parents[2]


# The steps whose scripts no other test runs on the CPU: train_throughput, decode_throughput and decode_shapes have
# their own smoke tests (tests/bench/test_bench_smoke.py), so the suite's smoke run leaves those steps out; every
# step's GPU arguments are still checked against its script's parser below.
SMOKED = ("serve-http", "serve-http-copy", "service-e2e", "profile-base-25k-v32k-compile", "train-base-auto-v32k")


def test_the_steps_no_other_test_runs_run_on_the_cpu_and_land_in_one_json(tmp_path: Path) -> None:
    out = tmp_path / "suite.json"
    suite = gpu_suite.main(["--smoke", "--only", ",".join(SMOKED), "--out", str(out)])
    assert json.loads(out.read_text()) == suite
    tails = {name: suite["steps"][name].get("output_tail") for name in suite["failed"]}
    assert suite["failed"] == [] and suite["skipped"] == [], tails
    assert set(suite["steps"]) == set(SMOKED)
    assert suite["versions"]["torch"] and suite["versions"]["ctranslate2"] and suite["device_kind"] == "cpu"
    ran = {name: r["result"] for name, r in suite["steps"].items() if "result" in r}
    shared = {name: r["same_as"] for name, r in suite["steps"].items() if "same_as" in r}
    assert set(shared.values()) <= set(ran)  # a toy-size duplicate points at the step that ran its command
    profile = ran["profile-base-25k-v32k-compile"]
    assert profile["share"]["matmul"] > 0 and 0.99 < sum(profile["share"].values()) < 1.5  # kinds may overlap
    assert len(profile["top"]) == profile_step.TOP
    service = ran["service-e2e"]
    assert service["ok"] and service["job"]["status"] == "succeeded", service.get("errors")
    assert service["job"]["auto_settings"]["chosen"]["max_tokens_per_batch"] > 0
    assert {w["device_kind"] for w in service["workers"]} == {"cpu"}
    assert service["translate"]["pytorch"]["backends"] == ["pytorch"]
    assert service["translate"]["ctranslate2"]["backends"] == ["ctranslate2"]
    served = ran["serve-http"]
    assert shared["serve-http-copy"] == "serve-http" and served["task"] == "copy"
    assert served["in_process"]["pytorch"]["output_tokens"] > 0
    assert served["http"]["embedded"]["pytorch"]["answered_by"] == ["pytorch"] and served["ratio"] > 0
    assert served["one_sentence_p50_ms"] > 0 and set(served["ratios"]["embedded/pytorch"]) == {"1", "2"}
    auto = ran["train-base-auto-v32k"]
    assert auto["ratio"] > 0 and auto["ours_tokens_per_s"] > 0
    assert auto["batch_tokens"] > 0 and auto["batch_rule"]["chosen"] == auto["batch_tokens"]


class Parsed(Exception):
    """Raised once a script has parsed its arguments: the step would run with them."""


def test_every_steps_gpu_arguments_are_accepted_by_its_script(monkeypatch: pytest.MonkeyPatch) -> None:
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        parse(self, *args, **kwargs)  # SystemExit 2 on an unknown option or a bad value
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    for step in gpu_suite.STEPS:
        script = importlib.import_module(f"bench.{Path(step.script).stem}")
        monkeypatch.setattr(sys, "argv", [step.script, *step.gpu])
        takes_argv = bool(inspect.signature(script.main).parameters)
        with pytest.raises(Parsed):
            script.main(list(step.gpu)) if takes_argv else script.main()
    monkeypatch.setattr(sys, "argv", ["serve_http.py", "--device", "tpu"])
    with pytest.raises(SystemExit):  # the check can fail: a value the script does not take is refused
        importlib.import_module("bench.serve_http").main()


def test_steps_past_the_budget_are_skipped_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU host (its environment injected) with 90 s: the steps run in order while their estimates fit."""
    monkeypatch.setattr(gpu_suite, "environment", lambda: {"device_kind": "cuda", "device_name": "NVIDIA H100 80GB"})
    calls: list[str] = []

    def fake_run(step: gpu_suite.Step, args: list[str], limit: float) -> dict[str, Any]:
        calls.append(step.name)
        assert "--device" in args and args[args.index("--device") + 1] == "cuda" and 0 < limit <= step.limit_s
        return {"args": list(args), "seconds": 0.0, "rc": 0, "result": {"ratio": 1.0}}

    monkeypatch.setattr(gpu_suite, "run_step", fake_run)
    out = tmp_path / "suite.json"
    suite = gpu_suite.main(["--budget", "90", "--out", str(out)])
    fits = [s.name for s in gpu_suite.STEPS if s.estimate_s <= 90]  # the fake steps take no time
    assert calls == fits and suite["skipped"] == [s.name for s in gpu_suite.STEPS if s.name not in fits]
    assert suite["steps"].keys() == set(fits)


def test_only_names_steps_and_a_bad_name_is_refused() -> None:
    assert [s.name for s in gpu_suite.select("service-e2e,decode-base-b1")] == ["service-e2e", "decode-base-b1"]
    with pytest.raises(SystemExit, match="unknown step.*'decode-base-b2'"):
        gpu_suite.select("decode-base-b2")


def test_a_gpu_run_files_its_json_under_the_gpu_and_the_date() -> None:
    day = dt.date(2026, 11, 26)
    env = {"device_kind": "cuda", "device_name": "NVIDIA H100 80GB HBM3"}
    assert gpu_suite.default_out(env, day).name == "gpu_suite-cuda-h100-2026-11-26.json"
    assert gpu_suite.default_out({"device_kind": "cuda", "device_name": "NVIDIA H200"}, day).name.endswith(
        "-h200-2026-11-26.json"
    )


def test_without_a_gpu_the_suite_asks_for_smoke(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_suite, "environment", lambda: {"device_kind": "cpu", "device_name": "x86_64"})
    with pytest.raises(SystemExit, match="no CUDA device"):
        gpu_suite.main([])


def test_a_failed_step_keeps_its_exit_status_and_output() -> None:
    step = gpu_suite.Step("bad", "train_throughput.py", (), (), 1, 60)
    record = gpu_suite.run_step(step, ["--preset", "nonexistent"], 60)
    assert record["rc"] == 2 and "invalid choice: 'nonexistent'" in record["output_tail"] and "result" not in record


def test_the_shell_wrapper_copies_the_json_and_the_log_to_out(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = tmp_path / "suite.json"
    env = {**os.environ, "OUT": str(out_dir), "PYTHON": sys.executable, "GPU_SUITE_WHEELS": str(tmp_path / "none")}
    argv = ["bash", "bench/gpu_suite.sh", "--smoke", "--only", "train-base-25k-v32k", "--out", str(target)]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((out_dir / "suite.json").read_text()) == json.loads(target.read_text())
    assert "train-base-25k-v32k: rc 0" in (out_dir / "gpu_suite.log").read_text()


def test_profile_shares_count_overlapping_kernels_once() -> None:
    spans = [
        Span("sm90_xmma_gemm_bf16", 0, 40),
        Span("flash_fwd_kernel", 30, 50),  # overlaps the product by 10
        Span("Memcpy HtoD (Pinned -> Device)", 60, 70),
        Span("vectorized_elementwise_kernel", 70, 80),
    ]
    summary = profile_step.summarize(spans, wall_us=100, steps=1)
    assert summary["busy_ms"] == pytest.approx(0.070)  # 0-50, 60-80
    assert summary["share"] == {"attention": 0.2, "matmul": 0.4, "copy": 0.1, "elementwise": 0.1, "idle": 0.3}
    assert [row["name"] for row in summary["top"]][:2] == ["sm90_xmma_gemm_bf16", "flash_fwd_kernel"]
