"""Validation metrics of a model during training: loss, perplexity, token accuracy; BLEU, chrF and exact
match of greedy translations; masked-token accuracy for denoising."""

from __future__ import annotations

import math
from collections.abc import Sequence

import sacrebleu
import torch

from model.data.batching import Batch, Example, collate
from model.data.tokenizer import Tokenizer
from model.decode.greedy import eval_mode, greedy_decode
from model.nn.transformer import Transformer
from model.train.loss import label_smoothed_loss
from model.train.step import autocast_for


def masked_positions(src_ids: Sequence[int], tgt_ids: Sequence[int], mask_id: int) -> list[int]:
    """Positions of tgt_ids hidden behind the <mask> tokens of a denoising source (token or span noise).

    Each <mask> stands for one or more target tokens and the unmasked pieces are copied in order; a piece is
    matched at its earliest possible place (the last one at the end), which is exact for token noise.
    """
    pieces: list[list[int]] = [[]]
    for t in src_ids:
        if t == mask_id:
            pieces.append([])
        else:
            pieces[-1].append(t)
    positions: list[int] = []
    pos = len(pieces[0])
    for k, piece in enumerate(pieces[1:], start=1):
        n = len(piece)
        if k == len(pieces) - 1:
            end = len(tgt_ids) - n
        else:
            end = next((p for p in range(pos + 1, len(tgt_ids) - n + 1) if list(tgt_ids[p : p + n]) == piece), pos + 1)
        positions.extend(range(pos, max(end, pos + 1)))
        pos = max(end, pos + 1) + n
    return [p for p in positions if p < len(tgt_ids)]


@torch.no_grad()
def evaluate(
    model: Transformer,
    objective: str,
    valid_batches: Sequence[Batch],
    tokenizer: Tokenizer,
    decode_examples: Sequence[Example] = (),
    precision: str = "fp32",
) -> dict[str, float]:
    """Validation metrics: loss (NLL per target token), perplexity, token_accuracy; for translation BLEU, chrF
    and exact_match of greedy outputs on decode_examples; for denoising masked_token_accuracy (teacher-forced
    top-1 at the target positions hidden behind <mask>)."""
    device = next(model.parameters()).device
    autocast = autocast_for(device, precision)
    nll_sum, n_tokens, correct, masked_correct, n_masked = 0.0, 0, 0, 0, 0
    with eval_mode(model):
        for batch in valid_batches:
            b = batch.to(device)
            with autocast:
                logits = model(b.src, b.tgt_in)  # (B, T, V)
            keep = b.tgt_out != model.config.pad_id
            _, nll = label_smoothed_loss(logits[keep], b.tgt_out[keep], 0.0)
            nll_sum += nll.item()
            n_tokens += int(keep.sum())
            predicted = logits.argmax(dim=-1)  # (B, T)
            correct += int(((predicted == b.tgt_out) & keep).sum())
            if objective == "denoising":
                pad = model.config.pad_id
                for src, pred, tgt in zip(batch.src.tolist(), predicted.tolist(), batch.tgt_out.tolist()):
                    src, tgt = [t for t in src if t != pad], [t for t in tgt if t != pad]  # right padding only
                    for p in masked_positions(src, tgt, model.config.mask_id):
                        masked_correct += int(pred[p] == tgt[p])
                        n_masked += 1
        loss = nll_sum / max(n_tokens, 1)
        metrics = {"loss": loss, "perplexity": math.exp(min(loss, 50.0)), "token_accuracy": correct / max(n_tokens, 1)}
        if objective == "denoising":
            metrics["masked_token_accuracy"] = masked_correct / max(n_masked, 1)
        elif decode_examples:
            metrics.update(translation_metrics(model, decode_examples, tokenizer, precision))
    return metrics


def translate_examples(
    model: Transformer, examples: Sequence[Example], batch_size: int = 64, precision: str = "fp32"
) -> list[list[int]]:
    """Greedy outputs (token ids) for examples' sources, in the given order; batched by similar length."""
    device = next(model.parameters()).device
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].src_ids))
    out: list[list[int]] = [[] for _ in examples]
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        src = collate([examples[i] for i in idx]).src.to(device)
        with autocast_for(device, precision):
            hyps = greedy_decode(model, src)
        for i, hyp in zip(idx, hyps):
            out[i] = hyp
    return out


def translation_metrics(
    model: Transformer, examples: Sequence[Example], tokenizer: Tokenizer, precision: str = "fp32"
) -> dict[str, float]:
    """Corpus BLEU and chrF (sacrebleu, on detokenized text) and the exact-match rate of greedy outputs."""
    hyps = tokenizer.decode_batch(translate_examples(model, examples, precision=precision))
    refs = tokenizer.decode_batch([e.tgt_ids for e in examples])
    return {
        "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score,
        "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
        "exact_match": sum(h == r for h, r in zip(hyps, refs)) / len(refs),
    }
