import random
import re
from collections import Counter

import numpy as np
import pytest
import torch

from model.data.batching import Example, LengthReport, TokenBatcher, collate, fit_length, plan_batches
from model.data.objectives import (
    encode_sentences,
    make_translation_examples,
    mask_spans,
    mask_tokens,
    noise_examples,
    renoising,
)
from model.data.special_tokens import BOS_ID, EOS_ID, MASK_ID, PAD_ID
from model.data.tokenizer import Tokenizer


def _examples(n: int = 300, seed: int = 0) -> list[Example]:
    rng = random.Random(seed)
    return [
        Example(
            [rng.randint(5, 99) for _ in range(rng.randint(1, 40))],
            [rng.randint(5, 99) for _ in range(rng.randint(1, 40))],
        )
        for _ in range(n)
    ]


def _plan(batcher: TokenBatcher) -> list[tuple[int, ...]]:
    return [b.indices for b in batcher]


# -- collation ----------------------------------------------------------------------------------------------


def test_collate_adds_bos_eos_and_pads_with_zero():
    batch = collate([Example([7, 8, 9], [10, 11]), Example([7], [10, 11, 12, 13])])
    assert batch.src.tolist() == [[7, 8, 9, EOS_ID], [7, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 10, 11, PAD_ID, PAD_ID], [BOS_ID, 10, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[10, 11, EOS_ID, PAD_ID, PAD_ID], [10, 11, 12, 13, EOS_ID]]
    assert batch.src.dtype == batch.tgt_in.dtype == torch.long
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (6, 8)


def test_collate_fills_rows_of_any_length_and_finds_the_target_positions():
    examples = [Example([], [6, 7, 8]), Example([5, 5, 5, 5], []), Example([9], [10])]
    batch = collate(examples)
    assert batch.src.tolist() == [[EOS_ID, 0, 0, 0, 0], [5, 5, 5, 5, EOS_ID], [9, EOS_ID, 0, 0, 0]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 6, 7, 8], [BOS_ID, 0, 0, 0], [BOS_ID, 10, 0, 0]]
    assert batch.tgt_out.tolist() == [[6, 7, 8, EOS_ID], [EOS_ID, 0, 0, 0], [10, EOS_ID, 0, 0]]
    assert batch.target_positions.tolist() == (batch.tgt_out.flatten() != PAD_ID).nonzero().squeeze(1).tolist()
    assert (
        (batch.n_src_tokens, batch.n_tgt_tokens) == (8, 7) == (int((batch.src != 0).sum()), len(batch.target_positions))
    )
    assert batch.target_positions.dtype == batch.tgt_out.dtype == torch.long


# -- token batching -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [True, False])
def test_batches_fit_max_tokens_and_cover_every_example_once(shuffle):
    examples = _examples()
    batcher = TokenBatcher(examples, max_tokens=200, shuffle=shuffle, seed=1)
    for epoch in range(2):
        seen: Counter[int] = Counter()
        for batch in batcher:
            b = batch.src.shape[0]
            assert b * max(batch.src.shape[1], batch.tgt_in.shape[1]) <= 200
            assert batch.tgt_in.shape == batch.tgt_out.shape
            for row, i in enumerate(batch.indices):
                assert batch.src[row, : len(examples[i].src_ids)].tolist() == examples[i].src_ids
                assert batch.tgt_out[row, : len(examples[i].tgt_ids)].tolist() == examples[i].tgt_ids
            seen.update(batch.indices)
        assert seen == Counter(range(len(examples))), f"epoch {epoch}"
        assert batcher.epoch == epoch + 1


def test_length_bucketing_keeps_padding_low():
    examples = _examples(2000)
    real = sum(len(e.tgt_ids) + 1 for e in examples)
    padded = sum(b.tgt_out.numel() for b in TokenBatcher(examples, max_tokens=500, seed=0))
    assert padded < 1.5 * real  # unsorted batches pad to ~1.8x here; bucketing gives ~1.3x


def _padding(batches: list) -> tuple[float, float]:
    """Shares of the target and source positions that are padding."""
    tgt = 1 - sum(b.n_tgt_tokens for b in batches) / sum(b.padded_tgt_tokens for b in batches)
    src = 1 - sum(b.n_src_tokens for b in batches) / sum(b.padded_src_tokens for b in batches)
    return tgt, src


def test_padding_falls_when_sizes_tie_by_target_then_source_length():
    """Source and target lengths drawn apart (1 to 40 each): sorted by size alone, a quarter of both sides was
    padding (0.247 and 0.248 for this corpus); sorting each size's examples by target then source length halves it.
    Every example is still in exactly one batch of each epoch."""
    examples = _examples(3000, seed=0)
    batcher = TokenBatcher(examples, max_tokens=500, seed=0)
    for epoch in range(2):
        batches = list(batcher)
        tgt, src = _padding(batches)
        assert tgt < 0.16 and src < 0.16, (epoch, tgt, src)
        assert sorted(i for b in batches for i in b.indices) == list(range(len(examples)))


