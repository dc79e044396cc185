"""Token-count batching with length bucketing (Vaswani et al., 2017, Sec. 5.1: "batched together by
approximate sequence length ... approximately 25000 source tokens and 25000 target tokens").

Collation convention (inference must match it): src = ids + [</s>], tgt_in = [<s>] + ids, tgt_out = ids + [</s>].

A prepared corpus holds its token ids as small NumPy arrays (Tokenizer.id_dtype: uint16 when the vocabulary
fits), not lists: a list costs 8 bytes a token for the pointer and 28 more for each id above 256. 200,000 pairs of
5-30 words took 2,272 MB as lists and take 130 MB as arrays (bench/prepare_memory.py: 11,912 and 679 bytes a pair,
peak 2,643 and 451 MB). Lists still work everywhere (tests and inference build them), and both give the same
batches: collate widens every id to int64.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import torch

from model.data.special_tokens import BOS_ID, EOS_ID, PAD_ID

Overlong = Literal["drop", "truncate"]
# Token ids of one sentence: a (n,) array of Tokenizer.id_dtype in a prepared corpus, or a list.
TokenIds: TypeAlias = "np.ndarray | list[int]"


def ids_list(ids: TokenIds) -> list[int]:
    """Token ids as a list of Python ints (for JSON, or a tokenizer's decode)."""
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)


@dataclass(frozen=True, eq=False, slots=True)  # slots: no __dict__ per example (~100 bytes)
class Example:
    """One training pair as token ids, without <s> or </s> (collate adds them). Equal when the ids are, whether
    held as arrays or lists."""

    src_ids: TokenIds
    tgt_ids: TokenIds

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Example):
            return NotImplemented
        return bool(np.array_equal(self.src_ids, other.src_ids) and np.array_equal(self.tgt_ids, other.tgt_ids))

    @property
    def size(self) -> int:
        """Padded length this example needs: the longer side plus its </s> or <s>."""
        return max(len(self.src_ids), len(self.tgt_ids)) + 1


@dataclass(frozen=True)
class LengthReport:
    """How many examples a length limit kept, dropped, and truncated (truncated ones are also kept)."""

    kept: int
    dropped: int
    truncated: int


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids + </s>, padded with PAD_ID
    tgt_in: torch.Tensor  # (B, T) <s> + target ids: decoder input
    tgt_out: torch.Tensor  # (B, T) target ids + </s>: what the decoder predicts
    n_src_tokens: int  # non-pad tokens in src
    n_tgt_tokens: int  # non-pad tokens in tgt_out: the count the loss is averaged over
    indices: tuple[int, ...] = ()  # positions of these examples in the batcher's example list
    # (N,) positions of tgt_out's non-pad tokens in tgt_out.flatten(), N = n_tgt_tokens. Found where the batch is
    # built, on the host: selecting them on a GPU with a boolean mask would make every micro-batch wait for the
    # device to count them (a mask's result has a data-dependent size).
    target_positions: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.target_positions is None:
            self.target_positions = (self.tgt_out.flatten() != PAD_ID).nonzero().squeeze(1)  # (N,)

    @property
    def padded_src_tokens(self) -> int:
        """Positions of src, padding included: what the encoder computes on."""
        return self.src.numel()

    @property
    def padded_tgt_tokens(self) -> int:
        """Positions of tgt_in, padding included: what the decoder computes on."""
        return self.tgt_in.numel()

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        """The same batch with fn applied to each tensor (a copy to a device, pinning); the counts are kept."""
        assert self.target_positions is not None  # set by __post_init__
        return Batch(
            fn(self.src),
            fn(self.tgt_in),
            fn(self.tgt_out),
            self.n_src_tokens,
            self.n_tgt_tokens,
            self.indices,
            fn(self.target_positions),
        )

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return self.map_tensors(lambda t: t.to(device, non_blocking=non_blocking))

    def halves(self) -> list[Batch]:
        """The first and second half of the sentences (one batch if it holds one sentence): together they give
        the same loss sum and token counts as this batch. Used to retry a step that ran out of memory."""
        rows = self.src.shape[0]
        if rows < 2:
            return [self]
        cut = (rows + 1) // 2
        parts = []
        for part in (slice(0, cut), slice(cut, rows)):
            src, tgt_in, tgt_out = self.src[part], self.tgt_in[part], self.tgt_out[part]  # (B/2, S), (B/2, T)
            parts.append(
                Batch(
                    src,
                    tgt_in,
                    tgt_out,
                    int((src != PAD_ID).sum()),
                    int((tgt_out != PAD_ID).sum()),
                    self.indices[part],
                )
            )
        return parts


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """(B, max_len) long tensor, right-padded with pad_id."""
    lengths, ids = _lengths_and_ids(seqs)
    out = np.full((len(seqs), int(lengths.max(initial=0))), pad_id, dtype=np.int64)  # (B, max_len)
    out[_filled(lengths, out.shape[1])] = ids
    return torch.from_numpy(out)


