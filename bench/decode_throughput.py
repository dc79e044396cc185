"""Beam-search throughput on identical weights: our model.decode.beam vs transformers generate() vs CTranslate2.

    .venv/bin/python bench/decode_throughput.py [--threads 1] [--sentences 256] [--rounds 5] [--train-steps 300]
    .venv/bin/python bench/decode_throughput.py --device cuda [--precision bf16|fp16] [--batch-size 128]
    .venv/bin/python bench/decode_throughput.py --device cuda --weights bf16 --workloads fixed --preset base

Each model is exported with model.io.export to a MarianMTModel directory (what transformers loads) and
converted from there to CTranslate2: float32 and int8 on a CPU, float16 on a GPU (bench/ct2_compute.py,
from ctranslate2.get_supported_compute_types). Ours and transformers run in --precision: fp32 by default on
a CPU, bf16 autocast by default on a GPU (fp16 on request); --weights bf16 instead casts their weights to
bf16, as an inference worker loads a model on a GPU (SERVING_DTYPE). On a GPU the device is synchronized around
every timed run and the peak torch.cuda.max_memory_allocated of ours and of transformers is reported
(CTranslate2 allocates outside torch, so it has none). Every engine decodes the same English
sources of the numbers task (model.data.demo.numbers_to_words_task), already tokenized and sorted by length, in
batches of --batch-size sentences, beam 4, 1-best, on the same number of threads (torch.set_num_threads(N);
CTranslate2 intra_threads=N, inter_threads=1). Within a round the engines run one after the other (the
first one rotating); rounds repeat; the median time per engine gives sentences/second (tokenization
excluded, the encoder included).

Two workloads, on the "small" preset (d_model 256, 3+3 layers; 5.6M parameters with the 300-token BPE):
  trained  the model trained --train-steps steps on the numbers task (English -> German, ~8 output tokens);
           natural stopping, maximum length 2 * longest source + 10 for all engines. What a user sees;
           the engines' 1-best agreement with ours is reported (length penalties differ, see below).
  fixed    random weights, min length = max length = --length tokens, so every beam of every engine
           decodes exactly that many steps whatever the weights say: pure per-step cost, no early exit.
The top-level JSON figures are the trained workload's; "fixed_length" holds the other. The ratios differ
because the model's matrix products cost the same in every PyTorch engine: with natural stopping ours
also saves the steps of sentences that are done (they leave the batch; generate() keeps decoding them
until the whole batch is done), with fixed lengths only per-step overhead differs.

Search settings, as close as the engines allow: all stop a sentence once 4 hypotheses have ended (ours;
transformers early_stopping=True; CTranslate2 patience=1). Length penalty: ours is GNMT's
((5 + len) / 6)^0.6; transformers and CTranslate2 only offer len^alpha, given alpha = 0.6.
One thread by default: on a shared 2-core machine a 2-thread run mostly measures how long each op waits
for its second thread to be scheduled (seen here: 4x slower than one thread under load); pass --threads 2
on an idle machine. Prints human lines, then one JSON object as the last line (ratio: ours / transformers),
also written to --out, by default bench/results/decode_throughput-cuda-<date>.json on a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench.ct2_compute import ENGINE_NAMES, Ct2Plan, ct2_plan  # noqa: E402
from bench.gpu_info import DeviceProbe, probe_for  # noqa: E402
from bench.run_record import environment, result_path, write_result  # noqa: E402
from model.data.batching import Example, TokenBatcher, pad_sequences  # noqa: E402
from model.data.demo import numbers_to_words_task  # noqa: E402
from model.data.tokenizer import Tokenizer  # noqa: E402
from model.decode.beam import beam_search  # noqa: E402
from model.decode.greedy import never_emitted  # noqa: E402
from model.io.export import convert_to_ctranslate2, export_marian  # noqa: E402
from model.nn.config import PRESETS, ModelConfig  # noqa: E402
from model.nn.transformer import Transformer  # noqa: E402
from worker.serving.ct2 import prefer_exact_int8_gemm  # noqa: E402

prefer_exact_int8_gemm()  # CTranslate2 as the inference workers configure it (MKL's int8 GEMM on AMD CPUs)

BENCH = "decode_throughput"
BEAM, ALPHA = 4, 0.6
AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Run:
    """Where and how the engines run: torch device, precision of ours and transformers, CTranslate2 types."""

    device: torch.device
    precision: str  # a key of AUTOCAST_DTYPES
    probe: DeviceProbe
    ct2: Ct2Plan
    weights: str = "fp32"  # a key of AUTOCAST_DTYPES: the dtype the weights of ours and transformers are cast to

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        dtype = AUTOCAST_DTYPES[self.precision]
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=dtype)


def train(model: Transformer, examples: list[Example], steps: int) -> None:
    """Paper-style training (model.train.step.train_step, label smoothing 0.1), warm-up then linear decay."""
    from model.train.config import TrainConfig
    from model.train.step import build_optimizer, train_step

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # training is not measured; one thread is much faster on a shared CPU
    config = TrainConfig(max_steps=steps, peak_lr=1e-3, warmup_steps=max(1, steps // 10), max_tokens_per_batch=2048)
    optimizer = build_optimizer(model, config)
    batcher = TokenBatcher(examples, max_tokens=config.max_tokens_per_batch, seed=0)
    batches, start = iter(batcher), time.perf_counter()
    warmup = config.warmup_steps
    for step in range(steps):
        batch = next(batches, None)
        if batch is None:  # next epoch
            batches = iter(batcher)
            batch = next(batches)
        lr = config.peak_lr * min((step + 1) / warmup, (steps - step) / max(1, steps - warmup))
        result = train_step(model, optimizer, [batch], lr, config)
    torch.set_num_threads(threads)
    print(f"trained {steps} steps in {time.perf_counter() - start:.0f} s, last loss {result.loss:.3f}")


def measure(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: list[list[int]],
    args: argparse.Namespace,
    fixed_length: int | None,
    workdir: Path,
    run: Run,
) -> dict[str, Any]:
    """Sentences/second of every engine on one model; fixed_length forces every beam to that many tokens."""
    import ctranslate2
    import transformers

    marian_dir = export_marian(model.cpu(), tokenizer, workdir / "marian")
    dtype = AUTOCAST_DTYPES[run.weights] or torch.float32  # as an inference worker loads them (SERVING_DTYPE)
    model.to(run.device, dtype)
    hf = transformers.MarianMTModel.from_pretrained(str(marian_dir)).to(run.device, dtype).eval()
    translators = {
        q: ctranslate2.Translator(
            str(convert_to_ctranslate2(marian_dir, workdir / f"ct2-{q}", quantization=q)),
            device=run.device.type,
            device_index=run.device.index or 0,
            compute_type=q,
            intra_threads=args.threads,
            inter_threads=1,
        )
        for q in run.ct2.compute_types
    }
    batches = [sources[i : i + args.batch_size] for i in range(0, len(sources), args.batch_size)]
    tensors = [pad_sequences(b).to(run.device) for b in batches]
    token_batches = [[[tokenizer.id_to_token(t) for t in s] for s in b] for b in batches]
    max_len = max(len(s) for s in sources) * 2 + 10
    L = fixed_length

    def ours() -> list[list[int]]:
        out = []
        with run.autocast():
            for src in tensors:
                if L is not None:
                    nbest = beam_search(model, src, BEAM, 1, ALPHA, max_len_a=0, max_len_b=L, min_len=L)
                else:
                    nbest = beam_search(model, src, BEAM, 1, ALPHA, max_len_a=0, max_len_b=max_len)
                out += [hyps[0].tokens for hyps in nbest]
        return out

    def hf_generate() -> list[list[int]]:
        out = []
        lengths = dict(max_new_tokens=L, min_new_tokens=L) if L is not None else dict(max_new_tokens=max_len)
        with torch.inference_mode(), run.autocast():
            for src in tensors:
                gen = hf.generate(
                    input_ids=src,
                    attention_mask=(src != 0).long(),
                    num_beams=BEAM,
                    do_sample=False,
                    early_stopping=True,
                    length_penalty=ALPHA,
                    num_return_sequences=1,
                    **lengths,
                )
                out += [[t for t in row[1:] if t not in (tokenizer.pad_id, tokenizer.eos_id)] for row in gen.tolist()]
        return out

    suppressed = [[tokenizer.id_to_token(i)] for i in never_emitted(model.config)]

    def ct2(q: str) -> Callable[[], list[list[int]]]:
        lengths = (
            dict(max_decoding_length=L, min_decoding_length=L) if L is not None else dict(max_decoding_length=max_len)
        )

        def decode() -> list[list[int]]:
            out = []
            for b in token_batches:
                results = translators[q].translate_batch(
                    b,
                    beam_size=BEAM,
                    length_penalty=ALPHA,
                    patience=1,
                    max_batch_size=args.batch_size,
                    suppress_sequences=suppressed,  # what our decoders never emit (generate(): bad_words_ids)
                    **lengths,
                )
                out += [[tokenizer.token_to_id(t) for t in r.hypotheses[0]] for r in results]
            return out

        return decode

    engines = {"ours": ours, "hf": hf_generate, **{ENGINE_NAMES[q]: ct2(q) for q in run.ct2.compute_types}}
    outputs, failed = {}, {}
    for name, fn in list(engines.items()):  # warm-up, and the outputs to compare
        try:
            outputs[name] = fn()
        except RuntimeError as e:
            # CTranslate2 can count a GPU and list its compute types yet fail at the first translation, e.g.
            # "Library libcublas.so.12 is not found" (a CUDA 12 wheel on a CUDA 13 host, seen on an H200).
            if not name.startswith("ct2"):
                raise
            print(f"  {name} left out: {e}")
            failed[name] = str(e)
            del engines[name]
    names = list(engines)
    times: dict[str, list[float]] = {name: [] for name in engines}
    memory: dict[str, int | None] = {name: None for name in engines}
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate who goes first
            run.probe.reset_peak_memory()
            run.probe.synchronize()
            start = time.perf_counter()
            engines[name]()
            run.probe.synchronize()
            times[name].append(time.perf_counter() - start)
            used = run.probe.max_memory_allocated()
            if used is not None and not name.startswith("ct2"):  # CTranslate2 allocates outside torch
                memory[name] = max(used, memory[name] or 0)
        print(f"  round {r + 1}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()))
    rate = {name: len(sources) / statistics.median(t) for name, t in times.items()}
    agree = {name: sum(a == b for a, b in zip(outputs[name], outputs["ours"])) / len(sources) for name in engines}
    mean_len = sum(len(o) for o in outputs["ours"]) / len(sources)
    for name in names:
        print(f"  {name:9s} {rate[name]:8.1f} sentences/s  (same 1-best as ours: {agree[name]:.0%})")
    print("  " + "; ".join(f"ours / {n} = {rate['ours'] / rate[n]:.2f}x" for n in names[1:]))
    return {
        **{f"{name}_sent_per_s": round(rate[name], 2) for name in names},
        "ratio": round(rate["ours"] / rate["hf"], 3),
        **{f"ratio_vs_{name}": round(rate["ours"] / rate[name], 3) for name in names[2:]},
        "agreement_with_ours": {k: round(v, 3) for k, v in agree.items() if k != "ours"},
        "mean_output_tokens": round(mean_len, 2),
        "max_memory_allocated": {k: v for k, v in memory.items() if v is not None} or None,
        "ct2_failed": failed or None,
    }


def main(
    argv: Sequence[str] | None = None, probe: DeviceProbe | None = None, ct2: Ct2Plan | None = None
) -> dict[str, Any]:
    """Run the benchmark; `probe` and `ct2` replace the device's own (tests hand in ones that report a GPU)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument(
        "--vocab-size", type=int, default=300, help="BPE vocabulary; 300 splits a German number word into ~8 tokens"
    )
    parser.add_argument("--train-steps", type=int, default=300, help="training of the 'trained' workload's model")
    parser.add_argument("--length", type=int, default=24, help="tokens per beam in the 'fixed' workload")
    parser.add_argument("--workloads", default="trained,fixed", help="comma-separated: trained, fixed")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument(
        "--precision",
        choices=sorted(AUTOCAST_DTYPES),
        help="autocast of ours and transformers; default bf16 on a GPU (fp32 with --weights), fp32 on a CPU",
    )
    parser.add_argument(
        "--weights",
        choices=sorted(AUTOCAST_DTYPES),
        default="fp32",
        help="cast the weights of ours and transformers to this dtype, as the inference workers load them "
        "(SERVING_DTYPE: bf16 on a GPU); the autocast is then off unless --precision asks",
    )
    parser.add_argument("--out", type=Path, help="also write the final JSON here (default on a GPU: bench/results/)")
    args = parser.parse_args(argv)
    workloads = args.workloads.split(",")
    if not workloads or set(workloads) - {"trained", "fixed"}:
        parser.error(f"--workloads={args.workloads!r}: choose from trained, fixed")
    if args.train_steps < 1:
        parser.error(f"--train-steps={args.train_steps} must be >= 1")

    device = torch.device(args.device)
    probe = probe or probe_for(device)
    info = probe.describe()
    autocast_default = "bf16" if info.device_kind == "cuda" and args.weights == "fp32" else "fp32"
    run = Run(device, args.precision or autocast_default, probe, ct2 or ct2_plan(device.type), args.weights)
    if run.ct2.skipped:
        print(f"CTranslate2 left out: {run.ct2.skipped}")
    torch.set_num_threads(args.threads)
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    pairs = numbers_to_words_task(999, seed=0, low=1, high=999)
    tokenizer = Tokenizer.train([t for p in pairs for t in p], args.vocab_size)
    sources = sorted((tokenizer.encode(s) + [tokenizer.eos_id] for s, _ in pairs[: args.sentences]), key=len)
    config = ModelConfig.from_preset(args.preset, tokenizer.vocab_size, max_positions=256)
    n_params = sum(p.numel() for p in Transformer(config).parameters())
    print(
        f"preset {args.preset}: {n_params / 1e6:.1f}M parameters, vocabulary {tokenizer.vocab_size}; "
        f"{len(sources)} sentences in batches of {args.batch_size}, beam {BEAM}, {args.threads} thread(s), "
        f"{args.rounds} rounds; {args.device} ({info.device_name}), autocast {run.precision}, weights {run.weights}, "
        f"CTranslate2 {', '.join(run.ct2.compute_types) or 'none'}"
    )

    results: dict[str, dict[str, Any]] = {}
    workdir = Path(tempfile.mkdtemp(prefix="decode-bench-"))
    for workload in workloads:
        torch.manual_seed(0)
        model = Transformer(config).to(device)
        if workload == "trained":
            print(f"trained: natural stopping (training {args.train_steps} steps first)")
            train(model, [Example(tokenizer.encode(s), tokenizer.encode(t)) for s, t in pairs], args.train_steps)
        else:
            print(f"fixed: random weights, exactly {args.length} tokens per beam")
        results[workload] = measure(
            model.eval(),
            tokenizer,
            sources,
            args,
            None if workload == "trained" else args.length,
            workdir / workload,
            run,
        )

    summary = dict(results[workloads[0]])
    summary["workload"] = workloads[0]
    if "fixed" in results and workloads[0] != "fixed":
        summary["fixed_length"] = results["fixed"]
    summary.update(
        precision=run.precision,
        weights=run.weights,
        ct2_compute_types=list(run.ct2.compute_types),
        ct2_skipped=run.ct2.skipped,
        threads=args.threads,
        sentences=len(sources),
        batch_size=args.batch_size,
        beam=BEAM,
        rounds=args.rounds,
        preset=args.preset,
        parameters=n_params,
        vocab_size=tokenizer.vocab_size,
        train_steps=args.train_steps,
        fixed_tokens=args.length,
        cpu_count=os.cpu_count(),
        **environment(args.device, info),
    )
    write_result(summary, result_path(BENCH, info.device_kind, args.out))
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
