"""Training throughput of our Transformer against Hugging Face MarianMTModel of identical size.

    python bench/train_throughput.py [--d-model 256 --heads 4 --layers 3 --d-ff 1024 --vocab 8000 ...]

Both models get the same batches (the same padded token tensors), the same label-smoothed loss, gradient
clipping and Adam (0.9, 0.98, 1e-9), and the same number of threads. One timed unit is a full training step:
forward, backward and optimizer update. The two sides alternate (ours, theirs, ours, theirs, ...) so that
drifts of the machine hit both; the first round is warm-up and not counted; the median round decides.
Marian is built from a MarianConfig (nothing is downloaded): post-norm, ReLU, sinusoidal positions, scaled
and shared embeddings, dropout on residuals, embeddings and inside the FFN (activation_dropout), like ours.

Prints human-readable lines, then as the last line one JSON object with both rates and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.batching import Batch, Example, TokenBatcher  # noqa: E402
from model.config import ModelConfig  # noqa: E402
from model.step import build_optimizer, train_step  # noqa: E402
from model.train_config import TrainConfig  # noqa: E402
from model.transformer import Transformer  # noqa: E402

PAD, BOS, EOS = 0, 1, 2


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=3, help="encoder layers = decoder layers")
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch-tokens", type=int, default=4000, help="padded tokens per batch (max_tokens)")
    p.add_argument("--min-len", type=int, default=8)
    p.add_argument("--max-len", type=int, default=48)
    p.add_argument("--rounds", type=int, default=6, help="timed rounds per side, after one warm-up round")
    p.add_argument("--steps", type=int, default=3, help="training steps per round")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


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


def ours(args: argparse.Namespace, cfg: TrainConfig) -> tuple[torch.nn.Module, Callable[[Batch], None]]:
    torch.manual_seed(args.seed)
    config = ModelConfig(
        vocab_size=args.vocab,
        d_model=args.d_model,
        n_heads=args.heads,
        n_encoder_layers=args.layers,
        n_decoder_layers=args.layers,
        d_ff=args.d_ff,
        dropout=args.dropout,
    )
    model = Transformer(config).to(args.device).train()
    optimizer = build_optimizer(model, cfg)
    return model, lambda batch: train_step(model, optimizer, [batch], 1e-4, cfg)


def marian(args: argparse.Namespace, cfg: TrainConfig) -> tuple[torch.nn.Module, Callable[[Batch], None]]:
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(args.seed)
    config = MarianConfig(
        vocab_size=args.vocab,
        d_model=args.d_model,
        encoder_layers=args.layers,
        decoder_layers=args.layers,
        encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads,
        encoder_ffn_dim=args.d_ff,
        decoder_ffn_dim=args.d_ff,
        activation_function="relu",
        dropout=args.dropout,
        attention_dropout=0.0,
        activation_dropout=args.dropout,
        max_position_embeddings=1024,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
        use_cache=False,
    )
    model = MarianMTModel(config).to(args.device).train()
    optimizer = build_optimizer(model, cfg)  # same Adam (and the same fused/foreach choice) as ours

    def step(batch: Batch) -> None:
        b = batch.to(args.device)
        optimizer.zero_grad(set_to_none=True)
        logits = model(
            input_ids=b.src, attention_mask=b.src != PAD, decoder_input_ids=b.tgt_in, use_cache=False
        ).logits  # (B, T, V)
        # The usual way to train an HF model: cross entropy over all positions, pads ignored.
        loss = F.cross_entropy(
            logits.flatten(0, 1),
            b.tgt_out.flatten(),
            ignore_index=PAD,
            label_smoothing=cfg.label_smoothing,
            reduction="sum",
        )
        (loss / b.n_tgt_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
        for group in optimizer.param_groups:
            group["lr"] = 1e-4
        optimizer.step()

    return model, step


def timed_round(step: Callable[[Batch], None], batches: Sequence[Batch], device: str) -> tuple[float, int]:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - start, sum(b.n_tgt_tokens for b in batches)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = TrainConfig(device=args.device, bf16=False)
    batches = make_batches(args, args.steps)
    padded = sum(b.tgt_out.numel() for b in batches)
    real = sum(b.n_tgt_tokens for b in batches)
    sides = {"ours": ours(args, cfg), "peer": marian(args, cfg)}
    n_params = {name: sum(p.numel() for p in model.parameters()) for name, (model, _) in sides.items()}
    print(
        f"config: d_model={args.d_model} heads={args.heads} layers={args.layers}+{args.layers} d_ff={args.d_ff} "
        f"vocab={args.vocab} dropout={args.dropout} device={args.device} threads={args.threads}"
    )
    print(f"parameters: ours {n_params['ours']:,}, Marian {n_params['peer']:,}")
    print(
        f"batches: {len(batches)} x ~{args.batch_tokens} padded tokens, {real} target tokens "
        f"({real / padded:.0%} of target positions are real)"
    )
    load_before = os.getloadavg()[0]
    if load_before > 0.5 * (os.cpu_count() or 1):
        print(
            f"warning: load average {load_before:.1f} on {os.cpu_count()} CPUs; other processes share the cores "
            f"(with several threads per side this slows both sides erratically; --threads 1 is steadier)"
        )
    rates: dict[str, list[float]] = {"ours": [], "peer": []}
    for r in range(args.rounds + 1):
        for name, (_, step) in sides.items():
            seconds, tokens = timed_round(step, batches, args.device)
            if r > 0:  # round 0 warms up allocators, kernels and caches
                rates[name].append(tokens / seconds)
        if r > 0:
            print(f"round {r}: ours {rates['ours'][-1]:,.0f} tok/s, Marian {rates['peer'][-1]:,.0f} tok/s")
    result = {
        "ours_tokens_per_s": round(statistics.median(rates["ours"]), 1),
        "peer_tokens_per_s": round(statistics.median(rates["peer"]), 1),
    }
    result["ratio"] = round(result["ours_tokens_per_s"] / result["peer_tokens_per_s"], 3)
    print(
        f"median: ours {result['ours_tokens_per_s']:,.0f} tok/s, Marian {result['peer_tokens_per_s']:,.0f} tok/s, "
        f"ratio {result['ratio']:.2f}x (target tokens per second of full training steps)"
    )
    result.update(
        peer="transformers.MarianMTModel",
        d_model=args.d_model,
        heads=args.heads,
        layers=args.layers,
        d_ff=args.d_ff,
        vocab=args.vocab,
        dropout=args.dropout,
        batch_tokens=args.batch_tokens,
        steps_per_round=args.steps,
        rounds=args.rounds,
        threads=args.threads,
        device=args.device,
        torch=torch.__version__,
        params_ours=n_params["ours"],
        params_peer=n_params["peer"],
        real_target_fraction=round(real / padded, 3),
        load_average=[round(load_before, 2), round(os.getloadavg()[0], 2)],
    )
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
