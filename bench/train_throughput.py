"""Training throughput of our Transformer against Hugging Face MarianMTModel of identical size, and MFU.

    python bench/train_throughput.py [--preset small] [--d-model 256 --layers 3 ...] [--vocab 8000]
    python bench/train_throughput.py --device cuda --preset base [--precision bf16] [--compile]
    python bench/train_throughput.py --device cuda --preset base --batch-tokens auto [--auto-minutes 60]

Both models get the same batches (the same padded token tensors), the same label-smoothed loss, gradient
clipping and Adam (0.9, 0.98, 1e-9), the same precision (bf16 autocast, or fp32) and the same number of
threads. One timed unit is a full training step: forward, backward and optimizer update. The two sides
alternate (ours, theirs, ours, theirs, ...) so that drifts of the machine hit both; the first round is
warm-up and not counted; the median round decides. On a GPU the device is synchronized before and after
every timed round, and the peak of torch.cuda.max_memory_allocated during each side's rounds is reported
(both models and their optimizer states stay on the device throughout, so each peak includes the other's).

--compile runs ours as `training.compile` does (model/train/step_graph.py: a micro-batch's forward, loss and
backward as one graph per length bucket) and compiles MarianMTModel's layers one by one (--compile-ours layers
compiles ours that way too); the warm-up round then includes compilation. MFU: model FLOPs per step
(bench/flops.py: 6 per weight per token plus attention,
real tokens only) per second, over the GPU's bf16 dense peak (bench/gpu_info.py, or --peak-tflops); it is
null on a CPU or an unlisted GPU without --peak-tflops, and is against the bf16 peak even for --precision fp32.

--batch-tokens auto times the batch a job of --auto-minutes that leaves max_tokens_per_batch to its budget gets on
this device: our step is timed as the worker times it (worker/training/auto_settings.py: at 2,048 tokens, and on a
GPU also 4 and 16 times that, within the device's memory) and model/train/budget.py chooses from those figures;
the curve, the choice and its reason are in `batch_rule`.

Prints human-readable lines, then as the last line one JSON object with both rates and the ratio (ours /
Marian); the same JSON goes to --out, by default bench/results/train_throughput-cuda-<date>.json on a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.flops import mfu, train_flops  # noqa: E402
from bench.gpu_info import DeviceInfo, DeviceProbe, peak_bf16_tflops, probe_for  # noqa: E402
from bench.marian_peer import marian_layers, marian_model, marian_train_step  # noqa: E402
from bench.run_record import environment, result_path, write_result  # noqa: E402
from model.data.batching import Batch, Example, TokenBatcher  # noqa: E402
from model.nn import layers as model_layers  # noqa: E402
from model.nn.config import PRESETS, ModelConfig  # noqa: E402
from model.nn.transformer import Transformer  # noqa: E402
from model.probes.anatomy import estimate_memory  # noqa: E402
from model.train import (
    linear_loss,  # noqa: E402
    step_graph,  # noqa: E402
)
from model.train.budget import BudgetInputs, choose, largest_batch  # noqa: E402
from model.train.config import TrainConfig  # noqa: E402
from model.train.step import build_optimizer, train_step  # noqa: E402
from model.train.step_graph import compile_step  # noqa: E402
from model.train.throughput import steady_step_seconds  # noqa: E402

BENCH = "train_throughput"
# As a worker times its throughput for the budget rule (worker/training/auto_settings.py): not imported, as that
# module reads the service's settings.
PROBE_TOKENS, CURVE_FACTORS, PROBE_STEPS = 2048, (1, 4, 16), 3
Step = Callable[[Batch], None]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="small", help="model sizes (model/nn/config.py)")
    p.add_argument("--d-model", type=int, help="overrides the preset")
    p.add_argument("--heads", type=int, help="overrides the preset")
    p.add_argument("--layers", type=int, help="encoder layers = decoder layers; overrides the preset")
    p.add_argument("--d-ff", type=int, help="overrides the preset")
    p.add_argument("--dropout", type=float, help="overrides the preset")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument(
        "--batch-tokens",
        type=lambda v: v if v == "auto" else int(v),
        help="padded tokens per batch, or 'auto': the time-budget rule's choice; default 4000 on a CPU, 16384 on a GPU",
    )
    p.add_argument("--auto-minutes", type=float, default=60.0, help="the job's max_minutes for --batch-tokens auto")
    p.add_argument("--min-len", type=int, default=8)
    p.add_argument("--max-len", type=int, default=48)
    p.add_argument("--rounds", type=int, default=6, help="timed rounds per side, after one warm-up round")
    p.add_argument("--steps", type=int, default=3, help="training steps per round")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--precision", choices=("fp32", "bf16"), help="default: bf16 on a GPU, fp32 on a CPU")
    p.add_argument(
        "--compile",
        action="store_true",
        help="ours as training.compile runs it (each micro-batch's forward, loss and backward one graph), Marian's "
        "layers compiled one by one",
    )
    p.add_argument(
        "--compile-ours",
        choices=("step", "layers"),
        default="step",
        help="with --compile: ours as one graph a micro-batch (training.compile) or layer by layer (as Marian)",
    )
    p.add_argument("--compile-backend", default="inductor", help="torch.compile backend (with --compile)")
    switches = {
        "--fused-add-norm": "post-norm's residual, dropout and layer norm as one Triton kernel (model/nn/layers.py)",
        "--fused-linear-loss": "the output projection and the loss a chunk of rows at a time, no (N, V) logits "
        "(model/train/linear_loss.py; 'auto' is 'on')",
        "--cuda-graphs": "with --compile: the compiled step replayed as CUDA graphs, rows bucketed "
        "(model/train/step_graph.py; default off)",
    }
    defaults = {"--fused-add-norm": "auto", "--fused-linear-loss": "on", "--cuda-graphs": step_graph.CUDA_GRAPHS}
    for flag, text in switches.items():
        help = f"ours: {text}; auto: on a GPU"
        p.add_argument(flag, choices=("auto", "on", "off"), default=defaults[flag], help=help)
    p.add_argument("--peak-tflops", type=float, help="the device's bf16 dense peak, instead of the built-in table")
    p.add_argument("--out", type=Path, help="also write the final JSON here (default on a GPU: bench/results/)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def model_config(args: argparse.Namespace) -> ModelConfig:
    """The preset with the sizes given on the command line."""
    overrides = {
        "d_model": args.d_model,
        "n_heads": args.heads,
        "n_encoder_layers": args.layers,
        "n_decoder_layers": args.layers,
        "d_ff": args.d_ff,
        "dropout": args.dropout,
    }
    return ModelConfig.from_preset(args.preset, args.vocab, **{k: v for k, v in overrides.items() if v is not None})


def make_batches(args: argparse.Namespace, n: int) -> list[Batch]:
    """n batches of random sentence pairs, length-bucketed like real training data."""
    rng = random.Random(args.seed)

    def pair() -> Example:  # target length within +-25% of the source length, as in translation data
        n_src = rng.randint(args.min_len, args.max_len)
        n_tgt = max(1, round(n_src * rng.uniform(0.75, 1.25)))
        return Example(
            [rng.randrange(5, args.vocab) for _ in range(n_src)], [rng.randrange(5, args.vocab) for _ in range(n_tgt)]
        )

    examples = [pair() for _ in range(n * args.batch_tokens // args.min_len)]
    batches = list(TokenBatcher(examples, args.batch_tokens, shuffle=True, seed=args.seed))
    return batches[:n]


def autocast_for(device: torch.device, precision: str) -> contextlib.AbstractContextManager[object]:
    """bf16 autocast on the device (CPU included, so a CPU run exercises the same path); fp32: none."""
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def compile_layers(layers: Iterable[torch.nn.Module], backend: str) -> None:
    for layer in layers:
        layer.compile(backend=backend)


def timed_round(step: Step, batches: Sequence[Batch], probe: DeviceProbe) -> tuple[float, int]:
    probe.synchronize()
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    probe.synchronize()
    return time.perf_counter() - start, sum(b.n_tgt_tokens for b in batches)


def lengths(batches: Sequence[Batch], pad: int) -> tuple[list[int], list[int]]:
    """Real (non-pad) source and target lengths of every sentence pair of the batches."""
    src = [n for b in batches for n in (b.src != pad).sum(dim=1).tolist()]
    tgt = [n for b in batches for n in (b.tgt_out != pad).sum(dim=1).tolist()]
    return src, tgt


def main(argv: Sequence[str] | None = None, probe: DeviceProbe | None = None) -> dict[str, Any]:
    """Run the benchmark; `probe` replaces the device's own (tests hand in one that reports a GPU)."""
    args = parse_args(argv)
    device = torch.device(args.device)
    probe = probe or probe_for(device)
    info = probe.describe()
    on_gpu = info.device_kind == "cuda"
    precision = args.precision or ("bf16" if on_gpu else "fp32")
    torch.set_num_threads(args.threads)
    model_layers.FUSED_ADD_NORM = args.fused_add_norm
    linear_loss.FUSED_LINEAR_LOSS = "off" if args.fused_linear_loss == "off" else "on"
    step_graph.CUDA_GRAPHS = args.cuda_graphs
    config = model_config(args)
    cfg = TrainConfig(device=args.device)  # loss, clipping and Adam settings; precision is the autocast below
    autocast = autocast_for(device, precision)
    batch_rule = None
    if args.batch_tokens == "auto":
        batch_rule = budget_batch(args, config, cfg, autocast, info, precision)
        args.batch_tokens = batch_rule["chosen"]
    args.batch_tokens = args.batch_tokens or (16384 if on_gpu else 4000)
    batches = make_batches(args, args.steps)
    padded = sum(b.tgt_out.numel() for b in batches)
    real = sum(b.n_tgt_tokens for b in batches)
    flops_per_round = train_flops(config, *lengths(batches, config.pad_id))
    peak = peak_bf16_tflops(info.device_name, args.peak_tflops) if on_gpu or args.peak_tflops else None

    torch.manual_seed(args.seed)
    model = Transformer(config).to(device).train()
    optimizer = build_optimizer(model, cfg)
    peer = marian_model(config).to(device).train()
    graph = None
    if args.compile:
        if args.compile_ours == "step":
            graph = compile_step(model, cfg.label_smoothing, precision, backend=args.compile_backend)
        else:
            compile_layers([*model.encoder.layers, *model.decoder.layers], args.compile_backend)
        compile_layers(marian_layers(peer), args.compile_backend)

    def ours_step(batch: Batch) -> None:
        train_step(model, optimizer, [batch], 1e-4, cfg, autocast, step_graph=graph)

    sides: dict[str, tuple[torch.nn.Module, Step]] = {
        "ours": (model, ours_step),
        "peer": (peer, marian_train_step(peer, cfg, device, autocast)),
    }
    n_params = {name: sum(p.numel() for p in m.parameters()) for name, (m, _) in sides.items()}
    print(
        f"config: preset={args.preset} d_model={config.d_model} heads={config.n_heads} "
        f"layers={config.n_encoder_layers}+{config.n_decoder_layers} d_ff={config.d_ff} vocab={config.vocab_size} "
        f"dropout={config.dropout} device={args.device} ({info.device_name}) precision={precision} "
        f"compile={args.compile} threads={args.threads}"
    )
    print(f"parameters: ours {n_params['ours']:,}, Marian {n_params['peer']:,}")
    print(
        f"batches: {len(batches)} x ~{args.batch_tokens} padded tokens, {real} target tokens "
        f"({real / padded:.0%} of target positions are real); {flops_per_round / real / 1e6:.1f} MFLOPs per token"
    )
    load_before = os.getloadavg()[0]
    if not on_gpu and load_before > 0.5 * (os.cpu_count() or 1):
        print(
            f"warning: load average {load_before:.1f} on {os.cpu_count()} CPUs; other processes share the cores "
            f"(with several threads per side this slows both sides erratically; --threads 1 is steadier)"
        )
    rates: dict[str, list[float]] = {"ours": [], "peer": []}
    peak_memory: dict[str, int | None] = {"ours": None, "peer": None}
    for r in range(args.rounds + 1):
        for name, (_, step) in sides.items():
            probe.reset_peak_memory()
            seconds, tokens = timed_round(step, batches, probe)
            used = probe.max_memory_allocated()
            if used is not None:
                peak_memory[name] = max(used, peak_memory[name] or 0)
            if r > 0:  # round 0 warms up allocators, kernels, caches (and compiles, with --compile)
                rates[name].append(tokens / seconds)
        if r > 0:
            print(f"round {r}: ours {rates['ours'][-1]:,.0f} tok/s, Marian {rates['peer'][-1]:,.0f} tok/s")
    result = summary(rates, flops_per_round / real, peak)
    print(
        f"median: ours {result['ours_tokens_per_s']:,.0f} tok/s, Marian {result['peer_tokens_per_s']:,.0f} tok/s, "
        f"ratio {result['ratio']:.2f}x (target tokens per second of full training steps)"
    )
    if result["mfu_ours"] is not None:
        print(f"MFU against {peak:g} TFLOPS bf16: ours {result['mfu_ours']:.1%}, Marian {result['mfu_peer']:.1%}")
    for name, used in peak_memory.items():
        if used is not None:
            print(f"peak memory allocated ({name} rounds): {used / 2**30:.2f} GiB")
    result.update(
        peer="transformers.MarianMTModel",
        preset=args.preset,
        d_model=config.d_model,
        heads=config.n_heads,
        layers=config.n_encoder_layers,
        d_ff=config.d_ff,
        vocab=config.vocab_size,
        dropout=config.dropout,
        precision=precision,
        compile=args.compile and args.compile_ours,
        fused_add_norm=args.fused_add_norm,
        fused_linear_loss=args.fused_linear_loss,
        cuda_graphs=args.cuda_graphs,
        batch_tokens=args.batch_tokens,
        batch_rule=batch_rule,
        steps_per_round=args.steps,
        rounds=args.rounds,
        threads=args.threads,
        max_memory_allocated_ours=peak_memory["ours"],
        max_memory_allocated_peer=peak_memory["peer"],
        params_ours=n_params["ours"],
        params_peer=n_params["peer"],
        real_target_fraction=round(real / padded, 3),
        load_average=[round(load_before, 2), round(os.getloadavg()[0], 2)],
        **environment(args.device, info),
    )
    write_result(result, result_path(BENCH, info.device_kind, args.out))
    print(json.dumps(result))
    return result


