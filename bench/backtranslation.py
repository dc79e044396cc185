"""Back-translation on a low-resource pair built from real corpora, over HTTP: the pipeline's model against the same
model trained on the real pairs alone for the same minutes.

The data are the gettext catalogs' en-fr (bench/corpus.py), split by a hash of the source: a test part and a valid
part; of the training part, --real pairs (the first by that hash order) are the real parallel data, and the French
side of the rest (up to --monolingual sentences, whose English never reaches the service) is the target-side text.
On the embedded service, as a user would:

- baseline: a job at its defaults on the real pairs for --minutes (auto preset, validated on the valid part);
- pipeline: POST /v1/pipelines kind backtranslation at its defaults: a reverse model trained first on the real
  pairs (--reverse-minutes), its sampled, tagged translations of the French text, cleaned, then the forward job on
  the real pairs mixed among them for --minutes, with the preset the baseline's job chose (the same model).

Both models translate the test part (beam 4). Prints one JSON object last: BLEU and chrF of both, the pipeline's
steps and their times, `bleu_gain` (goal >= 3) and `ratio` = pipeline BLEU / baseline BLEU.

    .venv/bin/python bench/backtranslation.py [--minutes 10] [--reverse-minutes 10] [--real 5000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import sacrebleu  # noqa: E402

from bench.corpus import catalogs, pairs, part_of  # noqa: E402
from bench.harness.stack import wait_for  # noqa: E402
from bench.service_session import embedded_service, translate_all  # noqa: E402


def build(out: Path, real: int, monolingual: int, test_size: int) -> dict[str, list]:
    parts: dict[str, list] = {"train": [], "valid": [], "test": []}
    for pair in pairs(catalogs("fr"), 200):
        parts[part_of(pair[0], 20, 20)].append(pair)
    train = sorted(parts["train"], key=lambda pair: hashlib.sha256(pair[0].encode()).digest())
    if len(train) < real + 1000:
        raise SystemExit(f"the training part has {len(train)} pairs: too few for {real} real ones and the text")
    data = {
        "real": train[:real],
        "text": [target for _, target in train[real : real + monolingual]],
        "valid": parts["valid"],
        "test": parts["test"][:test_size],
    }
    out.mkdir(parents=True, exist_ok=True)
    for name in ("real", "valid", "test"):
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for source, target in data[name]:
                f.write(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n")
    (out / "text.txt").write_text("\n".join(data["text"]) + "\n", encoding="utf-8")
    return data


def upload(client: httpx.Client, path: Path, kind: str, **languages: str) -> str:
    with open(path, "rb") as f:
        r = client.post(
            "/v1/datasets", data={"name": path.stem, "kind": kind, **languages}, files={"file": (path.name, f)}
        )
    r.raise_for_status()
    return str(r.json()["id"])


def score(hyps: list[str], rows: list[tuple[str, str]]) -> dict[str, float]:
    refs = [[t for _, t in rows]]
    return {
        "bleu": round(sacrebleu.corpus_bleu(hyps, refs).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hyps, refs).score, 2),
    }


def wait_job(client: httpx.Client, job_id: str, minutes: float) -> dict:
    def over() -> dict | None:
        job = client.get(f"/v1/jobs/{job_id}").json()
        return job if job["status"] in ("succeeded", "failed", "cancelled") else None

    done = wait_for(over, minutes * 60 + 900, f"job {job_id}", interval=5)
    if done["status"] != "succeeded":
        raise SystemExit(f"job {job_id} {done['status']}: {done.get('error')}")
    return done


def wait_pipeline(client: httpx.Client, pipeline_id: str, seconds: float) -> dict:
    """The pipeline once it succeeded; SystemExit naming its status and error otherwise."""

    def over() -> dict | None:
        got = client.get(f"/v1/pipelines/{pipeline_id}").json()
        return got if got["status"] != "running" else None

    done = wait_for(over, seconds, "the pipeline", interval=10)
    if done["status"] != "succeeded":
        raise SystemExit(f"the pipeline {done['status']}: {done['error']}")
    return done


def main() -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="the baseline's and the forward job's budget")
    p.add_argument("--reverse-minutes", type=float, default=10.0, help="the reverse model's job")
    p.add_argument("--real", type=int, default=5000, help="real pairs")
    p.add_argument("--monolingual", type=int, default=100_000, help="most target-side sentences")
    p.add_argument("--test-size", type=int, default=1000)
    p.add_argument("--decoding", help='the pipeline\'s decoding as JSON, e.g. {"method": "beam"} (default: its own)')
    p.add_argument("--real-share", type=float, help="the pipeline's real_share (default: its own)")
    p.add_argument(
        "--baseline-from", type=Path, help="an earlier run's JSON on the same data and minutes: its baseline is reused"
    )
    p.add_argument("--out", type=Path, default=ROOT / "var" / "corpus" / "backtranslation-en-fr")
    args = p.parse_args()
    data = build(args.out, args.real, args.monolingual, args.test_size)
    out: dict = {
        "bench": "backtranslation",
        "minutes": args.minutes,
        "reverse_minutes": args.reverse_minutes,
        "real_pairs": len(data["real"]),
        "target_side_sentences": len(data["text"]),
        "test_sentences": len(data["test"]),
    }
    print(json.dumps(out))
    sources = [s for s, _ in data["test"]]
    with embedded_service("backtranslation-") as client:
        languages = {"source_language": "en", "target_language": "fr"}
        real = upload(client, args.out / "real.jsonl", "parallel", **languages)
        valid = upload(client, args.out / "valid.jsonl", "parallel", **languages)
        text = upload(client, args.out / "text.txt", "monolingual", source_language="fr")
        body = {
            "objective": "translation", "dataset_id": real, "valid_dataset_id": valid,
            "training": {"max_minutes": args.minutes}, **languages,
        }  # fmt: skip
        if args.baseline_from:
            out["baseline"] = json.loads(args.baseline_from.read_text())["baseline"] | {"from": str(args.baseline_from)}
            preset = out["baseline"]["preset"]
        else:
            made = client.post("/v1/jobs", json=body)
            made.raise_for_status()
            baseline = wait_job(client, made.json()["id"], args.minutes)
            preset = baseline["model"]["preset"]
            out["baseline"] = {"preset": preset, "steps": baseline["progress"]["step"], "job": baseline["id"]}
            out["baseline"] |= score(translate_all(client, baseline["model_id"], sources), data["test"])
        print("baseline", json.dumps(out["baseline"]))
        request = {
            "kind": "backtranslation", "name": "gettext-bt", "dataset_id": real, "monolingual_dataset_id": text,
            "valid_dataset_id": valid, "reverse_job": {"training": {"max_minutes": args.reverse_minutes}},
            "job": {"model": {"preset": preset}, "training": {"max_minutes": args.minutes}},
        }  # fmt: skip
        if args.decoding:
            request["decoding"] = json.loads(args.decoding)
        if args.real_share is not None:
            request["real_share"] = args.real_share
        out["pipeline_request"] = {k: request[k] for k in ("decoding", "real_share") if k in request}
        started = time.monotonic()
        created = client.post("/v1/pipelines", json=request)
        if created.status_code != 201:
            raise SystemExit(f"the pipeline was refused: {created.text}")
        done = wait_pipeline(client, created.json()["id"], (args.minutes + args.reverse_minutes) * 60 + 3600)
        out["pipeline_seconds"] = round(time.monotonic() - started, 1)
        steps = {step["name"]: step for step in done["steps"]}
        translation = client.get(steps["back-translate"]["url"]).json()
        synthetic = client.get(f"/v1/datasets/{steps['clean']['output']['dataset_id']}").json()
        forward = client.get(steps["train"]["url"]).json()
        reverse = client.get(steps["reverse"]["url"]).json()
        out["pipeline"] = {
            "reverse": {"preset": reverse["model"]["preset"], "steps": reverse["progress"]["step"]},
            "back_translation": {
                "sentences": translation["sentences"], "backend": translation["backend"],
                "seconds": _seconds(translation), "counts": translation["counts"],
            },
            "cleaned_rows": synthetic["rows"],
            "cleaning_removed": (synthetic.get("filter_counts") or {}).get("removed"),
            "forward": {
                "preset": forward["model"]["preset"], "steps": forward["progress"]["step"], "job": forward["id"],
            },
        }  # fmt: skip
        out["pipeline"] |= score(translate_all(client, done["model_id"], sources), data["test"])
        print("pipeline", json.dumps(out["pipeline"]))
    out["bleu_gain"] = round(out["pipeline"]["bleu"] - out["baseline"]["bleu"], 2)
    out["chrf_gain"] = round(out["pipeline"]["chrf"] - out["baseline"]["chrf"], 2)
    out["ratio"] = round(out["pipeline"]["bleu"] / max(out["baseline"]["bleu"], 1e-9), 3)
    print(json.dumps(out))
    return out


def _seconds(row: dict) -> float | None:
    from datetime import datetime

    if not row.get("started_at") or not row.get("finished_at"):
        return None
    spent = datetime.fromisoformat(row["finished_at"]) - datetime.fromisoformat(row["started_at"])
    return round(spent.total_seconds(), 1)


if __name__ == "__main__":
    main()
