"""Per-component training dynamics: gradient, weight and update norms of each W_Q, W_K, ... per layer."""

from __future__ import annotations

import math

import pytest
import torch

from model.data.batching import Example, collate
from model.data.demo import reverse_task
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.probes.dynamics import STATS, DynamicsProbe, group_of
from model.train.config import TrainConfig
from model.train.events import Callbacks
from model.train.loop import train
from model.train.prepare import prepare
from model.train.settings import DataSettings
from model.train.step import accumulate_gradients, build_optimizer, update_on_device
from tests.model.train.support import quick_config


def test_groups_are_the_papers_matrices_per_layer():
    assert group_of("shared.weight") == ("embeddings", None)
    assert group_of("encoder.embed_tokens.weight") == ("embeddings", None)
    assert group_of("encoder.layers.1.self_attn.q_proj.weight") == ("encoder.self_attn.W_Q", 1)
    assert group_of("encoder.layers.1.self_attn.q_proj.bias") == ("encoder.self_attn.W_Q", 1)
    assert group_of("decoder.layers.0.encoder_attn.out_proj.weight") == ("decoder.encoder_attn.W_O", 0)
    assert group_of("decoder.layers.2.ffn.fc2.weight") == ("decoder.ffn.W_2", 2)
    assert group_of("decoder.layers.2.encoder_attn_layer_norm.bias") == ("decoder.encoder_attn_layer_norm", 2)
    assert group_of("encoder.layer_norm.weight") == ("encoder.layer_norm", None)
    with pytest.raises(ValueError, match="lm_bias"):
        group_of("lm_bias")


def test_a_model_has_one_group_per_matrix_and_layer():
    config = ModelConfig.from_preset("tiny", 40)
    probe = DynamicsProbe(Transformer(config))
    per_encoder_layer = 4 + 2 + 2  # W_Q W_K W_V W_O, W_1 W_2, two LayerNorms
    per_decoder_layer = 8 + 2 + 3  # self- and cross-attention, W_1 W_2, three LayerNorms
    expected = 1 + per_encoder_layer * config.n_encoder_layers + per_decoder_layer * config.n_decoder_layers
    assert len(probe.groups) == len(set(probe.groups)) == expected
    assert ("decoder.encoder_attn.W_K", config.n_decoder_layers - 1, None) in probe.groups


def _batch():
    return [collate([Example([5 + i, 6 + i % 7, 7], [8 + i, 9, 10 + i % 5]) for i in range(6)])]


