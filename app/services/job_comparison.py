"""Comparing jobs side by side (the pure part of GET /v1/jobs/compare): settings flattened to dotted keys, the
keys whose values differ, and each metric series' best and final value.

Which value of a series is best is decided by its name (`better`): lower for losses and perplexities (a name
ending in `loss` or `ppl`), higher for scores (a name containing `bleu`, `chrf`, `accuracy` or `exact_match`);
any other series (`lr`, `grad_norm`, `tokens_per_second`) has a final value but no best.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

MAX_JOBS = 10
HIGHER_IS_BETTER = ("bleu", "chrf", "accuracy", "exact_match")
LOWER_IS_BETTER = ("loss", "ppl")  # suffixes: train_loss, valid_nll_loss, valid_ppl


def parse_ids(text: str) -> list[str]:
    """The ids of `?ids=a,b,c`, in order; ValueError saying what is wrong for fewer than 2, more than MAX_JOBS or
    an id given twice."""
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if len(ids) < 2 or len(ids) > MAX_JOBS:
        raise ValueError(f"give 2 to {MAX_JOBS} comma-separated job ids, got {len(ids)}")
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"job ids given more than once: {', '.join(repeated)}")
    return ids


def flatten(sections: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"model": {"d_model": 64}} -> {"model.d_model": 64}; lists and scalars are leaves."""
    out: dict[str, Any] = {}
    for key, value in sections.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def differing(settings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The sorted keys whose values are not all equal; a key one job lacks (an older job) counts as None there."""
    keys = set().union(*settings) if settings else set()
    return sorted(k for k in keys if any(s.get(k) != settings[0].get(k) for s in settings[1:]))


def better(name: str) -> Literal["min", "max"] | None:
    """Whether a lower ("min") or higher ("max") value of the metric `name` is better; None when neither is."""
    if name.endswith(LOWER_IS_BETTER):
        return "min"
    if any(word in name for word in HIGHER_IS_BETTER):
        return "max"
    return None


def best_and_final(name: str, steps: Sequence[int], values: Sequence[float]) -> dict[str, Any]:
    """{"best", "best_step", "final", "final_step"} of a non-empty series ordered by step; best is None for a
    metric with no better direction. Ties keep the earliest step."""
    direction = better(name)
    best = best_step = None
    if direction is not None:
        pick = min if direction == "min" else max
        index = pick(range(len(values)), key=values.__getitem__)
        best, best_step = values[index], steps[index]
    return {"best": best, "best_step": best_step, "final": values[-1], "final_step": steps[-1]}
