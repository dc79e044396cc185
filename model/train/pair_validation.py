"""Validation of a model of several language pairs, pair by pair: each pair's loss, BLEU, chrF, ... under the
metric's name and the pair ("bleu/en-fr"), and the mean over the pairs under the metric's own name ("bleu"), so
the pairs count alike whatever their sizes (a macro average, as multilingual papers report it).

A single validation set (a job of one pair, or denoising) is the set named "" and keeps its plain names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from model.data.batching import Batch, Example, TokenBatcher

SINGLE = ""  # the name of the one validation set of a job that is not split by pair


@dataclass(frozen=True)
class ValidationSet:
    batches: list[Batch]  # teacher-forced: every example of the set
    decode: list[Example]  # translated greedily for BLEU and chrF: the set's share of eval_max_sentences


def validation_sets(
    examples: Sequence[Example], groups: Sequence[str], max_tokens: int, max_sentences: int, translate: bool
) -> dict[str, ValidationSet]:
    """The validation examples as one set, or as a set a pair when `groups` names each example's pair. The
    sentences decoded are the first max_sentences of the examples (prepare() interleaves the pairs, so each pair
    gets its share), split by pair."""
    if groups and len(groups) != len(examples):
        raise ValueError(f"{len(groups)} pair names for {len(examples)} validation examples")
    names = list(groups) if groups else [SINGLE] * len(examples)
    by_pair: dict[str, list[Example]] = {}
    for name, example in zip(names, examples):
        by_pair.setdefault(name, []).append(example)
    decoded = set(range(min(max_sentences, len(examples)))) if translate else set()
    sets = {}
    for name, members in by_pair.items():
        batch_tokens = max(max_tokens, max(e.size for e in members))
        decode = [e for i, (n, e) in enumerate(zip(names, examples)) if n == name and i in decoded]
        sets[name] = ValidationSet(list(TokenBatcher(members, batch_tokens, shuffle=False)), decode)
    return sets


def pair_metrics(per_pair: dict[str, dict[str, float]]) -> dict[str, float]:
    """One evaluation's metrics: a single set's as they are; several pairs' under "name/pair" and their mean
    under "name" (a metric some pair lacks, e.g. BLEU where no sentence of that pair was decoded, is averaged over
    the pairs that have it)."""
    if set(per_pair) == {SINGLE}:
        return dict(per_pair[SINGLE])
    out: dict[str, float] = {}
    for pair, metrics in per_pair.items():
        out.update({f"{name}/{pair}": value for name, value in metrics.items()})
    names = dict.fromkeys(name for metrics in per_pair.values() for name in metrics)
    for name in names:
        values = [metrics[name] for metrics in per_pair.values() if name in metrics]
        out[name] = sum(values) / len(values)
    return out


def evaluate_sets(
    sets: dict[str, ValidationSet], evaluate_one: Callable[[ValidationSet], dict[str, float]]
) -> dict[str, float]:
    """pair_metrics of evaluate_one run on every set."""
    return pair_metrics({name: evaluate_one(s) for name, s in sets.items()})


def metric_key(name: str, pair: str | None) -> str:
    """The key of `name` for one pair ("bleu/en-nl"), or of the mean over the pairs (pair None)."""
    return f"{name}/{pair}" if pair else name
