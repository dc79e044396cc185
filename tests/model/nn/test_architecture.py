"""Spec of the Transformer architecture: config, attention, layers and the full model."""

import math

import pytest
import torch

from model.nn.attention import KVCache, MultiHeadAttention
from model.nn.config import PRESETS, ModelConfig
from model.nn.layers import SinusoidalPositionalEncoding
from model.nn.transformer import Transformer

V = 40


def make_model(seed: int = 0, vocab_size: int = V, **overrides) -> Transformer:
    torch.manual_seed(seed)
    config = ModelConfig.from_preset("tiny", vocab_size, **{"dropout": 0.0, "max_positions": 64, **overrides})
    return Transformer(config).eval()


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources (the second padded after 5 tokens) and two target inputs starting with BOS."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(5, V, (2, 9), generator=g)
    src[1, 5:] = 0
    tgt = torch.randint(5, V, (2, 7), generator=g)
    tgt[:, 0] = 1
    return src, tgt


# --- config -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(d_model=500, n_heads=3), "d_model=500 is not divisible by n_heads=3"),
        (dict(d_ff=0), "d_ff=0"),
        (dict(n_encoder_layers=-1), "n_encoder_layers=-1"),
        (dict(dropout=1.0), "dropout=1.0"),
        (dict(attention_dropout=-0.1), "attention_dropout=-0.1"),
        (dict(activation="tanh"), "activation='tanh'"),
        (dict(eos_id=40), "eos_id=40 is outside [0, vocab_size=40)"),
        (dict(mask_id=99), "mask_id=99"),
        (dict(bos_id=0), "pad_id=0, bos_id=0"),
        (dict(d_model=64.0), "d_model=64.0"),
    ],
)
def test_invalid_config_raises_value_error_naming_the_values(overrides, message):
    with pytest.raises(ValueError) as exc:
        ModelConfig(vocab_size=V, **overrides)
    assert message in str(exc.value)


def test_presets_match_the_paper_and_accept_overrides():
    base = ModelConfig.from_preset("base", 37000)
    assert (base.d_model, base.n_heads, base.n_encoder_layers, base.d_ff, base.dropout) == (512, 8, 6, 2048, 0.1)
    big = ModelConfig.from_preset("big", 37000, norm_first=True)
    assert (big.d_model, big.n_heads, big.d_ff, big.dropout, big.norm_first) == (1024, 16, 4096, 0.3, True)
    assert set(PRESETS) == {"tiny", "small", "base", "big"}


def test_unknown_preset_or_override_raises_value_error():
    with pytest.raises(ValueError, match="'huge'"):
        ModelConfig.from_preset("huge", V)
    with pytest.raises(ValueError, match="'n_layers'"):
        ModelConfig.from_preset("tiny", V, n_layers=3)


def test_config_dict_round_trip_and_unknown_keys_refused():
    config = ModelConfig.from_preset("small", V, activation="gelu")
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="'d_modle'"):
        ModelConfig.from_dict({**config.to_dict(), "d_modle": 3})


# --- attention --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_path_equals_explicit_softmax_path(causal):
    torch.manual_seed(0)
    attn = MultiHeadAttention(32, 4).eval()
    x, memory = torch.randn(3, 6, 32), torch.randn(3, 8, 32)
    pad = torch.zeros(3, 8, dtype=torch.bool)
    pad[1, 5:] = True
    for kv, mask in ((None, pad[:, :6] if not causal else None), (memory, pad)):
        fast, no_weights = attn(x, kv, key_padding_mask=mask, causal=causal and kv is None)
        slow, weights = attn(x, kv, key_padding_mask=mask, causal=causal and kv is None, need_weights=True)
        assert no_weights is None
        torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)
        assert weights.shape == (3, 4, 6, x.size(1) if kv is None else 8)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))


