"""Translation-memory lookups at 1M segments: ours (model/data/translation_memory.py) against scoring every segment.

The memory is built from real text: the English sources of the gettext catalogs' corpus (bench/corpus.py, en-fr),
each made into several segments by joining it with another chosen at random, until --segments (1M by default; a
corpus of 1M distinct real segments is not on this machine). Queries, --queries of each kind:
  exact    a segment of the memory, as stored
  edited   a segment with one edit (a word dropped, replaced by another of the corpus, or two swapped)
  unseen   a sentence of the corpus's test split joined with another (its words are known, the segment is not)
Ours: TranslationMemory.lookup(min_score 75, 3 matches). The peer: rapidfuzz's process.extract over every source
(the same scorer, the same cutoff), on --peer-queries of the queries (it takes far longer). Recall: the share of
those queries where our best score equals the peer's.

Prints a line per figure, then one JSON object: build seconds, index MB, p50/p95 milliseconds per kind, the peer's
p50, recall, and `ratio` = the peer's p50 / ours over all kinds (higher is better).

    .venv/bin/python bench/memory_lookup.py [--segments 1000000] [--queries 300] [--peer-queries 30]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rapidfuzz import fuzz, process  # noqa: E402

from bench.corpus import build as build_corpus  # noqa: E402
from model.data.text_rows import TextRows  # noqa: E402
from model.data.translation_memory import TranslationMemory, normalise  # noqa: E402


def read_sources(path: Path) -> list[str]:
    return [json.loads(line)["source"] for line in path.read_text().splitlines() if line.strip()]


def segments(sources: list[str], n: int, rng: random.Random) -> list[tuple[str, str]]:
    """n (source, target) pairs: a real source joined with another; the target is a stand-in (never compared)."""
    return [(f"{rng.choice(sources)} {rng.choice(sources)}", f"t{i}") for i in range(n)]


def edited(text: str, words: list[str], rng: random.Random) -> str:
    parts = text.split()
    i = rng.randrange(len(parts))
    kind = rng.randrange(3)
    if kind == 0 and len(parts) > 2:
        del parts[i]
    elif kind == 1:
        parts[i] = rng.choice(words)
    else:
        j = rng.randrange(len(parts))
        parts[i], parts[j] = parts[j], parts[i]
    return " ".join(parts)


def timed(fn, queries: list[str]) -> tuple[list[float], list]:
    times, results = [], []
    for q in queries:
        t0 = time.perf_counter()
        results.append(fn(q))
        times.append((time.perf_counter() - t0) * 1000)
    return times, results


def pct(values: list[float], q: float) -> float:
    return round(sorted(values)[min(len(values) - 1, int(q * len(values)))], 3)


def main() -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--segments", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--peer-queries", type=int, default=30)
    p.add_argument("--corpus", type=Path, default=ROOT / "var" / "corpus")
    args = p.parse_args()
    corpus = args.corpus / "en-fr"
    if not (corpus / "train.jsonl").exists():
        build_corpus("fr", corpus)
    train, test = read_sources(corpus / "train.jsonl"), read_sources(corpus / "test.jsonl")
    rng = random.Random(0)
    pairs = segments(train, args.segments, rng)
    rows = TextRows.write(pairs, 2)
    del pairs
    t0 = time.perf_counter()
    memory = TranslationMemory(rows)
    build_s = time.perf_counter() - t0
    print(f"built a memory of {len(memory):,} segments in {build_s:.1f} s, index {memory.nbytes / 1e6:.1f} MB")
    words = [w for s in train[:5000] for w in s.split()]
    picks = [rows[rng.randrange(len(rows))][0] for _ in range(args.queries)]
    kinds = {
        "exact": picks,
        "edited": [edited(s, words, rng) for s in picks],
        "unseen": [f"{rng.choice(test)} {rng.choice(test)}" for _ in range(args.queries)],
    }
    out: dict = {"segments": len(memory), "build_seconds": round(build_s, 1), "index_mb": round(memory.nbytes / 1e6, 1)}
    ours_all: list[float] = []
    found: dict[str, list] = {}
    for kind, queries in kinds.items():
        times, found[kind] = timed(lambda q: memory.lookup(q, 75, 3), queries)
        ours_all += times
        hit = sum(bool(r) for r in found[kind]) / len(queries)
        out[kind] = {"p50_ms": pct(times, 0.5), "p95_ms": pct(times, 0.95), "with_a_match": round(hit, 3)}
        print(f"{kind:>7}: p50 {pct(times, 0.5):.2f} ms, p95 {pct(times, 0.95):.2f} ms, {hit:.0%} with a match >= 75")
    sources = [normalise(s) for s, _ in rows]
    peer_times, agree, total = [], 0, 0
    for kind, queries in kinds.items():
        sample = queries[: args.peer_queries]
        times, best = timed(
            lambda q: process.extract(normalise(q), sources, scorer=fuzz.ratio, score_cutoff=75, limit=3), sample
        )
        peer_times += times
        for ours, theirs in zip(found[kind], best):
            total += 1
            agree += (not ours and not theirs) or (
                bool(ours) and bool(theirs) and abs(ours[0].score - theirs[0][1]) < 0.01
            )
    out["peer_p50_ms"] = pct(peer_times, 0.5)
    out["recall"] = round(agree / total, 3)
    out["ours_p50_ms"] = pct(ours_all, 0.5)
    out["ratio"] = round(out["peer_p50_ms"] / max(out["ours_p50_ms"], 1e-6), 1)
    print(f"peer (every segment scored): p50 {out['peer_p50_ms']:.1f} ms; recall {out['recall']:.1%}")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
