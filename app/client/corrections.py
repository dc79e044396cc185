"""Corrections and adaptation: `correct` sends what a translation should have been, `corrections` lists them, and
`adapt` fine-tunes the model on them into the next version of its name (app/services/corrections.py).

    python -m app.cli correct gettext@latest "could not open file" --corrected "n'a pas pu ouvrir le fichier"
    python -m app.cli correct gettext@latest --file fixes.jsonl     # {"source", "translation", "corrected"} a line
    python -m app.cli adapt gettext@latest --minutes 2 --watch
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.client import connection, watch
from app.client.connection import check, fail, path
from app.client.output import Column, add_output_arguments, print_items, when

CORRECTION_COLUMNS: list[Column] = [
    ("ID", lambda c: c["id"]),
    ("SOURCE", lambda c: c["source"]),
    ("GIVEN", lambda c: c["translation"] or None),
    ("CORRECTED", lambda c: c["corrected"]),
    ("CREATED", when),
]


def _from_file(file: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            fail(f"{file}:{number}: not JSON ({exc.msg})")
        if not isinstance(row, dict) or not {"source", "corrected"} <= row.keys():
            fail(f"{file}:{number}: each line is an object with source, corrected and (optionally) translation")
        rows.append({"source": row["source"], "translation": row.get("translation", ""), "corrected": row["corrected"]})
    return rows


def cmd_correct(args: argparse.Namespace) -> None:
    """Send one correction, or a file of them; prints how many were kept."""
    if args.file:
        rows = _from_file(Path(args.file))
    elif args.source and args.corrected is not None:
        rows = [{"source": args.source, "translation": args.translation or "", "corrected": args.corrected}]
    else:
        fail("give a source and --corrected, or --file")
    with connection.open_client(args) as client:
        for row in rows:
            check(client.post(path("models", args.model, "corrections"), json=row))
    print(f"{len(rows)} correction{'s' if len(rows) != 1 else ''} of {args.model} sent", file=sys.stderr)


def cmd_corrections(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        rows = connection.page_through(client, path("models", args.model, "corrections"), {}, args.limit)
    print_items(rows, CORRECTION_COLUMNS, args.json)


def cmd_adapt(args: argparse.Namespace) -> None:
    """Submit the adaptation; prints its job's id (and follows it with --watch)."""
    body: dict[str, Any] = {"max_minutes": args.minutes} if args.minutes is not None else {}
    if args.mix_share is not None:
        body["mix_share"] = args.mix_share
    if args.register_as:
        body["register_as"] = args.register_as
    if args.mix_dataset:
        body["mix_dataset_id"] = args.mix_dataset
    with connection.open_client(args) as client:
        adaptation = check(client.post(path("models", args.model, "adaptations"), json=body))
        print(
            f"adapting {args.model} to {adaptation['corrections']} corrections (dataset {adaptation['dataset_id']}); "
            f"its model becomes the next version of {adaptation['register_as']}",
            file=sys.stderr,
        )
        print(adaptation["job_id"])
        if args.watch:
            sys.exit(watch.watch(client, adaptation["job_id"], args.interval))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("correct", help="send corrections of a model's translations")
    p.add_argument("model")
    p.add_argument("source", nargs="?", help="the text that was translated")
    p.add_argument("--translation", help="the model's translation as it was given")
    p.add_argument("--corrected", help="the translation as it should be")
    p.add_argument("--file", help='a JSON-lines file: {"source", "translation", "corrected"} a line')
    p.set_defaults(func=cmd_correct)
    p = sub.add_parser("corrections", help="list a model's corrections, newest first")
    p.add_argument("model")
    add_output_arguments(p)
    p.set_defaults(func=cmd_corrections)
    p = sub.add_parser("adapt", help="fine-tune a model on its corrections into the next version of its name")
    p.add_argument("model")
    p.add_argument("--minutes", type=float, help="the adaptation job's time budget (default 2)")
    p.add_argument("--mix-share", type=float, help="the corrections' share of the training rows (default 0.25)")
    p.add_argument("--mix-dataset", help="the original data to mix in (default: the model's training dataset)")
    p.add_argument("--register-as", help="the registry name (default: the model's own)")
    p.add_argument("--watch", action="store_true", help="follow the job until it ends (exit 1 if it fails)")
    p.add_argument("--interval", type=float, default=2.0)
    p.set_defaults(func=cmd_adapt)
