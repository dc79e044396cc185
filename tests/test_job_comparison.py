"""app/services/job_comparison.py: flattening settings, the keys that differ, best and final values, ids asked for."""

from __future__ import annotations

import pytest

from app.services.job_comparison import best_and_final, better, differing, flatten, parse_ids


def test_flatten_joins_nested_keys_with_dots_and_keeps_lists_and_nulls_as_leaves():
    sections = {"model": {"d_model": 64, "dropout": None}, "training": {"max_tokens_per_batch": 4096, "x": [1, 2]}}
    assert flatten(sections) == {
        "model.d_model": 64,
        "model.dropout": None,
        "training.max_tokens_per_batch": 4096,
        "training.x": [1, 2],
    }
    assert flatten({"a": {"b": {"c": 1}}}) == {"a.b.c": 1}


def test_differing_lists_sorted_keys_not_equal_in_every_job_and_a_missing_key_as_none():
    a = {"model.d_model": 64, "training.seed": 1, "training.lr_scale": 1.0}
    b = {"model.d_model": 128, "training.seed": 1, "training.lr_scale": 1.0, "training.new": None}
    c = {"model.d_model": 64, "training.seed": 2, "training.lr_scale": 1.0, "training.old": 3}
    assert differing([a, b, c]) == ["model.d_model", "training.old", "training.seed"]
    assert differing([a, dict(a)]) == []


@pytest.mark.parametrize(
    ("name", "direction"),
    [
        ("train_loss", "min"),
        ("valid_loss", "min"),
        ("train_nll_loss", "min"),
        ("valid_ppl", "min"),
        ("bleu", "max"),
        ("chrf", "max"),
        ("masked_token_accuracy", "max"),
        ("exact_match", "max"),
        ("lr", None),
        ("grad_norm", None),
        ("tokens_per_second", None),
    ],
)
def test_which_value_is_better_is_decided_by_the_name(name, direction):
    assert better(name) == direction


def test_best_is_the_minimum_of_a_loss_and_the_maximum_of_a_score_earliest_on_ties():
    steps, values = [100, 200, 300, 400], [5.0, 3.0, 3.0, 4.0]
    assert best_and_final("valid_loss", steps, values) == {
        "best": 3.0,
        "best_step": 200,
        "final": 4.0,
        "final_step": 400,
    }
    assert best_and_final("bleu", steps, values) == {"best": 5.0, "best_step": 100, "final": 4.0, "final_step": 400}
    assert best_and_final("lr", steps, values) == {"best": None, "best_step": None, "final": 4.0, "final_step": 400}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a", "got 1"),
        ("", "got 0"),
        (",".join(str(i) for i in range(11)), "got 11"),
        ("a,b,a", "given more than once: a"),
    ],
)
def test_parse_ids_wants_two_to_ten_distinct_ids(text, message):
    with pytest.raises(ValueError, match=message):
        parse_ids(text)


def test_parse_ids_keeps_order_and_ignores_spaces_and_empty_parts():
    assert parse_ids(" b, a,,c ") == ["b", "a", "c"]
