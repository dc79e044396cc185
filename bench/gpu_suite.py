"""Every GPU figure in one command, within a deadline: training throughput, a profile of one step, decoding and
the service end to end, merged into one JSON file with the device and the versions.

    python bench/gpu_suite.py                       # on a GPU host: bench/results/gpu_suite-cuda-<gpu>-<date>.json
    python bench/gpu_suite.py --only decode-base-b32,service-e2e
    python bench/gpu_suite.py --smoke --out /tmp/suite.json   # the same steps at toy sizes on a CPU (a test runs it)

GPU time is lent for minutes, so the steps run in order of what they are worth (STEPS), each in its own process
(a CUDA error or an out-of-memory ends that step, not the suite) with a time limit, and a step whose estimate no
longer fits in what is left of --budget (8 minutes by default) is skipped and named in `skipped`; a second run
with --only takes them. Each step's own JSON (the benchmarks' last line) is kept under `steps`, with its
seconds and exit status, or the end of its output when it failed.

The steps (bench/*.py, whose docstrings say what each measures):
- training of `base` and `big` against MarianMTModel, compiled and eager, at 25k-token batches and at the batch
  the time-budget rule chooses on this device (--batch-tokens auto), vocabularies of 32k and 8k (the paper's 37k);
  eager `base` also without the fused residual/dropout/layer-norm kernels (model/nn/fused_add_norm.py);
- a torch.profiler summary of one compiled `base` step (matrix products, attention, copies, elementwise, idle);
- beam-4 decoding of `base` with bf16 weights, as the inference workers load them: ours, generate() and
  CTranslate2 float16 at batches of 1, 32 and 128;
- a beam search's first call at a new batch size, the decoders' attention kernels against PyTorch's own choice;
- the service on its embedded default with WORKER_DEVICE=cuda: upload, a 2-minute job over HTTP, translations
  by each backend;
- translations over HTTP on the embedded default against the same engine in this process (bench/serve_http.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "bench" / "results"
DEFAULT_BUDGET_S = 480.0
PACKAGES = ("torch", "transformers", "ctranslate2", "tokenizers", "fastapi", "celery", "sqlalchemy", "triton")


@dataclass(frozen=True)
class Step:
    name: str
    script: str  # under bench/
    gpu: tuple[str, ...]  # arguments on a GPU
    smoke: tuple[str, ...]  # arguments for the CPU smoke run
    estimate_s: float  # expected seconds on a GPU, process start included: a step is skipped past the budget
    limit_s: float  # killed after this many seconds


TRAIN_SMOKE = ("--preset", "tiny", "--vocab", "64", "--batch-tokens", "256", "--max-len", "12", "--threads", "1")
TRAIN_SMOKE_ROUNDS = ("--rounds", "1", "--steps", "1")
DECODE_SMOKE = ("--preset", "tiny", "--workloads", "fixed", "--length", "3", "--rounds", "1", "--weights", "bf16")
DECODE_SMOKE += ("--batch-size", "4", "--sentences", "8")
GPU_TRAIN = ("--device", "cuda", "--rounds", "4", "--steps", "3")
GPU_DECODE = ("--device", "cuda", "--preset", "base", "--workloads", "fixed", "--weights", "bf16", "--rounds", "3")


def train(
    name: str, preset: str, tokens: str, vocab: str, compile_: bool, estimate: float, more: tuple[str, ...] = ()
) -> Step:
    extra = ("--compile", *more) if compile_ else more
    # Toy sizes on the CPU, where the same command runs once for all the steps that share it: the compile flag
    # (with the eager backend: inductor would take minutes), the budget rule, and neither.
    smoke_extra = ("--compile", "--compile-backend", "eager") if compile_ and tokens != "auto" else ()
    smoke_tokens = ("--batch-tokens", "auto", "--auto-minutes", "1") if tokens == "auto" else ()
    return Step(
        name,
        "train_throughput.py",
        (*GPU_TRAIN, "--preset", preset, "--batch-tokens", tokens, "--vocab", vocab, *extra),
        (*TRAIN_SMOKE, *TRAIN_SMOKE_ROUNDS, *smoke_tokens, *smoke_extra),
        estimate,
        max(180.0, 3 * estimate),
    )


# In order of what they are worth: the headline training figure, decoding, the service, the profile, then the
# rest. Estimates from one H200 on 2026-11-27 (bench/results/gpu_suite-cuda-h200-2026-11-27*.json), rounded up:
# a compiled step compiles one graph per length bucket its batches need, which took `base` 210 s in all.
SERVE_SMOKE = (
    *("--stacks", "embedded", "--backends", "pytorch", "--preset", "tiny", "--task", "copy", "--train-steps", "20"),
    *("--requests", "5", "--clients", "1,2", "--idle-seconds", "0.5"),
)
STEPS: tuple[Step, ...] = (
    # What users get: translations over HTTP against the same engine in this process (embedded default: no Redis or
    # PostgreSQL on a bare GPU host); base trained for a minute, beam 4, 1, 8 and 32 clients, 12 requests a client (4
    # gave figures that moved by a quarter between hosts).
    Step(
        "serve-http",
        "serve_http.py",
        ("--device", "cuda", "--stacks", "embedded", "--preset", "base", "--requests", "100", "--per-client", "12"),
        SERVE_SMOKE,
        150,
        330,
    ),
    # The same with outputs as long as a sentence's (16 to 28 tokens, where the numbers' are 1 to 3): the engine's
    # work a request, not its fixed cost a call, against the path's fixed cost. PyTorch alone: a GPU host's
    # CTranslate2 runs on its CPU (no cuBLAS 12 there), minutes at these lengths.
    Step(
        "serve-http-copy",
        "serve_http.py",
        (
            *("--device", "cuda", "--stacks", "embedded", "--backends", "pytorch", "--preset", "base"),
            *("--task", "copy", "--requests", "50", "--per-client", "12"),
        ),
        SERVE_SMOKE,
        150,
        330,
    ),
    train("train-base-25k-v32k-compile", "base", "25000", "32000", True, 220),
    train("train-base-25k-v32k", "base", "25000", "32000", False, 25),
    # The same eager step with post-norm's residual, dropout and layer norm unfused: what the Triton kernels gain.
    train("train-base-25k-v32k-unfused", "base", "25000", "32000", False, 25, ("--fused-add-norm", "off")),
    # The projection and the loss apart again, (N, V) logits and their gradient written: the fused loss's gain.
    train("train-base-25k-v32k-logits", "base", "25000", "32000", False, 25, ("--fused-linear-loss", "off")),
    # The compiled step replayed as CUDA graphs, rows bucketed: against train-base-25k-v32k-compile, the idle gaps.
    train("train-base-25k-v32k-compile-graphs", "base", "25000", "32000", True, 240, ("--cuda-graphs", "on")),
    Step("decode-base-b32", "decode_throughput.py", (*GPU_DECODE, "--batch-size", "32"), DECODE_SMOKE, 50, 180),
    # A search at a batch size it has not run before, the decoders' attention kernels against PyTorch's choice.
    Step(
        "decode-shapes",
        "decode_shapes.py",
        ("--device", "cuda", "--preset", "base"),
        ("--preset", "tiny", "--rounds", "1", "--fresh", "1"),
        60,
        180,
    ),
    Step(
        "service-e2e",
        "service_e2e.py",
        ("--device", "cuda", "--minutes", "2"),
        ("--minutes", "0.1", "--preset", "tiny", "--pairs", "1000", "--test", "16", "--threads", "1"),
        200,
        600,  # the service's start alone took over 180 s on a loaded 2-core host (the smoke test)
    ),
    Step(
        "profile-base-25k-v32k-compile",
        "profile_step.py",
        (
            *("--device", "cuda", "--preset", "base", "--batch-tokens", "25000", "--vocab", "32000", "--compile"),
            *("--warmup", "4", "--profile-steps", "2"),
        ),
        (*TRAIN_SMOKE, "--warmup", "1", "--profile-steps", "1"),
        80,
        240,
    ),
    Step(
        "decode-base-b128",
        "decode_throughput.py",
        (*GPU_DECODE, "--batch-size", "128", "--sentences", "512"),
        DECODE_SMOKE,
        40,
        180,
    ),
    Step(
        "decode-base-b1",
        "decode_throughput.py",
        (*GPU_DECODE, "--batch-size", "1", "--sentences", "16"),
        DECODE_SMOKE,
        40,
        180,
    ),
    train("train-big-25k-v32k-compile", "big", "25000", "32000", True, 250),
    train("train-base-auto-v32k-compile", "base", "auto", "32000", True, 240),
    train("train-base-25k-v8k-compile", "base", "25000", "8000", True, 210),
    train("train-big-25k-v32k", "big", "25000", "32000", False, 35),
    train("train-base-auto-v32k", "base", "auto", "32000", False, 40),
    train("train-base-25k-v8k", "base", "25000", "8000", False, 25),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds for the whole suite")
    p.add_argument("--only", help="comma-separated step names (default: all, in order)")
    p.add_argument("--smoke", action="store_true", help="toy sizes on the CPU: checks that every step still runs")
    p.add_argument("--out", type=Path, help="the merged JSON (default: bench/results/gpu_suite-<device>-<date>.json)")
    return p.parse_args(argv)


def last_json(output: str) -> dict[str, Any] | None:
    """The benchmarks' convention: the last line printed is one JSON object."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def run_step(step: Step, args: Sequence[str], limit: float) -> dict[str, Any]:
    """One step in its own process; its JSON, or its exit status and the end of its output."""
    t0 = time.monotonic()
    command = [sys.executable, str(ROOT / "bench" / step.script), *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
        rc, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:
        rc = 124
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        output += f"\n(killed after {limit:.0f} s)"
    seconds = round(time.monotonic() - t0, 1)
    result = last_json(output) if rc == 0 else None
    record: dict[str, Any] = {"args": list(args), "seconds": seconds, "rc": rc}
    if result is not None:
        record["result"] = result
    else:
        record["output_tail"] = output[-3000:]
    return record


def gpu_facts() -> dict[str, Any]:
    """The driver and GPU as nvidia-smi reports them (None where there is no nvidia-smi)."""
    query = "name,driver_version,memory.total,clocks.max.sm,power.limit"
    try:
        line = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return {"nvidia_smi": None}
    return {"nvidia_smi": dict(zip(query.split(","), (v.strip() for v in line.split(","))))}


def environment() -> dict[str, Any]:
    import torch

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    cuda = torch.cuda.is_available()
    return {
        "device_kind": "cuda" if cuda else "cpu",
        "device_name": torch.cuda.get_device_name(0) if cuda else (platform.processor() or platform.machine()),
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "versions": versions,
        **gpu_facts(),
    }


def default_out(env: dict[str, Any], today: dt.date | None = None) -> Path:
    """bench/results/gpu_suite-cuda-<gpu>-<YYYY-MM-DD>.json, e.g. gpu_suite-cuda-h100-2026-11-26.json."""
    day = (today or dt.datetime.now(dt.UTC).date()).isoformat()
    gpu = re.search(r"\b([A-Z]+\d+[A-Z]*)\b", env["device_name"] or "")
    tag = f"-{gpu.group(1).lower()}" if env["device_kind"] == "cuda" and gpu else ""
    return RESULTS_DIR / f"gpu_suite-{env['device_kind']}{tag}-{day}.json"


def select(only: str | None) -> list[Step]:
    if not only:
        return list(STEPS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = {s.name: s for s in STEPS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"--only: unknown step(s) {unknown}; steps are {sorted(known)}")
    return [known[n] for n in names]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    started = time.monotonic()
    env = environment()
    if env["device_kind"] != "cuda" and not args.smoke:
        raise SystemExit("no CUDA device: run the suite on a GPU host, or pass --smoke for its CPU check")
    out = args.out or default_out(env)
    suite: dict[str, Any] = {
        "bench": "gpu_suite",
        "smoke": args.smoke,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "budget_s": args.budget,
        **env,
        "steps": {},
        "skipped": [],
    }
    ran: dict[tuple[str, tuple[str, ...]], str] = {}  # (script, arguments) -> the step that ran them
    for step in select(args.only):
        step_args = step.smoke if args.smoke else step.gpu
        if (step.script, step_args) in ran:  # smoke runs share toy sizes: the same command once is enough
            suite["steps"][step.name] = {"same_as": ran[step.script, step_args]}
            continue
        ran[step.script, step_args] = step.name
        left = args.budget - (time.monotonic() - started)
        if not args.smoke and step.estimate_s > left:
            suite["skipped"].append(step.name)
            print(f"{step.name}: skipped, about {step.estimate_s:.0f} s needed and {left:.0f} s left", flush=True)
            continue
        record = run_step(step, step_args, step.limit_s if args.smoke else min(step.limit_s, max(left, 30)))
        suite["steps"][step.name] = record
        headline = {
            k: record.get("result", {}).get(k) for k in ("ratio", "mfu_ours", "ok") if k in record.get("result", {})
        }
        print(f"{step.name}: rc {record['rc']} in {record['seconds']} s {headline}", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(suite, indent=2) + "\n")  # after every step: a killed suite keeps what it measured
    suite["seconds"] = round(time.monotonic() - started, 1)
    suite["failed"] = [name for name, r in suite["steps"].items() if r.get("rc", 0) != 0]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(suite, indent=2) + "\n")
    print(f"written to {out}")
    print(json.dumps({k: suite[k] for k in ("bench", "device_name", "seconds", "failed", "skipped")}))
    return suite


if __name__ == "__main__":
    main()
