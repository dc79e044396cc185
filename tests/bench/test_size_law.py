"""bench/size_law.py: the fit recovers a law it is given; the rule's constants are the fit of the committed curves."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from bench.size_law import fit, main
from model.train.size_choice import LAW, LossLaw

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def test_the_fit_recovers_the_constants_of_curves_drawn_from_a_known_law():
    """Curves of two sizes drawn from a known law, 1% noise. Pass: every constant within 15%, alpha held."""
    truth = LossLaw(irreducible=1.2, a=60.0, alpha=0.34, b=2000.0, beta=0.5)
    rng = np.random.default_rng(0)
    points = [
        (n, d, truth.loss(n, d) * (1 + 0.01 * rng.standard_normal()))
        for n in (2.3e5, 5.5e6)
        for d in np.geomspace(3e5, 3e7, 12)
    ]
    found = fit(np.array(points), fixed_alpha=0.34)
    assert found.alpha == 0.34
    for name in ("irreducible", "a", "b", "beta"):
        assert getattr(found, name) == pytest.approx(getattr(truth, name), rel=0.15), (name, found)


def test_the_rule_uses_the_fit_of_the_committed_curves_and_it_picks_each_measured_winner(capsys):
    """Pass: the law fitted to bench/results' preset curves is the rule's LAW, and it picks the preset that won every
    budget measured there (where Hoffmann's constants did not)."""
    files = sorted(str(p) for p in RESULTS.glob("quality-*-service-presets-*.json"))
    assert len(files) >= 2
    out = main(files)
    assert out["law"] == pytest.approx(asdict(LAW), rel=1e-3, abs=1e-3)
    assert out["ratio"] == 1.0 and all(b["fitted_picks"] == b["best"] for b in out["budgets"])
    assert any(b["hoffmann_picks"] != b["best"] for b in out["budgets"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith('{"bench": "size_law"')