def test_self_attention_kv_cache_matches_full_causal_attention():
    torch.manual_seed(0)
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 5, 32)
    full, _ = attn(x, causal=True)
    cache = KVCache()
    first, _ = attn(x[:, :2], causal=True, cache=cache)  # a 2-token prefix, then one token at a time
    steps = [first] + [attn(x[:, t : t + 1], causal=True, cache=cache)[0] for t in range(2, 5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert cache.length == 5


# --- positions and embeddings -----------------------------------------------------------------------------


@pytest.mark.parametrize("num_positions, d_model", [(256, 512), (64, 64), (10, 7)])
def test_positional_encoding_equals_marian_sinusoidal_embedding(num_positions, d_model):
    marian = pytest.importorskip("transformers.models.marian.modeling_marian")
    reference = marian.MarianSinusoidalPositionalEmbedding(num_positions, d_model).create_weight()
    ours = SinusoidalPositionalEncoding(num_positions, d_model)
    assert torch.equal(ours.weight, reference)
    assert torch.equal(ours(3, offset=2), reference[2:5])


def test_positional_encoding_follows_the_paper_formula():
    pe = SinusoidalPositionalEncoding(50, 16).weight
    p, i = 7, 3
    assert pe[p, i].item() == pytest.approx(math.sin(p / 10000 ** (2 * i / 16)), abs=1e-6)
    assert pe[p, 8 + i].item() == pytest.approx(math.cos(p / 10000 ** (2 * i / 16)), abs=1e-6)


def test_too_long_input_raises_value_error():
    model = make_model()
    with pytest.raises(ValueError, match="max_positions=64"):
        model(torch.ones(1, 65, dtype=torch.long) + 4, torch.ones(1, 3, dtype=torch.long))


def test_token_embeddings_are_scaled_by_sqrt_d_model_and_added_to_positions():
    model = make_model()
    ids = torch.tensor([[5, 6, 7]])
    expected = model.encoder.embed_tokens.weight[ids] * math.sqrt(64) + model.encoder.embed_positions.weight[:3]
    torch.testing.assert_close(model.encoder.embed(ids), expected)


def test_shared_embeddings_are_one_parameter():
    model = make_model(share_embeddings=True)
    assert model.encoder.embed_tokens.weight is model.decoder.embed_tokens.weight is model.lm_head.weight
    assert model.shared.weight is model.lm_head.weight


def test_unshared_embeddings_are_three_parameters():
    model = make_model(share_embeddings=False)
    weights = [model.encoder.embed_tokens.weight, model.decoder.embed_tokens.weight, model.lm_head.weight]
    assert len({id(w) for w in weights}) == 3
    assert model.shared is None


@pytest.mark.parametrize("preset", ["small", "base"])
def test_default_initialisation_is_normal_0_02_with_zero_biases(preset):
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset(preset, 2000, n_encoder_layers=1, n_decoder_layers=1))
    assert model.config.init == "normal"
    std = 0.02
    for name, p in model.named_parameters():
        if "layer_norm" in name:
            continue
        if name.endswith("bias"):
            assert torch.all(p == 0), name
        else:
            assert p.mean().item() == pytest.approx(0.0, abs=std / 10), name
            assert p.std().item() == pytest.approx(std, rel=0.1), name


def test_unknown_init_is_refused_naming_it():
    with pytest.raises(ValueError, match="init='kaiming'"):
        ModelConfig.from_preset("tiny", 300, init="kaiming")


def test_tiny_initialisation_is_xavier_linears_zero_biases_normal_embeddings():
    model = make_model(vocab_size=2000)
    assert model.config.init == "xavier"
    q = model.encoder.layers[0].self_attn.q_proj
    assert q.weight.abs().max() <= math.sqrt(6 / (64 + 64))
    assert torch.all(q.bias == 0)
    assert model.shared.weight.std().item() == pytest.approx(64**-0.5, rel=0.05)


# --- the full model ---------------------------------------------------------------------------------------


def test_forward_returns_logits_for_every_target_position():
    model = make_model()
    src, tgt = batch()
    assert model(src, tgt).shape == (2, 7, V)
    memory = model.encode(src, src == 0)
    assert memory.shape == (2, 9, 64)
    assert model.decode(tgt, memory, src == 0).shape == (2, 7, 64)


def test_changing_a_future_target_token_leaves_earlier_logits_unchanged():
    model = make_model()
    src, tgt = batch()
    changed = tgt.clone()
    changed[:, 4] = (tgt[:, 4] + 1 - 5) % (V - 5) + 5
    a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_padded_source_positions_are_never_attended():
    model = make_model()
    src, tgt = batch()
    pad_mask = src == 0
    other = src.clone()
    other[1, 5:] = torch.arange(5, 9) + 10  # different ids under the same padding mask
    memory_a, memory_b = model.encode(src, pad_mask), model.encode(other, pad_mask)
    torch.testing.assert_close(memory_a[1, :5], memory_b[1, :5], atol=1e-6, rtol=0)
    torch.testing.assert_close(
        model.decode(tgt, memory_a, pad_mask), model.decode(tgt, memory_b, pad_mask), atol=1e-6, rtol=0
    )


def test_extra_source_padding_does_not_change_logits():
    model = make_model()
    src, tgt = batch()
    padded = torch.cat([src, torch.zeros(2, 4, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(src, tgt), model(padded, tgt), atol=1e-5, rtol=0)


def test_attention_weights_are_distributions_that_skip_padding():
    model = make_model()
    src, tgt = batch()
    logits, attn = model.forward_with_attention(src, tgt)
    torch.testing.assert_close(logits, model(src, tgt), atol=1e-5, rtol=0)
    assert len(attn.encoder_self) == len(attn.decoder_self) == len(attn.cross) == 2
    assert attn.encoder_self[0].shape == (2, 4, 9, 9)
    assert attn.decoder_self[0].shape == (2, 4, 7, 7)
    assert attn.cross[0].shape == (2, 4, 7, 9)
    for w in attn.encoder_self + attn.decoder_self + attn.cross:
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    for w in attn.encoder_self + attn.cross:
        assert torch.all(w[1, :, :, 5:] == 0)  # pad keys of the second source
    for w in attn.decoder_self:
        assert torch.all(w.triu(diagonal=1) == 0)  # no query sees a later target position


@pytest.mark.parametrize("norm_first", [False, True])
def test_kv_cached_step_by_step_decoding_equals_full_recomputation(norm_first):
    model = make_model(norm_first=norm_first)
    src, tgt = batch()
    memory = model.encode(src, src == 0)
    full = model.decode(tgt, memory, src == 0)
    cache = model.new_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, src == 0, cache=cache) for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert cache.length == tgt.size(1)


def test_cache_reorder_follows_the_selected_rows():
    model = make_model()
    src, tgt = batch()
    memory = model.encode(src, src == 0)
    cache = model.new_cache()
    model.decode(tgt[:, :3], memory, src == 0, cache=cache)
    order = torch.tensor([1, 1, 0])  # e.g. beam search keeping two hypotheses of sentence 1
    cache.reorder(order)
    step = model.decode(tgt[order, 3:4], memory[order], (src == 0)[order], cache=cache)
    full = model.decode(tgt[order, :4], memory[order], (src == 0)[order])
    torch.testing.assert_close(step[:, 0], full[:, 3], atol=1e-5, rtol=0)


def test_post_norm_and_pre_norm_differ_and_pre_norm_ends_stacks_with_layer_norm():
    post, pre = make_model(norm_first=False), make_model(norm_first=True)
    assert post.encoder.layer_norm is None and post.decoder.layer_norm is None
    assert isinstance(pre.encoder.layer_norm, torch.nn.LayerNorm)
    assert isinstance(pre.decoder.layer_norm, torch.nn.LayerNorm)
    pre.load_state_dict(post.state_dict(), strict=False)  # same weights, only the wiring differs
    src, tgt = batch()
    assert not torch.allclose(post(src, tgt), pre(src, tgt), atol=1e-3)
    # Post-norm: every sub-layer output goes through LayerNorm (gain 1, bias 0 at init), so memory is normalised.
    memory = post.encode(src, src == 0)
    torch.testing.assert_close(memory.mean(-1), torch.zeros(2, 9), atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_pre_norm_keeps_an_identity_path_and_post_norm_normalises_it(norm_first):
    # With every sub-layer's output projection zeroed, a layer is x -> LayerNorm(x) per sub-layer (post-norm,
    # Sec. 3.1) or the identity x -> x + 0 (pre-norm).
    layer = make_model(norm_first=norm_first).decoder.layers[0]
    with torch.no_grad():
        for linear in (layer.self_attn.out_proj, layer.encoder_attn.out_proj, layer.ffn.fc2):
            linear.weight.zero_()
            linear.bias.zero_()
    x = torch.randn(2, 5, 64) * 3 + 1
    out, _, _ = layer(x, torch.randn(2, 4, 64), None)
    if norm_first:
        torch.testing.assert_close(out, x)
    else:
        torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (64,)), atol=1e-4, rtol=0)


@pytest.mark.parametrize("activation", ["relu", "gelu", "swish"])
def test_every_activation_trains_one_step(activation):
    model = make_model(activation=activation, dropout=0.1).train()
    src, tgt = batch()
    loss = torch.nn.functional.cross_entropy(model(src, tgt).flatten(0, 1), tgt.roll(-1, 1).flatten())
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None for p in model.parameters())


