"""What recording the per-component training dynamics (model/probes/dynamics.py) costs a training step.

    python bench/dynamics_cost.py [--preset small] [--vocab 8000] [--every 25] [--rounds 4]

One round is `--every` training steps of our Transformer on the same batches, twice: once plain and once with the
dynamics of the round's last step recorded (the copy of the weights before it, the norms after it, the read back to
the host), as the trainer does at training.dynamics_every. The two alternate, round 0 warms up and is not counted,
medians decide. The direct cost of one record is also timed alone (median over the rounds), against the median step.

Prints human-readable lines, then as the last line one JSON object: `ratio` = target tokens per second with the
dynamics recorded every `--every` steps / without (1.0 = free; the default's goal is >= 0.97), and
`overhead_direct` = one record's time / (every x one step's time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_info import probe_for  # noqa: E402
from bench.run_record import environment, result_path, write_result  # noqa: E402
from bench.train_throughput import make_batches, model_config  # noqa: E402
from model.nn.config import PRESETS  # noqa: E402
from model.nn.transformer import Transformer  # noqa: E402
from model.probes.dynamics import DynamicsProbe  # noqa: E402
from model.train.config import TrainConfig  # noqa: E402
from model.train.step import build_optimizer, update_on_device  # noqa: E402

BENCH = "dynamics_cost"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="small")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--every", type=int, default=TrainConfig().dynamics_every or 25, help="steps per record")
    p.add_argument("--rounds", type=int, default=4, help="timed rounds per side, after one warm-up round")
    p.add_argument("--batch-tokens", type=int, default=4000)
    p.add_argument("--min-len", type=int, default=8)
    p.add_argument("--max-len", type=int, default=48)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", type=Path, help="also write the final JSON here")
    p.add_argument("--seed", type=int, default=0)
    for name in ("d_model", "heads", "layers", "d_ff", "dropout"):  # model_config reads them; the preset's sizes
        p.set_defaults(**{name: None})
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    probe_device = probe_for(device)
    config = model_config(args)
    cfg = TrainConfig(device=args.device)
    batches = make_batches(args, args.every)
    torch.manual_seed(args.seed)
    model = Transformer(config).to(device).train()
    optimizer = build_optimizer(model, cfg)
    dynamics = DynamicsProbe(model)
    tokens = sum(b.n_tgt_tokens for b in batches)
    print(
        f"config: preset={args.preset} vocab={args.vocab} every={args.every} device={args.device} "
        f"threads={args.threads}; {len(dynamics.groups)} groups; {len(batches)} batches, {tokens} target tokens"
    )

    def run(record: bool) -> tuple[float, float]:
        """(seconds for the round, seconds of the record alone)."""
        probe_device.synchronize()
        start = time.perf_counter()
        recorded = 0.0
        for i, batch in enumerate(batches):
            last = record and i == len(batches) - 1
            t0 = time.perf_counter()
            before = dynamics.before() if last else None
            t1 = time.perf_counter()
            pending = update_on_device(model, optimizer, [batch], 1e-4, cfg)
            float(pending.grad_norm)  # the step's read back, as the trainer's log does on a CPU
            t2 = time.perf_counter()
            if before is not None:
                dynamics.record(i, dynamics.after(before, pending.grad_norm, cfg.clip_norm).flatten().cpu().tolist())
                recorded = (t1 - t0) + (time.perf_counter() - t2)
        probe_device.synchronize()
        return time.perf_counter() - start, recorded

    rates: dict[str, list[float]] = {"plain": [], "recorded": []}
    record_seconds: list[float] = []
    step_seconds: list[float] = []
    for r in range(args.rounds + 1):
        plain, _ = run(False)
        with_record, recorded = run(True)
        if r > 0:
            rates["plain"].append(tokens / plain)
            rates["recorded"].append(tokens / with_record)
            record_seconds.append(recorded)
            step_seconds.append(plain / len(batches))
            print(
                f"round {r}: plain {tokens / plain:,.0f} tok/s, recorded {tokens / with_record:,.0f} tok/s, "
                f"one record {recorded * 1e3:.1f} ms, one step {plain / len(batches) * 1e3:.1f} ms"
            )
    plain, recorded = statistics.median(rates["plain"]), statistics.median(rates["recorded"])
    overhead = statistics.median(record_seconds) / (args.every * statistics.median(step_seconds))
    result = {
        "bench": BENCH,
        "preset": args.preset,
        "vocab": args.vocab,
        "every": args.every,
        "groups": len(dynamics.groups),
        "tokens_per_second": {"plain": plain, "recorded": recorded},
        "record_ms": statistics.median(record_seconds) * 1e3,
        "step_ms": statistics.median(step_seconds) * 1e3,
        "overhead_direct": overhead,
        "ratio": recorded / plain,
        "environment": environment(args.device, probe_device.describe()),
    }
    write_result(result, result_path(BENCH, probe_device.describe().device_kind, args.out))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
