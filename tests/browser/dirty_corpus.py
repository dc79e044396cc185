"""A small English-French corpus with known problems, for the dashboard's dataset pages: 300 clean pairs from the
lexicon of tests/model/corpus_fixture.py, then, at known lines, an empty target, two German targets, two copies, a
placeholder dropped, a long target (a ratio outlier) and three duplicates at the end."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.model.corpus_fixture import GERMAN, lexicon_pairs

EMPTY_LINE = 11
GERMAN_LINES = (21, 22)
COPY_LINES = (31, 32)
PLACEHOLDER_LINE = 41
RATIO_LINE = 51
DUPLICATE_LINES = (301, 302, 303)  # repeat lines 6, 7 and 6


def dirty_pairs() -> list[tuple[str, str]]:
    pairs = lexicon_pairs(300, seed=3)
    pairs[EMPTY_LINE - 1] = (pairs[EMPTY_LINE - 1][0], "")
    for line, german in zip(GERMAN_LINES, GERMAN, strict=False):
        pairs[line - 1] = (pairs[line - 1][0], german)
    pairs[COPY_LINES[0] - 1] = (pairs[COPY_LINES[0] - 1][0], pairs[COPY_LINES[0] - 1][0])
    pairs[COPY_LINES[1] - 1] = (pairs[COPY_LINES[1] - 1][0], pairs[COPY_LINES[1] - 1][0].upper())
    pairs[PLACEHOLDER_LINE - 1] = ("Save %s to the disk now", "Enregistrer sur le disque maintenant")
    pairs[RATIO_LINE - 1] = ("Save", "Enregistrer le document ouvert dans le dossier choisi, puis fermer la fenêtre")
    return pairs + [pairs[5], pairs[6], pairs[5]]


def write_jsonl(path: Path, pairs: list[tuple[str, str]], compress: bool = False) -> Path:
    text = "".join(json.dumps({"source": s, "target": t}, ensure_ascii=False) + "\n" for s, t in pairs)
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    return path
