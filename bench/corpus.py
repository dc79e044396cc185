"""A real parallel corpus from the gettext catalogs a Debian machine installs: English messages and their
translations by the projects' translators (coreutils, apt, glib, gtk, ...), read from the compiled `.mo` files.

    python bench/corpus.py --lang fr --out var/corpus/en-fr

writes train.jsonl, valid.jsonl and test.jsonl ({"source": ..., "target": ...} a line) and prints one JSON
object with the counts. Nothing here is committed as data: any machine with the same packages rebuilds the
same files, because

- catalogs are read in sorted path order, and a source message seen twice keeps its first translation;
- the split is by a hash of the source text (sha256), so a message lands in the same part whatever else is
  installed, and no source occurs in two parts.

Kept: translated, non-fuzzy singular messages (plural forms: the first one), whitespace collapsed to single
spaces, 2 to `--max-chars` characters on both sides, translation not identical to the source, no
`translator-credits`-style placeholders.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import polib

LOCALE_ROOT = Path("/usr/share/locale")
_SPACE = re.compile(r"\s+")
_PLACEHOLDER_IDS = {"translator-credits", "translator_credits", "TRANSLATORS", "default:LTR", "default:RTL"}


def catalogs(lang: str, root: Path = LOCALE_ROOT) -> list[Path]:
    """Every compiled catalog of one language, sorted (e.g. /usr/share/locale/fr/LC_MESSAGES/*.mo)."""
    return sorted((root / lang / "LC_MESSAGES").glob("*.mo"))


def clean(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def pairs(paths: Sequence[Path], max_chars: int) -> Iterator[tuple[str, str]]:
    """(English, translation) pairs of the catalogs, first translation of each source, in file order."""
    seen: set[str] = set()
    for path in paths:
        try:
            entries = polib.mofile(str(path))
        except (OSError, ValueError) as e:  # a truncated or foreign file: skip it, say so
            print(f"skipping {path}: {e}", file=sys.stderr)
            continue
        for entry in entries:
            if entry.obsolete or "fuzzy" in entry.flags or entry.msgid in _PLACEHOLDER_IDS:
                continue
            target = entry.msgstr or (entry.msgstr_plural or {}).get(0, "")
            source, target = clean(entry.msgid), clean(target)
            if not (2 <= len(source) <= max_chars and 2 <= len(target) <= max_chars) or source == target:
                continue
            if source in seen:
                continue
            seen.add(source)
            yield source, target


def part_of(source: str, valid_per_mille: int, test_per_mille: int) -> str:
    """'test', 'valid' or 'train', fixed by the source text alone."""
    bucket = int.from_bytes(hashlib.sha256(source.encode("utf-8")).digest()[:4], "big") % 1000
    if bucket < test_per_mille:
        return "test"
    return "valid" if bucket < test_per_mille + valid_per_mille else "train"


def build(
    lang: str,
    out: Path,
    max_chars: int = 200,
    valid_per_mille: int = 20,
    test_per_mille: int = 20,
    root: Path = LOCALE_ROOT,
) -> dict[str, int]:
    paths = catalogs(lang, root)
    if not paths:
        raise SystemExit(f"no catalogs under {root / lang / 'LC_MESSAGES'}; try another --lang")
    parts: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for source, target in pairs(paths, max_chars):
        parts[part_of(source, valid_per_mille, test_per_mille)].append((source, target))
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in parts.items():
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for source, target in rows:
                f.write(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n")
    return {"catalogs": len(paths), **{name: len(rows) for name, rows in parts.items()}}


def cut(corpus: Path, pairs: int) -> Path:
    """A corpus beside `corpus` whose training part is a sample of `pairs` of its pairs (in their order; seed 0), the
    validation and test parts the same."""
    lines = (corpus / "train.jsonl").read_text().splitlines()
    if not 0 < pairs <= len(lines):
        raise SystemExit(f"--train-pairs {pairs}: the corpus has {len(lines)} training pairs")
    keep = sorted(random.Random(0).sample(range(len(lines)), pairs))
    out = corpus.with_name(f"{corpus.name}-train{pairs}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.jsonl").write_text("".join(lines[i] + "\n" for i in keep))
    for part in ("valid.jsonl", "test.jsonl"):
        (out / part).write_bytes((corpus / part).read_bytes())
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, int]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lang", default="fr", help="catalog language under /usr/share/locale (target side)")
    p.add_argument("--out", type=Path, default=Path("var/corpus/en-fr"))
    p.add_argument("--max-chars", type=int, default=200)
    p.add_argument("--root", type=Path, default=LOCALE_ROOT)
    args = p.parse_args(argv)
    counts = build(args.lang, args.out, args.max_chars, root=args.root)
    print(json.dumps({"lang": args.lang, "out": str(args.out), **counts}))
    return counts


if __name__ == "__main__":
    main()
