"""Spec of the training loop: schedule, loss, accumulation, stopping, callbacks, exact resume."""

import json
import math
import random
import shutil
from dataclasses import asdict, replace

import pytest
import torch
import torch.nn.functional as F

from model.data.batching import Example, collate
from model.data.demo import grammar_sentences, reverse_task
from model.data.objectives import mask_spans, mask_tokens
from model.data.special_tokens import EOS_ID, MASK_ID, PAD_ID
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import load_checkpoint
from model.io.checkpoint_files import list_checkpoints, step_dir
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train import trainer
from model.train import validation as evaluation
from model.train.config import TrainConfig, TrainingError
from model.train.events import Callbacks, CheckpointInfo, StepInfo
from model.train.loop import train
from model.train.loss import label_smoothed_loss
from model.train.prepare import PreparedData, prepare, split_validation
from model.train.schedule import InverseSqrtSchedule, lambda_lr
from model.train.settings import MAX_KEEP_CHECKPOINTS, DataSettings
from model.train.step import accumulate_gradients, autocast_for, enable_tf32
from model.train.validation import masked_positions


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models gain nothing from two threads, and lose a lot when other processes share the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def reverse_data() -> PreparedData:
    return prepare(
        "translation",
        reverse_task(300, vocab=12, min_len=2, max_len=8, seed=0),
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=16),
        seed=0,
    )


def quick_config(**overrides) -> TrainConfig:
    base = dict(
        max_steps=10,
        max_tokens_per_batch=256,
        warmup_steps=10,
        peak_lr=1e-3,
        eval_every=1000,
        checkpoint_every=1000,
        eval_max_sentences=8,
        keep_checkpoints=MAX_KEEP_CHECKPOINTS,  # every checkpoint these short runs write
        seed=0,
        eval_budget=None,  # every due evaluation runs, however long it takes
    )
    return TrainConfig(**{**base, **overrides})


# -- learning rate (Sec. 5.3, Eq. 3) --------------------------------------------------------------------------


def test_schedule_is_equation_3_and_peaks_at_warmup():
    s = InverseSqrtSchedule(d_model=512, warmup_steps=4000)
    for step in (1, 100, 3999, 4000, 4001, 100_000):
        assert s.lr(step) == pytest.approx(512**-0.5 * min(step**-0.5, step * 4000**-1.5), rel=1e-12)
    assert s.lr(4000) == pytest.approx(7.0e-4, rel=0.01) == s.peak_lr
    assert max(range(1, 20_000, 7), key=s.lr) in range(3994, 4001)
    assert s.lr(2000) == pytest.approx(s.lr(4000) / 2)  # linear warm-up
    assert s.lr(16_000) == pytest.approx(s.lr(4000) / 2)  # inverse square root decay


def test_peak_lr_parametrisation_gives_the_same_curve_scaled():
    s = InverseSqrtSchedule.from_peak_lr(1e-3, d_model=256, warmup_steps=100)
    assert s.peak_lr == pytest.approx(1e-3)
    paper = InverseSqrtSchedule(256, 100)
    assert s.lr(37) / paper.lr(37) == pytest.approx(s.lr(5000) / paper.lr(5000))
    assert InverseSqrtSchedule.from_state_dict(s.state_dict()) == s
    with pytest.raises(ValueError, match="warmup_steps"):
        InverseSqrtSchedule(256, 0)


def test_lambda_lr_follows_the_schedule_from_step_1():
    s = InverseSqrtSchedule(64, warmup_steps=4, scale=2.0)
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    scheduler = lambda_lr(optimizer, s)
    seen = []
    for _ in range(6):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([s.lr(k) for k in range(1, 7)])


# -- configuration --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_steps", 0),
        ("max_minutes", -1.0),
        ("max_tokens_per_batch", 0),
        ("grad_accum_steps", 0),
        ("warmup_steps", 0),
        ("peak_lr", 0.0),
        ("label_smoothing", 1.0),
        ("clip_norm", -1.0),
        ("adam_betas", (0.9,)),
        ("adam_eps", 0.0),
        ("weight_decay", -0.1),
        ("eval_every", 0),
        ("eval_budget", 0.0),
        ("eval_budget", 1.5),
        ("early_stopping_patience", 0),
        ("keep_checkpoints", 0),
        ("average_last", -1),
        ("device", "gpu"),
        ("precision", "fp16"),
        ("compile", "yes"),
        ("eval_max_sentences", 0),
        ("seed", 1.5),
    ],
)
def test_train_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**{field: value})


