"""`translate-dataset MODEL DATASET`: a dataset's text translated by a model into a new parallel dataset, in the
background (POST /v1/models/{id}/dataset-translations); with --wait, its progress and ETA until the new dataset's
id is printed.

    python -m app.cli translate-dataset teacher@latest 0c3d... --wait                     # distillation's data
    python -m app.cli translate-dataset de-en@latest 7a1f... --sampling --synthetic-side source --tag "<BT>" --wait
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from app.client import connection
from app.client.connection import check, fail, path


def _body(args: argparse.Namespace) -> dict[str, Any]:
    if not args.sampling and (args.temperature is not None or args.top_k is not None or args.seed is not None):
        fail("--temperature, --top-k and --seed are for --sampling")
    if args.sampling and args.beam_size is not None:
        fail("--beam-size is for beam search: leave out --sampling")
    decoding: dict[str, Any] = {"method": "sampling" if args.sampling else "beam"}
    for field in ("beam_size", "temperature", "top_k", "seed"):
        if getattr(args, field) is not None:
            decoding[field] = getattr(args, field)
    body: dict[str, Any] = {"dataset_id": args.dataset, "side": args.side, "decoding": decoding}
    body["synthetic_side"] = args.synthetic_side
    for field in ("tag", "name", "max_sentences", "backend"):
        if getattr(args, field) is not None:
            body[field] = getattr(args, field)
    return body


def cmd_translate_dataset(args: argparse.Namespace) -> None:
    """Prints the translation's id; with --wait, the new dataset's id once it is made (exit 1 if it fails)."""
    with connection.open_client(args) as client:
        row = check(client.post(path("models", args.model, "dataset-translations"), json=_body(args)))
        if not args.wait:
            print(row["id"])
            return
        url = path("models", args.model, "dataset-translations", row["id"])
        while row["status"] in ("queued", "running"):
            eta = f", about {row['eta_seconds']:.0f} s left" if row.get("eta_seconds") is not None else ""
            print(
                f"dataset translation {row['id']}: {row['status']} {row['translated']}/{row['sentences']}{eta}",
                file=sys.stderr,
            )
            time.sleep(args.interval)
            row = check(client.get(url))
    if row["status"] != "succeeded":
        sys.exit(f"error: dataset translation {row['id']} {row['status']}: {row['error']}")
    counts = row["counts"] or {}
    print(
        f"{counts.get('pairs', 0)} pairs made ({counts.get('empty', 0)} empty and {counts.get('too_long', 0)} too "
        f"long rows left out) by {row['backend']}; the dataset is parsed and reported on next",
        file=sys.stderr,
    )
    scores = row.get("reference_scores")
    if scores:
        print(
            f"against the dataset's other side ({scores['pairs']} pairs): BLEU {scores['bleu']}, chrF "
            f"{scores['chrf']}, length ratio {scores['length_ratio']}",
            file=sys.stderr,
        )
    print(row["output_dataset_id"])


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("translate-dataset", help="translate a dataset's text with a model into a new parallel dataset")
    p.add_argument("model")
    p.add_argument("dataset", help="the dataset's id")
    p.add_argument("--side", choices=("source", "target"), default="source", help="a parallel dataset's side")
    p.add_argument("--sampling", action="store_true", help="draw each token rather than search (back-translation)")
    p.add_argument("--beam-size", type=int, help="beam search's width (default 4)")
    p.add_argument("--temperature", type=float, help="--sampling: < 1 sharper, > 1 flatter (default 1)")
    p.add_argument("--top-k", type=int, help="--sampling: among the k likeliest tokens (default 0: all)")
    p.add_argument("--seed", type=int, help="--sampling: repeats the draws with the PyTorch backend")
    p.add_argument(
        "--synthetic-side",
        choices=("target", "source"),
        default="target",
        help="where the translations go: target (distillation, default) or source (back-translation)",
    )
    p.add_argument("--tag", help="--synthetic-side source: a word before every synthetic source, e.g. <BT>")
    p.add_argument("--name", help="the new dataset's name")
    p.add_argument("--max-sentences", type=int, help="the first N rows only")
    p.add_argument("--backend", choices=("auto", "pytorch", "ctranslate2"))
    p.add_argument("--wait", action="store_true", help="follow it and print the new dataset's id")
    p.add_argument("--interval", type=float, default=2.0, help="--wait: seconds between looks")
    p.set_defaults(func=cmd_translate_dataset)
