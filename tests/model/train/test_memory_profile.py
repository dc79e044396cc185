"""The memory of one training step, measured (model/train/memory_profile.py): the kinds add up to the peak, the
parameter-sized kinds are exact, the attention matrices match a hand count, and the GPU branch reads CUDA's
allocator statistics (injected here, as a GPU would report them)."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from model.data.batching import Example, TokenBatcher, collate
from model.data.demo import reverse_task
from model.nn.config import PRESETS, ModelConfig
from model.nn.transformer import Transformer
from model.probes.anatomy import count_parameters, estimate_memory
from model.train import linear_loss
from model.train.config import TrainConfig
from model.train.events import Callbacks
from model.train.loop import train
from model.train.memory_profile import CpuPeak, CudaPeak, measure_step, memory_report
from model.train.prepare import prepare
from model.train.settings import DataSettings

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py


CONFIG = ModelConfig(vocab_size=300, **PRESETS["tiny"])  # d_model 64, 4 heads, 2 + 2 layers, d_ff 256
B, S, T = 8, 21, 13  # sentences, source length (20 ids + </s>), target length (12 ids + <s>)


def _batch():
    g = torch.Generator().manual_seed(0)
    examples = [
        Example(
            torch.randint(5, 300, (S - 1,), generator=g).tolist(), torch.randint(5, 300, (T - 1,), generator=g).tolist()
        )
        for _ in range(B)
    ]
    return collate(examples)


def _parameter_bytes(config: ModelConfig) -> int:
    return count_parameters(config)["total"] * 4  # fp32


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_kinds_measured_directly_explain_the_measured_cpu_peak_within_10_percent(precision):
    """`temporary` is the peak less the other kinds, so it proves nothing; the kinds measured on their own tensors
    (weights, gradients, Adam moments, autocast copies, saved activations) must come within 10% of the peak that the
    profiler measured independently, leaving at most 10% of it unexplained. Saved activations are over a quarter of
    this peak: a step that missed them would fail."""
    report = measure_step(CONFIG, _batch(), TrainConfig(max_tokens_per_batch=512, precision=precision))
    assert report.device == "cpu" and report.precision == precision
    assert abs(report.accounted - report.peak_bytes) <= 0.1 * report.peak_bytes, (report.accounted, report.peak_bytes)
    assert report.temporary <= 0.1 * report.peak_bytes, (report.temporary, report.peak_bytes)
    # the step's own allocations are seen: the peak is above what is held before it (weights and Adam state)
    assert report.peak_bytes > report.weights + report.adam_moments + sum(report.activations.values()) // 2
    assert report.batch == {"sentences": B, "source_length": S, "target_length": T, "padded_tokens": B * S,
                            "target_tokens": B * T}  # fmt: skip
    assert (report.autocast_weights > 0) == (precision == "bf16")


def test_weights_gradients_and_adam_moments_are_the_exact_parameter_bytes():
    report = measure_step(CONFIG, _batch(), TrainConfig(max_tokens_per_batch=512))
    expected = sum(p.numel() * p.element_size() for p in Transformer(CONFIG).parameters())  # tied matrix once
    assert expected == _parameter_bytes(CONFIG)
    assert report.weights == report.gradients == expected
    assert report.adam_moments == 2 * expected  # exp_avg and exp_avg_sq


def test_attention_softmax_is_batch_heads_queries_keys_4_bytes_per_attention_layer(monkeypatch):
    """The math attention kernel saves each layer's softmax output (B, heads, T_q, T_k) in fp32; the fused CPU
    kernel (the default) saves none, only a log-sum-exp per query, which is what the estimate assumes."""
    h, n_enc, n_dec = CONFIG.n_heads, CONFIG.n_encoder_layers, CONFIG.n_decoder_layers
    per_layer = n_enc * B * h * S * S + n_dec * B * h * (T * T + T * S)  # encoder self; decoder self + cross
    with sdpa_kernel([SDPBackend.MATH]):
        math = measure_step(CONFIG, _batch(), TrainConfig(max_tokens_per_batch=512))
    assert math.activations["attention_softmax"] == 4 * per_layer
    assert math.activations["attention_scores"] == 0  # no dropout on the weights: no mask, no second matrix
    fused = measure_step(CONFIG, _batch(), TrainConfig(max_tokens_per_batch=512))
    assert fused.activations["attention_softmax"] == fused.activations["attention_scores"] == 0
    # the rest is the same tensors: the FFN's d_ff-wide ones; unfused, the loss's log-softmax (N non-pad x V)
    assert fused.activations["ffn_hidden"] == math.activations["ffn_hidden"] > 0
    assert fused.activations["logits"] == 0  # the projection fused with the loss keeps no logits (linear_loss.py)
    monkeypatch.setattr(linear_loss, "FUSED_LINEAR_LOSS", "off")
    unfused = measure_step(CONFIG, _batch(), TrainConfig(max_tokens_per_batch=512))
    assert unfused.activations["logits"] == B * T * CONFIG.vocab_size * 4


def test_the_gpu_branch_reads_cudas_allocator_statistics(monkeypatch):
    """What a GPU reports is injected into torch.cuda (the tensors stay on the CPU): the peak is the bytes held
    before the step plus max_memory_allocated less memory_allocated at its start."""
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device: calls.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: calls.append("memory_allocated") or 10_000_000)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: calls.append("max") or 17_000_000)
    report = measure_step(CONFIG, _batch(), TrainConfig(max_tokens_per_batch=512), CudaPeak(torch.device("cuda", 0)))
    assert calls == ["synchronize", "memory_allocated", "reset", "synchronize", "max"]
    held = report.weights + report.adam_moments  # parameters and moments, plus buffers and Adam's step counters
    assert report.device == "cuda:0" and held < report.peak_bytes - 7_000_000 < held + 1_000_000
    assert report.temporary == max(0, report.peak_bytes - report.accounted)


def test_the_report_sets_the_estimates_for_the_job_settings_and_the_same_batch_beside_it_with_differences():
    """`estimated` is what POST /v1/estimate answers for the job's settings (app/api/estimate.py: describe_anatomy,
    i.e. estimate_memory at tokens_per_batch in the precision); the differences compare the batch's estimate."""
    from app.services.job_submission import describe_anatomy

    report = memory_report(CONFIG, _batch(), TrainConfig(max_tokens_per_batch=512), CpuPeak())
    assert report["estimated"] == describe_anatomy(CONFIG, 512, "fp32")["memory"]
    assert report["estimated_for_batch"] == estimate_memory(CONFIG, B * S, precision="fp32")
    assert report["estimated"]["activations_bytes"] > report["estimated_for_batch"]["activations_bytes"]
    measured = report["measured"]
    assert measured["tokens_per_batch"] == 512 and set(measured["by_kind"]["activations"]) == {
        "attention_scores", "attention_softmax", "ffn_hidden", "logits", "other"}  # fmt: skip
    acts = sum(measured["by_kind"]["activations"].values())
    ratio = acts / report["estimated_for_batch"]["activations_bytes"]
    assert f"activations measured {acts / 2**20:.2f} MiB, {ratio:.2f}x the estimate" in report["differences"][0]
    est_logits = B * S * 2 * CONFIG.vocab_size * 4  # logits and log-softmax in fp32 for the batch's padded tokens
    assert (
        f"logits: none kept (the projection and the loss run fused, a chunk of rows at a time), where the "
        f"estimate counts {est_logits / 2**20:.2f} MiB" in "".join(report["differences"])
    )
    settings_total = report["estimated"]["training_total_bytes"] / 2**20
    assert report["differences"][-1].startswith(
        f"the estimate for the job's settings (512 tokens per batch, fp32) is {settings_total:.2f} MiB; "
        f"this batch has {B * S} padded tokens ({100 * B * S / 512:.0f}% of 512)"
    )