def test_train_config_round_trips_through_json_and_refuses_unknown_keys():
    cfg = TrainConfig(peak_lr=5e-4, average_last=3, max_minutes=1.5)
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="lr_scale.*peak_lr"):
        TrainConfig(lr_scale=1.0, peak_lr=1e-3)
    with pytest.raises(ValueError, match="average_last"):
        TrainConfig(average_last=6, keep_checkpoints=5)
    with pytest.raises(ValueError, match="learning_rate"):
        TrainConfig.from_dict({"learning_rate": 1.0})


def test_default_schedule_is_the_papers():
    assert TrainConfig(warmup_steps=4000).schedule(512) == InverseSqrtSchedule(512, 4000, 1.0)
    assert TrainConfig(peak_lr=1e-3, warmup_steps=10).schedule(64).peak_lr == pytest.approx(1e-3)


# -- loss and accumulation ------------------------------------------------------------------------------------


def test_label_smoothed_loss_ignores_pad_and_matches_torch():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=g)
    target = torch.tensor([[5, 6, 7, PAD_ID, PAD_ID], [8, 9, PAD_ID, PAD_ID, PAD_ID], [5, 5, 5, 5, 5]])
    loss, nll = label_smoothed_loss(logits, target, 0.1, ignore_index=PAD_ID)
    keep = target != PAD_ID
    loss_real, nll_real = label_smoothed_loss(logits[keep], target[keep], 0.1)
    assert loss == pytest.approx(loss_real.item()) and nll == pytest.approx(nll_real.item())
    expected = F.cross_entropy(
        logits.flatten(0, 1), target.flatten(), ignore_index=PAD_ID, label_smoothing=0.1, reduction="sum"
    )
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert nll.item() == pytest.approx(F.cross_entropy(logits[keep], target[keep], reduction="sum").item(), rel=1e-6)
    changed = logits.clone()
    changed[~keep] = 100.0  # whatever the model says at pad positions does not matter
    assert label_smoothed_loss(changed, target, 0.1, PAD_ID)[0].item() == pytest.approx(loss.item())


