"""Where the time of one training step goes: a torch.profiler summary of our model's full step (forward, loss,
backward, Adam), the same step bench/train_throughput.py times.

    python bench/profile_step.py --device cuda --preset base --batch-tokens 25000 --vocab 32000 [--compile]

After --warmup steps on the same batches (compilation, allocator, cuBLAS heuristics), --profile-steps steps run
under the profiler. What is
reported, per step:
- on a GPU, the kernels' time by kind (matrix products, attention kernels, copies, elementwise and reductions:
  KERNEL_KINDS, matched on the kernel's name) and the idle gaps of the device: the wall-clock time of the steps
  (synchronized before and after) less the time at least one kernel ran. A large idle share means the host does
  not keep the GPU fed (launch overhead, host reads, Python);
- on a CPU, the same split over the aten operators' own time (there are no kernels), idle = the wall-clock time
  no operator accounts for (Python, the profiler itself);
- the 15 kernels (operators on a CPU) with the most time: name, calls, milliseconds per step, share.

Prints human lines, then one JSON object as the last line; with --out it is also written there.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_info import DeviceProbe, probe_for  # noqa: E402
from bench.run_record import environment, write_result  # noqa: E402
from bench.train_throughput import autocast_for, make_batches, model_config  # noqa: E402
from bench.train_throughput import parse_args as train_args  # noqa: E402
from model.nn.compile import compile_layers  # noqa: E402
from model.nn.transformer import Transformer  # noqa: E402
from model.train.config import TrainConfig  # noqa: E402
from model.train.step import build_optimizer, train_step  # noqa: E402
from model.train.step_graph import compile_step  # noqa: E402

TOP = 15
# First match wins. GPU kernel names (cuBLAS/CUTLASS "sm90_xmma_gemm_...", "nvjet_...", triton's "triton_mm"...)
# and CPU aten operator names.
KERNEL_KINDS: tuple[tuple[str, str], ...] = (
    ("attention", r"flash|fmha|attention|sdpa|_efficient_attention"),
    ("matmul", r"gemm|matmul|xmma|cutlass|nvjet|wgmma|triton_mm|triton_bmm|aten::(mm|addmm|bmm|baddbmm|linear)$"),
    ("copy", r"memcpy|memset|copy|CatArray|aten::(cat|index_select|index_copy_|_to_copy|clone|contiguous)$|gather"),
)
OTHER = "elementwise"  # elementwise ops, reductions, softmax, norms, Adam, fused (triton) kernels


def kind_of(name: str) -> str:
    for kind, pattern in KERNEL_KINDS:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return kind
    return OTHER


@dataclass(frozen=True)
class Span:
    name: str
    start_us: float
    end_us: float

    @property
    def us(self) -> float:
        return self.end_us - self.start_us


def busy_us(spans: Iterable[Span]) -> float:
    """Time at least one span covers (overlapping kernels on several streams count once)."""
    total, end = 0.0, float("-inf")
    for s in sorted(spans, key=lambda s: s.start_us):
        if s.end_us <= end:
            continue
        total += s.end_us - max(s.start_us, end)
        end = s.end_us
    return total


def summarize(spans: Sequence[Span], wall_us: float, steps: int) -> dict[str, Any]:
    """Shares of the wall-clock time by kind (and idle), and the TOP spans' names by total time, per step."""
    by_kind: dict[str, float] = {}
    by_name: dict[str, list[float]] = {}
    for s in spans:
        by_kind[kind_of(s.name)] = by_kind.get(kind_of(s.name), 0.0) + s.us
        by_name.setdefault(s.name, []).append(s.us)
    busy = busy_us(spans)
    idle = max(0.0, wall_us - busy)
    shares = {k: round(by_kind.get(k, 0.0) / wall_us, 4) for k in (*(k for k, _ in KERNEL_KINDS), OTHER)}
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:TOP]
    return {
        "step_ms": round(wall_us / steps / 1e3, 3),
        "busy_ms": round(busy / steps / 1e3, 3),
        "share": {**shares, "idle": round(idle / wall_us, 4)},
        "top": [
            {
                "name": name[:160],
                "kind": kind_of(name),
                "calls_per_step": round(len(times) / steps, 2),
                "ms_per_step": round(sum(times) / steps / 1e3, 4),
                "share": round(sum(times) / wall_us, 4),
            }
            for name, times in top
        ],
    }


