"""README.md and docs/*.md name only what exists: their links (and #anchors), paths from the repository root
(`app/api/jobs.py`, `model/train/`) and bare file names (`loop.py`). A module moved without its docs fails here.

Paths under demo/ and var/ are made at run time, and globs (`bench/results/quality-*.json`) are patterns."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ("demo/", "var/", ".venv/", ".env")
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"(?<![\w/.:@<>{}$-])((?:\.{0,2}[\w-]+/)+(?:[\w.-]*\w)?/?)")
NAME = re.compile(r"(?<![\w/.-])([\w-]+\.(?:py|js|md|toml|yml|ini|html|css))\b")


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def _anchors(md: Path) -> set[str]:
    titles = (line.lstrip("#").strip().lower() for line in md.read_text().splitlines() if line.startswith("#"))
    return {re.sub(r"[^\w\- ]", "", title).replace(" ", "-") for title in titles}


def _broken_links(doc: Path, line: str) -> tuple[list[str], set[str]]:
    broken, targets = [], set()
    for match in LINK.finditer(line):
        target = match.group(1)
        if "://" in target or target.startswith("<"):
            continue
        file_part, _, anchor = target.partition("#")
        targets.add(file_part)
        dest = doc.parent / file_part if file_part else doc
        if not dest.exists():
            broken.append(f"link {target}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"anchor {target}")
    return broken, targets


def _broken_paths(line: str, links: set[str], tops: set[str]) -> list[str]:
    broken = []
    for match in PATH.finditer(line):
        path = match.group(1)
        if path in links or path.split("/")[0] not in tops or path.startswith(RUNTIME):
            continue
        if "://" in line[max(0, match.start() - 12) : match.end()]:
            continue
        if line[match.end(1) : match.end(1) + 1] in ("*", "<", "{", "…", "-"):
            continue  # a glob or a pattern
        if not (ROOT / path).exists():
            broken.append(path)
    return broken


def _unknown_names(line: str, tracked: list[str]) -> list[str]:
    unknown = []
    for match in NAME.finditer(line):
        name = match.group(1)
        if name.endswith(".md") or line[match.start() - 1 : match.start()] == "/":
            continue
        if not any(t == name or t.endswith("/" + name) for t in tracked):
            unknown.append(f"no file named {name}")
    return unknown


def test_the_docs_name_only_files_that_exist():
    tracked = _tracked()
    tops = {path.split("/")[0] for path in tracked}
    bad = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            links, targets = _broken_links(doc, line)
            problems = links + _broken_paths(line, targets, tops) + _unknown_names(line, tracked)
            bad += [f"{doc.relative_to(ROOT)}:{number}: {problem}" for problem in problems]
    assert bad == []


def test_a_moved_module_is_caught():
    tracked = _tracked()
    assert _broken_paths("see `model/trainer.py` and `app/settings.py`", set(), {"model", "app"}) == [
        "model/trainer.py",
        "app/settings.py",
    ]
    assert _unknown_names("the loop is in `training_loop.py`", tracked) == ["no file named training_loop.py"]
    assert _unknown_names("the loop is in `loop.py`", tracked) == []