def test_gradient_accumulation_of_two_halves_equals_one_full_batch():
    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset("tiny", 40, dropout=0.0))
    examples = [Example([5 + i % 30, 6 + i % 20, 7 + i], [8 + i, 9, 10 + i % 25][: 1 + i % 3]) for i in range(8)]

    def grads(batches):
        model.zero_grad(set_to_none=True)
        loss, _, n = accumulate_gradients(model, batches, smoothing=0.1)
        return float(loss) / n, {k: p.grad.clone() for k, p in model.named_parameters()}

    full_loss, full = grads([collate(examples)])
    half_loss, halves = grads([collate(examples[:3]), collate(examples[3:])])  # unequal token counts
    assert half_loss == pytest.approx(full_loss, rel=1e-5)
    for name in full:
        torch.testing.assert_close(halves[name], full[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_bf16_autocast_is_the_same_code_on_cpu_and_cuda():
    for device in (torch.device("cpu"), torch.device("cuda")):
        bf16 = autocast_for(device, "bf16")
        assert isinstance(bf16, torch.autocast) and bf16.device == device.type and bf16.fast_dtype == torch.bfloat16
        assert not isinstance(autocast_for(device, "fp32"), torch.autocast)
    with autocast_for(torch.device("cpu"), "bf16"):
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="'fp16'"):
        autocast_for(torch.device("cpu"), "fp16")


def test_precision_defaults_to_bf16_on_a_gpu_and_fp32_on_a_cpu():
    assert TrainConfig(device="cpu").resolved_precision == "fp32"
    assert TrainConfig(device="cuda:1").resolved_precision == "bf16"
    assert TrainConfig(device="cuda", precision="fp32").resolved_precision == "fp32"
    assert TrainConfig(device="cpu", precision="bf16").resolved_precision == "bf16"


def test_configs_saved_with_the_old_bf16_flag_still_load():
    assert TrainConfig.from_dict({"bf16": True}).precision is None  # "bf16 on a GPU": today's default
    assert TrainConfig.from_dict({"bf16": False}).precision == "fp32"
    assert TrainConfig.from_dict({"bf16": True, "precision": "fp32"}).precision == "fp32"


def test_a_config_saved_by_the_old_trainer_with_its_paper_defaults_still_loads():
    """What a checkpoint of TrainConfig() held before the trainer took the product's defaults (model/train/settings.py):
    every value is kept; average_last 0 and keep_checkpoints None, outside today's bounds, keep their meaning."""
    old = {
        "max_steps": 100_000, "max_minutes": None, "max_tokens_per_batch": 4096, "grad_accum_steps": 1,
        "warmup_steps": 4000, "lr_scale": None, "peak_lr": None, "label_smoothing": 0.1, "clip_norm": 1.0,
        "adam_betas": [0.9, 0.98], "adam_eps": 1e-9, "weight_decay": 0.0, "seed": 0, "eval_every": 1000,
        "eval_budget": None, "checkpoint_every": 1000, "early_stopping_patience": None, "keep_checkpoints": None,
        "average_last": 0, "device": "cpu", "bf16": True, "eval_max_sentences": 200,
    }  # fmt: skip
    config = TrainConfig.from_dict(old)
    assert (config.max_steps, config.warmup_steps, config.seed, config.eval_every, config.checkpoint_every) == (
        100_000, 4000, 0, 1000, 1000,
    )  # fmt: skip
    assert config.eval_budget is None and config.precision is None and config.adam_betas == (0.9, 0.98)
    assert config.average_last == 1  # 0 and 1 both meant "no averaging"
    assert config.keep_checkpoints == MAX_KEEP_CHECKPOINTS  # None kept every one
    assert config.dynamics_every == 25 and config.compile is None  # saved before they existed: the defaults


def test_the_trainer_defaults_are_the_products():
    """One set of defaults: a TrainConfig built without arguments trains as a job that leaves every field out."""
    from model.train.settings import TrainSettings

    assert {name: getattr(TrainConfig(), name) for name in TrainSettings.model_fields} == TrainSettings().model_dump()
    assert (TrainConfig().max_steps, TrainConfig().warmup_steps, TrainConfig().seed) == (2000, 400, 1)


def test_tf32_is_enabled_for_gpus_only():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        assert enable_tf32(torch.device("cpu")) is False and torch.backends.cuda.matmul.allow_tf32 is False
        assert enable_tf32(torch.device("cuda", 0)) is True  # only flags: no GPU is touched
        assert torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# -- stopping and callbacks -----------------------------------------------------------------------------------


def test_max_steps_is_respected_and_step_reports_are_plain(reverse_data):
    infos: list[StepInfo] = []
    result = train(reverse_data, quick_config(max_steps=7), callbacks=Callbacks(on_step=infos.append))
    assert result.stop_reason == "max_steps" and result.step == 7
    assert [i.step for i in infos] == list(range(1, 8))
    assert all(i.total_steps == 7 for i in infos)
    assert infos[-1].eta_seconds == 0.0 and infos[0].eta_seconds > 0
    assert infos[4].lr == pytest.approx(TrainConfig(peak_lr=1e-3, warmup_steps=10).schedule(64).lr(5))
    for info in infos:
        assert info.tokens_per_second > 0 and info.grad_norm > 0 and math.isfinite(info.loss)
        json.dumps(asdict(info))  # plain numbers, ready for a database row
    assert result.losses == [i.loss for i in infos]


def test_should_stop_stops_within_one_step(reverse_data):
    steps: list[int] = []
    result = train(
        reverse_data,
        quick_config(max_steps=100),
        callbacks=Callbacks(on_step=lambda i: steps.append(i.step), should_stop=lambda: len(steps) >= 3),
    )
    assert result.stop_reason == "cancelled"
    assert steps == [1, 2, 3] and result.step == 3
    assert result.model_checkpoint is None  # a cancelled run spends no time on a final checkpoint


def test_max_minutes_is_respected(reverse_data):
    result = train(reverse_data, quick_config(max_steps=100_000, max_minutes=0.5 / 60))
    assert result.stop_reason == "max_minutes"
    assert 0 < result.step < 100_000
    assert result.elapsed < 0.5 + 10  # the last step and the final evaluation finish after the limit


def test_early_stopping_after_patience_evaluations_without_improvement(reverse_data, monkeypatch):
    losses = iter([3.0, 2.0, 2.5, 2.1, 2.0, 1.0])  # best at the 2nd evaluation, then 3 without improvement
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {"loss": next(losses)})
    evals: list[tuple[int, dict]] = []
    result = train(
        reverse_data,
        quick_config(max_steps=100, eval_every=2, early_stopping_patience=3),
        callbacks=Callbacks(on_eval=lambda step, m: evals.append((step, m))),
    )
    assert result.stop_reason == "early_stopping"
    assert result.step == 10 and [s for s, _ in evals] == [2, 4, 6, 8, 10]
    assert result.best_valid_loss == 2.0 and result.best_step == 4


