"""Mixed fine-tuning's rows: the new rows at the share asked, repeats never validated on, fixed by the seed."""

from __future__ import annotations

import pytest

from model.data.mixing import Chain, mix
from model.data.text_rows import TextRows


def test_chain_reads_its_parts_in_order_by_index_and_slice() -> None:
    chain = Chain([[1, 2], [], [3], [1, 2]])
    assert len(chain) == 5 and list(chain) == [1, 2, 3, 1, 2]
    assert [chain[i] for i in range(5)] == [1, 2, 3, 1, 2] and chain[-1] == 2
    assert chain[1:4] == [2, 3, 1] and chain[::2] == [1, 3, 2] and chain[4:9] == [2]
    with pytest.raises(IndexError):
        chain[5]


def test_new_rows_take_the_share_asked_among_a_sample_of_the_old(tmp_path) -> None:
    new = [(f"new {i}", f"neu {i}") for i in range(40)]
    old = TextRows.write(((f"old {i}", f"alt {i}") for i in range(3000)), 2, tmp_path)
    mixed = mix(new, old, 0.5, seed=1, old_cap=1000)
    assert mixed.valid is None and mixed.old_rows == 1000
    assert mixed.repeats == 25 and mixed.share == pytest.approx(0.5)
    rows = list(mixed.train)
    assert sum(r[0].startswith("new") for r in rows) == 1000
    assert len({r for r in rows if r[0].startswith("old")}) == 1000  # a sample, each old row once
    assert mix(new, old, 0.5, seed=1, old_cap=1000).train[:] == rows  # fixed by the seed
    assert mix(new, old, 0.5, seed=2, old_cap=1000).train[:] != rows
    assert mix(new, old, 0.2, seed=1, old_cap=1000).share == pytest.approx(0.2, abs=0.01)


def test_held_out_rows_come_from_both_sides_and_never_train(tmp_path) -> None:
    new = [(f"new {i}", f"neu {i}") for i in range(100)]
    old = [(f"old {i}", f"alt {i}") for i in range(500)]
    mixed = mix(new, old, 0.25, seed=3, hold_out=0.1)
    assert mixed.valid is not None
    held_new = [r for r in mixed.valid if r[0].startswith("new")]
    held_old = [r for r in mixed.valid if r[0].startswith("old")]
    assert len(held_new) == 10 and len(held_old) == 30  # the mix's proportions: 1 new to 3 old
    assert not set(mixed.valid) & set(mixed.train)
    assert {r for r in mixed.train if r[0].startswith("new")} == set(new) - set(held_new)


def test_a_few_new_rows_all_train_and_the_old_validate() -> None:
    new = [("a", "b"), ("c", "d")]
    mixed = mix(new, [(f"o{i}", f"p{i}") for i in range(50)], 0.5, seed=0, hold_out=0.05)
    assert mixed.valid and all(r[0].startswith("o") for r in mixed.valid)
    assert set(new) <= set(mixed.train)


def test_bad_shares_and_nothing_new_are_refused() -> None:
    for share in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="share"):
            mix([("a", "b")], [("c", "d")], share, seed=0)
    with pytest.raises(ValueError, match="no new rows"):
        mix([], [("c", "d")], 0.5, seed=0)


def test_the_distinct_rows_of_a_mix_count_each_repeated_part_once():
    """Rules sized by a corpus (the budget's vocabulary) see the data behind a mix, not its repeats."""
    from model.data.mixing import distinct_len

    new, old = [("n", str(i)) for i in range(100)], [("o", str(i)) for i in range(1000)]
    mixed = mix(new, old, 0.8, seed=0)
    assert mixed.repeats == 40 and len(mixed.train) == 40 * 100 + 1000
    assert distinct_len(mixed.train) == 100 + 1000
    assert distinct_len(new) == 100  # a plain sequence: its length
