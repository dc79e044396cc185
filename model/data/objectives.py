"""Training examples for the two objectives: translation, and denoising for fill-mask.

Denoising is BART's text infilling (Lewis et al., 2020, Sec. 2.2): spans with Poisson(3) lengths are each
replaced by a single <mask>, and the decoder reconstructs the original sentence. A token mode replaces single
tokens, matching fill-mask inputs where each <mask> stands for one token.

Sentences come as NumPy arrays (a prepared corpus, model/data/batching.py) or lists; the noise keeps their kind,
draws the same random numbers for both, and shares an array's ids as the target instead of copying them.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal

import numpy as np

from model.data.batching import Example, LengthReport, Overlong, TokenIds, fit_length
from model.data.example_store import ExampleStore, TokenStore
from model.data.special_tokens import MASK_ID
from model.data.tokenizer import Tokenizer

MaskMode = Literal["span", "token"]
ENCODE_ROWS = 16384  # rows read (and held as strings) at a time while encoding


def make_translation_examples(
    pairs: Sequence[tuple[str, str]], tokenizer: Tokenizer, max_len: int, overlong: Overlong = "drop"
) -> tuple[ExampleStore, LengthReport]:
    """Encode (source, target) pairs into an ExampleStore; sides longer than max_len ids are dropped or truncated.
    The pairs are read ENCODE_ROWS at a time, so rows kept on disk (model/data/text_rows.py) are never all in memory
    as strings, nor their examples as objects."""
    reports: list[LengthReport] = []

    def chunks() -> Iterator[list[Example]]:
        for start in range(0, len(pairs), ENCODE_ROWS):
            chunk = pairs[start : start + ENCODE_ROWS]
            src = tokenizer.encode_arrays([s for s, _ in chunk])
            tgt = tokenizer.encode_arrays([t for _, t in chunk])
            kept, report = fit_length([Example(s, t) for s, t in zip(src, tgt)], max_len, overlong)
            reports.append(report)
            yield kept

    return ExampleStore.build(chunks(), tokenizer.id_dtype), total_report(reports)


def encode_sentences(
    sentences: Sequence[str], tokenizer: Tokenizer, max_len: int, overlong: Overlong = "drop"
) -> tuple[TokenStore, LengthReport]:
    """Token ids of monolingual sentences in a TokenStore, length-limited before any noise is added; read
    ENCODE_ROWS sentences at a time."""
    reports: list[LengthReport] = []
    stores: list[TokenStore] = []
    for start in range(0, len(sentences), ENCODE_ROWS):
        encoded = tokenizer.encode_arrays(sentences[start : start + ENCODE_ROWS])
        kept, report = fit_length([Example(ids, ids) for ids in encoded], max_len, overlong)
        reports.append(report)
        stores.append(TokenStore.concat([np.asarray(e.tgt_ids) for e in kept], tokenizer.id_dtype))
    return TokenStore.join(stores, tokenizer.id_dtype), total_report(reports)


def total_report(reports: Sequence[LengthReport]) -> LengthReport:
    """The reports of several parts encoded apart, added up."""
    return LengthReport(
        kept=sum(r.kept for r in reports),
        dropped=sum(r.dropped for r in reports),
        truncated=sum(r.truncated for r in reports),
    )


def _budget(n: int, mask_ratio: float) -> int:
    if not 0.0 < mask_ratio <= 1.0:
        raise ValueError(f"mask_ratio={mask_ratio} must be in (0, 1]")
    return min(n, max(1, round(mask_ratio * n))) if n else 0


def _poisson(rng: random.Random, lam: float) -> int:
    """Knuth's sampler; fine for the small means used here."""
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def mask_tokens(ids: TokenIds, mask_id: int, rng: random.Random, mask_ratio: float = 0.15) -> tuple[TokenIds, TokenIds]:
    """(source, target): about mask_ratio of the tokens (at least one) each replaced by one <mask>. An array's
    target is the array itself; a list's, a copy."""
    chosen = set(rng.sample(range(len(ids)), _budget(len(ids), mask_ratio)))
    if isinstance(ids, np.ndarray):
        src = ids.copy()
        src[sorted(chosen)] = mask_id
        return src, ids
    return [mask_id if i in chosen else t for i, t in enumerate(ids)], list(ids)