def test_eval_every_minutes_evaluates_by_training_time_whatever_the_pace(reverse_data, monkeypatch):
    """A clock where each step takes 25 s of training: with eval_every_minutes=1 and eval_every out of reach, an
    evaluation falls on the first step at least 60 s after the last one (steps 3, 6, 9), and the last step is
    still evaluated; without it, only the last."""
    updates = [0]
    real_step = trainer.Trainer._step

    def counted_step(self, *args, **kwargs):
        updates[0] += 1
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(trainer.Trainer, "_step", counted_step)
    monkeypatch.setattr(trainer, "elapsed_clock", lambda before: lambda: before + 25.0 * updates[0])
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {"loss": 1.0})
    steps: list[int] = []
    train(
        reverse_data,
        quick_config(max_steps=10, eval_every_minutes=1),
        callbacks=Callbacks(on_eval=lambda s, m: steps.append(s)),
    )
    assert steps == [3, 6, 9, 10]
    steps.clear()
    updates[0] = 0
    train(reverse_data, quick_config(max_steps=10), callbacks=Callbacks(on_eval=lambda s, m: steps.append(s)))
    assert steps == [10]


def test_evaluation_reports_validation_loss_perplexity_bleu_and_chrf(reverse_data):
    evals: list[tuple[int, dict]] = []
    train(
        reverse_data,
        quick_config(max_steps=4, eval_every=2),
        callbacks=Callbacks(on_eval=lambda s, m: evals.append((s, m))),
    )
    assert [s for s, _ in evals] == [2, 4]
    metrics = evals[-1][1]
    assert {"loss", "perplexity", "token_accuracy", "bleu", "chrf", "exact_match"} <= set(metrics)
    assert metrics["perplexity"] == pytest.approx(math.exp(metrics["loss"]))
    assert 0 <= metrics["bleu"] <= 100 and 0 <= metrics["chrf"] <= 100


def test_evaluation_stays_within_its_budget_of_wall_clock_time(reverse_data, monkeypatch):
    """An evaluation longer than a step, due every step: with a 20% budget some are skipped, the time spent
    stays within the budget (the first evaluation aside), the last step is still evaluated, and eval_seconds is
    the running total reported with each evaluation. How many fit depends on the step's time on this machine
    (a loaded one fits more), so the count is bounded by the budget over the measured time."""
    import time as time_module

    def slow_evaluate(*args, **kwargs):
        time_module.sleep(0.05)
        return {"loss": 1.0}

    monkeypatch.setattr(trainer, "evaluate", slow_evaluate)
    evals: list[tuple[int, dict]] = []
    result = train(
        reverse_data,
        quick_config(max_steps=60, eval_every=1, eval_budget=0.2),
        callbacks=Callbacks(on_eval=lambda s, m: evals.append((s, dict(m)))),
    )
    steps = [s for s, _ in evals]
    assert steps[0] == 1 and steps[-1] == 60 and 2 < len(steps) < 60
    assert len(steps) <= 2 + 0.2 * result.elapsed / 0.05
    spent = evals[-1][1]["eval_seconds"]
    assert spent == pytest.approx(0.05 * len(steps), rel=0.5)
    assert spent <= 0.2 * result.elapsed + 0.05 + 0.02
    assert [m["eval_seconds"] for _, m in evals] == sorted(m["eval_seconds"] for _, m in evals)