def test_weights_map_key_by_key_onto_marian():
    transformers = pytest.importorskip("transformers")
    model = make_model()
    c = model.config
    marian = transformers.MarianMTModel(
        transformers.MarianConfig(
            vocab_size=V,
            d_model=c.d_model,
            encoder_layers=c.n_encoder_layers,
            decoder_layers=c.n_decoder_layers,
            encoder_attention_heads=c.n_heads,
            decoder_attention_heads=c.n_heads,
            encoder_ffn_dim=c.d_ff,
            decoder_ffn_dim=c.d_ff,
            activation_function=c.activation,
            max_position_embeddings=c.max_positions,
            pad_token_id=c.pad_id,
            eos_token_id=c.eos_id,
            decoder_start_token_id=c.bos_id,
            scale_embedding=True,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
        )
    ).eval()
    renamed = {}
    for key, value in model.state_dict().items():
        key = key.replace(".ffn.", ".")
        renamed[key if key.startswith("lm_head") else f"model.{key}"] = value
    result = marian.load_state_dict(renamed, strict=False)
    assert result.unexpected_keys == []
    assert set(result.missing_keys) <= {
        "final_logits_bias",
        "model.encoder.embed_positions.weight",
        "model.decoder.embed_positions.weight",
    }
    src, tgt = batch()
    with torch.no_grad():
        expected = marian(input_ids=src, attention_mask=src != 0, decoder_input_ids=tgt).logits
    torch.testing.assert_close(model(src, tgt), expected, atol=1e-4, rtol=0)