def budget_batch(
    args: argparse.Namespace,
    config: ModelConfig,
    cfg: TrainConfig,
    autocast: contextlib.AbstractContextManager[object],
    info: DeviceInfo,
    precision: str,
) -> dict[str, Any]:
    """The max_tokens_per_batch the time-budget rule gives a job of args.auto_minutes on this device, from our own
    step timed at the sizes a worker times (the median of PROBE_STEPS batches, each stepped once untimed first)."""
    on_gpu = info.device_kind == "cuda"

    def fits(tokens: int) -> bool:
        if info.device_memory_total is None:
            return True
        return estimate_memory(config, tokens, precision=precision)["training_total_bytes"] <= info.device_memory_total

    largest = largest_batch(fits)
    sizes = sorted({min(PROBE_TOKENS * f, largest) for f in (CURVE_FACTORS if on_gpu else (1,))})
    torch.manual_seed(args.seed)
    model = Transformer(config).to(args.device).train()
    optimizer = build_optimizer(model, cfg)
    curve = []
    for size in sizes:
        batches = make_batches(argparse.Namespace(**{**vars(args), "batch_tokens": size}), PROBE_STEPS)
        seconds = steady_step_seconds(
            lambda batch, m=model, o=optimizer: train_step(m, o, [batch], 1e-4, cfg, autocast),
            batches,
            lambda: torch.cuda.synchronize(args.device) if on_gpu else None,
        )
        curve.append((size, round(size / statistics.median(seconds), 1)))
    del model, optimizer
    inputs = BudgetInputs(
        max_minutes=args.auto_minutes,
        training_pairs=1_000_000,
        longest_example=args.max_len + 1,
        tokens_per_second=curve[0][1],
        max_batch_tokens=largest,
        throughput_curve=tuple(curve) if len(curve) > 1 else (),
    )
    choice = choose(["max_tokens_per_batch"], inputs)
    chosen = choice.chosen["max_tokens_per_batch"]
    print(f"--batch-tokens auto: {chosen:,} ({choice.reasons['max_tokens_per_batch']})")
    return {
        "minutes": args.auto_minutes,
        "curve": curve,
        "chosen": chosen,
        "reason": choice.reasons["max_tokens_per_batch"],
        "expected_updates": choice.expected_updates,
    }


def summary(rates: dict[str, list[float]], flops_per_token: float, peak: float | None) -> dict[str, Any]:
    """Median rates, their ratio (ours / peer), model FLOPs per target token and MFU of each side."""
    ours, theirs = statistics.median(rates["ours"]), statistics.median(rates["peer"])
    mfu_ours, mfu_peer = mfu(ours * flops_per_token, peak), mfu(theirs * flops_per_token, peak)
    return {
        "ours_tokens_per_s": round(ours, 1),
        "peer_tokens_per_s": round(theirs, 1),
        "ratio": round(ours / theirs, 3),
        "flops_per_token": round(flops_per_token),
        "peak_tflops_bf16": peak,
        "mfu_ours": None if mfu_ours is None else round(mfu_ours, 4),
        "mfu_peer": None if mfu_peer is None else round(mfu_peer, 4),
    }


if __name__ == "__main__":
    main()
