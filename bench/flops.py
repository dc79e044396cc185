"""Model FLOPs of a training step of the encoder-decoder Transformer, and MFU (model FLOPs utilization).

The standard approximation (Kaplan et al. 2020, Sec. 2.1; PaLM, Chowdhery et al. 2022, App. B): a training
step costs 6 FLOPs per weight per token that weight touches (2 forward: one multiply, one add; 4 backward:
gradients of inputs and of weights), plus the attention products that involve no weight, QK^T and AV,
2 * 2 * d_model FLOPs forward per (query, key) pair, so 12 * d_model per pair for a training step.

With s source and t target tokens of one sentence pair, d = d_model, f = d_ff, V = vocab_size:

    weights per source token   encoder layer: 4 d^2 (Q, K, V, O) + 2 d f (FFN), times n_encoder_layers;
                               plus the cross-attention K and V of every decoder layer: 2 d^2 each
    weights per target token   decoder layer: 4 d^2 (self-attention) + 2 d^2 (cross-attention Q, O)
                               + 2 d f (FFN), times n_decoder_layers; plus the output projection d V
    attention pairs            encoder s^2 per layer; decoder self-attention t^2 (all pairs, as PaLM counts,
                               the causal mask notwithstanding) and cross-attention t s per layer

    FLOPs = 6 * (s * weights per source token + t * weights per target token) + 12 d * (attention pairs)

Embedding lookups, biases, LayerNorm, softmax and the loss are left out (each is O(d) per token, negligible).
Only real tokens count, not padding: the figure is the work the model needs, whatever the implementation
spends, so two implementations of the same model are measured against the same FLOPs.
"""

from __future__ import annotations

from collections.abc import Sequence

from model.nn.config import ModelConfig


def weights_per_token(config: ModelConfig) -> tuple[int, int]:
    """(weights a source token passes through, weights a target token passes through); see the module doc."""
    d, f = config.d_model, config.d_ff
    per_source = config.n_encoder_layers * (4 * d * d + 2 * d * f) + config.n_decoder_layers * 2 * d * d
    per_target = config.n_decoder_layers * (6 * d * d + 2 * d * f) + d * config.vocab_size
    return per_source, per_target


def train_flops(config: ModelConfig, src_lengths: Sequence[int], tgt_lengths: Sequence[int]) -> int:
    """Model FLOPs of one training step (forward + backward) over sentence pairs of these real lengths."""
    if len(src_lengths) != len(tgt_lengths):
        raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths")
    per_source, per_target = weights_per_token(config)
    total = 0
    for s, t in zip(src_lengths, tgt_lengths):
        pairs = config.n_encoder_layers * s * s + config.n_decoder_layers * (t * t + t * s)
        total += 6 * (s * per_source + t * per_target) + 12 * config.d_model * pairs
    return total


def mfu(flops_per_second: float, peak_tflops: float | None) -> float | None:
    """Achieved model FLOP/s as a fraction of the device's peak; None when the peak is unknown."""
    if peak_tflops is None:
        return None
    if not peak_tflops > 0:
        raise ValueError(f"peak_tflops={peak_tflops!r} must be positive")
    return flops_per_second / (peak_tflops * 1e12)
