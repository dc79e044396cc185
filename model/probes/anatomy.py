"""Where the parameters and the memory of a Transformer go, by arithmetic on its config.

Torch-free (the API server shows these numbers without loading a model); named_parameter_groups is the one
function that looks at a real model, so tests can check the arithmetic against it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from model.nn.config import ModelConfig

ParameterGroup = dict[str, Any]  # {"component", "name", "symbol", "shape", "count"}

_SYMBOLS = {"q_proj": "Q", "k_proj": "K", "v_proj": "V", "out_proj": "O", "fc1": "1", "fc2": "2"}


def _symbol(name: str) -> str:
    """Paper notation of a parameter: W_Q / b_Q ... W_O, W_1 / b_1, W_2 / b_2; gamma / beta for LayerNorm; E."""
    module, kind = name.split(".")[-2:]
    if module in _SYMBOLS:
        return ("W_" if kind == "weight" else "b_") + _SYMBOLS[module]
    if module.endswith("layer_norm"):
        return "gamma" if kind == "weight" else "beta"
    return "E"  # embedding / output projection matrix


def component_of(name: str) -> str:
    """Component of a parameter: "decoder.layers.3.encoder_attn.k_proj.weight" -> "decoder.layers.3.encoder_attn"."""
    parts = name.split(".")
    if len(parts) < 2:
        raise ValueError(f"parameter {name!r} belongs to no known component")
    if parts[0] in ("shared", "lm_head") or parts[1] == "embed_tokens":
        return "embeddings"
    if parts[1] == "layer_norm":
        return f"{parts[0]}.layer_norm"  # final LayerNorm of a pre-norm stack
    if parts[1] == "layers":
        sub = "layer_norm" if parts[3].endswith("layer_norm") else parts[3]
        return f"{parts[0]}.layers.{parts[2]}.{sub}"
    raise ValueError(f"parameter {name!r} belongs to no known component")


def _group(name: str, shape: list[int]) -> ParameterGroup:
    count = 1
    for n in shape:
        count *= n
    return {"component": component_of(name), "name": name, "symbol": _symbol(name), "shape": shape, "count": count}


def _linear(prefix: str, d_in: int, d_out: int) -> list[tuple[str, list[int]]]:
    return [(f"{prefix}.weight", [d_out, d_in]), (f"{prefix}.bias", [d_out])]


def _attention(prefix: str, d: int) -> list[tuple[str, list[int]]]:
    return [p for proj in ("q_proj", "k_proj", "v_proj", "out_proj") for p in _linear(f"{prefix}.{proj}", d, d)]


def _layer_norm(prefix: str, d: int) -> list[tuple[str, list[int]]]:
    return [(f"{prefix}.weight", [d]), (f"{prefix}.bias", [d])]


def _layer(prefix: str, config: ModelConfig, cross: bool) -> list[tuple[str, list[int]]]:
    d = config.d_model
    params = _attention(f"{prefix}.self_attn", d) + _layer_norm(f"{prefix}.self_attn_layer_norm", d)
    if cross:
        params += _attention(f"{prefix}.encoder_attn", d) + _layer_norm(f"{prefix}.encoder_attn_layer_norm", d)
    params += _linear(f"{prefix}.ffn.fc1", d, config.d_ff) + _linear(f"{prefix}.ffn.fc2", config.d_ff, d)
    return params + _layer_norm(f"{prefix}.final_layer_norm", d)


def parameter_groups(config: ModelConfig) -> list[ParameterGroup]:
    """Every trainable tensor of Transformer(config), in model.named_parameters() order, tied ones once."""
    V, d = config.vocab_size, config.d_model
    params: list[tuple[str, list[int]]] = []
    if config.share_embeddings:
        params.append(("shared.weight", [V, d]))
    for stack, n_layers in (("encoder", config.n_encoder_layers), ("decoder", config.n_decoder_layers)):
        if not config.share_embeddings:
            params.append((f"{stack}.embed_tokens.weight", [V, d]))
        for i in range(n_layers):
            params += _layer(f"{stack}.layers.{i}", config, cross=stack == "decoder")
        if config.norm_first:
            params += _layer_norm(f"{stack}.layer_norm", d)
    if not config.share_embeddings:
        params.append(("lm_head.weight", [V, d]))
    return [_group(name, shape) for name, shape in params]


def count_parameters(config: ModelConfig) -> dict[str, Any]:
    """{"total", "by_component": {component: count}, "by_kind": {embeddings/self_attn/encoder_attn/ffn/layer_norm}}."""
    groups = parameter_groups(config)
    by_component: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for g in groups:
        by_component[g["component"]] += g["count"]
        by_kind[g["component"].split(".")[-1]] += g["count"]
    return {"total": sum(by_component.values()), "by_component": dict(by_component), "by_kind": dict(by_kind)}


def non_embedding_parameters(config: ModelConfig) -> int:
    """N of a scaling law: every parameter but the embeddings (Gordon et al. and Kaplan et al. count these)."""
    counts = count_parameters(config)
    return int(counts["total"] - counts["by_kind"].get("embeddings", 0))


def estimate_memory(
    config: ModelConfig, tokens_per_batch: int, dtype_bytes: int = 4, precision: str = "fp32"
) -> dict[str, int]:
    """Rough memory of training and inference, in bytes.

    Assumptions:
    - tokens_per_batch source tokens and as many target tokens (the paper's batches: ~25000 of each, Sec. 5.1).
    - Weights, gradients and both Adam moments are all stored with dtype_bytes per value.
    - precision "bf16" (mixed: bf16 autocast over fp32 master weights): the weights, gradients and Adam moments
      stay as above, autocast keeps a bf16 copy of the weights (2 bytes each), activations take 2 bytes per
      value, and the log-softmax of the loss is computed in fp32 (4 bytes per vocabulary entry per target token).
    - Activations kept for the backward pass, in values per token: an encoder layer keeps 8 d_model + 2 d_ff
      (self-attention: input, Q, K, V, context, pre-norm sum = 6 d_model; FFN: input and sum = 2 d_model,
      pre- and post-activation = 2 d_ff); a decoder layer adds cross-attention's 6 d_model. Each target token
      also keeps 2 vocab_size (logits and log-softmax) and each token its embedding sum (2 d_model).
      Attention matrices are not stored (fused SDPA kernels recompute them); dropout masks are ignored.
    - Inference (one forward pass, no gradients): the weights, a working set of one layer per token
      (4 d_model + d_ff), the logits, and a decoder KV cache of 4 d_model per target token per decoder layer.
    """
    if tokens_per_batch <= 0 or dtype_bytes <= 0:
        raise ValueError(f"tokens_per_batch={tokens_per_batch} and dtype_bytes={dtype_bytes} must be positive")
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision={precision!r} must be 'fp32' or 'bf16'")
    d, d_ff, V = config.d_model, config.d_ff, config.vocab_size
    n_params = count_parameters(config)["total"]
    weights = n_params * dtype_bytes
    enc_per_token = config.n_encoder_layers * (8 * d + 2 * d_ff) + 2 * d
    dec_per_token = config.n_decoder_layers * (14 * d + 2 * d_ff) + 2 * d  # without the logits
    inference_per_token = 4 * d + d_ff + V + config.n_decoder_layers * 4 * d
    if precision == "bf16":
        activation_bytes, weight_copy = 2, n_params * 2
        logits = tokens_per_batch * V * (2 + 4)  # bf16 logits, fp32 log-softmax
    else:
        activation_bytes, weight_copy = dtype_bytes, 0
        logits = tokens_per_batch * 2 * V * dtype_bytes
    activations = tokens_per_batch * (enc_per_token + dec_per_token) * activation_bytes + logits
    return {
        "weights_bytes": weights,
        "gradients_bytes": weights,
        "adam_bytes": 2 * weights,
        "activations_bytes": activations,
        "training_total_bytes": 4 * weights + weight_copy + activations,
        "inference_bytes": weights + tokens_per_batch * inference_per_token * dtype_bytes,
    }


def named_parameter_groups(model: Any) -> list[ParameterGroup]:
    """The same listing as parameter_groups, read from a real torch model (tied parameters once)."""
    return [_group(name, list(p.shape)) for name, p in model.named_parameters()]
