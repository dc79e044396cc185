"""The peer of bench/quality.py: Hugging Face MarianMTModel of our `small` size from scratch, in a minimal loop.

BPE with a Metaspace pre-tokenizer and NFC; batches of shuffled pairs with batch size x longest side <= the
recipe's token limit; Adam (0.9, 0.98, 1e-9) at the paper's rate with the recipe's warm-up; label smoothing
0.1; clipping at 1.0; MarianConfig's other defaults. Trains for a wall-clock budget, then decodes with
generate(num_beams=4).
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

import torch
import torch.nn.functional as F

SIZES = dict(d_model=256, n_heads=4, layers=3, d_ff=1024, dropout=0.1)  # our `small` preset (model/nn/config.py)


def peer_tokenizer(texts: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Metaspace()
    tk.decoder = decoders.Metaspace()
    tk.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            show_progress=False,
            special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
        ),
    )
    return tk


def peer_batches(pairs: list[tuple[list[int], list[int]]], max_tokens: int, rng: random.Random):
    """Shuffled pairs, cut into batches with batch size x longest side (+1 for </s> or <s>) <= max_tokens."""
    order = list(range(len(pairs)))
    rng.shuffle(order)
    batch: list[int] = []
    longest = 0
    for i in order:
        size = max(len(pairs[i][0]), len(pairs[i][1])) + 1
        if batch and (len(batch) + 1) * max(longest, size) > max_tokens:
            yield batch
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, size)
    if batch:
        yield batch


def peer(
    train_rows: list[tuple[str, str]],
    test_sources: list[str],
    recipe: dict[str, Any],
    seed: int,
    minutes: float,
    max_len: int = 128,
    config_overrides: dict[str, Any] | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """Train on train_rows for `minutes` with recipe's vocab_size, max_tokens_per_batch and warmup_steps, then
    translate test_sources (beam 4): (translations, {steps, train_seconds, decode_seconds, pieces a source}).
    config_overrides are MarianConfig fields over our `small` size (e.g. decoder_layers=1)."""
    from transformers import MarianConfig, MarianMTModel

    pad, bos, eos = 0, 1, 2
    tk = peer_tokenizer([t for row in train_rows for t in row], recipe["vocab_size"])
    pairs = [
        (s.ids, t.ids)
        for s, t in zip(tk.encode_batch([s for s, _ in train_rows]), tk.encode_batch([t for _, t in train_rows]))
    ]
    pairs = [p for p in pairs if 0 < len(p[0]) <= max_len and 0 < len(p[1]) <= max_len]
    torch.manual_seed(seed)
    fields: dict[str, Any] = dict(
        vocab_size=tk.get_vocab_size(),
        d_model=SIZES["d_model"],
        encoder_layers=SIZES["layers"],
        decoder_layers=SIZES["layers"],
        encoder_attention_heads=SIZES["n_heads"],
        decoder_attention_heads=SIZES["n_heads"],
        encoder_ffn_dim=SIZES["d_ff"],
        decoder_ffn_dim=SIZES["d_ff"],
        dropout=SIZES["dropout"],
        max_position_embeddings=512,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=pad,
        eos_token_id=eos,
        bos_token_id=bos,
        decoder_start_token_id=bos,
        forced_eos_token_id=eos,
    )
    config = MarianConfig(**{**fields, **(config_overrides or {})})
    model = MarianMTModel(config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    d, warmup = SIZES["d_model"], recipe["warmup_steps"]
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: d**-0.5 * min((s + 1) ** -0.5, (s + 1) * warmup**-1.5)
    )
    rng, step, start = random.Random(seed), 0, time.monotonic()
    while time.monotonic() - start < minutes * 60:
        for idx in peer_batches(pairs, recipe["max_tokens_per_batch"], rng):
            if time.monotonic() - start >= minutes * 60:
                break
            src = torch.nn.utils.rnn.pad_sequence([torch.tensor(pairs[i][0] + [eos]) for i in idx], True, pad)
            tgt_in = torch.nn.utils.rnn.pad_sequence([torch.tensor([bos] + pairs[i][1]) for i in idx], True, pad)
            labels = torch.nn.utils.rnn.pad_sequence([torch.tensor(pairs[i][1] + [eos]) for i in idx], True, pad)
            logits = model(input_ids=src, attention_mask=src != pad, decoder_input_ids=tgt_in).logits
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=pad, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
    train_seconds = time.monotonic() - start
    model.eval()
    t0 = time.monotonic()
    sources = [tk.encode(s).ids[:max_len] + [eos] for s in test_sources]
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    hyps = [""] * len(sources)
    with torch.no_grad():
        for b in range(0, len(order), 32):
            idx = order[b : b + 32]
            src = torch.nn.utils.rnn.pad_sequence([torch.tensor(sources[i]) for i in idx], True, pad)
            out = model.generate(
                input_ids=src, attention_mask=src != pad, num_beams=4, max_new_tokens=2 * src.size(1) + 10
            )
            for i, ids in zip(idx, out.tolist()):
                hyps[i] = tk.decode([t for t in ids if t > eos])
    return hyps, {
        "steps": step,
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(train_seconds, 1),
        "decode_seconds": round(time.monotonic() - t0, 1),
        "source_pieces_per_sentence": round(statistics.mean(len(s) - 1 for s in sources), 2),
    }
