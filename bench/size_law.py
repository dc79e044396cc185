"""Fit the size rule's loss law to the validation curves our own jobs recorded, and check the choice it makes.

    python -m bench.size_law bench/results/quality-*-presets-*.json

model/train/size_choice.py predicts each preset's loss after a time budget with L(N, D) = E + A / N^ALPHA +
B / D^BETA (Hoffmann et al., 2022), N and D discounted for a small corpus as in Muennighoff et al. (2023). Hoffmann's
constants were fitted to language models of 70M-16B parameters; at our presets' 0.2M-5.5M they spread the N term
over 4 nats where our jobs showed about 1.5, and the rule chose `small` where `tiny` won by 11 BLEU.

This is Hoffmann's approach 3 on our data: every point of every curve (valid loss after a job's first warm-up, at
the batch tokens seen by then: the inverse-square-root schedule makes a longer run's curve pass through a shorter
run's end) is one observation; the fit minimises the Huber loss (delta 1e-3) between log L and
log(exp(a - alpha log N) + exp(b - beta log D) + exp(e)) with L-BFGS from a grid of starts. With fewer than three
sizes in the data, alpha stays Hoffmann's (two sizes measure A / N^alpha at two points only).

Then, for each budget the files measured with two presets or more, the choice the fitted law makes from what each
preset trained on (its batch tokens) against the BLEU each scored. Prints a line per run and per budget, then one JSON
object: the constants, and `ratio` = the lowest over budgets of (BLEU of the preset the law picks / the best BLEU).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import huber, logsumexp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model.nn.config import ModelConfig  # noqa: E402
from model.probes.anatomy import non_embedding_parameters  # noqa: E402
from model.train.size_choice import (  # noqa: E402
    HOFFMANN,
    LAW,
    LossLaw,
    effective_parameters,
    effective_tokens,
    prefer_smaller,
)

HUBER_DELTA = 1e-3  # Hoffmann et al.'s
TOKENS_PER_PAIR = 14.15  # batch tokens an en-fr pair of bench/corpus.py makes at vocabulary 4000 (longer side + 1)


def runs_of(path: Path) -> list[dict[str, Any]]:
    """The runs of a bench/quality.py result with a valid-loss curve: preset, corpus, tokens a step, points."""
    result = json.loads(path.read_text())
    pairs = result["corpus"]["train"]
    out = []
    for name, run in result["runs"].items():
        if not run.get("valid_loss"):
            continue
        chosen = run["auto_settings"]["chosen"]
        preset = chosen.get("preset") or name
        corpus_tokens = pairs * TOKENS_PER_PAIR
        for p in run.get("preset_predictions") or ():  # an auto run knows its corpus's tokens exactly
            corpus_tokens = p["tokens"] / p["epochs"]
        out.append(
            {
                "file": path.name,
                "run": name,
                "minutes": result["minutes"],
                "preset": preset,
                "bleu": run["bleu"],
                "steps": run["steps"],
                "batch": chosen["max_tokens_per_batch"],
                "warmup": chosen["warmup_steps"],
                "tokens_seen": run.get("tokens_seen"),
                "corpus_tokens": corpus_tokens,
                "parameters": non_embedding_parameters(ModelConfig.from_preset(preset, chosen["vocab_size"])),
                "curve": [(int(s), float(v)) for s, v in run["valid_loss"]],
            }
        )
    fills = [r["tokens_seen"] / (r["steps"] * r["batch"]) for r in out if r["tokens_seen"]]
    fill = float(np.mean(fills)) if fills else 0.8
    for r in out:  # older results recorded no tokens: the batch's mean fill in the runs that did
        r["tokens_per_step"] = r["tokens_seen"] / r["steps"] if r["tokens_seen"] else r["batch"] * fill
    return out


def observations(runs: list[dict[str, Any]]) -> np.ndarray:
    """(N', D', L) for every curve point past its run's warm-up, N' and D' as the rule discounts them."""
    rows = []
    for r in runs:
        for step, loss in r["curve"]:
            if step >= r["warmup"]:
                n = effective_parameters(r["parameters"], int(r["corpus_tokens"]))
                d = effective_tokens(step * r["tokens_per_step"], int(r["corpus_tokens"]))
                rows.append((n, d, loss))
    return np.array(rows, dtype=float)


