"""The default scale of the paper's rate follows the batch (model/train/budget.py batch_lr_scale): the square root
of the update's tokens over 3,072 below it, 1 from it on; a job's lr_scale or peak_lr still wins."""

from __future__ import annotations

import math

import pytest

from model.train.budget import REFERENCE_BATCH, batch_lr_scale
from model.train.config import TrainConfig


def test_below_the_reference_batch_the_rate_scales_by_the_square_root_and_from_it_on_it_is_the_papers():
    assert batch_lr_scale(1_536) == 0.71 and batch_lr_scale(768) == 0.5 and batch_lr_scale(1_024) == 0.58
    assert batch_lr_scale(REFERENCE_BATCH) == batch_lr_scale(25_000) == 1.0
    assert all(batch_lr_scale(b) <= batch_lr_scale(b + 128) for b in range(128, 4_000, 128))  # never falls
    with pytest.raises(ValueError, match="batch_tokens=0"):
        batch_lr_scale(0)


def test_a_config_without_lr_scale_takes_its_update_s_and_a_given_one_wins():
    small = TrainConfig(max_tokens_per_batch=1_536, warmup_steps=400)
    assert small.resolved_lr_scale == 0.71
    assert math.isclose(small.schedule(256).peak_lr, 0.71 * 256**-0.5 * 400**-0.5)
    assert TrainConfig(max_tokens_per_batch=768, grad_accum_steps=4).resolved_lr_scale == 1.0  # the update's tokens
    assert TrainConfig(max_tokens_per_batch=1_536, lr_scale=1.0).resolved_lr_scale == 1.0
    given_peak = TrainConfig(max_tokens_per_batch=1_536, warmup_steps=400, peak_lr=1e-3).schedule(256)
    assert math.isclose(given_peak.peak_lr, 1e-3)
