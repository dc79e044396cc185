"""One model for three language pairs against three bilingual models given the same total minutes, over HTTP.

The data are the gettext catalogs' English messages and their German, French and Dutch translations
(bench/corpus.py), each language split by a hash of the source: of its training part, the first --per-pair pairs by
that hash order (a tenth of them for the --small language: the pair with little data), and --test-size pairs of its
test part. On the embedded service, as a user would:

- multilingual: one job over the three datasets (`pairs`) for --minutes;
- bilingual: a job a pair on its dataset alone, for --minutes / 3 each (the same total minutes);

every job with the same preset and otherwise its defaults (validation held out of its training rows). Each model
translates its pairs' test parts (beam 4; the multilingual one with `target_language`). Prints one JSON object last:
BLEU and chrF per pair of both, `differences` (multilingual - bilingual BLEU), the goals (within 1 BLEU on the pairs
with plenty of data; better on the small one) and `ratio` = multilingual BLEU / bilingual BLEU on the small pair.

    .venv/bin/python bench/multilingual.py [--minutes 30] [--languages de,fr,nl] [--small nl] [--per-pair 20000]
        [--preset tiny]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.backtranslation import score, upload, wait_job  # noqa: E402
from bench.corpus import catalogs, pairs, part_of  # noqa: E402
from bench.service_session import embedded_service  # noqa: E402


def build(out: Path, language: str, rows: int, test_size: int) -> dict[str, list[tuple[str, str]]]:
    """The language's training rows (the first `rows` by hash order) and test rows, written as JSONL under `out`."""
    parts: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for pair in pairs(catalogs(language), 200):
        parts[part_of(pair[0], 20, 20)].append(pair)
    train = sorted(parts["train"], key=lambda pair: hashlib.sha256(pair[0].encode()).digest())
    if len(train) < rows:
        raise SystemExit(f"en-{language}: the training part has {len(train)} pairs, fewer than {rows}")
    data = {"train": train[:rows], "test": parts["test"][:test_size]}
    out.mkdir(parents=True, exist_ok=True)
    for name, part in data.items():
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for source, target in part:
                f.write(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n")
    return data


def translate(client: httpx.Client, model_id: str, sources: Sequence[str], target: str | None) -> list[str]:
    """Every source translated (beam 4), 64 to a request; `target`: the multilingual model's target_language."""
    found: list[str] = []
    for start in range(0, len(sources), 64):
        body = {"texts": list(sources[start : start + 64]), "beam_size": 4, "target_language": target}
        r = client.post(f"/v1/models/{model_id}/translate", json=body)
        r.raise_for_status()
        found += [t["text"] for t in r.json()["translations"]]
    return found


def main() -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="the multilingual job's; each bilingual job a third")
    p.add_argument("--languages", default="de,fr,nl", help="the target languages, English the source of each")
    p.add_argument("--small", default="nl", help="the language with a tenth of the pairs")
    p.add_argument("--per-pair", type=int, default=20_000)
    p.add_argument("--test-size", type=int, default=500)
    p.add_argument("--preset", default="tiny", help="every job's model.preset (auto: each job chooses its own)")
    p.add_argument("--out", type=Path, default=ROOT / "var" / "corpus" / "multilingual")
    args = p.parse_args()
    languages = [lang for lang in args.languages.split(",") if lang]
    if args.small not in languages:
        raise SystemExit(f"--small {args.small} is not among --languages {languages}")
    sizes = {lang: args.per_pair // 10 if lang == args.small else args.per_pair for lang in languages}
    data = {lang: build(args.out / f"en-{lang}", lang, sizes[lang], args.test_size) for lang in languages}
    out: dict = {"bench": "multilingual", "minutes": args.minutes, "preset": args.preset, "pairs": sizes,
                 "test_sentences": {lang: len(data[lang]["test"]) for lang in languages}}  # fmt: skip
    print(json.dumps(out), flush=True)
    model = {"preset": None if args.preset == "auto" else args.preset}
    with embedded_service("multilingual-") as client:
        datasets = {
            lang: upload(
                client, args.out / f"en-{lang}" / "train.jsonl", "parallel", source_language="en", target_language=lang
            )  # fmt: skip
            for lang in languages
        }
        jobs: dict[str, dict] = {}
        started = time.perf_counter()
        bodies = {
            "multilingual": {
                "pairs": [{"dataset_id": datasets[lang]} for lang in languages],
                "training": {"max_minutes": args.minutes},
            },  # fmt: skip
            **{
                lang: {
                    "dataset_id": datasets[lang],
                    "source_language": "en",
                    "target_language": lang,
                    "training": {"max_minutes": args.minutes / len(languages)},
                }  # fmt: skip
                for lang in languages
            },
        }
        for name, body in bodies.items():  # one training worker: they train one after the other
            made = client.post("/v1/jobs", json={"objective": "translation", "model": model, **body})
            made.raise_for_status()
            jobs[name] = made.json()
        for name, job in jobs.items():
            jobs[name] = wait_job(client, job["id"], args.minutes * 2)
            print(f"{name}: {jobs[name]['status']} after {time.perf_counter() - started:.0f} s", flush=True)
        scores: dict[str, dict] = {"multilingual": {}, "bilingual": {}}
        for lang in languages:
            sources, rows = [s for s, _ in data[lang]["test"]], data[lang]["test"]
            scores["multilingual"][lang] = score(
                translate(client, jobs["multilingual"]["model_id"], sources, lang), rows
            )
            scores["bilingual"][lang] = score(translate(client, jobs[lang]["model_id"], sources, None), rows)
            print(f"en-{lang}: multilingual {scores['multilingual'][lang]}, bilingual {scores['bilingual'][lang]}",
                  flush=True)  # fmt: skip
    differences = {
        lang: round(scores["multilingual"][lang]["bleu"] - scores["bilingual"][lang]["bleu"], 2) for lang in languages
    }
    plenty = [lang for lang in languages if lang != args.small]
    out |= {
        "scores": scores,
        "differences": differences,
        "jobs": {
            name: {
                "id": job["id"],
                "preset": job["model"]["preset"],
                "steps": job["progress"]["step"],
                "auto_settings": (job.get("auto_settings") or {}).get("chosen"),
                "validation": {  # the last evaluation's (a job of pairs: each pair's and their mean)
                    name: round(point["value"], 3)
                    for name, point in (job.get("latest_metrics") or {}).items()
                    if name.split("/")[0] in ("bleu", "chrf", "valid_loss")
                },
            }  # fmt: skip
            for name, job in jobs.items()
        },
        "goal_plenty_within_1_bleu": all(differences[lang] >= -1.0 for lang in plenty),
        "goal_small_pair_better": differences[args.small] > 0,
        "ratio": round(
            scores["multilingual"][args.small]["bleu"] / max(scores["bilingual"][args.small]["bleu"], 1e-9), 3
        ),
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