def collate(examples: Sequence[Example], indices: Sequence[int] = ()) -> Batch:
    """Batch tensors for examples; inference can call it with empty tgt_ids to build src.

    Each tensor is filled in one NumPy array from the concatenated ids rather than one small tensor per row: a
    25,000-token batch of the en-fr corpus (~1,800 rows) took 63.6 ms that way and takes 5.4 ms (4096 tokens:
    12.9 and 1.6 ms; one thread of a shared 2-core CPU, indicative), and the thread that prepares batches
    (model/train/loader.py) holds Python's lock that much less while the training loop launches kernels.
    """
    if not examples:
        raise ValueError("cannot collate an empty list of examples")
    rows = np.arange(len(examples))
    src_len, src_ids = _lengths_and_ids([e.src_ids for e in examples])
    tgt_len, tgt_ids = _lengths_and_ids([e.tgt_ids for e in examples])
    src = np.full((len(examples), int(src_len.max()) + 1), PAD_ID, dtype=np.int64)  # (B, S): ids + </s>
    src[_filled(src_len, src.shape[1])] = src_ids
    src[rows, src_len] = EOS_ID
    tgt_out = np.full((len(examples), int(tgt_len.max()) + 1), PAD_ID, dtype=np.int64)  # (B, T): ids + </s>
    tgt_out[_filled(tgt_len, tgt_out.shape[1])] = tgt_ids
    tgt_out[rows, tgt_len] = EOS_ID
    tgt_in = np.full_like(tgt_out, PAD_ID)  # (B, T): <s> + ids
    tgt_in[:, 0] = BOS_ID
    tgt_in[:, 1:][_filled(tgt_len, tgt_in.shape[1] - 1)] = tgt_ids
    target = _filled(tgt_len + 1, tgt_out.shape[1])  # (B, T): the non-pad positions of tgt_out
    return Batch(
        torch.from_numpy(src),
        torch.from_numpy(tgt_in),
        torch.from_numpy(tgt_out),
        n_src_tokens=int(src_len.sum()) + len(examples),
        n_tgt_tokens=int(tgt_len.sum()) + len(examples),
        indices=tuple(indices),
        target_positions=torch.from_numpy(np.flatnonzero(target)),  # (N,)
    )


def _lengths_and_ids(seqs: Sequence[TokenIds] | Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(B,) lengths and the (sum of lengths,) concatenated ids (arrays: of their type; lists: int64)."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    if seqs and all(isinstance(s, np.ndarray) for s in seqs):
        return lengths, np.concatenate(seqs)
    return lengths, np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum()))


def _filled(lengths: np.ndarray, width: int) -> np.ndarray:
    """(B, width) mask of each row's first lengths[b] cells: row-major, it visits the concatenated ids in order."""
    return np.arange(width) < lengths[:, None]


