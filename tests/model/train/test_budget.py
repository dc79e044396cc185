"""Settings chosen from a time budget (model/train/budget.py): the rule, its anchors, and that it is reproducible."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from model.train.budget import (
    AUTO_FIELDS,
    MIN_BATCH_TOKENS,
    MIN_WARMUP_TOKENS,
    TIME_BINDS_STEPS,
    BudgetInputs,
    choose,
    choose_vocabulary,
    choose_warmup,
    knee,
    largest_batch,
    training_seconds,
)

ALL = list(AUTO_FIELDS)
# The 20-minute CPU run of docs/learning-efficiency.md: 54,249 en-fr pairs, ~2,745 batch tokens/s.
MEASURED = BudgetInputs(max_minutes=20, training_pairs=54_249, longest_example=90, tokens_per_second=2745)


def test_the_measured_20_minute_run_gets_the_recipe_that_won_there():
    choice = choose(ALL, MEASURED)
    assert choice.chosen == {
        "vocab_size": 4000,
        "max_tokens_per_batch": 1536,
        "warmup_steps": 400,
        "max_steps": TIME_BINDS_STEPS,
    }
    assert 1900 <= choice.expected_updates <= 2100  # the run made 2,086 updates at 1,500 tokens
    assert set(choice.reasons) == set(ALL) and all(choice.reasons.values())
    assert choice.inputs["tokens_per_second"] == 2745 and choice.inputs["training_pairs"] == 54_249


def test_same_inputs_same_choice():
    assert choose(ALL, MEASURED).to_dict() == choose(ALL, BudgetInputs(**MEASURED.__dict__)).to_dict()


def test_a_longer_budget_or_a_faster_host_affords_larger_batches_and_more_updates():
    short, base = choose(ALL, BudgetInputs(**{**MEASURED.__dict__, "max_minutes": 10})), choose(ALL, MEASURED)
    long = choose(ALL, BudgetInputs(**{**MEASURED.__dict__, "max_minutes": 60}))
    fast = choose(ALL, BudgetInputs(**{**MEASURED.__dict__, "tokens_per_second": 10 * 2745}))
    assert short.chosen["max_tokens_per_batch"] == base.chosen["max_tokens_per_batch"] == MIN_BATCH_TOKENS
    for smaller, larger in ((short, base), (base, long), (base, fast)):
        assert smaller.chosen["max_tokens_per_batch"] <= larger.chosen["max_tokens_per_batch"]
        assert smaller.expected_updates < larger.expected_updates
        assert smaller.chosen["warmup_steps"] <= larger.chosen["warmup_steps"]
    assert all(c.chosen["max_tokens_per_batch"] % 128 == 0 for c in (short, base, long, fast))


def test_the_batch_holds_the_longest_example_and_fits_in_memory():
    tiny_budget = choose(
        ALL, BudgetInputs(max_minutes=0.5, training_pairs=1000, longest_example=40, tokens_per_second=500)
    )
    assert tiny_budget.chosen["max_tokens_per_batch"] == MIN_BATCH_TOKENS
    assert "smallest batch" in tiny_budget.reasons["max_tokens_per_batch"]
    assert tiny_budget.chosen["warmup_steps"] == 400  # 600k batch tokens before the rate peaks, 1,536 at a time
    long_sentences = choose(
        ALL, BudgetInputs(max_minutes=0.5, training_pairs=1000, longest_example=3000, tokens_per_second=500)
    )
    assert long_sentences.chosen["max_tokens_per_batch"] == 3000
    capped = choose(ALL, BudgetInputs(**{**MEASURED.__dict__, "tokens_per_second": 1e6, "max_batch_tokens": 4096}))
    assert capped.chosen["max_tokens_per_batch"] == 4096
    assert "memory" in capped.reasons["max_tokens_per_batch"]


def test_data_parallel_devices_share_the_batch():
    fast = {**MEASURED.__dict__, "tokens_per_second": 4 * 2745}
    one = choose(["max_tokens_per_batch"], BudgetInputs(**fast))
    four = choose(["max_tokens_per_batch"], BudgetInputs(**{**fast, "devices": 4}))
    # Four times the tokens: the global batch doubles (square root), split over four devices.
    assert four.chosen["max_tokens_per_batch"] == pytest.approx(one.chosen["max_tokens_per_batch"] / 2, abs=128)


def test_only_the_fields_left_out_are_chosen():
    choice = choose(["warmup_steps"], MEASURED, fixed={"max_tokens_per_batch": 4096})
    assert choice.chosen == {"warmup_steps": 150}  # 4,096-token batches: ~740 updates, a fifth of them
    assert choose(["vocab_size", "max_steps"], BudgetInputs(max_minutes=5, training_pairs=10)).chosen == {
        "vocab_size": 2000,
        "max_steps": TIME_BINDS_STEPS,
    }  # no throughput needed


@pytest.mark.parametrize(
    "fields, inputs, message",
    [
        (["d_model"], MEASURED, "cannot choose"),
        (["max_tokens_per_batch"], BudgetInputs(max_minutes=5, training_pairs=10), "tokens_per_second"),
    ],
)
def test_impossible_choices_name_the_problem(fields, inputs, message):
    with pytest.raises(ValueError, match=message):
        choose(fields, inputs)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="max_minutes"):
        BudgetInputs(max_minutes=0, training_pairs=10)
    with pytest.raises(ValueError, match="devices"):
        BudgetInputs(max_minutes=1, training_pairs=10, devices=0)


@pytest.mark.parametrize(
    "pairs, vocabulary", [(500, 2000), (54_249, 4000), (250_000, 8000), (1_000_000, 16000), (4_500_000, 32000)]
)
def test_vocabulary_grows_with_the_corpus(pairs, vocabulary):
    assert choose_vocabulary(pairs)[0] == vocabulary


@pytest.mark.parametrize(
    "pairs, languages, vocabulary", [(42_000, 4, 8000), (42_000, 3, 6000), (500, 5, 5000), (4_500_000, 6, 32000)]
)
def test_a_vocabulary_shared_by_more_languages_grows_with_them(pairs, languages, vocabulary):
    size, why = choose_vocabulary(pairs, languages)
    assert size == vocabulary and f"{languages} languages share it" in why
    assert choose(["vocab_size"], BudgetInputs(max_minutes=5, training_pairs=pairs, languages=languages)).chosen == {
        "vocab_size": vocabulary
    }
    with pytest.raises(ValueError, match="languages=1"):
        choose_vocabulary(pairs, 1)


@pytest.mark.parametrize("limit", [1, 127, 128, 1000, 5000, 65_536, 10**9])
def test_largest_batch_finds_the_boundary(limit):
    found = largest_batch(lambda tokens: tokens <= limit)
    expected = max(128, min(65_536, limit // 128 * 128))
    assert found == expected


def test_ten_minutes_warm_up_over_600k_batch_tokens_not_a_fifth_of_the_updates():
    """10 minutes at 2,194 batch tokens/s once chose 1,024-token batches and 250 warm-up updates (the paper's rate
    peaking at 4.0e-3 for small), which stalled at 2.5 BLEU; now 1,536-token batches warm up over 400 updates."""
    measured = BudgetInputs(max_minutes=10, training_pairs=56_523, longest_example=114, tokens_per_second=2193.7)
    choice = choose(ALL, measured)
    assert (choice.chosen["max_tokens_per_batch"], choice.chosen["warmup_steps"]) == (1536, 400)
    assert "600,000 batch tokens" in choice.reasons["warmup_steps"]
    assert 1536 * choice.chosen["warmup_steps"] >= MIN_WARMUP_TOKENS
    grown = choose(ALL, BudgetInputs(**{**MEASURED.__dict__, "max_minutes": 60}))
    assert grown.chosen["warmup_steps"] == round(grown.expected_updates / 5 / 50) * 50  # a fifth binds there
    assert choose(["warmup_steps"], MEASURED, fixed={"max_tokens_per_batch": 1024}).chosen["warmup_steps"] == 600


# A GPU's curve, injected: tokens/s grows 3.5 times from 2,048 to 8,192 tokens (+87% a doubling), then 14% more at
# 32,768 (+7% a doubling): the knee is 8,192.
CURVE = ((2048, 20_000.0), (8192, 70_000.0), (32768, 80_000.0))
GPU = BudgetInputs(
    max_minutes=10, training_pairs=54_249, longest_example=90, tokens_per_second=20_000, throughput_curve=CURVE
)


def _with(inputs: BudgetInputs, **changes) -> BudgetInputs:
    return BudgetInputs(**{**asdict(inputs), **changes})


def test_the_knee_is_where_tokens_per_second_stops_growing_by_15_percent_a_doubling():
    assert knee(CURVE) == 8192
    assert knee(((2048, 1.0), (8192, 4.0), (32768, 16.0))) == 32768  # still growing: the largest measured
    assert knee(((2048, 1.0), (8192, 1.3), (32768, 5.0))) == 2048  # +14% a doubling at once: the first stops it
    assert knee(((2048, 1.0), (8192, 0.9))) == 2048  # a dip is a stop
    assert knee(((2048, 1.0),)) == 2048


def test_on_a_gpu_curve_the_batch_is_at_least_the_knee_and_updates_use_its_throughput():
    choice = choose(ALL, GPU)
    square_root_only = choose(ALL, _with(GPU, throughput_curve=(), tokens_per_second=70_000))
    assert square_root_only.chosen["max_tokens_per_batch"] < 8192  # the rule alone would idle the device
    assert choice.chosen["max_tokens_per_batch"] == 8192
    assert choice.expected_updates == int(70_000 * training_seconds(GPU) / 8192)
    why = choice.reasons["max_tokens_per_batch"]
    assert "knee" in why and "2,048 tokens: 20,000/s" in why and "32,768: 80,000/s (+7% a doubling)" in why
    assert choice.inputs["throughput_curve"] == CURVE


def test_the_knee_is_capped_by_memory():
    capped = _with(GPU, max_batch_tokens=6144)
    choice = choose(ALL, capped)
    assert choice.chosen["max_tokens_per_batch"] == 6144
    assert choice.expected_updates == int(capped.throughput_at(6144) * training_seconds(capped) / 6144)
    assert "memory" in choice.reasons["max_tokens_per_batch"]


def test_a_flat_curve_has_its_knee_at_the_smallest_batch_and_leaves_the_square_root_rule_alone():
    flat = ((2048, 50_000.0), (8192, 50_000.0), (32768, 50_000.0))
    assert knee(flat) == 2048
    for minutes in (0.2, 10, 120):
        on_curve = _with(GPU, max_minutes=minutes, throughput_curve=flat, tokens_per_second=50_000)
        one_rate = _with(on_curve, throughput_curve=())
        assert choose(ALL, on_curve).chosen == choose(ALL, one_rate).chosen
    short = choose(ALL, _with(GPU, max_minutes=0.2, throughput_curve=flat, tokens_per_second=50_000))
    assert short.chosen["max_tokens_per_batch"] == MIN_BATCH_TOKENS  # below the knee at 2,048: not raised to it


def test_the_square_root_rule_wins_when_its_batch_is_larger_than_the_knee():
    long = _with(GPU, max_minutes=600)
    choice = choose(ALL, long)
    batch = choice.chosen["max_tokens_per_batch"]
    # Past the last point the throughput is taken as flat: sqrt(0.75 x 80,000 tokens/s x the seconds).
    assert batch == round(math.sqrt(0.75 * 80_000 * training_seconds(long)) / 128) * 128 > 8192
    assert choice.expected_updates == int(80_000 * training_seconds(long) / batch)
    assert "knee of the measured curve, 8,192, is smaller" in choice.reasons["max_tokens_per_batch"]


def test_the_warm_up_follows_the_knee_and_the_peak_rate_grows_as_the_root_of_the_batch():
    at_knee = choose(ALL, GPU)
    square_root_only = choose(ALL, _with(GPU, throughput_curve=(), tokens_per_second=70_000))
    batch, warmup = at_knee.chosen["max_tokens_per_batch"], at_knee.chosen["warmup_steps"]
    assert warmup == choose_warmup(at_knee.expected_updates, batch)[0]
    smaller, its_warmup = square_root_only.chosen["max_tokens_per_batch"], square_root_only.chosen["warmup_steps"]
    assert warmup < its_warmup
    # Eq. 3 peaks at d_model^-0.5 x warmup^-0.5: the larger batch's peak is higher by about sqrt(batch ratio).
    peak_ratio = math.sqrt(its_warmup / warmup)
    assert peak_ratio == pytest.approx(math.sqrt(batch / smaller), rel=0.03)


def test_a_chosen_warm_up_for_a_given_batch_reads_the_curve_at_that_batch():
    choice = choose(["warmup_steps"], GPU, fixed={"max_tokens_per_batch": 32768})
    expected = int(80_000 * training_seconds(GPU) / 32768)
    assert choice.expected_updates == expected
    assert choice.chosen["warmup_steps"] == choose_warmup(expected, 32768)[0]


def test_throughput_between_measured_batches_is_a_power_law_and_flat_past_the_ends():
    assert GPU.throughput_at(2048) == 20_000 and GPU.throughput_at(8192) == 70_000
    assert GPU.throughput_at(4096) == pytest.approx(math.sqrt(20_000 * 70_000))  # halfway in log
    assert GPU.throughput_at(1024) == 20_000 and GPU.throughput_at(65_536) == 80_000
    assert MEASURED.throughput_at(65_536) == MEASURED.tokens_per_second  # no curve: one rate


def test_a_recorded_curve_reads_back_to_the_same_choice():
    recorded = json.loads(json.dumps(choose(ALL, GPU).to_dict()))
    again = BudgetInputs(**recorded["inputs"])
    assert again == GPU
    assert choose(ALL, again).to_dict() == choose(ALL, GPU).to_dict()


@pytest.mark.parametrize(
    "curve", [((8192, 1.0), (2048, 2.0)), ((2048, 1.0), (2048, 2.0)), ((2048, 0.0), (8192, 1.0)), ((0, 1.0),)]
)
def test_a_curve_needs_positive_rates_at_ascending_batches(curve):
    with pytest.raises(ValueError, match="throughput_curve"):
        BudgetInputs(max_minutes=1, training_pairs=10, throughput_curve=curve)
