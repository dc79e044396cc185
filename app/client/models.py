"""Trained models: `models`, `export`, `evaluate`, `import` (`delete model` is in deletions.py).

A model argument is passed to the API unchanged (an id, or any reference a model route accepts, such as
`name@alias`), quoted as one path segment by `connection.path`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from app.client import connection
from app.client.connection import check, path
from app.client.output import Column, add_output_arguments, print_items, when
from app.client.translations import add_language_options, languages
from app.client.upload import post_file

MODEL_COLUMNS: list[Column] = [
    ("ID", lambda model: model["id"]),
    ("NAME", lambda model: f"{model['name']}@{model['version']}" if model.get("name") else None),
    ("OBJECTIVE", lambda model: model["objective"]),
    ("PARAMS", lambda model: f"{model['parameters']:,}"),
    ("SOURCE", lambda model: model["source"]),
    ("PARENT", lambda model: model.get("parent_model_id")),
    ("CREATED", when),
    ("METRICS", lambda model: " ".join(f"{k}={v:.4g}" for k, v in sorted(model["metrics"].items())) or None),
]


def cmd_models(args: argparse.Namespace) -> None:
    """Every model, newest first, filtered by the API."""
    with connection.open_client(args) as client:
        params = {"name": args.name, "tag": args.tag or None, "objective": args.objective}
        models = connection.page_through(client, "/v1/models", {k: v for k, v in params.items() if v}, args.limit)
        print_items(models, MODEL_COLUMNS, args.json)


def cmd_export(args: argparse.Namespace) -> None:
    """Download a model's export, waiting while the service builds it (202 + Retry-After); written whole or not
    at all (a .partial file renamed at the end)."""
    params = {"format": args.format, **({"quantization": args.quantization} if args.quantization else {})}
    with connection.open_client(args) as client:
        for _ in range(args.retries + 1):
            with client.stream("GET", path("models", args.model, "export"), params=params, timeout=300) as response:
                if response.status_code == 202:
                    wait = float(response.headers.get("retry-after", "10"))
                    print(f"the export is being built; retrying in {wait:g}s", file=sys.stderr)
                    time.sleep(wait)
                    continue
                if response.status_code >= 400:
                    check(response)
                disposition = response.headers.get("content-disposition", "")
                name = (
                    disposition.split('filename="')[-1].rstrip('"') if 'filename="' in disposition else "export.tar.gz"
                )
                out = Path(args.output or name)
                partial = out.with_name(out.name + ".partial")
                with open(partial, "wb") as f:
                    for chunk in response.iter_bytes():
                        f.write(chunk)
                partial.rename(out)
                print(out)
                return
        sys.exit(f"error: the export was still being built after {args.retries} retries; run the command again")


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Score a model on a parallel dataset and print BLEU, chrF and chrF++ with their sacrebleu signatures; with
    -o, also write the hypotheses (one line per row)."""
    body = {
        "dataset_id": args.dataset, "alpha": args.alpha, "tokenize": args.tokenize, "backend": args.backend,
    } | ({"beam_size": args.beam_size} if args.beam_size is not None else {})  # fmt: skip
    body |= ({"glossary_id": args.glossary} if args.glossary else {}) | languages(args)
    with connection.open_client(args) as client:
        evaluation: dict[str, Any] = check(client.post(path("models", args.model, "evaluations"), json=body))
        url = path("models", args.model, "evaluations", evaluation["id"])
        while evaluation["status"] in ("queued", "running"):
            print(
                f"evaluation {evaluation['id']}: {evaluation['status']} {evaluation['progress']:.0%}", file=sys.stderr
            )
            time.sleep(args.interval)
            evaluation = check(client.get(url))
        if evaluation["status"] != "succeeded":
            sys.exit(f"error: evaluation {evaluation['id']} {evaluation['status']}: {evaluation['error']}")
        for name, value in evaluation["scores"].items():
            if isinstance(value, dict) and "score" in value:
                print(f"{name:7} {value['score']:7.2f}  {value['signature']}")
        split = evaluation["scores"].get("confidence")
        if split and split.get("threshold") is not None:
            print(
                f"flagged {split['flagged_share']:.0%} low confidence (chrF {split['flagged_chrf'] or 0:.1f} against "
                f"{split['other_chrf'] or 0:.1f})"
            )
        if terms := evaluation["scores"].get("glossary"):
            print(
                f"glossary {terms['terms']} terms met: {terms['present']} present, {terms['replaced']} replaced, "
                f"{terms['inserted']} inserted"
            )
        print(f"backend {evaluation['backend']}")  # scores compare within one backend
        if args.output:
            response = client.get(f"{url}/hypotheses")
            if response.status_code >= 400:
                check(response)
            Path(args.output).write_bytes(response.content)
            print(f"hypotheses: {args.output}", file=sys.stderr)


def cmd_import(args: argparse.Namespace) -> None:
    """Upload a model archive (a native export); prints the new model's id."""
    file = Path(args.file)
    with connection.open_client(args) as client:
        response = post_file(client, "/v1/models/import", file, timeout=3600)
    if response.status_code == 202:
        print(f"still being imported: {response.json()['detail']}", file=sys.stderr)
        print(response.json()["id"])
        return
    model = check(response)
    print(f"model {model['id']}: {model['objective']}, {model['parameters']:,} parameters", file=sys.stderr)
    print(model["id"])


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("models", help="list trained models, newest first (every page)")
    p.add_argument("--objective", choices=("translation", "denoising"))
    p.add_argument("--name", help="only the versions of this registered name")
    p.add_argument("--tag", action="append", help="only models with this tag (repeat: every one)")
    add_output_arguments(p)
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("export", help="download a model as a .tar.gz (native, huggingface or ctranslate2)")
    p.add_argument("model")
    p.add_argument("--format", choices=("native", "huggingface", "ctranslate2"), default="native")
    p.add_argument("--quantization", help="ctranslate2 only, e.g. int8")
    p.add_argument("-o", "--output", help="file to write (default: the name the service gives)")
    p.add_argument("--retries", type=int, default=30, help="times to wait while the export is being built")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("evaluate", help="score a model on a parallel dataset: BLEU, chrF, chrF++ (sacrebleu)")
    p.add_argument("model")
    p.add_argument("--dataset", required=True, help="a parallel dataset id: sources translated, targets the references")
    p.add_argument("--beam-size", type=int, help="the beam's width (default: the model's default beam, else 4)")
    p.add_argument("--alpha", type=float, default=0.6, help="GNMT length penalty exponent, 0 to 2 (as /translate)")
    p.add_argument("--tokenize", default="13a", help="sacrebleu's BLEU tokenizer: 13a, intl, zh, ja-mecab, ...")
    p.add_argument(
        "--backend",
        choices=("auto", "pytorch", "ctranslate2"),
        default="auto",
        help="the decoder (default auto: CTranslate2 where it serves the model, else PyTorch)",
    )
    p.add_argument("--glossary", metavar="GLOSSARY", help="a glossary's id: its terms in the hypotheses")
    add_language_options(p)
    p.add_argument("-o", "--output", help="also write the hypotheses to this file")
    p.add_argument("--interval", type=float, default=2.0)
    p.set_defaults(func=cmd_evaluate)
    p = sub.add_parser("import", help="upload a model archive (an export with --format native); prints its id")
    p.add_argument("file")
    p.set_defaults(func=cmd_import)