def mask_spans(
    ids: TokenIds, mask_id: int, rng: random.Random, mask_ratio: float = 0.15, mean_span: float = 3.0
) -> tuple[TokenIds, TokenIds]:
    """(source, target): spans covering about mask_ratio of the tokens, each replaced by a single <mask>.

    Span lengths are Poisson(mean_span), at least 1; spans never touch, so every <mask> in the source
    stands for exactly one non-empty, contiguous piece of the target. An array's target is the array itself.
    """
    n, budget = len(ids), _budget(len(ids), mask_ratio)
    if mean_span <= 0:
        raise ValueError(f"mean_span={mean_span} must be > 0")
    lengths: list[int] = []
    while sum(lengths) < budget:
        lengths.append(max(1, _poisson(rng, mean_span)))
    if lengths:
        lengths[-1] -= sum(lengths) - budget
        rng.shuffle(lengths)  # the trimmed span need not be the last one
    while len(lengths) > 1 and sum(lengths) + len(lengths) - 1 > n:  # no room for gaps: merge two spans
        lengths[-2] += lengths.pop()
    # Spread the free tokens over the len+1 gaps (stars and bars); inner gaps keep one token at least.
    m, free = len(lengths), n - sum(lengths) - max(0, len(lengths) - 1)
    cuts = sorted(rng.sample(range(free + m), m))
    free_before = [c - k for k, c in enumerate(cuts)]  # free tokens before span k, non-decreasing
    kept: list[tuple[int, int]] = []  # the runs of ids the source keeps, a <mask> between two
    pos = 0
    for k, length in enumerate(lengths):
        gap = free_before[k] - (free_before[k - 1] if k else 0) + (1 if k else 0)
        kept.append((pos, pos + gap))
        pos += gap + length
    kept.append((pos, n))
    if isinstance(ids, np.ndarray):
        mask = np.array([mask_id], dtype=ids.dtype)
        pieces = [p for a, b in kept for p in (ids[a:b], mask)][:-1]  # no <mask> after the last run
        return np.concatenate(pieces), ids
    src: list[int] = []
    for a, b in kept[:-1]:
        src.extend(ids[a:b])
        src.append(mask_id)
    src.extend(ids[kept[-1][0] : kept[-1][1]])
    return src, list(ids)


def _noised(
    token_ids: Iterable[TokenIds], rng: random.Random, mode: MaskMode, mask_ratio: float, mean_span: float, mask_id: int
) -> Iterator[Example]:
    if mode == "span":
        return (Example(*mask_spans(ids, mask_id, rng, mask_ratio, mean_span)) for ids in token_ids)
    if mode == "token":
        return (Example(*mask_tokens(ids, mask_id, rng, mask_ratio)) for ids in token_ids)
    raise ValueError(f"mode={mode!r} must be 'span' or 'token'")


def noise_examples(
    token_ids: Sequence[TokenIds],
    seed: int,
    epoch: int = 0,
    mode: MaskMode = "span",
    mask_ratio: float = 0.15,
    mean_span: float = 3.0,
    mask_id: int = MASK_ID,
) -> list[Example]:
    """Denoising examples (noised source, original target); the noise depends only on (seed, epoch)."""
    return list(_noised(token_ids, random.Random(f"denoise:{seed}:{epoch}"), mode, mask_ratio, mean_span, mask_id))


def renoising(
    token_ids: Sequence[TokenIds] | TokenStore,
    seed: int,
    mode: MaskMode = "span",
    mask_ratio: float = 0.15,
    mean_span: float = 3.0,
    mask_id: int = MASK_ID,
) -> Callable[[int], Sequence[Example]]:
    """epoch -> fresh denoising examples; pass it to TokenBatcher so every epoch sees new noise. A TokenStore's
    epochs are ExampleStores, noised ENCODE_ROWS sentences at a time (the same noise as noise_examples draws);
    other sentences' are lists, arrays kept as they are (nothing writes into them), lists copied."""
    if mode not in ("span", "token"):
        raise ValueError(f"mode={mode!r} must be 'span' or 'token'")
    if isinstance(token_ids, TokenStore):
        store = token_ids

        def epoch_store(epoch: int) -> ExampleStore:
            noised = _noised(store, random.Random(f"denoise:{seed}:{epoch}"), mode, mask_ratio, mean_span, mask_id)
            chunks = iter(lambda: list(itertools.islice(noised, ENCODE_ROWS)), [])
            return ExampleStore.build(chunks, store.ids.dtype)

        return epoch_store
    ids = [t if isinstance(t, np.ndarray) else list(t) for t in token_ids]
    return lambda epoch: noise_examples(ids, seed, epoch, mode, mask_ratio, mean_span, mask_id)
