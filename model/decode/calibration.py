"""When a translation's confidence is low enough to need a human: a threshold calibrated on held-out pairs.

A model's confidence (model/decode/scoring.py: the geometric mean of its tokens' probabilities) is a quality
estimate of the glass-box kind (Fomicheva et al., 2020: the length-normalised log-probability of the output
correlates with human judgements as well as trained estimators for many pairs). Its scale is the model's own: a
`tiny` model at 0.4 and a `big` one at 0.8 may be equally wrong. So the threshold is found per model, on pairs it
did not train on: translate their sources, score each translation against its reference with sentence chrF,
and cut the sentences sorted by confidence where the two groups differ most in chrF, in the sense of Otsu's
threshold (the cut that maximises the between-group variance n_low n_high (mean_low - mean_high)^2 / n^2), with
the flagged share kept between MIN_SHARE and MAX_SHARE: a flag raised on almost every sentence, or on one,
tells a reviewer nothing.

What the calibration reports is what the model's page shows: the threshold, the share of held-out sentences it
flags, their mean chrF against the others', and the rank correlation of confidence with chrF (Spearman), which
says how far the flag can be trusted at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import sacrebleu
import torch

from model.data.tokenizer import Tokenizer
from model.decode.batches import CPU_BATCH_SENTENCES
from model.decode.queries import translate
from model.nn.transformer import Transformer

MIN_SENTENCES = 20  # fewer held-out pairs calibrate nothing worth showing
MIN_SHARE, MAX_SHARE = 0.05, 0.5  # of the held-out sentences a threshold may flag


@dataclass(frozen=True)
class Calibration:
    threshold: float  # a translation whose confidence is below it is flagged low_confidence
    sentences: int  # held-out pairs it was calibrated on
    flagged_share: float  # of those, the share below the threshold
    flagged_chrf: float | None  # mean sentence chrF of the flagged ones; None when none is
    other_chrf: float  # and of the others
    spearman: float | None  # rank correlation of confidence with sentence chrF; None when either is constant
    beam_size: int
    backend: str = "pytorch"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibrate(
    confidences: Sequence[float], chrfs: Sequence[float], beam_size: int = 4, backend: str = "pytorch"
) -> Calibration | None:
    """The threshold for these (confidence, sentence chrF) pairs; None for fewer than MIN_SENTENCES. Ties in
    confidence are never split: a threshold flags all of a value or none of it. Where no admissible cut separates
    better from worse (every chrF alike, say), the threshold is the lowest confidence: nothing is flagged."""
    if len(confidences) != len(chrfs):
        raise ValueError(f"{len(confidences)} confidences for {len(chrfs)} chrF scores: one each")
    n = len(confidences)
    if n < MIN_SENTENCES:
        return None
    pairs = sorted(zip(confidences, chrfs))
    total = sum(c for _, c in pairs)
    best: tuple[float, int] | None = None  # (between-group variance, flagged count)
    low_sum = 0.0
    for k in range(1, n):  # k lowest flagged
        low_sum += pairs[k - 1][1]
        if pairs[k - 1][0] == pairs[k][0] or not MIN_SHARE <= k / n <= MAX_SHARE:
            continue
        gap = low_sum / k - (total - low_sum) / (n - k)
        variance = k * (n - k) * gap * gap / (n * n)
        if variance > (best[0] if best else 0.0):  # a cut that separates nothing (chrF all alike) is no flag
            best = (variance, k)
    if best is None:  # every cut splits a tie, leaves the bounds or separates nothing: flag nothing
        k, threshold = 0, pairs[0][0]
    else:
        k = best[1]
        threshold = (pairs[k - 1][0] + pairs[k][0]) / 2
    low, high = [c for _, c in pairs[:k]], [c for _, c in pairs[k:]]
    rho = spearman(confidences, chrfs)
    return Calibration(
        threshold=threshold,
        sentences=n,
        flagged_share=k / n,
        flagged_chrf=sum(low) / len(low) if low else None,
        other_chrf=sum(high) / len(high),
        spearman=rho,
        beam_size=beam_size,
        backend=backend,
    )


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties get their mean rank, as scipy.stats.spearmanr); None when x or y is
    constant. Written here because scipy (35 MB) would be the worker's only use of it and overflow what a GPU host's
    wheels may carry (bench/gpu_wheels.sh); tests/model/decode/test_calibration.py checks it against scipy."""
    if len(set(x)) < 2 or len(set(y)) < 2:
        return None
    rx, ry = _ranks(np.asarray(x, dtype=np.float64)), _ranks(np.asarray(y, dtype=np.float64))
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their ranks."""
    order = values.argsort(kind="stable")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def sentence_chrf(hypothesis: str, reference: str) -> float:
    """chrF of one translation against its reference (sacrebleu), 0-100."""
    return float(sacrebleu.sentence_chrf(hypothesis, [reference]).score)


def calibrate_model(
    model: Transformer,
    tokenizer: Tokenizer,
    sources: Sequence[str],
    references: Sequence[str],
    beam_size: int = 4,
    batch_size: int | None = None,
) -> Calibration | None:
    """Translate the held-out sources by beam search (as the service does with PyTorch), score each translation's
    confidence and chrF against its reference, and calibrate (None for fewer than MIN_SENTENCES pairs)."""
    if len(sources) < MIN_SENTENCES:
        return None
    with torch.inference_mode():
        found = translate(model, tokenizer, sources, beam_size=beam_size, batch_size=batch_size or CPU_BATCH_SENTENCES)
    chrfs = [sentence_chrf(r["text"], ref) for r, ref in zip(found, references, strict=True)]
    return calibrate([r["confidence"] for r in found], chrfs, beam_size)


def confidence_split(
    hypotheses: Sequence[str],
    references: Sequence[str],
    confidences: Sequence[float | None],
    calibration: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """How the model's confidence tells good translations from bad on this test set: the rank correlation of each
    translation's confidence with its sentence chrF, and, for a model with a calibrated low-confidence flag, the
    share it flags and their mean chrF against the others'. None when no translation has a confidence."""
    scored = [(c, sentence_chrf(h, r)) for h, r, c in zip(hypotheses, references, confidences) if c is not None]
    if not scored:
        return None
    out: dict[str, Any] = {
        "sentences": len(scored),
        "mean": round(sum(c for c, _ in scored) / len(scored), 4),
        "spearman": spearman([c for c, _ in scored], [q for _, q in scored]),
    }
    if calibration is not None:
        low = [q for c, q in scored if c < calibration["threshold"]]
        rest = [q for c, q in scored if c >= calibration["threshold"]]
        out.update(
            threshold=calibration["threshold"],
            flagged_share=round(len(low) / len(scored), 4),
            flagged_chrf=round(sum(low) / len(low), 2) if low else None,
            other_chrf=round(sum(rest) / len(rest), 2) if rest else None,
        )
    return out