def fit_length(examples: Sequence[Example], max_len: int, overlong: Overlong) -> tuple[list[Example], LengthReport]:
    """Drop or truncate examples whose source or target has more than max_len ids (specials not counted)."""
    if max_len < 1:
        raise ValueError(f"max_len={max_len} must be >= 1")
    if overlong not in ("drop", "truncate"):
        raise ValueError(f"overlong={overlong!r} must be 'drop' or 'truncate'")
    kept: list[Example] = []
    n_over = 0
    for e in examples:
        if len(e.src_ids) <= max_len and len(e.tgt_ids) <= max_len:
            kept.append(e)
            continue
        n_over += 1
        if overlong == "truncate":
            kept.append(Example(e.src_ids[:max_len], e.tgt_ids[:max_len]))
    truncated = n_over if overlong == "truncate" else 0
    return kept, LengthReport(kept=len(kept), dropped=n_over - truncated, truncated=truncated)


def example_lengths(examples: Sequence[Example]) -> tuple[np.ndarray, np.ndarray]:
    """(n,) source and (n,) target lengths of examples; an ExampleStore (model/data/example_store.py) gives them
    from its offsets, without making its examples."""
    lengths = getattr(examples, "lengths", None)
    if callable(lengths):
        src_len, tgt_len = lengths()
        return src_len, tgt_len
    n = len(examples)
    return (
        np.fromiter((len(e.src_ids) for e in examples), dtype=np.int64, count=n),
        np.fromiter((len(e.tgt_ids) for e in examples), dtype=np.int64, count=n),
    )


def example_sizes(examples: Sequence[Example]) -> np.ndarray:
    """(n,) Example.size of each example: the padded length it needs."""
    src_len, tgt_len = example_lengths(examples)
    sizes: np.ndarray = np.maximum(src_len, tgt_len) + 1
    return sizes


# Examples are sorted by length within buckets of about this many full batches. On bench/corpus.py's en-fr
# corpus (54k pairs, bench/padding.py), 4096-token batches: buckets of 4096 examples (~24 batches) sorted by size
# alone padded 18.2% of the positions; buckets of 256 batches sorted by (size, target, source) pad 5.2%.
BUCKET_BATCHES = 256


def plan_batches(
    examples: Sequence[Example], max_tokens: int, rng: random.Random | None, bucket_batches: int = BUCKET_BATCHES
) -> list[list[int]]:
    """Index lists with len(batch) * max(size) <= max_tokens.

    With rng: shuffle, cut into buckets of about bucket_batches full batches (by summed size), sort each bucket by
    (size, target length, source length), cut it into batches in that order, then shuffle the batches (the "pool"
    bucketing of fairseq and OpenNMT). Without rng: the same in file order, with no shuffling.

    Size alone decides how many sentences a batch holds; the ties of size (many, as lengths are small integers) are
    broken by the target length, then the source length, so sentences of equal size share their two lengths too:
    the decoder, which computes more per position than the encoder, pads least.
    """
    order = list(range(len(examples)))
    if rng is not None:
        rng.shuffle(order)
    src_len, tgt_len = example_lengths(examples)
    size = np.maximum(src_len, tgt_len) + 1  # (n,) Example.size
    sizes = size.tolist()
    batches: list[list[int]] = []
    for bucket in _buckets(order, sizes, bucket_batches * max_tokens):
        b = np.asarray(bucket)
        # by (size, target length, source length); lexsort is stable, so ties keep the shuffled order
        bucket = b[np.lexsort((src_len[b], tgt_len[b], size[b]))].tolist()
        batch: list[int] = []
        longest = 0
        for i in bucket:
            size_i = sizes[i]
            if batch and (len(batch) + 1) * max(longest, size_i) > max_tokens:
                batches.append(batch)
                batch, longest = [], 0
            batch.append(i)
            longest = max(longest, size_i)
        if batch:
            batches.append(batch)
    if rng is not None:
        rng.shuffle(batches)
    return batches


def _buckets(order: list[int], sizes: Sequence[int], bucket_tokens: int) -> Iterator[list[int]]:
    """Consecutive runs of order whose sizes sum to bucket_tokens (the last one to less)."""
    bucket: list[int] = []
    total = 0
    for i in order:
        bucket.append(i)
        total += sizes[i]
        if total >= bucket_tokens:
            yield bucket
            bucket, total = [], 0
    if bucket:
        yield bucket