def test_measuring_leaves_the_random_state_and_the_model_as_they_were():
    torch.manual_seed(3)
    model = Transformer(CONFIG)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    measure_step(CONFIG, _batch(), TrainConfig(max_tokens_per_batch=512))
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_the_trainer_reports_the_memory_once_before_the_first_update_and_an_error_without_failing(monkeypatch):
    data = prepare("translation", reverse_task(60, vocab=12, min_len=2, max_len=8, seed=0), preset="tiny",
                   vocab_size=300, settings=DataSettings(max_length=16), seed=0)  # fmt: skip
    config = TrainConfig(
        max_steps=2,
        max_tokens_per_batch=64,
        warmup_steps=1,
        eval_every=100,
        eval_max_sentences=2,
        seed=0,
        eval_budget=None,
    )
    reports: list[dict] = []
    trainer_config = []
    monkeypatch.setattr("model.train.recorders.memory_report", lambda *a: trainer_config.append(a) or memory_report(*a))
    assert train(data, config, callbacks=Callbacks(on_memory=reports.append)).step == 2
    assert len(reports) == 1 and trainer_config[0][2] is config  # the job's own settings
    first = TokenBatcher(data.train_examples, 64, shuffle=True, seed=0).batch_indices()[0]
    assert (
        reports[0]["measured"]["batch"]["sentences"] == len(first) and reports[0]["measured"]["tokens_per_batch"] == 64
    )
    monkeypatch.setattr("model.train.recorders.memory_report", lambda *a: 1 / 0)
    assert train(data, config, callbacks=Callbacks(on_memory=reports.append)).step == 2
    assert reports[1] == {"error": "ZeroDivisionError: division by zero"}


def test_the_cpu_peak_is_the_largest_sum_of_the_allocations_alive_together():
    def run():
        a = torch.empty(1_000_000)  # 4 MB
        b = torch.empty(500_000)  # 2 MB: 6 MB alive
        del a
        c = torch.empty(750_000)  # 3 MB: 5 MB alive
        return b, c

    assert CpuPeak().measure(run) == 6_000_000


def test_only_whole_casts_or_views_of_a_parameter_count_as_autocast_weights():
    """The embedding sum also reaches a parameter through single-input nodes (add, scale, lookup) but is an
    activation; autocast's bf16 copy of a weight, transposed for the product, is a weight copy."""
    from model.train.memory_profile import _from_parameter

    model = Transformer(CONFIG)
    embedded = model.encoder.embed(torch.randint(5, 300, (2, 7)))
    assert not _from_parameter(embedded)
    assert _from_parameter(model.lm_head.weight.to(torch.bfloat16).t())
    assert not _from_parameter(model.lm_head.weight.to(torch.bfloat16)[:10])  # a slice: not the whole weight
