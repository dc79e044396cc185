"""The lexical association model that finds misaligned pairs (model/data/alignment.py)."""

import random

import pytest

from model.data.alignment import LexicalAssociations, Reservoir, fit_alignment, random_recall, words
from tests.model.corpus_fixture import lexicon_pairs, numbered


def test_a_reservoir_keeps_a_bounded_uniform_sample_deterministically():
    first, again = Reservoir(100, seed=3), Reservoir(100, seed=3)
    for i in range(10_000):
        first.add(i, f"s{i}", "t" * 1000)
        again.add(i, f"s{i}", "t" * 1000)
    assert first.rows == again.rows and len(first.rows) == 100 and first.seen == 10_000
    assert all(len(target) == 300 for _, _, target in first.rows)  # cut, to bound memory
    lines = sorted(line for line, _, _ in first.rows)
    assert lines[50] > 2000 and lines[-1] > 5000  # drawn from the whole stream, not its head


def test_words_are_lowercased_letter_or_digit_runs():
    assert words("The %s file, 2 of 3; the FILE again!") == ["the", "file", "2", "of", "3", "again"]


def test_shuffled_targets_score_below_the_threshold_and_translations_above():
    pairs = lexicon_pairs(600)
    rng = random.Random(0)
    moved = rng.sample(range(len(pairs)), 30)
    corrupted = list(pairs)
    for i, j in zip(moved, moved[1:] + moved[:1]):
        corrupted[i] = (pairs[i][0], pairs[j][1])
    model = fit_alignment(numbered(corrupted))
    flagged = {i for i, (s, t) in enumerate(corrupted) if model.is_misaligned(s, t)[0]}
    assert len(flagged & set(moved)) >= 25  # most of the 30
    assert len(flagged - set(moved)) <= 3  # few of the 570 translations


def test_a_pair_without_known_words_is_unscored():
    model = LexicalAssociations.fit(lexicon_pairs(300))
    assert model.score("zzz qqq", "xxx yyy") is None
    assert model.is_misaligned("zzz qqq", "xxx yyy") == (False, None)
    assert model.pairs == 300


def test_fitting_checks_its_vocabulary_size():
    with pytest.raises(ValueError, match="vocab=1"):
        LexicalAssociations.fit(lexicon_pairs(10), vocab=1)


def test_random_recall_is_the_share_of_the_corpus_s_own_random_pairings_that_are_flagged():
    pairs = lexicon_pairs(600)
    model = LexicalAssociations.fit(pairs)
    recall = random_recall(model, pairs)
    assert recall is not None and 0.8 <= recall <= 1
    assert random_recall(model, pairs[:50]) is None  # too few scored to divide by