def spans_of(prof: profile, on_gpu: bool) -> list[Span]:
    """The GPU's kernels (and copies), or on a CPU the aten operators' own (self) time as spans."""
    out = []
    for e in prof.events():
        if on_gpu:
            if e.device_type == DeviceType.CUDA:
                out.append(Span(e.name, e.time_range.start, e.time_range.end))
        elif e.device_type == DeviceType.CPU and e.name.startswith("aten::") and e.self_cpu_time_total > 0:
            # self time only, so nested operators are not counted twice; laid end to end from the event's start
            out.append(Span(e.name, e.time_range.start, e.time_range.start + e.self_cpu_time_total))
    return out


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, argparse.Namespace]:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0], add_help=True)
    p.add_argument("--warmup", type=int, default=3, help="steps before profiling (compilation, allocator)")
    p.add_argument("--profile-steps", type=int, default=3, help="steps profiled")
    own, rest = p.parse_known_args(argv)
    return own, train_args(rest)


def main(argv: Sequence[str] | None = None, probe: DeviceProbe | None = None) -> dict[str, Any]:
    own, args = parse_args(argv)
    device = torch.device(args.device)
    probe = probe or probe_for(device)
    info = probe.describe()
    on_gpu = info.device_kind == "cuda"
    precision = args.precision or ("bf16" if on_gpu else "fp32")
    args.batch_tokens = args.batch_tokens or (25000 if on_gpu else 4000)
    torch.set_num_threads(args.threads)
    config = model_config(args)
    cfg = TrainConfig(device=args.device)
    autocast = autocast_for(device, precision)
    # The profiled batches are also the warm-up's (each at least once): with --compile every length bucket they
    # need is compiled before the profiler starts, and no more buckets than that.
    batches = make_batches(args, own.profile_steps)
    if own.warmup < len(batches):
        raise SystemExit(f"--warmup={own.warmup} must be at least --profile-steps={own.profile_steps}")
    torch.manual_seed(args.seed)
    model = Transformer(config).to(device).train()
    optimizer = build_optimizer(model, cfg)
    graph = None
    if args.compile:  # as training.compile runs a step (--compile-ours layers: layer by layer)
        if args.compile_ours == "step":
            graph = compile_step(model, cfg.label_smoothing, precision, backend=args.compile_backend)
        else:
            compile_layers(model)
    for i in range(own.warmup):
        train_step(model, optimizer, [batches[i % len(batches)]], 1e-4, cfg, autocast, step_graph=graph)
    probe.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for batch in batches:
            train_step(model, optimizer, [batch], 1e-4, cfg, autocast, step_graph=graph)
        probe.synchronize()
        wall_us = (time.perf_counter() - start) * 1e6
    spans = spans_of(prof, on_gpu)
    result = summarize(spans, wall_us, own.profile_steps)
    print(
        f"{args.preset} on {info.device_name}, {precision}, compile={args.compile}: "
        f"{result['step_ms']:.1f} ms a step, busy {result['busy_ms']:.1f} ms"
    )
    print("  " + ", ".join(f"{k} {v:.1%}" for k, v in result["share"].items()))
    for row in result["top"]:
        print(f"  {row['ms_per_step']:8.3f} ms {row['share']:6.1%} x{row['calls_per_step']:<6g} {row['name'][:90]}")
    result.update(
        bench="profile_step",
        unit="kernels" if on_gpu else "aten operators (self time)",
        preset=args.preset,
        vocab=config.vocab_size,
        batch_tokens=args.batch_tokens,
        precision=precision,
        compile=args.compile and args.compile_ours,
        profiled_steps=own.profile_steps,
        **environment(args.device, info),
    )
    write_result(result, args.out)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