class TokenBatcher:
    """Iterates over the remaining batches of the current epoch; deterministic for (seed, epoch).

    `examples` is a list, or a function epoch -> list (for per-epoch re-noising; same length every epoch).
    The position advances before a batch is yielded, so state_dict() taken after the optimizer step on a
    batch resumes at the next one.
    """

    def __init__(
        self,
        examples: Sequence[Example] | Callable[[int], Sequence[Example]],
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        *,
        max_len: int | None = None,
        overlong: Overlong = "drop",
        bucket_batches: int = BUCKET_BATCHES,
    ) -> None:
        if max_len is not None and max_len + 1 > max_tokens:
            raise ValueError(f"max_tokens={max_tokens} cannot hold one example of max_len={max_len} (+1 special)")
        if bucket_batches < 1:
            raise ValueError(f"bucket_batches={bucket_batches} must be >= 1")
        self._source: Callable[[int], Sequence[Example]]
        if callable(examples):
            self._source = examples
        else:
            fixed = _fixed(examples)
            self._source = lambda epoch: fixed
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.max_len, self.overlong, self.bucket_batches = max_len, overlong, bucket_batches
        self.epoch, self.position = 0, 0
        self.length_report: LengthReport | None = None
        self._cache: tuple[int, Sequence[Example], list[list[int]]] | None = None

    def plan(self, epoch: int) -> tuple[Sequence[Example], list[list[int]]]:
        """The (length-fitted) examples of an epoch and its batches as lists of indices into them.

        Safe to call from two threads (the training loader prepares batches in one): the plan is built into a
        local and the cache swapped whole, so a caller never gets one epoch's examples with another's batches.
        """
        cached = self._cache
        if cached is None or cached[0] != epoch:
            examples = _fixed(self._source(epoch))
            if self.max_len is not None:
                examples, self.length_report = fit_length(examples, self.max_len, self.overlong)
            sizes = example_sizes(examples)
            too_big = np.flatnonzero(sizes > self.max_tokens)
            if len(too_big):
                raise ValueError(
                    f"example {too_big[0]} needs {sizes[too_big[0]]} tokens > max_tokens="
                    f"{self.max_tokens}; pass max_len to drop or truncate long examples"
                )
            rng = random.Random(f"{self.seed}:{epoch}") if self.shuffle else None
            cached = (epoch, examples, plan_batches(examples, self.max_tokens, rng, self.bucket_batches))
            self._cache = cached
        return cached[1], cached[2]

    def examples(self, epoch: int | None = None) -> Sequence[Example]:
        """The (length-fitted) examples of an epoch; Batch.indices point into this list."""
        return self.plan(self.epoch if epoch is None else epoch)[0]

    def batch_indices(self, epoch: int | None = None) -> list[list[int]]:
        """The full batch plan of an epoch, as lists of example indices."""
        return self.plan(self.epoch if epoch is None else epoch)[1]

    def __len__(self) -> int:
        """Number of batches in the current epoch (all of them, not just the remaining ones)."""
        return len(self.batch_indices())

    def __iter__(self) -> Iterator[Batch]:
        examples, plan = self.plan(self.epoch)
        while self.position < len(plan):
            idx = plan[self.position]
            self.position += 1
            yield collate([examples[i] for i in idx], idx)
        self.epoch, self.position = self.epoch + 1, 0

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "batch": self.position,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "shuffle": self.shuffle,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at (epoch, batch); refuses a state made with another seed, max_tokens or shuffle."""
        for key in ("seed", "max_tokens", "shuffle"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(f"state has {key}={state[key]!r} but this batcher has {getattr(self, key)!r}")
        self.epoch, self.position = int(state["epoch"]), int(state["batch"])
        if self.position >= len(self.batch_indices()):  # saved after the last batch: start the next epoch
            self.epoch, self.position = self.epoch + 1, 0


def _fixed(examples: Sequence[Example]) -> Sequence[Example]:
    """examples as the batcher keeps them: a copy of a list (the caller's list may change), a store as it is."""
    return examples if callable(getattr(examples, "lengths", None)) else list(examples)
