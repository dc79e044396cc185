"""A sweep against the time-budget defaults, on the real corpus of bench/quality.py, through the service.

    python bench/sweep.py --budget-minutes 60 --trial-minutes 10

One embedded service (`python -m app.cli serve`: one training worker, so trials run one at a time) trains:

  defaults  one job of the `small` preset with max_minutes = --trial-minutes and nothing else: the worker chooses
            vocabulary, batch, warm-up and steps from the budget (model/train/budget.py), the job's defaults do
            the rest;
  sweep     POST /v1/sweeps with the same fixed fields and a space over the settings users ask about (learning
            rate scale, warm-up, dropout, label smoothing, vocabulary), TPE and ASHA on --metric, --budget-minutes
            of worker time; its best trial's model is name@best.

Both models translate the test set over HTTP (beam 4) and are scored with sacrebleu. Without pruning the budget
buys budget / trial-minutes trials (each trial takes at least its minutes of worker time); `trials_ratio` is the
trials the sweep ran over that. The last line is one JSON object with `ratio` = the sweep's best BLEU / the
defaults' BLEU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.corpus import build as build_corpus  # noqa: E402
from bench.harness.stack import wait_for  # noqa: E402
from bench.quality import PRESET, read_jsonl, score  # noqa: E402
from bench.service_session import embedded_service, translate_all, upload  # noqa: E402

ENDED = ("succeeded", "failed", "cancelled")
SPACE: dict[str, dict[str, Any]] = {
    "training.lr_scale": {"type": "float", "low": 0.25, "high": 4.0, "log": True},
    "training.warmup_steps": {"type": "int", "low": 50, "high": 1600, "log": True},
    "model.dropout": {"type": "float", "low": 0.0, "high": 0.3},
    "training.label_smoothing": {"type": "float", "low": 0.0, "high": 0.2},
    "model.vocab_size": {"type": "choice", "values": [2000, 4000, 8000]},
}


def _wait(client: Any, path: str, timeout: float) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get(path).json()
        return body if body["status"] in ENDED + ("pruned",) else None

    result: dict[str, Any] = wait_for(ended, timeout, path, interval=5)
    return result


def defaults_point(job: dict[str, Any]) -> dict[str, Any]:
    """The settings of the defaults' job (GET /v1/jobs/{id}, after the worker chose what the budget decides) that lie
    within SPACE, by the space's names: the point a sweep tries first with --defaults-first."""
    point: dict[str, Any] = {}
    for name, dim in SPACE.items():
        section, field = name.split(".", 1)
        value = job.get(section, {}).get(field)
        if name == "training.lr_scale" and value is None:
            value = 1.0  # the job's rate is the schedule's own
        if value is None:
            continue
        if dim["type"] == "choice" and value in dim["values"]:
            point[name] = value
        elif dim["type"] != "choice" and dim["low"] <= value <= dim["high"]:
            point[name] = value
    return point


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget-minutes", type=float, default=60.0, help="the sweep's worker minutes")
    p.add_argument("--trial-minutes", type=float, default=10.0, help="training minutes of a trial and of the defaults")
    p.add_argument("--pruner", default="asha", choices=("asha", "median", "none"))
    p.add_argument(
        "--metric",
        default="valid_loss",
        choices=("valid_loss", "bleu"),
        help="the sweep's objective. valid_loss by default here: at the first rung (a ninth of a 10-minute CPU "
        "trial) every trial's BLEU is still about 0, so BLEU cannot rank them there and only the second rung prunes",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lang", default="fr")
    p.add_argument("--corpus", type=Path, default=ROOT / "var" / "corpus")
    p.add_argument("--test-size", type=int, default=800)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--skip-defaults", action="store_true", help="the sweep only (the defaults from an earlier run)")
    p.add_argument(
        "--defaults-first",
        action="store_true",
        help="the defaults' settings (as their job chose them, where the space holds them) as the sweep's trial 0 "
        "(first_trials): the sweep then starts from what it is measured against",
    )
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    corpus = args.corpus / f"en-{args.lang}"
    counts = build_corpus(args.lang, corpus)
    test = read_jsonl(corpus / "test.jsonl")[: args.test_size]
    sources, refs = [s for s, _ in test], [t for _, t in test]
    print(f"corpus en-{args.lang}: {counts}; {args.budget_minutes:g} worker minutes, trials of {args.trial_minutes:g}")
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with embedded_service("sweep-bench-") as client:
        train = upload(client, corpus / "train.jsonl", "train")
        valid = upload(client, corpus / "valid.jsonl", "valid")
        fixed = {
            "objective": "translation",
            "dataset_id": train,
            "valid_dataset_id": valid,
            "model": {"preset": PRESET},
            "training": {"max_minutes": args.trial_minutes, "seed": args.seed},
        }
        defaults: dict[str, Any] | None = None
        if not args.skip_defaults:
            r = client.post("/v1/jobs", json=fixed)
            r.raise_for_status()
            job = _wait(client, f"/v1/jobs/{r.json()['id']}", args.trial_minutes * 60 + 900)
            if job["status"] != "succeeded":
                raise RuntimeError(f"the defaults' job {job['id']} {job['status']}: {job.get('error')}")
            defaults = {**score(translate_all(client, job["model_id"], sources), refs), "job": job["id"]}
            print("defaults", json.dumps(defaults), flush=True)
        body = {
            "name": "bench-sweep",
            "job": fixed,
            "space": SPACE,
            "budget": {"minutes": args.budget_minutes},
            "objective": {"metric": args.metric},
            "pruner": args.pruner,
            "seed": args.seed,
        }
        if args.defaults_first:
            if defaults is None:
                raise SystemExit("--defaults-first needs the defaults' job: leave out --skip-defaults")
            body["first_trials"] = [defaults_point(client.get(f"/v1/jobs/{defaults['job']}").json())]
            print("first trial", json.dumps(body["first_trials"][0]), flush=True)
        r = client.post("/v1/sweeps", json=body)
        r.raise_for_status()
        sweep = _wait(client, f"/v1/sweeps/{r.json()['id']}", args.budget_minutes * 60 * 2 + 1800)
        if sweep["status"] != "succeeded":
            raise RuntimeError(f"sweep {sweep['id']} {sweep['status']}: {sweep.get('error')}")
        best = {**score(translate_all(client, "bench-sweep@best", sources), refs), **sweep["best"]}
        print("sweep best", json.dumps(best), flush=True)
    trials = len(sweep["trials"])
    without_pruning = max(1, math.floor(args.budget_minutes / args.trial_minutes))
    result: dict[str, Any] = {
        "bench": "sweep",
        "budget_minutes": args.budget_minutes,
        "trial_minutes": args.trial_minutes,
        "pruner": args.pruner,
        "metric": args.metric,
        "seed": args.seed,
        "defaults_first": args.defaults_first,
        "lang": args.lang,
        "corpus": counts,
        "test_sentences": len(test),
        "threads": args.threads,
        "defaults_bleu": defaults["bleu"] if defaults else None,
        "defaults_chrf": defaults["chrf"] if defaults else None,
        "sweep_bleu": best["bleu"],
        "sweep_chrf": best["chrf"],
        "best_params": best["params"],
        "trials": trials,
        "trial_counts": sweep["trial_counts"],
        "trials_without_pruning": without_pruning,
        "trials_ratio": round(trials / without_pruning, 2),
        "worker_minutes": sweep["worker_minutes"],
        "importance": sweep["importance"],
        "stop_reason": sweep["stop_reason"],
        "trial_table": [
            {k: t[k] for k in ("number", "status", "params", "value", "best_value", "worker_minutes", "stop_reason")}
            for t in sweep["trials"]
        ],
        "wall_minutes": round((time.monotonic() - started) / 60, 1),
        "torch": torch.__version__,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    result["ratio"] = round(best["bleu"] / defaults["bleu"], 3) if defaults and defaults["bleu"] else None
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