def test_a_bucket_is_sorted_by_size_then_target_then_source_length():
    examples = _examples(500, seed=2)
    key = [(e.size, len(e.tgt_ids), len(e.src_ids)) for e in examples]
    batches = plan_batches(examples, max_tokens=200, rng=None, bucket_batches=10**6)  # one bucket, file order
    order = [i for batch in batches for i in batch]
    assert sorted(order) == list(range(500))
    assert [key[i] for i in order] == sorted(key)
    assert all(len(b) * max(key[i][0] for i in b) <= 200 for b in batches)


def test_buckets_hold_about_bucket_batches_batches():
    """Examples are sorted within buckets of bucket_batches x max_tokens summed sizes (in shuffled order), so
    small buckets pad more than large ones, and a bucket's batches never mix with another's."""
    examples = _examples(3000, seed=0)
    small = TokenBatcher(examples, max_tokens=500, seed=0, bucket_batches=2)
    large = TokenBatcher(examples, max_tokens=500, seed=0)
    assert sum(_padding(list(small))) > sum(_padding(list(large))) + 0.1
    unshuffled = plan_batches(examples, max_tokens=500, rng=None, bucket_batches=4)
    flat = [i for batch in unshuffled for i in batch]
    bounds, total = [0], 0
    for i in range(len(examples)):  # file order: the buckets are runs of about 4 x 500 positions
        total += examples[i].size
        if total >= 4 * 500:
            bounds.append(i + 1)
            total = 0
    for start, end in zip(bounds, bounds[1:]):
        assert sorted(flat[start:end]) == list(range(start, end))
    with pytest.raises(ValueError, match="bucket_batches=0"):
        TokenBatcher(examples, max_tokens=500, bucket_batches=0)


def test_same_seed_same_batches_and_epochs_differ():
    a = TokenBatcher(_examples(), max_tokens=200, seed=3)
    b = TokenBatcher(_examples(), max_tokens=200, seed=3)
    epoch0 = _plan(a)
    assert epoch0 == _plan(b)
    assert _plan(a) != epoch0  # epoch 1 is reshuffled
    assert _plan(TokenBatcher(_examples(), max_tokens=200, seed=4)) != epoch0
    assert _plan(TokenBatcher(_examples(), max_tokens=200, shuffle=False)) == _plan(
        TokenBatcher(_examples(), max_tokens=200, shuffle=False, seed=9)
    )


def test_resume_from_state_dict_continues_the_same_sequence():
    reference = TokenBatcher(_examples(), max_tokens=200, seed=5)
    full = _plan(reference) + _plan(reference)  # epochs 0 and 1
    n0 = len(full) // 2

    for stop in (3, n0 - 1, n0, n0 + 2):  # mid-epoch, last batch of epoch 0, first batches of epoch 1
        first = TokenBatcher(_examples(), max_tokens=200, seed=5)
        done = []
        while len(done) < stop:
            for batch in first:
                done.append(batch.indices)
                if len(done) == stop:
                    state = first.state_dict()
                    break
        resumed = TokenBatcher(_examples(), max_tokens=200, seed=5)
        resumed.load_state_dict(state)
        rest = []
        while len(done) + len(rest) < len(full):
            rest.extend(_plan(resumed))
        assert done + rest == full, f"stop={stop}"


def test_state_after_last_batch_resumes_at_next_epoch():
    batcher = TokenBatcher(_examples(), max_tokens=200, seed=0)
    n = len(batcher)
    batcher.load_state_dict({"epoch": 0, "batch": n})
    assert (batcher.epoch, batcher.position) == (1, 0)


def test_state_from_another_configuration_is_refused():
    state = TokenBatcher(_examples(), max_tokens=200, seed=0).state_dict()
    with pytest.raises(ValueError, match="seed"):
        TokenBatcher(_examples(), max_tokens=200, seed=1).load_state_dict(state)
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBatcher(_examples(), max_tokens=300, seed=0).load_state_dict(state)


def test_overlong_examples_are_dropped_or_truncated_with_a_count():
    examples = [Example([5] * 3, [6] * 3), Example([5] * 12, [6] * 2), Example([5] * 2, [6] * 11)]
    kept, report = fit_length(examples, max_len=10, overlong="drop")
    assert kept == examples[:1] and report == LengthReport(kept=1, dropped=2, truncated=0)
    kept, report = fit_length(examples, max_len=10, overlong="truncate")
    assert report == LengthReport(kept=3, dropped=0, truncated=2)
    assert all(len(e.src_ids) <= 10 and len(e.tgt_ids) <= 10 for e in kept)
    assert kept[1] == Example([5] * 10, [6] * 2)

    batcher = TokenBatcher(examples, max_tokens=11, max_len=10, overlong="drop")
    assert sorted(i for b in batcher for i in b.indices) == [0]
    assert batcher.length_report == LengthReport(kept=1, dropped=2, truncated=0)


