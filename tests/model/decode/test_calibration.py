"""The low-confidence threshold (model/decode/calibration.py): Otsu's cut of sentence chrF sorted by confidence,
within the flagged-share bounds, ties never split; and on a trained model, the flagged translations are the worse
ones."""

from __future__ import annotations

import random

import pytest

from model.data.demo import reverse_task
from model.decode.calibration import MAX_SHARE, MIN_SENTENCES, calibrate, calibrate_model, sentence_chrf, spearman
from tests.model.decode.test_beam import one_thread, reverse_model  # noqa: F401 (one_thread: autouse)


def test_the_threshold_falls_between_two_groups_of_quality():
    """30 sentences of confidence 0.2-0.3 and chrF about 20, 70 of confidence 0.7-0.9 and chrF about 80: the cut
    lies between the groups, flags exactly the first and reports their mean chrF."""
    rng = random.Random(0)
    low = [(rng.uniform(0.2, 0.3), rng.uniform(15, 25)) for _ in range(30)]
    high = [(rng.uniform(0.7, 0.9), rng.uniform(75, 85)) for _ in range(70)]
    pairs = rng.sample(low + high, 100)
    found = calibrate([c for c, _ in pairs], [q for _, q in pairs])
    assert found is not None
    assert max(c for c, _ in low) < found.threshold < min(c for c, _ in high)
    assert found.flagged_share == 0.3 and found.sentences == 100
    assert found.flagged_chrf == pytest.approx(sum(q for _, q in low) / 30)
    assert found.other_chrf == pytest.approx(sum(q for _, q in high) / 70)
    assert found.spearman is not None and found.spearman > 0.5  # ranks are random within each group


def test_the_flagged_share_stays_within_bounds_and_ties_are_never_split():
    """chrF falling steadily with confidence would be cut in the middle; a low group of 80% is held to MAX_SHARE;
    a tie straddling every admissible cut flags nothing rather than half of a value, and so does a chrF that is the
    same for every sentence."""
    steady = calibrate([i / 100 for i in range(100)], [float(i) for i in range(100)])
    assert steady is not None and steady.flagged_share == pytest.approx(0.5)
    mostly_bad = [0.1] * 80 + [0.9] * 20
    held = calibrate([c + i * 1e-6 for i, c in enumerate(mostly_bad)], [10.0] * 80 + [90.0] * 20)
    assert held is not None and held.flagged_share <= MAX_SHARE
    tied = calibrate([0.5] * 60, [float(i) for i in range(60)])
    assert tied is not None and tied.flagged_share == 0 and tied.flagged_chrf is None and tied.spearman is None
    assert not 0.5 < tied.threshold  # nothing at 0.5 is flagged
    alike = calibrate([i / 50 for i in range(50)], [100.0] * 50)
    assert alike is not None and alike.flagged_share == 0 and alike.threshold == 0.0


def test_the_rank_correlation_is_scipys_ties_included():
    from scipy.stats import spearmanr

    rng = random.Random(1)
    x = [round(rng.random(), 1) for _ in range(200)]  # many ties
    y = [v + rng.gauss(0, 0.3) for v in x]
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert spearman(x, [round(v) for v in y]) == pytest.approx(spearmanr(x, [round(v) for v in y]).statistic)
    assert spearman([1.0, 1.0], [1.0, 2.0]) is None


def test_too_few_sentences_calibrate_nothing_and_mismatched_lists_are_refused():
    assert calibrate([0.5] * (MIN_SENTENCES - 1), [50.0] * (MIN_SENTENCES - 1)) is None
    with pytest.raises(ValueError, match="3 confidences for 2 chrF"):
        calibrate([0.1, 0.2, 0.3], [1.0, 2.0])
    assert sentence_chrf("a b c", "a b c") == 100.0 and sentence_chrf("x", "a b c") < 10


def test_on_a_trained_model_flagged_translations_are_the_worse_ones():
    """The reversal model (trained on 3-8 symbols; on such held-out pairs every translation is right) calibrated on
    60 held-out pairs and 30 of 3-11 symbols, some longer than any it saw, which it gets wrong more often: the flag
    picks out the worse translations (flagged chrF 63 against 99 for the rest when written)."""
    model, tokenizer = reverse_model()
    pairs = reverse_task(60, max_len=8, seed=11) + reverse_task(30, max_len=11, seed=12)[:30]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    found = calibrate_model(model, tokenizer, sources, references)
    assert found is not None and found.sentences == 90 and 0 < found.flagged_share <= MAX_SHARE
    assert found.flagged_chrf < found.other_chrf - 10, found
    assert found.spearman is not None and found.spearman > 0.2, found
    assert calibrate_model(model, tokenizer, sources[:5], references[:5]) is None
