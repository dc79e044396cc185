"""Several language pairs in one model: a token naming the target language before every source (Johnson et al.,
2017; written `>>fr<<` as the OPUS-MT models write `>>fra<<`), and the pairs sampled by temperature (Arivazhagan et
al., 2019), so that a pair with little data is seen more often than its share of the rows and a large one less.

Pure Python: the API checks a job's pairs and a request's target language without torch or tokenizers.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

# Arivazhagan et al. (2019, Sec. 4.2): T = 5 served the pairs with little data well at a small cost to the large
# ones, against T = 1 (the data as they come) and T = 100 (nearly uniform); XLM-R's alpha = 0.3 is T = 3.3.
DEFAULT_TEMPERATURE = 5.0
# An ISO 639-1 or 639-3 code, optionally with a script or region (zh-Hant, pt_BR), as the datasets declare them.
LANGUAGE_CODE = re.compile(r"^[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")
TOKEN = re.compile(r"^>>(?P<language>[^<>\s]+)<<(?: |$)")

Row = TypeVar("Row")


@dataclass(frozen=True, order=True)
class LanguagePair:
    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}-{self.target}"


def target_token(language: str) -> str:
    """The token before a source that asks for `language`: ">>fr<<" for "fr"."""
    if not LANGUAGE_CODE.match(language):
        raise ValueError(f"language={language!r} is not a language code such as 'fr', 'fra' or 'pt-BR'")
    return f">>{language}<<"


def tag_source(source: str, target_language: str) -> str:
    """The source as a multilingual model reads it: the target's token, a space, the text."""
    return f"{target_token(target_language)} {source}"


def tagged_language(source: str) -> str | None:
    """The target language a tagged source asks for ("fr" for ">>fr<< Hello"); None when it carries no token."""
    found = TOKEN.match(source)
    return found.group("language") if found else None


def untagged(text: str) -> str:
    """The text without a leading target-language token (a tokenizer's training text: the token is not learned)."""
    found = TOKEN.match(text)
    return text[found.end() :] if found else text


def check_pairs(pairs: Sequence[LanguagePair]) -> None:
    """ValueError naming the first problem: no pair, a code that is not one, a pair from a language to itself,
    a pair listed twice."""
    if not pairs:
        raise ValueError("no language pair: a multilingual job needs at least one")
    seen: set[LanguagePair] = set()
    for pair in pairs:
        for side, code in (("source", pair.source), ("target", pair.target)):
            if not LANGUAGE_CODE.match(code):
                raise ValueError(f"pair {pair}: {side} language {code!r} is not a language code such as 'fr'")
        if pair.source == pair.target:
            raise ValueError(f"pair {pair}: the source and target languages are the same")
        if pair in seen:
            raise ValueError(f"pair {pair} is listed twice")
        seen.add(pair)


def temperature_shares(sizes: Sequence[int], temperature: float = DEFAULT_TEMPERATURE) -> list[float]:
    """Each pair's share of the training rows: p_i proportional to (n_i / N) ** (1 / T). T = 1 keeps the data's
    own proportions; a larger T moves towards the same share for every pair."""
    if not sizes or any(n < 1 for n in sizes):
        raise ValueError(f"sizes={list(sizes)}: every pair needs at least one row")
    if temperature < 1:
        raise ValueError(f"temperature={temperature} must be >= 1 (1: the data's own proportions)")
    total = sum(sizes)
    weights = [(n / total) ** (1 / temperature) for n in sizes]
    norm = sum(weights)
    return [w / norm for w in weights]


def rows_per_pair(sizes: Sequence[int], temperature: float = DEFAULT_TEMPERATURE) -> list[int]:
    """How many rows of each pair an epoch holds: the epoch as long as all the pairs' rows together, split by
    temperature_shares (largest remainders, each pair at least one row)."""
    total = sum(sizes)
    exact = [share * total for share in temperature_shares(sizes, temperature)]
    counts = [max(1, int(x)) for x in exact]
    by_remainder = sorted(range(len(sizes)), key=lambda i: (exact[i] - int(exact[i]), -i), reverse=True)
    for i in by_remainder[: max(0, total - sum(counts))]:
        counts[i] += 1
    return counts


