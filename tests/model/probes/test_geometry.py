"""Weight geometry: are W_Q and W_K the embedding? Separate tensors, and how far their input directions overlap."""

from __future__ import annotations

import math

import pytest
import torch

from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.probes.geometry import _input_directions, subspace_overlap, weight_geometry


def test_subspace_overlap_is_1_for_the_same_directions_and_0_for_orthogonal_ones():
    q, _ = torch.linalg.qr(torch.randn(16, 16, dtype=torch.float64))
    assert subspace_overlap(q[:, :4], q[:, :4]) == pytest.approx(1.0)
    assert subspace_overlap(q[:, :4], q[:, 4:8]) == pytest.approx(0.0, abs=1e-12)
    rotated = q[:, :4] @ torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))[0]  # same span, other basis
    assert subspace_overlap(q[:, :4], rotated) == pytest.approx(1.0)


def test_a_fresh_model_has_separate_projections_a_tied_output_and_a_random_overlap():
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 300))
    g = weight_geometry(model)
    d = model.config.d_model
    assert g["embedding_shape"] == [300, d] and g["projection_shape"] == [d, d]
    assert g["embedding_tied_to_output"] and g["source_and_target_embeddings_shared"]
    n = model.config.n_encoder_layers + 2 * model.config.n_decoder_layers  # self + cross in the decoder
    assert len(g["layers"]) == n and not any(layer["shares_storage_with_embedding"] for layer in g["layers"])
    assert g["random_baseline"] == pytest.approx(math.sqrt(8 / d))
    overlaps = [v for layer in g["layers"] for v in layer["overlap_with_embedding"].values()]
    assert max(overlaps) < 3 * g["random_baseline"]  # untrained: no more than chance


def test_the_parameter_counts_are_the_distinct_tensors_and_those_with_requires_grad():
    model = Transformer(ModelConfig.from_preset("tiny", 300))
    total = sum(p.numel() for p in model.parameters())  # the tied embedding once
    g = weight_geometry(model)
    assert g["parameters"] == g["trainable_parameters"] == total and g["parameter_bytes"] == 4 * total
    assert g["embedding_trainable"]
    model.encoder.embed_tokens.weight.requires_grad_(False)  # frozen: no longer counted as trainable
    g = weight_geometry(model)
    assert g["trainable_parameters"] == total - 300 * model.config.d_model and not g["embedding_trainable"]


def test_a_projection_reading_the_embeddings_own_directions_overlaps_fully():
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 300))
    e_dirs = _input_directions(model.encoder.embed_tokens.weight, 8)  # (d, 8)
    with torch.no_grad():  # W_Q = (some outputs) x (the embedding's top directions)^T
        model.encoder.layers[0].self_attn.q_proj.weight.copy_(
            (torch.randn(64, 8, dtype=torch.float64) @ e_dirs.T).float()
        )
    layer = weight_geometry(model)["layers"][0]
    assert (layer["stack"], layer["layer"], layer["attention"]) == ("encoder", 0, "self_attn")
    assert layer["overlap_with_embedding"]["q_proj"] == pytest.approx(1.0, abs=1e-4)
    assert layer["overlap_with_embedding"]["k_proj"] < 0.8