@pytest.mark.parametrize("clip_norm", [None, 0.05])
def test_update_ratio_is_a_hand_computed_first_adam_step(clip_norm):
    """Adam's first step is -lr * m_hat / (sqrt(v_hat) + eps) with m_hat = g and v_hat = g^2 (bias-corrected), so
    ||dW|| = lr * ||g / (|g| + eps)||, g being the clipped gradient; the recorded gradient norm is the unclipped one."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 40, dropout=0.0))
    config = TrainConfig(clip_norm=clip_norm)
    lr = 1e-3
    # the gradient by hand, on a copy of the same weights and batch
    twin = Transformer(model.config)
    twin.load_state_dict(model.state_dict())
    accumulate_gradients(twin, _batch(), config.label_smoothing)
    grads = {name: p.grad.detach().double() for name, p in twin.named_parameters()}
    total = math.sqrt(sum(float(g.square().sum()) for g in grads.values()))
    clip = 1.0 if clip_norm is None else min(1.0, clip_norm / (total + 1e-6))

    probe = DynamicsProbe(model)
    before = probe.before()
    pending = update_on_device(model, build_optimizer(model, config), _batch(), lr, config)
    record = probe.record(1, probe.after(before, pending.grad_norm, clip_norm).flatten().tolist())

    names = ("encoder.layers.0.self_attn.q_proj.weight", "encoder.layers.0.self_attn.q_proj.bias")
    weights = {n: p.detach().double() for n, p in twin.named_parameters()}
    grad = math.sqrt(sum(float(grads[n].square().sum()) for n in names))
    weight = math.sqrt(sum(float(weights[n].square().sum()) for n in names))
    step = math.sqrt(
        sum(float((lr * clip * grads[n] / (clip * grads[n].abs() + config.adam_eps)).square().sum()) for n in names)
    )
    i = record.groups.index(("encoder.self_attn.W_Q", 0, None))
    assert record.stats["grad_norm"][i] == pytest.approx(grad, rel=1e-4)
    assert record.stats["weight_norm"][i] == pytest.approx(weight, rel=1e-6)
    assert record.stats["update_ratio"][i] == pytest.approx(step / weight, rel=1e-4)
    # and over all groups, the gradient norms add up to the global one
    assert math.sqrt(sum(g * g for g in record.stats["grad_norm"])) == pytest.approx(total, rel=1e-4)


def test_training_records_dynamics_at_step_1_and_every_n():
    data = prepare("translation", reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0), preset="tiny",
                   vocab_size=300, settings=DataSettings(max_length=16), seed=0)  # fmt: skip
    records = []
    config = quick_config(max_steps=12, eval_every=1000, eval_max_sentences=4, dynamics_every=5)
    train(data, config, callbacks=Callbacks(on_dynamics=records.append))
    assert [r.step for r in records if r.kind == "attention"] == [12]  # the final evaluation
    records = [r for r in records if r.kind == "weights"]
    assert [r.step for r in records] == [1, 5, 10]
    for r in records:
        assert set(r.stats) == set(STATS)
        assert all(len(v) == len(r.groups) for v in r.stats.values())
        assert all(math.isfinite(x) and x >= 0 for v in r.stats.values() for x in v)
        assert all(x > 0 for x in r.stats["update_ratio"])  # every group moved
    assert records[0].to_json()["groups"][0] == ["embeddings", None, None] and records[0].kind == "weights"
    # off: never called
    train(data, TrainConfig(**{**config.to_dict(), "dynamics_every": None, "max_steps": 3}),
          callbacks=Callbacks(on_dynamics=lambda r: pytest.fail("recorded with dynamics_every=None")))  # fmt: skip


@pytest.mark.parametrize(("record_seconds", "expected"), [(0.001, [1, 5, 10, 15, 20, 25, 30, 35, 40]),
                                                          (0.5, [1, 5, 10, 20, 40])])  # fmt: skip
def test_records_are_spaced_out_where_one_costs_more_than_3_percent_of_the_time(record_seconds, expected):
    """Steps of 1 s: a record of 1 ms stays every 5 updates; one of 0.5 s is 11% of the 4.5 s since the last, so the
    spacing doubles (10, then 20) until a record costs 0.5 / 20.5 = 2.4%, under DYNAMICS_MAX_SHARE."""
    from model.train.recorders import DYNAMICS_MAX_SHARE, TrainingProbes
    from model.train.step import PendingStep

    now = [0.0]
    recorded = []

    def on_dynamics(record):
        now[0] += record_seconds  # what the record cost, as the clock sees it
        recorded.append(record.step)

    model = Transformer(ModelConfig.from_preset("tiny", 40, dropout=0.0))
    probes = TrainingProbes(model, None, TrainConfig(dynamics_every=5), Callbacks(on_dynamics=on_dynamics),
                            list, [], clock=lambda: now[0])  # fmt: skip
    zero = torch.zeros(())
    for step in range(1, 41):
        now[0] += 1.0  # the update itself
        before = probes.before_update(step)
        probes.after_update(step, before, PendingStep(zero, zero, torch.ones(()), 1))
    assert recorded == expected
    assert probes.dynamics_every == (5 if record_seconds < 0.01 else 40) and DYNAMICS_MAX_SHARE == 0.03


def test_on_a_gpu_the_record_is_timed_after_the_updates_kernels_have_run(monkeypatch):
    """CUDA runs the update asynchronously: the probe waits for it before starting the record's clock (a device
    reported as cuda, torch.cuda.synchronize injected), so the update's time is never counted as the record's."""
    from model.train.recorders import TrainingProbes
    from model.train.step import PendingStep

    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: events.append("synchronize"))
    model = Transformer(ModelConfig.from_preset("tiny", 40, dropout=0.0))
    probes = TrainingProbes(model, None, TrainConfig(dynamics_every=5), Callbacks(on_dynamics=lambda r: None),
                            list, [], clock=lambda: events.append("clock") or 0.0)  # fmt: skip
    zero = torch.zeros(())
    before = probes.before_update(1)
    events.clear()
    probes.after_update(1, before, PendingStep(zero, zero, torch.ones(()), 1))
    assert events == ["clock", "clock"]  # a CPU model: nothing to wait for
    probes._device_type = "cuda"
    events.clear()
    probes.after_update(1, before, PendingStep(zero, zero, torch.ones(()), 1))
    assert events[0] == "synchronize" and events[1] == "clock"
