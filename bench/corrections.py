"""Learning from corrections on a real domain shift: BLEU on a new domain before and after an adaptation to 500
corrections, and on the original domain, over HTTP.

The data are the gettext catalogs' en-fr (bench/corpus.py), split by package: the original domain is every catalog
but PostgreSQL 15's (coreutils, apt, glib, gtk, ...), the new domain PostgreSQL 15's 22 catalogs (server, psql,
pg_dump, ...: database messages, with their own terms and phrasing), whose sources seen in the original domain are
left out. A job at its defaults trains for --minutes on the original domain's training part (the embedded service,
as a user would), and is registered as `gettext`. Its model translates --corrections new-domain sentences, and each
(source, its translation, the catalog's translation) is sent as a correction. An adaptation at its defaults
(POST /v1/models/gettext@1/adaptations: 2 minutes, the corrections repeated to a quarter of the rows among the
original training data) publishes gettext@2. Both versions then translate --test-size held-out new-domain
sentences (no source among the corrections) and the original domain's test part.

Prints one JSON object last: BLEU and chrF of both versions on both test sets; `new_domain_bleu_gain` (goal >= 5),
`original_bleu_change` (goal >= -1); `ratio` = the adapted model's new-domain BLEU / the original model's.

    .venv/bin/python bench/corrections.py [--minutes 10] [--corrections 500] [--test-size 800]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sacrebleu  # noqa: E402

from bench.corpus import catalogs, pairs, part_of  # noqa: E402
from bench.harness.stack import wait_for  # noqa: E402
from bench.service_session import embedded_service, translate_all, upload  # noqa: E402

NEW_DOMAIN = re.compile(r"-15\.mo$")  # PostgreSQL 15's catalogs


def write(path: Path, rows: list[tuple[str, str]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for source, target in rows:
            f.write(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n")
    return path


def build(out: Path, corrections: int, test_size: int) -> dict[str, list[tuple[str, str]]]:
    paths = catalogs("fr")
    new_paths = [p for p in paths if NEW_DOMAIN.search(p.name)]
    old = list(pairs([p for p in paths if p not in new_paths], 200))
    seen = {source for source, _ in old}
    new = [pair for pair in pairs(new_paths, 200) if pair[0] not in seen]
    new.sort(key=lambda pair: hashlib.sha256(pair[0].encode()).digest())  # an order fixed by the text alone
    if len(new) < corrections + test_size:
        raise SystemExit(f"the new domain has {len(new)} pairs: fewer than {corrections} + {test_size}")
    parts: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for pair in old:
        parts[part_of(pair[0], 20, 20)].append(pair)
    parts["corrections"], parts["new_test"] = new[:corrections], new[corrections : corrections + test_size]
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in parts.items():
        write(out / f"{name}.jsonl", rows)
    return parts


def score(hyps: list[str], rows: list[tuple[str, str]]) -> dict[str, float]:
    refs = [[t for _, t in rows]]
    return {
        "bleu": round(sacrebleu.corpus_bleu(hyps, refs).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hyps, refs).score, 2),
    }


def main() -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0, help="the original model's job")
    p.add_argument("--corrections", type=int, default=500)
    p.add_argument("--test-size", type=int, default=800)
    p.add_argument("--out", type=Path, default=ROOT / "var" / "corpus" / "corrections-en-fr")
    args = p.parse_args()
    parts = build(args.out, args.corrections, args.test_size)
    old_test = parts["test"][: args.test_size]
    out: dict = {
        "bench": "corrections",
        "minutes": args.minutes,
        "original_train_pairs": len(parts["train"]),
        "corrections": len(parts["corrections"]),
        "new_test_sentences": len(parts["new_test"]),
        "original_test_sentences": len(old_test),
    }
    print(json.dumps(out))

    def wait(client, job_id: str, minutes: float) -> dict:
        def over() -> dict | None:
            j = client.get(f"/v1/jobs/{job_id}").json()
            return j if j["status"] in ("succeeded", "failed", "cancelled") else None

        done = wait_for(over, minutes * 60 + 900, f"job {job_id}", interval=5)
        if done["status"] != "succeeded":
            raise SystemExit(f"job {job_id} {done['status']}: {done.get('error')}")
        return done

    with embedded_service("corrections-") as client:
        body = {
            "objective": "translation",
            "dataset_id": upload(client, args.out / "train.jsonl", "gettext without postgresql"),
            "valid_dataset_id": upload(client, args.out / "valid.jsonl", "valid"),
            "training": {"max_minutes": args.minutes},
            "register_as": "gettext",
            "source_language": "en",
            "target_language": "fr",
        }
        made = client.post("/v1/jobs", json=body)
        made.raise_for_status()
        base = wait(client, made.json()["id"], args.minutes)
        out["original_steps"] = base["progress"]["step"]
        sources = [s for s, _ in parts["corrections"]]
        given = translate_all(client, "gettext@1", sources)
        t0 = time.monotonic()
        for (source, corrected), translation in zip(parts["corrections"], given):
            r = client.post(
                "/v1/models/gettext@1/corrections",
                json={"source": source, "translation": translation, "corrected": corrected},
            )
            r.raise_for_status()
        out["corrections_seconds"] = round(time.monotonic() - t0, 1)
        out["corrections_as_given"] = score(given, parts["corrections"])  # how wrong the model was on them
        results = {}
        for version in ("gettext@1", "gettext@2"):
            if version == "gettext@2":
                r = client.post("/v1/models/gettext@1/adaptations", json={})
                r.raise_for_status()
                adaptation = r.json()
                done = wait(client, adaptation["job_id"], 2)
                out["adaptation"] = {
                    "steps": done["progress"]["step"],
                    "max_minutes": done["training"]["max_minutes"],
                    "mix_share": done["mix_share"],
                    "job": adaptation["job_id"],
                }
            new_test = parts["new_test"]
            results[version] = {
                "new_domain": score(translate_all(client, version, [s for s, _ in new_test]), new_test),
                "original": score(translate_all(client, version, [s for s, _ in old_test]), old_test),
            }
            print(version, json.dumps(results[version]))
    before, after = results["gettext@1"], results["gettext@2"]
    out["original_model"], out["adapted_model"] = before, after
    out["new_domain_bleu_gain"] = round(after["new_domain"]["bleu"] - before["new_domain"]["bleu"], 2)
    out["new_domain_chrf_gain"] = round(after["new_domain"]["chrf"] - before["new_domain"]["chrf"], 2)
    out["original_bleu_change"] = round(after["original"]["bleu"] - before["original"]["bleu"], 2)
    out["ratio"] = round(after["new_domain"]["bleu"] / max(before["new_domain"]["bleu"], 1e-9), 3)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
