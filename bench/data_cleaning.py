"""Cleaning pays: a corpus corrupted on purpose, the data report's counts against the truth, and training on the
filtered dataset against training on the corrupted one for the same minutes, scored on the clean test set.

    python bench/data_cleaning.py --minutes 10          # [--report-only] [--raw-base]

The corpus is bench/quality.py's (English -> French messages of the gettext catalogs), first cleaned here by the
same rules (model/data/filters.py), so that it holds none of the problems to be found; the catalogs have their own
(5,800 case-insensitive copies such as language names), and with --raw-base, which keeps them, a corruption that hits
a row already having the problem raises no count. bench/corrupt.py corrupts 10% of its training pairs, split evenly
among copies (target = source), shuffled targets, wrong-language targets (German sentences of the en-de corpus) and
inserted duplicates, and returns the true count of each. Through the service on its embedded default
(bench/service_session.py): the base and the corrupted corpus are uploaded with their languages declared and the
worker reports on both; the report's finding for a kind is its count on the corrupted corpus less its count on the
base. Then POST /v1/datasets/{id}/filter cleans the corrupted dataset (deduplicate, drop copies, drop the wrong
language, drop misaligned pairs), and two jobs of the same settings (the job defaults at `max_minutes`, the same
seed, the clean validation set) train on the corrupted and on the filtered dataset at the same time, each in a
service of its own on --threads threads (whatever else loads the machine loads both alike); each model translates
the clean test set (beam 4) and sacrebleu scores it. The last line is one JSON object; `ratio` is the filtered
dataset's BLEU over the corrupted one's (above 1: cleaning helped).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.corpus import build as build_corpus  # noqa: E402
from bench.corrupt import corrupt  # noqa: E402
from bench.harness.stack import wait_for  # noqa: E402
from bench.quality import read_jsonl, score  # noqa: E402
from bench.service_session import embedded_service, translate_all  # noqa: E402
from model.data.alignment import fit_alignment  # noqa: E402
from model.data.filters import FilterRules, apply_filters  # noqa: E402

# A corruption kind -> the report's problems that find it (their counts less the clean corpus's).
FOUND_BY = {
    "copies": ("copies",),
    "shuffled": ("misaligned",),
    "wrong_language": ("wrong_language_target",),
    "duplicates": ("duplicates",),
}
RULES = {"deduplicate": True, "drop_copies": True, "drop_wrong_language": True, "drop_misaligned": True}


def write_jsonl(path: Path, rows: list[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for source, target in rows:
            f.write(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n")
    return path


def ready(client: httpx.Client, dataset_id: str, timeout: float = 1800) -> dict[str, Any]:
    dataset = wait_for(
        lambda: (d := client.get(f"/v1/datasets/{dataset_id}").json())["status"] != "processing" and d,
        timeout=timeout,
        what=f"dataset {dataset_id}",
        interval=1.0,
    )
    if dataset["status"] != "ready":
        raise RuntimeError(f"dataset {dataset_id} {dataset['status']}: {dataset.get('error')}")
    return dataset


def upload(client: httpx.Client, path: Path, name: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        response = client.post(
            "/v1/datasets",
            data={"name": name, "kind": "parallel", "source_language": "en", "target_language": "fr"},
            files={"file": (path.name, f)},
        )
    response.raise_for_status()
    return ready(client, response.json()["id"])


def submit(client: httpx.Client, dataset_id: str, valid_id: str, minutes: float, seed: int) -> str:
    response = client.post(
        "/v1/jobs",
        json={
            "objective": "translation",
            "dataset_id": dataset_id,
            "valid_dataset_id": valid_id,
            "model": {"preset": "small"},
            "training": {"max_minutes": minutes, "seed": seed},
        },
    )
    response.raise_for_status()
    return str(response.json()["id"])


def finished(client: httpx.Client, job_id: str, minutes: float) -> dict[str, Any]:
    job = wait_for(
        lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["status"] in ("succeeded", "failed", "cancelled") and j,
        minutes * 60 + 900,
        f"job {job_id}",
        interval=5,
    )
    if job["status"] != "succeeded":
        raise RuntimeError(f"job {job_id} {job['status']}: {job.get('error')}")
    return job


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="training minutes of each of the two jobs")
    p.add_argument("--share", type=float, default=0.1, help="the share of training pairs corrupted")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--corpus", type=Path, default=ROOT / "var" / "corpus")
    p.add_argument("--test-size", type=int, default=800)
    p.add_argument("--threads", type=int, default=1, help="threads of each service's training (two run at once)")
    p.add_argument("--raw-base", action="store_true", help="corrupt the corpus as it is, not cleaned first")
    p.add_argument("--report-only", action="store_true", help="the report's counts only: no training")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)  # each embedded service's worker takes this process's count

    counts = build_corpus("fr", args.corpus / "en-fr")
    build_corpus("de", args.corpus / "en-de")
    clean = read_jsonl(args.corpus / "en-fr" / "train.jsonl")
    if not args.raw_base:
        kept, _counts = apply_filters(
            ((i, s, t) for i, (s, t) in enumerate(clean, 1)), FilterRules(**RULES), "en", "fr",
            alignment=fit_alignment((i, s, t) for i, (s, t) in enumerate(clean, 1)),
        )  # fmt: skip
        clean = [(s, t) for _, s, t in kept]
    german = [t for _, t in read_jsonl(args.corpus / "en-de" / "train.jsonl")]
    corrupted, truth = corrupt(clean, args.share, args.seed, other_language=german)
    test = read_jsonl(args.corpus / "en-fr" / "test.jsonl")[: args.test_size]
    work = args.corpus / "cleaning"
    work.mkdir(parents=True, exist_ok=True)
    print(f"corpus en-fr {counts}; corrupted {truth}", file=sys.stderr, flush=True)

    with embedded_service("data-cleaning-a-") as client, embedded_service("data-cleaning-b-") as other:
        t0 = time.monotonic()
        clean_ds = upload(client, write_jsonl(work / "clean.jsonl", clean), "clean")
        bad_ds = upload(client, write_jsonl(work / "corrupted.jsonl", corrupted), "corrupted")
        report_seconds = time.monotonic() - t0
        clean_report = client.get(f"/v1/datasets/{clean_ds['id']}/report").json()
        bad_report = client.get(f"/v1/datasets/{bad_ds['id']}/report").json()
        found = {
            kind: sum(
                bad_report["problems"][p]["estimated"] - clean_report["problems"][p]["estimated"] for p in problems
            )
            for kind, problems in FOUND_BY.items()
        }
        # The filtered dataset is made in the other service (the same corpus, the same rules): each job trains there
        bad_other = upload(other, work / "corrupted.jsonl", "corrupted")
        response = other.post(f"/v1/datasets/{bad_other['id']}/filter", json={"rules": RULES})
        response.raise_for_status()
        filtered = ready(other, response.json()["id"])
        if args.report_only:
            runs: dict[str, dict[str, Any]] = {}
            return _result(args, counts, clean, corrupted, truth, found, filtered, report_seconds, runs)
        valid = {
            name: upload(service, args.corpus / "en-fr" / "valid.jsonl", "valid")["id"]
            for name, service in (("corrupted", client), ("filtered", other))
        }
        jobs = {
            "corrupted": (client, submit(client, bad_ds["id"], valid["corrupted"], args.minutes, args.seed)),
            "filtered": (other, submit(other, filtered["id"], valid["filtered"], args.minutes, args.seed)),
        }
        runs = {}
        for name, (service, job_id) in jobs.items():
            job = finished(service, job_id, args.minutes)
            hyps = translate_all(service, job["model_id"], [s for s, _ in test])
            runs[name] = {**score(hyps, [t for _, t in test]), "steps": job["progress"]["step"], "job": job["id"]}
            print(name, json.dumps(runs[name]), file=sys.stderr, flush=True)

    return _result(args, counts, clean, corrupted, truth, found, filtered, report_seconds, runs)


def _result(
    args: argparse.Namespace,
    counts: dict[str, int],
    clean: list[tuple[str, str]],
    corrupted: list[tuple[str, str]],
    truth: dict[str, int],
    found: dict[str, int],
    filtered: dict[str, Any],
    report_seconds: float,
    runs: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    result = {
        "bench": "data_cleaning",
        "base": "raw" if args.raw_base else "cleaned by the rules first",
        "minutes": args.minutes,
        "threads": args.threads,
        "seed": args.seed,
        "load_average": os.getloadavg(),
        "share": args.share,
        "corpus": counts,
        "rows": {"clean": len(clean), "corrupted": len(corrupted), "filtered": filtered["rows"]},
        "truth": truth,
        "found": found,
        "found_over_truth": {k: round(found[k] / truth[k], 3) if truth[k] else None for k in truth},
        "within_10_percent": {k: bool(truth[k]) and abs(found[k] - truth[k]) <= 0.1 * truth[k] for k in truth},
        "filter_rules": RULES,
        "filter_counts": filtered["filter_counts"],
        "report_seconds": round(report_seconds, 1),
        "corrupted": runs.get("corrupted"),
        "filtered": runs.get("filtered"),
        "ratio": round(runs["filtered"]["bleu"] / runs["corrupted"]["bleu"], 3) if runs else None,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
