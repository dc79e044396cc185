"""Corrupting a clean parallel corpus on purpose, with the true count of each corruption: the ground truth against
which the data report (model/data/report.py) and the cleaning filters (model/data/filters.py) are measured.

    python bench/corrupt.py --corpus var/corpus/en-fr/train.jsonl --other var/corpus/en-de/train.jsonl \\
        --share 0.1 --out var/corpus/en-fr-corrupt.jsonl

writes the corrupted rows ({"source", "target"} a line) and prints one JSON object with the true counts. Four kinds,
`share` of the rows split evenly among them (without `other_language`, among the first three and duplicates):

- copies: the target replaced by the source;
- shuffled: targets moved among the rows chosen for it by a derangement (no row keeps its own), so each of these
  pairs holds a real sentence of the right language that translates another source;
- wrong_language: the target replaced by a sentence of another language, drawn from `other_language` (e.g. the
  German targets of bench/corpus.py's en-de corpus put into an en-fr corpus);
- duplicates: rows not otherwise corrupted, copied and inserted again at random places (the corpus grows by
  their number).

A row is corrupted in one way at most, so each count is exact (a corpus's own flaws, e.g. the case-insensitive
copies of the gettext catalogs, are not in these counts: compare with the report of the clean corpus).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path

KINDS = ("copies", "shuffled", "wrong_language", "duplicates")


def corrupt(
    pairs: list[tuple[str, str]],
    share: float = 0.1,
    seed: int = 0,
    other_language: list[str] | None = None,
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The corrupted rows (same order, duplicates inserted) and the true count of each kind (module docstring)."""
    if not 0 <= share <= 1:
        raise ValueError(f"share={share} must be between 0 and 1")
    kinds = [k for k in KINDS if k != "wrong_language" or other_language]
    total = round(share * len(pairs))
    per_kind = {kind: total // len(kinds) + (i < total % len(kinds)) for i, kind in enumerate(kinds)}
    if per_kind.get("shuffled") == 1:  # one row cannot be deranged: it moves to copies
        per_kind["shuffled"], per_kind["copies"] = 0, per_kind["copies"] + 1
    if other_language is not None and per_kind.get("wrong_language", 0) > len(other_language):
        raise ValueError(f"other_language has {len(other_language)} sentences; {per_kind['wrong_language']} are needed")
    rng = random.Random(seed)
    chosen = rng.sample(range(len(pairs)), total)
    out = list(pairs)
    start = 0
    picked: dict[str, list[int]] = {}
    for kind in kinds:
        picked[kind] = chosen[start : start + per_kind[kind]]
        start += per_kind[kind]
    for i in picked["copies"]:
        out[i] = (pairs[i][0], pairs[i][0])
    shuffled = picked["shuffled"]
    for i, j in zip(shuffled, shuffled[1:] + shuffled[:1]):  # a cycle over a random order: no fixed point
        out[i] = (pairs[i][0], pairs[j][1])
    if other_language:
        for i, sentence in zip(picked["wrong_language"], rng.sample(other_language, per_kind["wrong_language"])):
            out[i] = (pairs[i][0], sentence)
    inserts: dict[int, list[tuple[str, str]]] = {}
    for i in picked["duplicates"]:
        inserts.setdefault(rng.randrange(len(pairs) + 1), []).append(pairs[i])
    result: list[tuple[str, str]] = []
    for position in range(len(out) + 1):
        result.extend(inserts.get(position, []))
        if position < len(out):
            result.append(out[position])
    return result, {kind: per_kind.get(kind, 0) for kind in KINDS}


def read_jsonl(path: Path) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8") as f:
        return [(row["source"], row["target"]) for row in map(json.loads, f) if row]


def main(argv: Sequence[str] | None = None) -> dict[str, int]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, required=True, help="clean JSONL corpus (bench/corpus.py's train.jsonl)")
    p.add_argument("--other", type=Path, help="JSONL corpus whose targets are in another language")
    p.add_argument("--share", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    other = [target for _, target in read_jsonl(args.other)] if args.other else None
    rows, counts = corrupt(read_jsonl(args.corpus), args.share, args.seed, other)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for source, target in rows:
            f.write(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n")
    print(json.dumps({"out": str(args.out), "rows": len(rows), **counts}))
    return counts


if __name__ == "__main__":
    main()
