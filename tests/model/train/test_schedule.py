"""Spec of what a step is made of: the paper's learning-rate schedule, the training config (its checks, JSON, old
configs, defaults), the label-smoothed loss, gradient accumulation and precision."""

import json

import pytest
import torch
import torch.nn.functional as F

from model.data.batching import Example, collate
from model.data.special_tokens import PAD_ID
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train.config import TrainConfig
from model.train.loss import label_smoothed_loss
from model.train.schedule import InverseSqrtSchedule, lambda_lr
from model.train.settings import MAX_KEEP_CHECKPOINTS
from model.train.step import accumulate_gradients, autocast_for, enable_tf32

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py


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
