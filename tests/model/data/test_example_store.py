"""Examples as flat arrays (model/data/example_store.py): the same examples, lengths and batches as a list."""

import random

import numpy as np
import pytest

from model.data.batching import Example, TokenBatcher, example_lengths, example_sizes, plan_batches
from model.data.example_store import ExampleStore, TokenStore


def _examples(n: int, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    return [
        Example(
            np.array([rng.randrange(4, 300) for _ in range(rng.randint(0, 12))], dtype=np.uint16),
            np.array([rng.randrange(4, 300) for _ in range(rng.randint(1, 12))], dtype=np.uint16),
        )
        for _ in range(n)
    ]


def test_a_store_built_in_chunks_holds_the_examples_in_order():
    examples = _examples(50)
    store = ExampleStore.build([examples[:7], [], examples[7:30], examples[30:]], np.uint16)
    assert len(store) == 50 and list(store) == examples and store[-1] == examples[-1] and store[3:6] == examples[3:6]
    assert store.src.ids.dtype == np.uint16 and store.src[4].base is not None  # a view, not a copy
    assert store.nbytes == sum(len(e.src_ids) + len(e.tgt_ids) for e in examples) * 2 + 2 * 51 * 8
    with pytest.raises(IndexError, match="example 50 of 50"):
        store[50]


def test_an_empty_store_and_mismatched_sides():
    empty = ExampleStore.build([], np.uint16)
    assert len(empty) == 0 and list(empty) == [] and example_sizes(empty).shape == (0,)
    with pytest.raises(ValueError, match="3 sources but 2 targets"):
        ExampleStore(TokenStore.concat([np.zeros(1)] * 3, np.uint16), TokenStore.concat([np.zeros(1)] * 2, np.uint16))


def test_lengths_come_from_the_offsets_and_match_the_examples():
    examples = _examples(40, seed=1)
    store = ExampleStore.build([examples], np.uint16)
    for ours, theirs in zip(example_lengths(store), example_lengths(examples)):
        assert np.array_equal(ours, theirs)
    assert example_sizes(store).tolist() == [e.size for e in examples]


def _reference_plan(examples, max_tokens, rng, bucket_tokens):
    """plan_batches as first written, with Python's sort on (size, target, source) tuples."""
    order = list(range(len(examples)))
    if rng is not None:
        rng.shuffle(order)
    keys = [(e.size, len(e.tgt_ids), len(e.src_ids)) for e in examples]
    buckets, bucket, total = [], [], 0
    for i in order:
        bucket.append(i)
        total += keys[i][0]
        if total >= bucket_tokens:
            buckets.append(bucket)
            bucket, total = [], 0
    buckets += [bucket] if bucket else []
    batches = []
    for bucket in buckets:
        bucket.sort(key=keys.__getitem__)
        batch, longest = [], 0
        for i in bucket:
            if batch and (len(batch) + 1) * max(longest, keys[i][0]) > max_tokens:
                batches.append(batch)
                batch, longest = [], 0
            batch.append(i)
            longest = max(longest, keys[i][0])
        batches += [batch] if batch else []
    if rng is not None:
        rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("shuffle", [True, False])
def test_batches_of_a_store_are_the_batches_of_first_writing(shuffle):
    examples = _examples(2000, seed=2)
    store = ExampleStore.build([examples[:999], examples[999:]], np.uint16)
    rng = (lambda: random.Random(5)) if shuffle else (lambda: None)
    expected = _reference_plan(examples, 64, rng(), 4 * 64)
    assert plan_batches(store, 64, rng(), bucket_batches=4) == expected
    assert plan_batches(examples, 64, rng(), bucket_batches=4) == expected


def test_a_batcher_keeps_a_store_and_names_an_example_too_big():
    examples = _examples(30, seed=3)
    store = ExampleStore.build([examples], np.uint16)
    batcher = TokenBatcher(store, 64, seed=1)
    assert batcher.examples() is store
    assert [b.indices for b in TokenBatcher(store, 64, seed=1)] == [
        b.indices for b in TokenBatcher(examples, 64, seed=1)
    ]
    with pytest.raises(ValueError, match=r"example \d+ needs 13 tokens > max_tokens=12"):
        TokenBatcher(store, 12).batch_indices()


def test_selecting_sequences_keeps_their_ids_in_order():
    sequences = [np.array(s, dtype=np.uint16) for s in ([5, 6], [], [7], [8, 9, 10], [])]
    store = TokenStore.concat(sequences, np.uint16)
    kept = store.select(store.lengths > 0)
    assert [t.tolist() for t in kept] == [[5, 6], [7], [8, 9, 10]] and kept.ids.dtype == np.uint16
    assert len(store.select(np.zeros(5, dtype=bool))) == 0


def test_taking_and_joining_examples_keeps_their_ids_repeats_included():
    examples = _examples(30, seed=4)
    first, second = ExampleStore.build([examples[:12]], np.uint16), ExampleStore.build([examples[12:]], np.uint16)
    joined = ExampleStore.join([first, second], np.uint16)
    assert list(joined) == examples and joined.src.ids.dtype == np.uint16
    order = [29, 0, 0, 13, 12, 5, 29]
    taken = joined.take(np.array(order))
    assert list(taken) == [examples[i] for i in order]  # in the order asked, repeats included
    assert taken.src[0].base is not joined.src.ids  # arrays of its own: the corpus's are never written
    assert len(joined.take(np.array([], dtype=np.int64))) == 0


@pytest.mark.parametrize("mode", ["span", "token"])
def test_a_stores_epochs_draw_exactly_the_noise_of_noise_examples(monkeypatch, mode):
    from model.data import objectives

    monkeypatch.setattr(objectives, "ENCODE_ROWS", 7)  # many chunks: the noise runs on across them
    sentences = [e.tgt_ids for e in _examples(40, seed=4)]
    store = TokenStore.concat(sentences, np.uint16)
    epochs = objectives.renoising(store, seed=3, mode=mode, mask_ratio=0.3)
    for epoch in (0, 1):
        noised = epochs(epoch)
        assert isinstance(noised, ExampleStore) and noised.src.ids.dtype == np.uint16
        assert list(noised) == objectives.noise_examples(sentences, 3, epoch, mode, 0.3)
    assert list(epochs(0)) != list(epochs(1))
    with pytest.raises(ValueError, match="mode='words'"):
        objectives.renoising(store, seed=3, mode="words")
