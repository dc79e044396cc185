"""Token-count batching with length bucketing (Vaswani et al., 2017, Sec. 5.1: "batched together by
approximate sequence length ... approximately 25000 source tokens and 25000 target tokens").

Collation convention (inference must match it): src = ids + [</s>], tgt_in = [<s>] + ids, tgt_out = ids + [</s>].
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from model.data.special_tokens import BOS_ID, EOS_ID, PAD_ID

Overlong = Literal["drop", "truncate"]


@dataclass(frozen=True)
class Example:
    """One training pair as token ids, without <s> or </s> (collate adds them)."""

    src_ids: list[int]
    tgt_ids: list[int]

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

    def to(self, device: torch.device | str) -> Batch:
        assert self.target_positions is not None  # set by __post_init__
        return Batch(
            self.src.to(device),
            self.tgt_in.to(device),
            self.tgt_out.to(device),
            self.n_src_tokens,
            self.n_tgt_tokens,
            self.indices,
            self.target_positions.to(device),
        )

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
    out = torch.full((len(seqs), max((len(s) for s in seqs), default=0)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def collate(examples: Sequence[Example], indices: Sequence[int] = ()) -> Batch:
    """Batch tensors for examples; inference can call it with empty tgt_ids to build src."""
    if not examples:
        raise ValueError("cannot collate an empty list of examples")
    src = pad_sequences([e.src_ids + [EOS_ID] for e in examples])
    tgt_in = pad_sequences([[BOS_ID] + e.tgt_ids for e in examples])
    tgt_out = pad_sequences([e.tgt_ids + [EOS_ID] for e in examples])
    return Batch(
        src,
        tgt_in,
        tgt_out,
        n_src_tokens=int((src != PAD_ID).sum()),
        n_tgt_tokens=int((tgt_out != PAD_ID).sum()),
        indices=tuple(indices),
    )


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


def plan_batches(sizes: Sequence[int], max_tokens: int, rng: random.Random | None, bucket_size: int) -> list[list[int]]:
    """Index lists with len(batch) * max(size) <= max_tokens.

    With rng: shuffle, sort by size within chunks of bucket_size, then shuffle the batches (fairseq/OpenNMT
    "pool" bucketing). Without rng: the same, in file order, with no shuffling.
    """
    order = list(range(len(sizes)))
    if rng is not None:
        rng.shuffle(order)
    batches: list[list[int]] = []
    for start in range(0, len(order), bucket_size):
        chunk = sorted(order[start : start + bucket_size], key=lambda i: sizes[i])  # stable: ties keep order
        batch: list[int] = []
        longest = 0
        for i in chunk:
            if batch and (len(batch) + 1) * max(longest, sizes[i]) > max_tokens:
                batches.append(batch)
                batch, longest = [], 0
            batch.append(i)
            longest = max(longest, sizes[i])
        if batch:
            batches.append(batch)
    if rng is not None:
        rng.shuffle(batches)
    return batches


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
        bucket_size: int = 4096,
    ) -> None:
        if max_len is not None and max_len + 1 > max_tokens:
            raise ValueError(f"max_tokens={max_tokens} cannot hold one example of max_len={max_len} (+1 special)")
        if bucket_size < 1:
            raise ValueError(f"bucket_size={bucket_size} must be >= 1")
        self._source = examples if callable(examples) else (lambda epoch, fixed=list(examples): fixed)
        self.max_tokens, self.shuffle, self.seed = max_tokens, shuffle, seed
        self.max_len, self.overlong, self.bucket_size = max_len, overlong, bucket_size
        self.epoch, self.position = 0, 0
        self.length_report: LengthReport | None = None
        self._cache: tuple[int, list[Example], list[list[int]]] | None = None

    def _plan(self, epoch: int) -> tuple[list[Example], list[list[int]]]:
        if self._cache is None or self._cache[0] != epoch:
            examples = list(self._source(epoch))
            if self.max_len is not None:
                examples, self.length_report = fit_length(examples, self.max_len, self.overlong)
            sizes = [e.size for e in examples]
            too_big = [i for i, s in enumerate(sizes) if s > self.max_tokens]
            if too_big:
                raise ValueError(
                    f"example {too_big[0]} needs {sizes[too_big[0]]} tokens > max_tokens="
                    f"{self.max_tokens}; pass max_len to drop or truncate long examples"
                )
            rng = random.Random(f"{self.seed}:{epoch}") if self.shuffle else None
            self._cache = (epoch, examples, plan_batches(sizes, self.max_tokens, rng, self.bucket_size))
        return self._cache[1], self._cache[2]

    def examples(self, epoch: int | None = None) -> list[Example]:
        """The (length-fitted) examples of an epoch; Batch.indices point into this list."""
        return self._plan(self.epoch if epoch is None else epoch)[0]

    def batch_indices(self, epoch: int | None = None) -> list[list[int]]:
        """The full batch plan of an epoch, as lists of example indices."""
        return self._plan(self.epoch if epoch is None else epoch)[1]

    def __len__(self) -> int:
        """Number of batches in the current epoch (all of them, not just the remaining ones)."""
        return len(self.batch_indices())

    def __iter__(self) -> Iterator[Batch]:
        examples, plan = self._plan(self.epoch)
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