def fit(points: np.ndarray, fixed_alpha: float | None) -> LossLaw:
    """Hoffmann et al.'s approach 3: Huber on log L, L-BFGS from a grid of starts; the best end wins."""
    log_n, log_d, log_l = np.log(points[:, 0]), np.log(points[:, 1]), np.log(points[:, 2])

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        """The Huber loss and its gradient in (a, b, e, beta[, alpha])."""
        a, b, e, beta = theta[:4]
        alpha = fixed_alpha if fixed_alpha is not None else theta[4]
        terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])  # (3, points)
        predicted = logsumexp(terms, axis=0)
        residual = predicted - log_l
        slope = np.clip(residual, -HUBER_DELTA, HUBER_DELTA)  # the Huber loss's derivative
        share = np.exp(terms - predicted)  # each term's share of the sum: d predicted / d term
        grad = [slope @ share[0], slope @ share[1], slope @ share[2], -(slope * share[1]) @ log_d]
        if fixed_alpha is None:
            grad.append(-(slope * share[0]) @ log_n)
        return float(np.sum(huber(HUBER_DELTA, residual))), np.array(grad)

    alphas = [None] if fixed_alpha is not None else [0.2, 0.5, 1.0]
    best = None
    for a, b, e, beta, alpha in itertools.product((0, 5, 10), (0, 5, 10, 15), (-1, 0, 0.5), (0.2, 0.5, 0.8), alphas):
        start = np.array([a, b, e, beta] + ([] if alpha is None else [alpha]), dtype=float)
        found = minimize(objective, start, method="L-BFGS-B", jac=True)
        if best is None or found.fun < best.fun:
            best = found
    assert best is not None
    a, b, e, beta = best.x[:4]
    alpha = fixed_alpha if fixed_alpha is not None else best.x[4]
    return LossLaw(
        round(math.exp(e), 4),
        round(math.exp(a), 4),
        round(float(alpha), 4),
        round(math.exp(b), 4),
        round(float(beta), 4),
    )


def final_loss(law: LossLaw, run: dict[str, Any], tokens: float) -> float:
    u = int(run["corpus_tokens"])
    return law.loss(effective_parameters(run["parameters"], u), effective_tokens(tokens, u))


def pick(law: LossLaw, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule's choice (size_choice.prefer_smaller) among runs of one budget, at the tokens each trained on."""
    ordered = sorted(runs, key=lambda r: r["parameters"])
    return ordered[prefer_smaller([final_loss(law, r, r["steps"] * r["tokens_per_step"]) for r in ordered])]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="bench/quality.py results with valid_loss curves")
    args = parser.parse_args(argv)
    runs = [r for path in args.results for r in runs_of(path)]
    points = observations(runs)
    sizes = {r["parameters"] for r in runs}
    law = fit(points, None if len(sizes) >= 3 else HOFFMANN.alpha)
    print(f"{len(points)} points from {len(runs)} runs, {len(sizes)} sizes; fitted {law}; the rule has {LAW}")
    for r in runs:
        tokens = r["steps"] * r["tokens_per_step"]
        print(
            f"  {r['file']} {r['run']}: {r['preset']} {tokens / 1e6:.2f}M tokens ({tokens / r['corpus_tokens']:.1f} "
            f"epochs): valid loss {r['curve'][-1][1]:.2f}, fitted {final_loss(law, r, tokens):.2f}, "
            f"Hoffmann's {final_loss(HOFFMANN, r, tokens):.2f}; BLEU {r['bleu']}"
        )
    budgets = []
    for (file, minutes), group in itertools.groupby(
        sorted(runs, key=lambda r: (r["file"], r["minutes"])), key=lambda r: (r["file"], r["minutes"])
    ):
        fixed = {}
        for r in group:  # one run a preset: the fixed one where an auto run chose the same
            fixed.setdefault(r["preset"], r) if r["run"] == "auto" else fixed.__setitem__(r["preset"], r)
        if len(fixed) < 2:
            continue
        chosen, was = pick(law, list(fixed.values())), pick(HOFFMANN, list(fixed.values()))
        best = max(fixed.values(), key=lambda r: r["bleu"])
        budgets.append(
            {
                "file": file,
                "minutes": minutes,
                "bleu": {p: r["bleu"] for p, r in fixed.items()},
                "fitted_picks": chosen["preset"],
                "hoffmann_picks": was["preset"],
                "best": best["preset"],
                "ratio": round(chosen["bleu"] / best["bleu"], 3),
            }
        )
        print(
            f"  {minutes:g} min ({file}): the fitted law picks {chosen['preset']}, Hoffmann's {was['preset']}; "
            f"best {best['preset']}"
        )
    out = {
        "bench": "size_law",
        "points": len(points),
        "runs": len(runs),
        "sizes": sorted(sizes),
        "law": asdict(law),
        "hoffmann": asdict(HOFFMANN),
        "rule_now": asdict(LAW),
        "budgets": budgets,
        "ratio": min((b["ratio"] for b in budgets), default=None),
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