def test_example_larger_than_max_tokens_is_refused():
    with pytest.raises(ValueError, match="max_tokens=10"):
        len(TokenBatcher([Example([5] * 20, [6])], max_tokens=10))
    with pytest.raises(ValueError, match="max_len=10"):
        TokenBatcher([], max_tokens=10, max_len=10)


def test_examples_can_change_per_epoch():
    batcher = TokenBatcher(lambda epoch: [Example([5 + epoch], [6])] * 4, max_tokens=8, shuffle=False)
    assert {b.src[0, 0].item() for b in batcher} == {5}
    assert {b.src[0, 0].item() for b in batcher} == {6}


# -- objectives ---------------------------------------------------------------------------------------------


def _is_infilling(src: list[int], tgt: list[int]) -> bool:
    """True when replacing each <mask> in src by a non-empty run of tokens can give tgt."""
    pattern = ",".join(r"\d+(?:,\d+)*" if t == MASK_ID else str(t) for t in src)
    return re.fullmatch(pattern, ",".join(map(str, tgt))) is not None


@pytest.mark.parametrize("n", [1, 2, 5, 13, 40, 120])
def test_mask_spans_is_a_valid_infilling_noise(n):
    rng = random.Random(n)
    for _ in range(50):
        ids = [rng.randint(5, 50) for _ in range(n)]
        src, tgt = mask_spans(ids, MASK_ID, rng, mask_ratio=0.3, mean_span=3.0)
        assert tgt == ids
        assert MASK_ID in src
        assert all(not (a == b == MASK_ID) for a, b in zip(src, src[1:]))  # spans never touch
        assert _is_infilling(src, tgt)
        masked = len(tgt) - (len(src) - src.count(MASK_ID))
        assert masked == max(1, round(0.3 * n))


def test_mask_spans_is_deterministic_per_seed():
    ids = list(range(5, 65))
    a = mask_spans(ids, MASK_ID, random.Random(7))
    assert a == mask_spans(ids, MASK_ID, random.Random(7))
    assert any(mask_spans(ids, MASK_ID, random.Random(s)) != a for s in range(8, 12))


def test_mask_tokens_replaces_single_tokens():
    ids = list(range(5, 45))
    src, tgt = mask_tokens(ids, MASK_ID, random.Random(0), mask_ratio=0.15)
    assert tgt == ids and len(src) == len(ids)
    assert src.count(MASK_ID) == 6
    assert all(s == t for s, t in zip(src, tgt) if s != MASK_ID)


def test_noise_is_deterministic_per_seed_and_differs_per_epoch():
    ids = [list(range(5, 5 + n)) for n in range(3, 30)]
    assert noise_examples(ids, seed=1, epoch=0) == noise_examples(ids, seed=1, epoch=0)
    assert noise_examples(ids, seed=1, epoch=0) != noise_examples(ids, seed=1, epoch=1)
    assert renoising(ids, seed=1, mode="token")(2) == noise_examples(ids, seed=1, epoch=2, mode="token")
    with pytest.raises(ValueError, match="mode="):
        noise_examples(ids, seed=1, mode="word")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(["the cat sat on the mat", "die Katze saß auf der Matte"] * 20, vocab_size=300)


def test_make_translation_examples_encodes_and_limits_length(tok):
    pairs = [("the cat sat", "die Katze saß"), ("the cat " * 30, "die Katze")]
    examples, report = make_translation_examples(pairs, tok, max_len=16)
    assert report == LengthReport(kept=1, dropped=1, truncated=0)
    assert list(examples) == [Example(tok.encode("the cat sat"), tok.encode("die Katze saß"))]


def test_denoising_examples_from_sentences(tok):
    """What prepare() does for denoising: encode with a length limit, then noise."""
    sentences = ["the cat sat on the mat"] * 5 + ["the mat " * 20]
    ids, report = encode_sentences(sentences, tok, max_len=16)
    examples = noise_examples(ids, seed=0, epoch=0, mode="token", mask_ratio=0.2)
    assert report.dropped == 1 and len(examples) == 5
    assert all(t.dtype == tok.id_dtype == np.uint16 for t in ids)  # compact arrays, as a prepared corpus holds
    assert [e.tgt_ids.tolist() for e in examples] == [t.tolist() for t in ids]
    assert all(e.src_ids.tolist().count(MASK_ID) == 1 and len(e.src_ids) == len(e.tgt_ids) for e in examples)
    spans = noise_examples(ids, seed=0, epoch=0, mode="span", mask_ratio=0.5)
    assert all(_is_infilling(e.src_ids, e.tgt_ids) for e in spans)