def test_without_a_budget_every_due_evaluation_runs(reverse_data, monkeypatch):
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {"loss": 1.0})
    evals: list[int] = []
    train(
        reverse_data,
        quick_config(max_steps=12, eval_every=3, eval_budget=None),
        callbacks=Callbacks(on_eval=lambda s, m: evals.append(s)),
    )
    assert evals == [3, 6, 9, 12]


def test_denoising_evaluation_reports_masked_token_accuracy():
    data = prepare(
        "denoising",
        grammar_sentences(200, seed=0),
        preset="tiny",
        vocab_size=450,
        settings=DataSettings(max_length=16, noise="token"),
        seed=0,
    )
    evals: list[dict] = []
    train(data, quick_config(max_steps=2, eval_every=2), callbacks=Callbacks(on_eval=lambda s, m: evals.append(m)))
    assert "masked_token_accuracy" in evals[0] and "bleu" not in evals[0]


class WrongAtMasks(torch.nn.Module):
    """Predicts every next target token, except at the positions hidden behind <mask>: there it says <mask>."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.config = ModelConfig.from_preset("tiny", vocab_size)
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        B, T = tgt_in.shape
        logits = torch.zeros(B, T, self.config.vocab_size)
        for b in range(B):
            tgt = [t for t in tgt_in[b, 1:].tolist() if t != PAD_ID] + [EOS_ID]  # tgt_out without padding
            hidden = masked_positions([t for t in src[b].tolist() if t != PAD_ID], tgt, MASK_ID)
            for j, t in enumerate(tgt):
                logits[b, j, MASK_ID if j in hidden else t] = 1.0
        return logits


def test_masked_token_accuracy_counts_exactly_the_hidden_positions():
    rng = random.Random(0)
    examples = [
        Example(*mask_spans([rng.randint(5, 30) for _ in range(rng.randint(2, 15))], MASK_ID, rng, 0.3))
        for _ in range(20)
    ]
    metrics = evaluation.evaluate(WrongAtMasks(32), "denoising", [collate(examples[:9]), collate(examples[9:])], None)
    n_tokens = sum(len(e.tgt_ids) + 1 for e in examples)
    n_hidden = sum(len(e.tgt_ids) - len(e.src_ids) + e.src_ids.count(MASK_ID) for e in examples)
    assert metrics["masked_token_accuracy"] == 0.0
    assert metrics["token_accuracy"] == pytest.approx(1 - n_hidden / n_tokens)


def test_checkpoints_rotate_keep_the_best_and_average_the_last(reverse_data, tmp_path, monkeypatch):
    losses = iter([1.0, 2.0, 3.0, 4.0, 5.0])  # the first checkpoint stays the best
    monkeypatch.setattr(trainer, "evaluate", lambda *a, **k: {"loss": next(losses, 9.0)})
    infos: list[CheckpointInfo] = []
    result = train(
        reverse_data,
        quick_config(max_steps=10, checkpoint_every=2, keep_checkpoints=2, average_last=2),
        tmp_path,
        Callbacks(on_checkpoint=infos.append),
    )
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000002", "step-00000008", "step-00000010"]
    assert [(i.step, i.kind) for i in infos] == [
        (2, "step"),
        (4, "step"),
        (6, "step"),
        (8, "step"),
        (10, "step"),
        (10, "averaged"),
    ]
    assert result.best_checkpoint == str(step_dir(tmp_path, 2))
    assert result.averaged_checkpoint == result.model_checkpoint == str(tmp_path / "averaged-00000010")
    assert load_checkpoint(result.averaged_checkpoint).meta["averaged_from"] == ["step-00000008", "step-00000010"]
    for info in infos:
        json.dumps(asdict(info))
        assert len(info.sha256) == 64 and info.size_bytes > 0


# -- data preparation -----------------------------------------------------------------------------------------


def test_validation_split_is_deterministic_and_disjoint():
    rows = [(f"s{i}", f"t{i}") for i in range(100)]
    train_rows, valid_rows = split_validation(rows, 0.1, 1000, seed=3)
    assert len(valid_rows) == 10 and set(train_rows).isdisjoint(valid_rows)
    assert split_validation(rows, 0.1, 1000, seed=3) == (train_rows, valid_rows)
    assert split_validation(rows, 0.1, 1000, seed=4)[1] != valid_rows
    assert len(split_validation(rows, 0.5, 7, seed=3)[1]) == 7


def test_prepare_trains_the_tokenizer_and_sizes_the_model(reverse_data):
    assert reverse_data.model_config.vocab_size == reverse_data.tokenizer.vocab_size
    assert reverse_data.stats["train_examples"] + reverse_data.stats["valid_examples"] == 300
    data = prepare(
        "translation",
        reverse_task(50, seed=0),
        preset="tiny",
        model_overrides={"d_model": 32},
        tokenizer=reverse_data.tokenizer,
    )
    assert data.tokenizer is reverse_data.tokenizer and data.model_config.d_model == 32


@pytest.mark.parametrize(
    "objective, rows, kwargs, message",
    [
        ("translation", [("a b", "b a")], {}, "at least 2 rows"),
        ("translation", [], {}, "train_rows is empty"),
        ("translation", [("a", "")] * 5, {}, r"train_rows\[0\] must be a \(source, target\) pair"),
        ("denoising", [("a", "b")] * 5, {}, r"train_rows\[0\] must be a non-empty string"),
        (
            "translation",
            [("a b c d e f g h", "x")] * 10,
            {"settings": DataSettings(max_length=4)},
            "no training examples left.*max_length=4",
        ),
        ("translation", [("a", "b")] * 10, {"vocab_size": 100}, "vocab_size=100"),
        ("translation", [("a", "b")] * 10, {"model_overrides": {"d_model": 30}}, "invalid model config.*d_model=30"),
        ("summarize", [("a", "b")] * 10, {}, "objective"),
    ],
)
def test_prepare_refuses_bad_data_with_a_readable_message(objective, rows, kwargs, message):
    with pytest.raises(TrainingError, match=message):
        prepare(objective, rows, preset="tiny", **{"vocab_size": 300, **kwargs})


def test_a_batch_limit_smaller_than_one_example_is_a_training_error(reverse_data):
    long = Example(list(range(5, 45)), list(range(5, 45)))  # 41 padded tokens: more than the smallest limit, 32
    with pytest.raises(TrainingError, match="max_tokens_per_batch=32"):
        train(replace(reverse_data, train_examples=[long] * 4), quick_config(max_tokens_per_batch=32))


def test_masked_positions_recover_token_and_span_noise():
    rng = random.Random(0)
    for _ in range(200):
        ids = [rng.randint(5, 9) for _ in range(rng.randint(1, 20))]  # few symbols: many ambiguous matches
        src, tgt = mask_tokens(ids, MASK_ID, rng, 0.3)
        assert masked_positions(src, tgt, MASK_ID) == [i for i, t in enumerate(src) if t == MASK_ID]
        src, tgt = mask_spans(ids, MASK_ID, rng, 0.3, 2.0)
        hidden = set(masked_positions(src, tgt, MASK_ID))
        # Spans never touch, so replacing each run of hidden positions by one <mask> gives the source back.
        rebuilt = [MASK_ID if i in hidden else t for i, t in enumerate(tgt) if not (i in hidden and i - 1 in hidden)]
        assert rebuilt == src


# -- exact resume ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("objective", ["translation", "denoising"])
def test_resumed_training_is_identical_to_an_uninterrupted_run(objective, tmp_path):
    """Train 12 steps with a checkpoint at 5; a fresh run resumed from it repeats steps 6-12 bit for bit.

    Dropout is on, epochs end mid-run and updates accumulate two micro-batches, so the batch position,
    the per-epoch noise and the RNG states must all be restored.
    """
    if objective == "translation":
        rows = reverse_task(120, vocab=12, min_len=2, max_len=8, seed=0)
    else:
        rows = grammar_sentences(120, seed=0)
    overrides = {"dropout": 0.2, "attention_dropout": 0.1}

    def data(tokenizer: Tokenizer | None = None) -> PreparedData:
        return prepare(
            objective,
            rows,
            preset="tiny",
            model_overrides=overrides,
            vocab_size=300,
            settings=DataSettings(max_length=40),
            seed=1,
            tokenizer=tokenizer,
        )

    cfg = quick_config(max_steps=12, checkpoint_every=5, eval_every=5, grad_accum_steps=2, max_tokens_per_batch=128)
    first: list[StepInfo] = []
    train(data(), cfg, tmp_path / "a", Callbacks(on_step=first.append))
    assert first[-1].epoch >= 1  # the run crossed an epoch boundary

    shutil.copytree(step_dir(tmp_path / "a", 5), step_dir(tmp_path / "b", 5))
    second: list[StepInfo] = []
    result = train(
        data(Tokenizer.load(step_dir(tmp_path / "b", 5))), cfg, tmp_path / "b", Callbacks(on_step=second.append)
    )
    assert [i.step for i in second] == list(range(6, 13))
    assert [i.loss for i in second] == [i.loss for i in first[5:]]
    assert [i.grad_norm for i in second] == [i.grad_norm for i in first[5:]]
    a = load_checkpoint(step_dir(tmp_path / "a", 12)).model_state
    b = load_checkpoint(result.last_checkpoint).model_state
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_preemption_checkpoints_the_current_step_and_the_resumed_run_loses_no_step(tmp_path):
    """Fault: the process is told to go away at step 7 (checkpoints every 5). Pass: a checkpoint of step 7 is
    written at once (no final evaluation, no averaging), and a run resumed from it repeats steps 8-12 exactly
    as an uninterrupted run does: no step is lost or repeated."""
    rows = reverse_task(120, vocab=12, min_len=2, max_len=8, seed=0)

    def data(tokenizer: Tokenizer | None = None) -> PreparedData:
        return prepare(
            "translation",
            rows,
            preset="tiny",
            model_overrides={"dropout": 0.2},
            vocab_size=300,
            settings=DataSettings(max_length=40),
            seed=1,
            tokenizer=tokenizer,
        )

    cfg = quick_config(max_steps=12, checkpoint_every=5, eval_every=5, max_tokens_per_batch=128, average_last=2)
    whole: list[StepInfo] = []
    train(data(), cfg, tmp_path / "whole", Callbacks(on_step=whole.append))

    first: list[StepInfo] = []
    evals: list[int] = []
    result = train(
        data(),
        cfg,
        tmp_path / "cut",
        Callbacks(on_step=first.append, on_eval=lambda s, _: evals.append(s), should_preempt=lambda: len(first) >= 7),
    )
    assert result.stop_reason == "preempted" and result.step == 7
    assert evals == [5] and result.averaged_checkpoint is None
    assert [p.name for p in list_checkpoints(tmp_path / "cut")] == [
        step_dir(tmp_path, 5).name,
        step_dir(tmp_path, 7).name,
    ]
    assert result.last_checkpoint == str(step_dir(tmp_path / "cut", 7))

    second: list[StepInfo] = []
    train(data(Tokenizer.load(result.last_checkpoint)), cfg, tmp_path / "cut", Callbacks(on_step=second.append))
    assert [i.step for i in second] == list(range(8, 13))
    assert [i.loss for i in first + second] == [i.loss for i in whole]


def test_resume_refuses_a_checkpoint_of_another_objective(reverse_data, tmp_path):
    train(reverse_data, quick_config(max_steps=2, checkpoint_every=2), tmp_path)
    data = prepare("denoising", grammar_sentences(50), preset="tiny", tokenizer=reverse_data.tokenizer)
    with pytest.raises(TrainingError, match="translation"):
        train(data, quick_config(max_steps=4), tmp_path)


@pytest.mark.parametrize("kind", ["bpe", "unigram", "byte_bpe"])
def test_prepare_trains_the_tokenizer_kind_asked_for(kind):
    data = prepare(
        "translation",
        reverse_task(200, vocab=12, min_len=2, max_len=8, seed=0),
        preset="tiny",
        vocab_size=300,
        settings=DataSettings(max_length=16, tokenizer=kind),
        seed=0,
    )
    assert data.tokenizer.kind == kind and data.model_config.vocab_size == data.tokenizer.vocab_size


def test_an_unknown_tokenizer_kind_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="tokenizer"):
        DataSettings(max_length=16, tokenizer="sentencepiece")
