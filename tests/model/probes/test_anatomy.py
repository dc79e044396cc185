"""Spec of the parameter and memory accounting in model.probes.anatomy."""

import subprocess
import sys
from pathlib import Path

import pytest

from model.nn.config import ModelConfig
from model.probes.anatomy import count_parameters, estimate_memory, named_parameter_groups, parameter_groups

ROOT = Path(__file__).resolve().parents[3]


def test_base_model_has_about_the_papers_65_million_parameters():
    # Table 3 reports 65M for "base" with a shared 37000-token BPE vocabulary (Sec. 5.1).
    total = count_parameters(ModelConfig.from_preset("base", 37000))["total"]
    assert total == pytest.approx(65e6, rel=0.03)
    assert total == 63_082_496  # 18.9M embeddings + 6 x 3.15M encoder + 6 x 4.20M decoder layers


def test_big_model_has_about_the_papers_213_million_parameters():
    total = count_parameters(ModelConfig.from_preset("big", 37000))["total"]
    assert total == pytest.approx(213e6, rel=0.03)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("share_embeddings", [True, False])
@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_arithmetic_matches_the_real_model(preset, norm_first, share_embeddings):
    import torch

    from model.nn.transformer import Transformer

    config = ModelConfig.from_preset(preset, 101, norm_first=norm_first, share_embeddings=share_embeddings)
    model = Transformer(config)
    assert parameter_groups(config) == named_parameter_groups(model)
    unique = {id(p): p for p in model.parameters()}.values()
    assert count_parameters(config)["total"] == sum(p.numel() for p in unique)
    assert {name for name, _ in model.named_parameters()} == {g["name"] for g in parameter_groups(config)}
    assert all(isinstance(p, torch.nn.Parameter) for p in unique)


def test_groups_name_the_papers_matrices_per_component():
    config = ModelConfig.from_preset("tiny", 101)
    groups = parameter_groups(config)
    cross = [g for g in groups if g["component"] == "decoder.layers.1.encoder_attn"]
    assert [g["symbol"] for g in cross] == ["W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O"]
    assert all(g["shape"] in ([64, 64], [64]) for g in cross)
    ffn = [g for g in groups if g["component"] == "encoder.layers.0.ffn"]
    assert [(g["symbol"], g["shape"]) for g in ffn] == [
        ("W_1", [256, 64]),
        ("b_1", [256]),
        ("W_2", [64, 256]),
        ("b_2", [64]),
    ]
    assert [g["name"] for g in groups if g["component"] == "embeddings"] == ["shared.weight"]


def test_pre_norm_adds_exactly_the_two_final_layer_norms():
    post = count_parameters(ModelConfig.from_preset("tiny", 101))
    pre = count_parameters(ModelConfig.from_preset("tiny", 101, norm_first=True))
    assert pre["total"] - post["total"] == 2 * 2 * 64
    assert pre["by_component"]["encoder.layer_norm"] == pre["by_component"]["decoder.layer_norm"] == 128
    assert "encoder.layer_norm" not in post["by_component"]


def test_unshared_embeddings_triple_the_embedding_parameters():
    shared = count_parameters(ModelConfig.from_preset("base", 37000))
    separate = count_parameters(ModelConfig.from_preset("base", 37000, share_embeddings=False))
    assert shared["by_kind"]["embeddings"] == 37000 * 512
    assert separate["by_kind"]["embeddings"] == 3 * 37000 * 512


def test_counts_by_component_and_by_kind_add_up_to_the_total():
    counts = count_parameters(ModelConfig.from_preset("small", 8000, norm_first=True))
    assert sum(counts["by_component"].values()) == counts["total"]
    assert sum(counts["by_kind"].values()) == counts["total"]
    assert set(counts["by_kind"]) == {"embeddings", "self_attn", "encoder_attn", "ffn", "layer_norm"}


def test_memory_estimate_counts_weights_gradients_and_two_adam_moments():
    config = ModelConfig.from_preset("base", 37000)
    memory = estimate_memory(config, tokens_per_batch=25000)
    n = count_parameters(config)["total"]
    assert memory["weights_bytes"] == memory["gradients_bytes"] == 4 * n
    assert memory["adam_bytes"] == 8 * n
    assert memory["training_total_bytes"] == 16 * n + memory["activations_bytes"]
    assert memory["weights_bytes"] < memory["inference_bytes"] < memory["training_total_bytes"]


def test_memory_estimate_scales_with_batch_and_dtype():
    config = ModelConfig.from_preset("small", 8000)
    one, two = estimate_memory(config, 1000), estimate_memory(config, 2000)
    assert two["activations_bytes"] == 2 * one["activations_bytes"]
    assert two["weights_bytes"] == one["weights_bytes"]
    half = estimate_memory(config, 1000, dtype_bytes=2)
    assert half["training_total_bytes"] * 2 == one["training_total_bytes"]
    with pytest.raises(ValueError, match="tokens_per_batch=0"):
        estimate_memory(config, 0)


def test_config_and_anatomy_import_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"  # any `import torch` now raises ImportError
        "import model.nn.config, model.probes.anatomy\n"
        "c = model.nn.config.ModelConfig.from_preset('base', 37000)\n"
        "print(model.probes.anatomy.count_parameters(c)['total'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "63082496"
