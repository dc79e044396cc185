"""Is a target the translation of its source? A lexical association model learnt from the corpus itself.

A misaligned pair (a target shuffled from another row, a sentence split or merged wrongly) looks like any other
pair by its lengths and languages; what gives it away is that its words do not go together. Since clean pairs
dominate a corpus, the associations between source and target words can be learnt from the corpus it checks:

1. Sample (`Reservoir`: a uniform sample of at most 50,000 pairs, seeded, from a stream of unknown length).
2. Words: lower-cased runs of two or more letters, or of digits (numbers are anchors); punctuation, placeholders
   and one-letter words are dropped. Each sentence counts as the set of its first MAX_WORDS distinct words.
3. Co-occurrence: over the sample, how many pairs hold source word s and target word t, for the VOCAB most
   frequent words of each side (a dense VOCAB x VOCAB int32 table: 64 MiB at 4,096), and Dice's coefficient
   2 c(s, t) / (c(s) + c(t)). Each word's partners are its PARTNERS best-associated words of the other side, seen
   together at least twice, with a Dice of MIN_DICE or more and at least RELATIVE_DICE times the best partner's
   (without it, frequent words that merely occur in the same kind of sentence ride along as partners).
4. Evidence (a naive Bayes log-likelihood ratio): for a source word s, a *hit* is a pair whose target holds one
   of s's partners. From the sample, p(s) = P(hit | s in a pair), with add-one smoothing; for a random target,
   q(s) = P(hit) ~ the summed document frequency of s's partners. A hit adds log(p / q), a miss
   log((1 - p) / (1 - q)); the same from the target words' side; words with p <= q tell nothing and are left out.
5. A pair's score is the sum; below THRESHOLD (-5: by these estimates the pair is e^5 = 150 times likelier a
   random target than a translation; the naive independence overstates it, hence the margin) it is misaligned.
   A pair none of whose words has partners is unscored (None): one-word UI strings with rare words, or languages
   written without spaces (Chinese, Japanese, Thai: a whole sentence reads as one word here).
6. Recall (`random_recall`): the share of the corpus's own random pairings (the sample's targets moved along a
   random cycle) that fall below the threshold, by which the data report divides its count of misaligned pairs to
   estimate how many there are (93-95% on the gettext corpora).

Memory: the sample (texts cut to 300 characters: 50,000 x 2 x at most 1.2 KB, typically 10 MB) until `fit`,
which then peaks at about 175 MB (the 64 MiB table, the sample's word lists and id arrays: tracemalloc on 48,000
gettext pairs; about 220 MB of process memory); the fitted model keeps its vocabularies and partners (5 MB).
Measured on the gettext corpora of bench/corpus.py (en-fr, en-de, en-es; 40,000-54,000 pairs), one core: fit
in 2.5-4.5 s; scoring 40,000-100,000 pairs a second (depending on the machine's load). With 2.5% of the targets
shuffled, the threshold flags 0.2-0.4% of the other pairs and 87-96% of the shuffled ones.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from model.data.problems import is_blank, is_copy

SAMPLE = 50_000
SAMPLE_CHARS = 300
VOCAB = 4096
MAX_WORDS = 32
PARTNERS = 3
MIN_DICE = 0.05
RELATIVE_DICE = 0.3  # a partner's Dice is at least 0.3 of the best one's: else frequent words ride along
THRESHOLD = -5.0
MIN_RANDOM_PAIRS = 100  # random pairings scored at least, to measure the share the threshold catches
_WORD = re.compile(r"[^\W\d_]{2,}|\d+")
_CHUNK_CODES = 2_000_000  # co-occurrence codes counted at once (16 MB of int64)


def is_scorable(source: str, target: str) -> bool:
    """A pair the model learns from and scores: both sides non-blank, and not a copy (those are problems of their
    own, which would teach that English goes with English)."""
    return not is_blank(source) and not is_blank(target) and not is_copy(source, target)


def words(text: str) -> list[str]:
    """The distinct words of `text` that the association model reads, in order, at most MAX_WORDS."""
    return list(dict.fromkeys(_WORD.findall(text.lower())))[:MAX_WORDS]


class Reservoir:
    """A uniform random sample of at most `size` rows (line, source, target) from a stream (Algorithm R).

    Seeded, so the same stream gives the same sample; texts are cut to SAMPLE_CHARS characters."""

    def __init__(self, size: int = SAMPLE, seed: int = 0) -> None:
        if size < 1:
            raise ValueError(f"size={size} must be at least 1")
        self.size = size
        self.seen = 0
        self.rows: list[tuple[int, str, str]] = []
        self._random = random.Random(seed)

    def add(self, line: int, source: str, target: str) -> None:
        self.seen += 1
        if len(self.rows) < self.size:
            self.rows.append((line, source[:SAMPLE_CHARS], target[:SAMPLE_CHARS]))
            return
        slot = self._random.randrange(self.seen)
        if slot < self.size:
            self.rows[slot] = (line, source[:SAMPLE_CHARS], target[:SAMPLE_CHARS])


def _vocabulary(sentences: list[list[str]], size: int) -> dict[str, int]:
    frequency = Counter(word for sentence in sentences for word in sentence)
    return {word: i for i, (word, _) in enumerate(frequency.most_common(size))}


def _ids(sentences: list[list[str]], vocabulary: dict[str, int]) -> list[np.ndarray]:
    return [np.array([vocabulary[w] for w in sentence if w in vocabulary], dtype=np.int64) for sentence in sentences]


def _cooccurrence(source_ids: list[np.ndarray], target_ids: list[np.ndarray], size: int) -> np.ndarray:
    """(size, size) int32: in how many pairs source word i and target word j occur together."""
    counts = np.zeros(size * size, dtype=np.int32)
    chunk: list[np.ndarray] = []
    pending = 0

    def flush() -> None:
        codes, repeats = np.unique(np.concatenate(chunk), return_counts=True)
        counts[codes] += repeats.astype(np.int32)  # codes are distinct: a plain fancy-index add is exact

    for s, t in zip(source_ids, target_ids):
        if len(s) and len(t):
            chunk.append((s[:, None] * size + t[None, :]).ravel())
            pending += len(chunk[-1])
        if pending >= _CHUNK_CODES:
            flush()
            chunk, pending = [], 0
    if chunk:
        flush()
    return counts.reshape(size, size)


def _partners(counts: np.ndarray, row_df: np.ndarray, column_df: np.ndarray) -> list[frozenset[int]]:
    """For each row word, its best columns by Dice (at most PARTNERS, Dice >= MIN_DICE, seen together twice)."""
    partners: list[frozenset[int]] = []
    k = min(PARTNERS, counts.shape[1])
    for start in range(0, counts.shape[0], 512):  # in blocks: a float table of the whole would double the memory
        block = counts[start : start + 512]
        dice = 2.0 * block / (row_df[start : start + 512, None] + column_df[None, :])
        dice[block < 2] = 0.0
        best = np.argpartition(-dice, k - 1, axis=1)[:, :k]  # the k largest, in no order
        for row, columns in zip(dice, best):
            floor = max(MIN_DICE, RELATIVE_DICE * float(row[columns].max(initial=0.0)))
            partners.append(frozenset(int(c) for c in columns if row[c] >= floor))
    return partners


def _evidence(
    ids: list[np.ndarray],
    other_sets: list[frozenset[int]],
    partners: list[frozenset[int]],
    other_df: np.ndarray,
) -> tuple[dict[int, float], dict[int, float]]:
    """log(p/q) for a hit and log((1-p)/(1-q)) for a miss, for each word whose hits are evidence (p > q)."""
    n = len(ids)
    seen = np.zeros(len(partners))
    hits = np.zeros(len(partners))
    for sentence, other in zip(ids, other_sets):
        for word in sentence.tolist():
            if partners[word]:
                seen[word] += 1
                hits[word] += not partners[word].isdisjoint(other)
    hit: dict[int, float] = {}
    miss: dict[int, float] = {}
    for word, found in enumerate(partners):
        if not found or not seen[word]:
            continue
        p = (hits[word] + 1) / (seen[word] + 2)
        q = min(0.99, max(1e-4, float(sum(other_df[j] for j in found)) / n))
        if p > q:
            hit[word] = math.log(p / q)
            miss[word] = math.log((1 - p) / (1 - q))
    return hit, miss


class LexicalAssociations:
    """Scores pairs by how well their words go together; see the module docstring. Build it with `fit`."""

    def __init__(
        self,
        source_vocabulary: dict[str, int],
        target_vocabulary: dict[str, int],
        source_partners: list[frozenset[int]],
        target_partners: list[frozenset[int]],
        source_evidence: tuple[dict[int, float], dict[int, float]],
        target_evidence: tuple[dict[int, float], dict[int, float]],
        pairs: int,
        threshold: float = THRESHOLD,
    ) -> None:
        self.source_vocabulary = source_vocabulary
        self.target_vocabulary = target_vocabulary
        self.source_partners = source_partners
        self.target_partners = target_partners
        self.source_evidence = source_evidence
        self.target_evidence = target_evidence
        self.pairs = pairs  # how many pairs it was learnt from
        self.threshold = threshold

    @classmethod
    def fit(
        cls, pairs: Iterable[tuple[str, str]], vocab: int = VOCAB, threshold: float = THRESHOLD
    ) -> LexicalAssociations:
        """Learn the associations from `pairs` (a sample: they are all held in memory as word lists)."""
        if vocab < 2:
            raise ValueError(f"vocab={vocab} must be at least 2")
        source_words: list[list[str]] = []
        target_words: list[list[str]] = []
        for source, target in pairs:
            source_words.append(words(source))
            target_words.append(words(target))
        source_vocabulary = _vocabulary(source_words, vocab)
        target_vocabulary = _vocabulary(target_words, vocab)
        size = max(len(source_vocabulary), len(target_vocabulary), 2)
        source_ids, target_ids = _ids(source_words, source_vocabulary), _ids(target_words, target_vocabulary)
        del source_words, target_words
        counts = _cooccurrence(source_ids, target_ids, size)
        source_df = np.bincount(np.concatenate([np.zeros(0, np.int64), *source_ids]), minlength=size)
        target_df = np.bincount(np.concatenate([np.zeros(0, np.int64), *target_ids]), minlength=size)
        source_partners = _partners(counts, source_df.astype(np.float32), target_df.astype(np.float32))
        target_partners = _partners(counts.T, target_df.astype(np.float32), source_df.astype(np.float32))
        del counts
        source_sets = [frozenset(ids.tolist()) for ids in source_ids]
        target_sets = [frozenset(ids.tolist()) for ids in target_ids]
        return cls(
            source_vocabulary,
            target_vocabulary,
            source_partners,
            target_partners,
            _evidence(source_ids, target_sets, source_partners, target_df),
            _evidence(target_ids, source_sets, target_partners, source_df),
            pairs=len(source_ids),
            threshold=threshold,
        )

    def score(self, source: str, target: str) -> float | None:
        """The pair's log-likelihood ratio, aligned against random (higher: more likely a translation); None when
        no word of either side carries evidence."""
        source_ids = [self.source_vocabulary[w] for w in words(source) if w in self.source_vocabulary]
        target_ids = [self.target_vocabulary[w] for w in words(target) if w in self.target_vocabulary]
        forward, n_forward = _side_score(source_ids, frozenset(target_ids), self.source_partners, self.source_evidence)
        backward, n_backward = _side_score(
            target_ids, frozenset(source_ids), self.target_partners, self.target_evidence
        )
        return forward + backward if n_forward + n_backward else None

    def is_misaligned(self, source: str, target: str) -> tuple[bool, float | None]:
        """(whether the pair scores below the threshold, its score)."""
        score = self.score(source, target)
        return score is not None and score < self.threshold, score


def _side_score(
    ids: list[int],
    other: frozenset[int],
    partners: list[frozenset[int]],
    evidence: tuple[dict[int, float], dict[int, float]],
) -> tuple[float, int]:
    hit, miss = evidence
    total, used = 0.0, 0
    for word in ids:
        if word in hit:
            used += 1
            total += hit[word] if not partners[word].isdisjoint(other) else miss[word]
    return total, used


def random_recall(model: LexicalAssociations, pairs: Sequence[tuple[str, str]], seed: int = 0) -> float | None:
    """The share of random pairings that `model` flags as misaligned, among those it scores: the sources of `pairs`
    (a sample of the corpus, e.g. the Reservoir's) with the targets moved along one cycle of a seeded random order,
    as a shuffle moves them (not to the next pair: neighbouring rows of a file are often about the same thing).
    None when fewer than MIN_RANDOM_PAIRS are scored: too few to divide by."""
    order = random.Random(seed).sample(range(len(pairs)), len(pairs))
    flagged = scored = 0
    for i, j in zip(order, order[1:]):
        source, target = pairs[i][0], pairs[j][1]
        if not is_scorable(source, target):
            continue
        misaligned, score = model.is_misaligned(source, target)
        scored += score is not None
        flagged += misaligned
    return flagged / scored if scored >= MIN_RANDOM_PAIRS else None


def fit_alignment(rows: Iterable[tuple[int, str, str]], sample: int = SAMPLE, seed: int = 0) -> LexicalAssociations:
    """A model learnt from a uniform sample of the scorable pairs of `rows`: the same sample, hence the same model,
    as ReportBuilder.alignment() gets from the same rows."""
    reservoir = Reservoir(sample, seed)
    for line, source, target in rows:
        if is_scorable(source, target):
            reservoir.add(line, source, target)
    return LexicalAssociations.fit((source, target) for _, source, target in reservoir.rows)
