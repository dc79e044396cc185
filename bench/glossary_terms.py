"""Glossary terms on a real test set: term use and BLEU of a job's model with and without a glossary, over HTTP.

The corpus is the gettext catalogs' en-fr (bench/corpus.py). A job at its defaults trains for --minutes on it (the
embedded service, as a user would). The glossary is built from the data, as a terminologist's would be from a
termbase: each English word of 4+ letters, seen in 5+ training pairs and in at most 1% of them, paired with the French
word whose Dice coefficient of co-occurrence with it over the training pairs is highest (at least --min-dice); of
those, the terms whose source word is in a test source and whose target word is in that source's reference (so the
reference uses the term): glossary `all`. Glossary `consistent` keeps the terms whose target the references use in
at least --consistency of the test sentences holding the source (a curated termbase's terms, which translators use
consistently; `all` also forces terms the references render otherwise). The test set's sources are translated
without a glossary and with each.

Term use: over every (test sentence, glossary term) where the source holds the term (a whole word, any case), the
share of translations holding the target term (any case: the glossaries are not case-sensitive). Prints one JSON
object last: per glossary, term use (references, without, with) and BLEU/chrF without and with; `ratio` = term use
with / without for `consistent` (higher is better), and `bleu_change` its BLEU with minus without.

    .venv/bin/python bench/glossary_terms.py [--minutes 10] [--min-dice 0.5] [--test-size 800]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sacrebleu  # noqa: E402

from bench.corpus import build as build_corpus  # noqa: E402
from bench.harness.stack import wait_for  # noqa: E402
from bench.service_session import embedded_service, translations, upload  # noqa: E402

WORD = re.compile(r"[^\W\d_]+")


def read(path: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(r["source"], r["target"]) for r in rows]


def words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def build_glossary(train: list[tuple[str, str]], test: list[tuple[str, str]], min_dice: float) -> list[tuple[str, str]]:
    source_count: Counter[str] = Counter()
    target_count: Counter[str] = Counter()
    together: Counter[tuple[str, str]] = Counter()
    test_words = set().union(*(words(s) for s, _ in test))
    for source, target in train:
        s = {w for w in words(source) if w in test_words and len(w) >= 4}
        t = words(target)
        source_count.update(s)
        target_count.update(t)
        together.update((a, b) for a in s for b in t)
    rare = len(train) / 100
    best: dict[str, tuple[float, str]] = {}
    for (a, b), c in together.items():
        if source_count[a] < 5 or source_count[a] > rare or len(b) < 3:
            continue
        dice = 2 * c / (source_count[a] + target_count[b])
        if dice >= min_dice and dice > best.get(a, (0.0, ""))[0]:
            best[a] = (dice, b)
    used = {(a, b) for a, (_, b) in best.items() for s, t in test if a in words(s) and b in words(t)}
    return sorted(used)


def term_use(sources: list[str], outputs: list[str], glossary: list[tuple[str, str]]) -> tuple[float, int]:
    hits = total = 0
    for source, output in zip(sources, outputs):
        present = words(source)
        for a, b in glossary:
            if a in present:
                total += 1
                hits += b in output.lower()  # the glossary is not case-sensitive
    return hits / max(total, 1), total


def consistent(glossary: list[tuple[str, str]], test: list[tuple[str, str]], share: float) -> list[tuple[str, str]]:
    """The terms whose target the references use in at least `share` of the test sentences holding the source: the
    terms a translator uses consistently, as a curated termbase holds."""
    kept = []
    for a, b in glossary:
        refs = [t.lower() for s, t in test if a in words(s)]
        if refs and sum(b in r for r in refs) / len(refs) >= share:
            kept.append((a, b))
    return kept


def main() -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--min-dice", type=float, default=0.5)
    p.add_argument("--test-size", type=int, default=800)
    p.add_argument("--consistency", type=float, default=0.8, help="the 'consistent' glossary's reference agreement")
    p.add_argument("--corpus", type=Path, default=ROOT / "var" / "corpus")
    args = p.parse_args()
    corpus = args.corpus / "en-fr"
    if not (corpus / "train.jsonl").exists():
        build_corpus("fr", corpus)
    train, test = read(corpus / "train.jsonl"), read(corpus / "test.jsonl")[: args.test_size]
    glossary = build_glossary(train, test, args.min_dice)
    print(f"glossary: {len(glossary)} terms, e.g. {glossary[:8]}")
    sources, references = [s for s, _ in test], [t for _, t in test]
    out: dict = {
        "bench": "glossary_terms",
        "minutes": args.minutes,
        "terms": len(glossary),
        "test_sentences": len(test),
    }
    with embedded_service("glossary-terms-") as client:
        body = {
            "objective": "translation",
            "dataset_id": upload(client, corpus / "train.jsonl", "train"),
            "valid_dataset_id": upload(client, corpus / "valid.jsonl", "valid"),
            "training": {"max_minutes": args.minutes},
        }
        job = client.post("/v1/jobs", json=body)
        job.raise_for_status()
        job_id = job.json()["id"]

        def over() -> dict | None:
            j = client.get(f"/v1/jobs/{job_id}").json()
            return j if j["status"] in ("succeeded", "failed", "cancelled") else None

        done = wait_for(over, args.minutes * 60 + 900, "the job", interval=5)
        if done["status"] != "succeeded":
            raise SystemExit(f"job {job_id} {done['status']}: {done.get('error')}")
        model_id = done["model_id"]
        t0 = time.monotonic()
        plain = [t["text"] for t in translations(client, model_id, sources)]
        out["seconds_without"] = round(time.monotonic() - t0, 1)
        results = {}
        for name, terms in (("all", glossary), ("consistent", consistent(glossary, test, args.consistency))):
            made = client.post(
                "/v1/glossaries",
                json={
                    "name": f"gettext terms ({name})",
                    "source_language": "en",
                    "target_language": "fr",
                    "entries": [{"source": a, "target": b} for a, b in terms],
                },
            )
            made.raise_for_status()
            t0 = time.monotonic()
            found = []
            for start in range(0, len(sources), 64):
                r = client.post(
                    f"/v1/models/{model_id}/translate",
                    json={"texts": sources[start : start + 64], "glossary_id": made.json()["id"]},
                )
                r.raise_for_status()
                found += r.json()["translations"]
            results[name] = (terms, found, round(time.monotonic() - t0, 1))
    out["steps"] = done["progress"]["step"]
    for name, (terms, found, seconds) in results.items():
        outputs = [t["text"] for t in found]
        before, total = term_use(sources, plain, terms)
        after, _ = term_use(sources, outputs, terms)
        reference, _ = term_use(sources, references, terms)
        out[name] = {
            "terms": len(terms),
            "term_occurrences": total,
            "term_use_references": round(reference, 4),
            "term_use_without": round(before, 4),
            "term_use_with": round(after, 4),
            "bleu_without": round(sacrebleu.corpus_bleu(plain, [references]).score, 2),
            "bleu_with": round(sacrebleu.corpus_bleu(outputs, [references]).score, 2),
            "chrf_without": round(sacrebleu.corpus_chrf(plain, [references]).score, 2),
            "chrf_with": round(sacrebleu.corpus_chrf(outputs, [references]).score, 2),
            "how": dict(Counter(term["how"] for t in found for term in t["glossary_terms"])),
            "seconds_with": seconds,
        }
        r = out[name]
        print(
            f"{name:>10}: {len(terms)} terms, {total} uses; term use {before:.1%} -> {after:.1%} (references "
            f"{reference:.1%}); BLEU {r['bleu_without']} -> {r['bleu_with']}, "
            f"chrF {r['chrf_without']} -> {r['chrf_with']}"
        )
    main_ = out["consistent"]
    out["bleu_change"] = round(main_["bleu_with"] - main_["bleu_without"], 2)
    out["ratio"] = round(main_["term_use_with"] / max(main_["term_use_without"], 1e-9), 3)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
