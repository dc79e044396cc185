"""What each attention head does, in five numbers, on a fixed probe batch: the dynamics of attention over training.

For every layer and head of the encoder self-attention, the decoder self-attention and the cross-attention, the
attention weights softmax(QK^T / sqrt(d_k)) (Eq. 1) of the batch's real (non-pad) query positions give:

    entropy   -sum_k a log a, in nats: 0 = all weight on one token, log(n) = spread evenly over n
    diagonal  weight on the key at the query's own position (cross-attention: at the same relative position of the
              source, round(i * (S - 1) / (T - 1)), the monotone alignment)
    previous  weight on the key just before the query's position (self-attention; None for cross-attention)
    first     weight on the first key (the source's first token; the decoder's <s>)
    eos       weight on the source's final </s> (encoder self- and cross-attention; None for decoder self-attention)

each the mean over the probe batch's real queries. A head that collapses shows entropy near 0 and one share near 1;
heads that specialise move apart (Voita et al. 2019, "Analyzing Multi-Head Self-Attention").
"""

from __future__ import annotations

import torch
from torch import Tensor

from model.data.batching import Batch
from model.nn.transformer import Transformer
from model.probes.dynamics import DynamicsRecord

ATTENTION_STATS = ("entropy", "diagonal", "previous", "first", "eos")


def _gather(a: Tensor, keys: Tensor) -> Tensor:
    """a (B, H, Tq, Tk), keys (B, Tq) key index per query -> (B, H, Tq) weight on that key."""
    index = keys.clamp(0, a.shape[-1] - 1)[:, None, :, None].expand(-1, a.shape[1], -1, 1)  # (B, H, Tq, 1)
    return a.gather(-1, index).squeeze(-1)


def _mean(values: Tensor, mask: Tensor) -> list[float]:
    """values (B, H, Tq), mask (B, Tq) -> per-head mean over the masked queries."""
    m = mask[:, None, :].to(values.dtype)
    return ((values * m).sum(dim=(0, 2)) / m.sum(dim=(0, 2)).clamp(min=1)).tolist()  # (H,)


@torch.no_grad()
def attention_stats(model: Transformer, batch: Batch, step: int) -> DynamicsRecord:
    """The record of `step`: groups (kind, layer, head), e.g. ("cross", 2, 3), with the five statistics above."""
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        batch = batch.to(device)
        _, weights = model.forward_with_attention(batch.src, batch.tgt_in)
    finally:
        model.train(was_training)
    pad = model.config.pad_id
    src_real, tgt_real = batch.src != pad, batch.tgt_in != pad  # (B, S), (B, T)
    src_len, tgt_len = src_real.sum(dim=1), tgt_real.sum(dim=1)  # (B,)
    groups: list[tuple[str, int | None, int | None]] = []
    stats: dict[str, list[float | None]] = {s: [] for s in ATTENTION_STATS}
    kinds = (
        ("encoder_self", weights.encoder_self, src_real, src_len),
        ("decoder_self", weights.decoder_self, tgt_real, tgt_len),
        ("cross", weights.cross, tgt_real, tgt_len),
    )
    for kind, layers, q_real, q_len in kinds:
        for layer, a in enumerate(layers):
            a = a.double()  # (B, H, Tq, Tk)
            q = torch.arange(a.shape[2], device=a.device).expand(a.shape[0], -1)  # (B, Tq)
            if kind == "cross":  # the same relative position of the source
                scale = (src_len - 1).double() / (q_len - 1).clamp(min=1).double()  # (B,)
                diagonal_keys = (q.double() * scale[:, None]).round().long()
            else:
                diagonal_keys = q
            entropy = -(a * a.clamp(min=1e-30).log()).sum(dim=-1)  # (B, H, Tq)
            eos_keys = (src_len - 1)[:, None].expand_as(q)  # (B, Tq): the source's </s>
            values: dict[str, list[float] | None] = {
                "entropy": _mean(entropy, q_real),
                "diagonal": _mean(_gather(a, diagonal_keys), q_real),
                "previous": None if kind == "cross" else _mean(_gather(a, q - 1), q_real & (q >= 1)),
                "first": _mean(a[..., 0], q_real),
                "eos": None if kind == "decoder_self" else _mean(_gather(a, eos_keys), q_real),
            }
            for head in range(a.shape[1]):
                groups.append((kind, layer, head))
                for name, per_head in values.items():
                    stats[name].append(None if per_head is None else per_head[head])
    return DynamicsRecord("attention", step, groups, stats)
