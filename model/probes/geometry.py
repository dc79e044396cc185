"""How the trained weight matrices relate to each other and to the embedding, measured on a model's weights.

Answers, with the model's own numbers, "are W_Q and W_K the same weights as the embedding?": they are separate
tensors (never the same storage), of shape (d_model, d_model) against the embedding's (vocab, d_model), and how much
of the input directions they read overlaps with the directions the embedding uses most is the cosine of the
principal angles between two k-dimensional subspaces of R^d_model (Björck & Golub 1973):

    E = U_E S_E V_E^T   the embedding's top-k right singular vectors V_E[:, :k] span where tokens mostly lie
    W = U_W S_W V_W^T   a projection's top-k right singular vectors span the input directions it amplifies most
    cos(theta_i)        the singular values of V_E[:, :k]^T V_W[:, :k]; 1 = the same directions, 0 = orthogonal

Two random k-dimensional subspaces of R^d have a mean cos^2 of k / d: `random_baseline` is sqrt(k / d).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from model.nn.transformer import Transformer

TOP_K = 8
_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def _input_directions(weight: Tensor, k: int) -> Tensor:
    """(d_in, k): the top-k right singular vectors of weight (d_out, d_in)."""
    _, _, vh = torch.linalg.svd(weight.detach().double(), full_matrices=False)
    directions: Tensor = vh[:k].T
    return directions


def subspace_overlap(a: Tensor, b: Tensor) -> float:
    """Root mean square cosine of the principal angles between the column spaces of a and b (orthonormal columns)."""
    cosines = torch.linalg.svdvals(a.T @ b).clamp(max=1.0)
    return float(cosines.square().mean().sqrt())


@torch.no_grad()
def weight_geometry(model: Transformer, k: int = TOP_K) -> dict[str, Any]:
    """Shapes, storage and subspace overlaps of the embedding and every attention projection, per layer, and the
    parameter counts: every distinct parameter tensor once (the tied embedding once), those with requires_grad (the
    ones a backward pass gives a gradient for the optimizer to apply), and their bytes as loaded."""
    params = list(model.parameters())  # distinct tensors: a tied matrix appears once
    d = model.config.d_model
    k = min(k, d)
    embedding = model.encoder.embed_tokens.weight
    output = model.lm_head.weight
    e_dirs = _input_directions(embedding, k)
    layers = []
    for stack_name, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        for i, layer in enumerate(stack.layers):
            for attn_name in ("self_attn", "encoder_attn"):
                attn = getattr(layer, attn_name, None)
                if attn is None:
                    continue
                dirs = {p: _input_directions(getattr(attn, p).weight, k) for p in _PROJECTIONS}
                layers.append(
                    {
                        "stack": stack_name,
                        "layer": i,
                        "attention": attn_name,
                        "shares_storage_with_embedding": any(
                            getattr(attn, p).weight.data_ptr() == embedding.data_ptr() for p in _PROJECTIONS
                        ),
                        "overlap_with_embedding": {p: subspace_overlap(e_dirs, dirs[p]) for p in _PROJECTIONS},
                        "overlap_q_k": subspace_overlap(dirs["q_proj"], dirs["k_proj"]),
                    }
                )
    return {
        "d_model": d,
        "k": k,
        "random_baseline": math.sqrt(k / d),
        "embedding_shape": list(embedding.shape),
        "projection_shape": [d, d],
        "embedding_tied_to_output": output.data_ptr() == embedding.data_ptr(),
        "source_and_target_embeddings_shared": model.encoder.embed_tokens.weight.data_ptr()
        == model.decoder.embed_tokens.weight.data_ptr(),
        "layers": layers,
        "parameters": sum(p.numel() for p in params),
        "trainable_parameters": sum(p.numel() for p in params if p.requires_grad),
        "embedding_trainable": embedding.requires_grad,
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
    }
