"""A translation memory: the segments of a parallel dataset looked up by their source, exactly or fuzzily.

A CAT tool shows a translator the stored translations of sources like the one at hand, with a match score: 100 for
the same source, less as edits are needed. The score here is rapidfuzz's normalised Indel similarity of the two
sources (fuzz.ratio, 0-100: 100 * (1 - insertions and deletions / (len a + len b))), on whitespace-normalised text,
case kept (a case difference costs a point or two, as in most CAT tools).

Comparing a query with every segment of a 1M-segment memory takes far longer than a request may wait, so the
lookup narrows first, as search engines and TM servers do:
- exact: the hash of each normalised source, sorted (np.searchsorted), then the stored source compared;
- fuzzy: an inverted index from lowercased words to the segments holding them (CSR arrays: a segment id per
  (word, segment)). A query's words are taken rarest first while their postings stay under POSTINGS_BUDGET (the
  rarest always), the segments are counted by the words they share (np.bincount), those whose length cannot reach
  min_score are dropped (the ratio is at most 200 * min(len a, len b) / (len a + len b)), and the CANDIDATES that
  share the most words are scored by rapidfuzz. A segment sharing no word with the query is never found; such a
  segment scores low anyway. Recall against scoring every segment is measured in bench/memory_lookup.py.

The rows stay in a TextRows file (model/data/text_rows.py), read for the candidates only; the index holds
integers: 62 MB for 1M segments of about 20 words, built in 6 s. There a lookup took 6.2 ms at the median (19x
faster than scoring every segment with rapidfuzz) and found the same best score as that for every query sampled
(bench/memory_lookup.py, bench/results/memory_lookup-cpu-1m-2026-11-29.json).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

WORD = re.compile(r"\w+")
POSTINGS_BUDGET = 200_000  # segment ids counted per query, at most (beyond the rarest word's)
CANDIDATES = 300  # segments scored by edit distance per query


def normalise(text: str) -> str:
    """Whitespace collapsed and trimmed: what the score compares and what an exact match means."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Match:
    source: str
    target: str
    score: float  # 0-100; 100 for the same source (whitespace aside)
    segment: int  # its row in the dataset's pairs


class TranslationMemory:
    """Exact and fuzzy lookup over `pairs` (source, target), which it keeps and reads at lookup time."""

    def __init__(self, pairs: Sequence[tuple[str, str]]) -> None:
        self.pairs = pairs
        n = len(pairs)
        hashes = np.empty(n, dtype=np.int64)
        lengths = np.empty(n, dtype=np.int32)
        vocabulary: dict[str, int] = {}
        words: list[int] = []  # word id of each (word, segment), in segment order
        counts = np.empty(n, dtype=np.int32)  # distinct words a segment holds
        for i, (source, _) in enumerate(pairs):
            key = normalise(source)
            hashes[i], lengths[i] = hash(key), len(key)
            ids = {vocabulary.setdefault(w, len(vocabulary)) for w in WORD.findall(key.lower())}
            words.extend(ids)
            counts[i] = len(ids)
        self._order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[self._order]
        self._lengths = lengths
        self._vocabulary = vocabulary
        word_ids = np.asarray(words, dtype=np.int32)
        segment_ids = np.repeat(np.arange(n, dtype=np.int32), counts)
        by_word = np.argsort(word_ids, kind="stable")  # postings in segment order within each word
        self._postings = segment_ids[by_word]
        self._indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(word_ids, minlength=len(vocabulary)), out=self._indptr[1:])

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def nbytes(self) -> int:
        """Bytes of the index's arrays (the vocabulary's dict and the rows themselves aside)."""
        arrays = (self._order, self._hashes, self._lengths, self._postings, self._indptr)
        return sum(a.nbytes for a in arrays)

    def lookup(self, text: str, min_score: float = 75.0, limit: int = 3) -> list[Match]:
        """Up to `limit` segments whose source scores at least min_score against `text`, best first (exact
        matches first of all)."""
        if not 0 <= min_score <= 100:
            raise ValueError(f"min_score={min_score} must be in [0, 100]")
        if limit < 1:
            raise ValueError(f"limit={limit} must be >= 1")
        key = normalise(text)
        exact = self._exact(key)
        found = [Match(key, self.pairs[i][1], 100.0, i) for i in exact[:limit]]
        if len(found) == limit:
            return found
        candidates = [int(i) for i in self._candidates(key, min_score) if int(i) not in exact]
        if candidates:
            from rapidfuzz import fuzz, process  # here: a worker starts without it (tests/test_optional_imports.py)

            sources = [normalise(self.pairs[i][0]) for i in candidates]
            scored = process.extract(key, sources, scorer=fuzz.ratio, score_cutoff=min_score, limit=limit)
            found += [
                Match(sources[j], self.pairs[candidates[j]][1], round(float(s), 2), candidates[j]) for _, s, j in scored
            ]
        return sorted(found, key=lambda m: -m.score)[:limit]

    def _exact(self, key: str) -> list[int]:
        h = hash(key)
        lo, hi = np.searchsorted(self._hashes, h, "left"), np.searchsorted(self._hashes, h, "right")
        return [int(i) for i in sorted(self._order[lo:hi]) if normalise(self.pairs[int(i)][0]) == key]

    def _candidates(self, key: str, min_score: float) -> np.ndarray:
        """The segments most like `key` by the characters of the words they share (an estimate of the score that
        ignores order: 200 x shared word characters / (len a + len b)), among those whose length can reach
        min_score."""
        words = {w for w in WORD.findall(key.lower()) if w in self._vocabulary}
        ids = sorted(
            ((self._vocabulary[w], len(w) + 1) for w in words),  # a word and the space beside it
            key=lambda item: self._indptr[item[0] + 1] - self._indptr[item[0]],
        )
        if not ids:
            return np.empty(0, dtype=np.int32)
        chosen: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        total = 0
        for w, chars in ids:  # rarest first
            size = int(self._indptr[w + 1] - self._indptr[w])
            if chosen and total + size > POSTINGS_BUDGET:
                break
            chosen.append(self._postings[self._indptr[w] : self._indptr[w + 1]])
            weights.append(np.full(size, chars, dtype=np.float32))
            total += size
        hits, hit_chars = np.concatenate(chosen), np.concatenate(weights)
        segments: np.ndarray
        shared: np.ndarray
        if total * 16 < len(self._lengths):  # few: sorting them is cheaper than a sum per segment
            segments, inverse = np.unique(hits, return_inverse=True)
            shared = np.bincount(inverse, weights=hit_chars)
        else:
            per_segment = np.bincount(hits, weights=hit_chars)
            segments = np.flatnonzero(per_segment)
            shared = per_segment[segments]
        n = len(key)
        lengths = self._lengths[segments].astype(np.float64)
        reachable = 200.0 * np.minimum(lengths, n) / np.maximum(lengths + n, 1) >= min_score
        segments = segments[reachable]
        estimate = shared[reachable] / (lengths[reachable] + n)
        if len(segments) > CANDIDATES:
            top = np.argpartition(-estimate, CANDIDATES - 1)[:CANDIDATES]
            segments = segments[top]
        return segments
