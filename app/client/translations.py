"""`translate MODEL --text T [--text T ...]` (POST /v1/models/{id}/translate: one translation a line) and
`translate MODEL FILE` (a translated file written in the background, POST /v1/models/{id}/translations)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from app.client import connection
from app.client.connection import check, path


def languages(args: argparse.Namespace) -> dict[str, str]:
    """A model of several pairs: the target asked for, and the source (to flag a pair it never trained on)."""
    given = {"target_language": args.target_language, "source_language": args.source_language}
    return {name: value for name, value in given.items() if value}


def translate_texts(client: httpx.Client, args: argparse.Namespace) -> None:
    """One line per text; with --n-best N, N lines per text: `INDEX<TAB>SCORE<TAB>TRANSLATION`, best first; with
    --confidence, `CONFIDENCE<TAB>TRANSLATION` (with --json, each token's probability too); with --memory, each
    translation's memory matches on indented lines after it."""
    body: dict[str, Any] = {"texts": args.text, "n_best": args.n_best}
    if args.beam_size is not None:
        body["beam_size"] = args.beam_size
    if args.confidence:
        body["return_token_probs"] = True
    if args.max_length:
        body["max_length"] = args.max_length
    if args.backend:
        body["backend"] = args.backend
    if args.glossary:
        body["glossary_id"] = args.glossary
    body |= languages(args)
    if args.memory:
        body["memory"] = {
            "dataset_id": args.memory,
            **({"replace_at": args.memory_replace_at} if args.memory_replace_at is not None else {}),
        }
    answer = check(client.post(path("models", args.model, "translate"), json=body, timeout=300))
    for index, translation in enumerate(answer["translations"]):
        if args.json:
            print(json.dumps(translation))
        elif args.confidence and args.n_best == 1:
            print(f"{translation['confidence']:.4f}\t{translation['text']}")
        elif args.n_best == 1:
            print(translation["text"])
            for match in translation.get("memory_matches") or []:  # indented under it: MEMORY<TAB>SCORE<TAB>...
                print(f"  memory\t{match['score']:.2f}\t{match['source']}\t{match['target']}")
        else:
            for hypothesis in [translation, *(translation.get("alternatives") or [])]:
                print(f"{index}\t{hypothesis['score']:.4f}\t{hypothesis['text']}")


def translate_file(client: httpx.Client, args: argparse.Namespace) -> None:
    """Translate a text file in the background, wait, and write the result (same lines, translated)."""
    file = Path(args.file)
    with open(file, "rb") as f:
        row = check(
            client.post(
                path("models", args.model, "translations"),
                files={"file": (file.name, f)},
                data={"language": args.language, "backend": args.backend or "auto"}
                | ({"beam_size": str(args.beam_size)} if args.beam_size is not None else {})
                | ({"glossary_id": args.glossary} if args.glossary else {})
                | languages(args),
                timeout=300,
            )
        )
    url = path("models", args.model, "translations", row["id"])
    while row["status"] in ("queued", "running"):
        print(f"translation {row['id']}: {row['status']} {row['progress']:.0%}", file=sys.stderr)
        time.sleep(args.interval)
        row = check(client.get(url))
    if row["status"] != "succeeded":
        sys.exit(f"error: translation {row['id']} {row['status']}: {row['error']}")
    response = client.get(row["result_url"])
    if response.status_code >= 400:
        check(response)
    out = Path(args.output or file.with_name(f"{file.stem}.{args.model[:8]}{file.suffix or '.txt'}"))
    out.write_bytes(response.content)
    print(out)


def cmd_translate(args: argparse.Namespace) -> None:
    if (args.file is None) == (not args.text):
        connection.fail("give either a FILE or one or more --text, not both" if args.text else "give FILE or --text")
    texts_only = [
        n for n in ("n_best", "max_length", "json", "confidence", "memory") if getattr(args, n) not in (None, 1, False)
    ]
    if args.file and texts_only:
        connection.fail(
            f"--{texts_only[0].replace('_', '-')} is for --text; a FILE is translated with --beam-size, --backend "
            "and --glossary"
        )
    with connection.open_client(args) as client:
        (translate_texts if args.text else translate_file)(client, args)


def add_language_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target-language",
        metavar="LANG",
        help="a model of several pairs: the language to translate into (one of its targets)",
    )
    p.add_argument(
        "--source-language", metavar="LANG", help="a model of several pairs: the texts' language (flags zero-shot)"
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "translate", help="translate texts (--text, one translation a line) or a text file (writes the translated file)"
    )
    p.add_argument("model")
    p.add_argument("file", nargs="?", help="a text file, one segment a line (omit with --text)")
    p.add_argument("--text", action="append", metavar="TEXT", help="a text to translate (repeat for more)")
    p.add_argument("--beam-size", type=int, help="the beam's width (default: the model's default beam, else 4)")
    p.add_argument("--n-best", type=int, default=1, help="--text: the N best translations of each text, scored")
    p.add_argument("--max-length", type=int, help="--text: most target tokens (default 2 x source + 10)")
    p.add_argument(
        "--backend",
        choices=("auto", "pytorch", "ctranslate2"),
        help="the decoder (default auto: CTranslate2 where it serves the model, else PyTorch)",
    )
    p.add_argument("--json", action="store_true", help="--text: one JSON object a line, as the API gives it")
    p.add_argument(
        "--confidence",
        action="store_true",
        help="--text: each translation's confidence (the geometric mean of its token probabilities) before it; "
        "with --json, each token's probability too",
    )
    p.add_argument("--glossary", metavar="GLOSSARY", help="a glossary's id: its terms in the translations")
    add_language_options(p)
    p.add_argument(
        "--memory",
        metavar="DATASET",
        help="--text: a parallel dataset as a translation memory: each translation's matches (score >= 75) on "
        "indented lines after it, `  memory<TAB>SCORE<TAB>SOURCE<TAB>TARGET`",
    )
    p.add_argument(
        "--memory-replace-at",
        type=float,
        metavar="SCORE",
        help="--text with --memory: a match scoring at least this (100: exact) is printed instead of a translation",
    )
    p.add_argument(
        "-o", "--output", help="FILE: where to write (default: FILE with the model's short id before the suffix)"
    )
    p.add_argument("--language", default="en", help="FILE: the source's language, for sentence splitting")
    p.add_argument("--interval", type=float, default=1.0, help="FILE: seconds between looks at the progress")
    p.set_defaults(func=cmd_translate)