def epoch_indices(sizes: Sequence[int], counts: Sequence[int], seed: int, epoch: int = 0) -> list[int]:
    """The rows of one epoch, as indices into the pairs' rows laid end to end (pair 0's first): pair i's counts[i]
    rows, taken where the epoch before stopped along passes over its rows, each pass in an order of its own. Every
    row of a pair comes once before any comes twice, so a pair sampled below its size reaches all its rows over the
    epochs (not the same subset every epoch) and one above it is repeated whole. Sorted within each pair (the loader
    shuffles and buckets); fixed by (seed, epoch)."""
    if len(sizes) != len(counts):
        raise ValueError(f"{len(sizes)} pairs of rows but {len(counts)} counts")
    out: list[int] = []
    start = 0
    for i, (n, count) in enumerate(zip(sizes, counts)):
        if n < 1:
            raise ValueError(f"pair {i} has no rows")
        first = epoch * count  # where this epoch begins along the pair's passes
        taken: list[int] = []
        for one_pass in range(first // n, (first + count - 1) // n + 1 if count else first // n):
            order = list(range(n))
            random.Random(f"pairs:{seed}:{i}:{one_pass}").shuffle(order)
            lo, hi = max(first - one_pass * n, 0), min(first + count - one_pass * n, n)
            taken.extend(order[lo:hi])
        out.extend(start + j for j in sorted(taken))
        start += n
    return out


def tagged_rows(
    rows_by_pair: Sequence[Sequence[tuple[str, str]]], pairs: Sequence[LanguagePair]
) -> list[tuple[str, str]]:
    """Every pair's (source, target) rows once, pair after pair, each source tagged with its pair's target language:
    the corpus epoch_indices draws each epoch from."""
    check_pairs(pairs)
    if len(rows_by_pair) != len(pairs):
        raise ValueError(f"{len(rows_by_pair)} pairs of rows for {len(pairs)} language pairs")
    for pair, rows in zip(pairs, rows_by_pair):
        if not rows:
            raise ValueError(f"pair {pair} has no rows")
    return [
        (tag_source(source, pair.target), target) for pair, rows in zip(pairs, rows_by_pair) for source, target in rows
    ]


def common_language(languages: Iterable[str]) -> str | None:
    """The one language of them all (the sources' or the targets' of a model's pairs: its own source or target
    language); None where they differ, or for none."""
    found = set(languages)
    return found.pop() if len(found) == 1 else None


def is_zero_shot(pair: LanguagePair, trained: Sequence[LanguagePair]) -> bool | None:
    """True for a pair the model never trained on whose source it read and whose target it wrote (German to French
    through English: zero-shot, Johnson et al. 2017 Sec. 5); False for a trained pair; None when the model never
    read the source or never wrote the target."""
    if pair in trained:
        return False
    if pair.source in {p.source for p in trained} and pair.target in {p.target for p in trained}:
        return True
    return None


def multilingual_rows(
    rows_by_pair: Sequence[Sequence[tuple[str, str]]],
    pairs: Sequence[LanguagePair],
    temperature: float = DEFAULT_TEMPERATURE,
    seed: int = 0,
    epoch: int = 0,
) -> list[tuple[str, str]]:
    """One epoch's training rows of a model of several pairs: each pair's (source, target) rows, their number set by
    temperature (rows_per_pair), drawn by epoch_indices, each source tagged with its pair's target language."""
    rows = tagged_rows(rows_by_pair, pairs)
    sizes = [len(part) for part in rows_by_pair]
    return [rows[j] for j in epoch_indices(sizes, rows_per_pair(sizes, temperature), seed, epoch)]


def held_out_rows(
    rows_by_pair: Sequence[Sequence[tuple[str, str]]], pairs: Sequence[LanguagePair], fraction: float, seed: int = 0
) -> tuple[list[list[tuple[str, str]]], list[list[tuple[str, str]]]]:
    """Each pair's rows split before the pairs are sampled, so no validation row is a training row's repeat: the
    training rows by pair, untagged, and the validation rows by pair, tagged (`fraction` of each pair, at least one
    row, never all of them), in a fixed order of `seed`."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction={fraction} must be in (0, 1)")
    train: list[list[tuple[str, str]]] = []
    valid: list[list[tuple[str, str]]] = []
    for i, (pair, rows) in enumerate(zip(pairs, rows_by_pair, strict=True)):
        if len(rows) < 2:
            raise ValueError(f"pair {pair} has {len(rows)} row(s): validation needs one and training another")
        order = list(range(len(rows)))
        random.Random(f"held-out:{seed}:{i}").shuffle(order)
        k = min(len(rows) - 1, max(1, round(fraction * len(rows))))
        kept = set(order[k:])
        train.append([rows[j] for j in range(len(rows)) if j in kept])
        valid.append([(tag_source(rows[j][0], pair.target), rows[j][1]) for j in sorted(order[:k])])
    return train, valid
