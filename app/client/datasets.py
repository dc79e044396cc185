"""Datasets: `upload` (with a progress bar, then waiting for the worker's checks), `register`, `datasets`,
`delete dataset`."""

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
from app.client.dataset_report import summary_lines
from app.client.output import Column, add_output_arguments, print_items, when
from app.client.upload import post_file

POLL_SECONDS = 1.0

DATASET_COLUMNS: list[Column] = [
    ("ID", lambda dataset: dataset["id"]),
    ("NAME", lambda dataset: dataset["name"]),
    ("KIND", lambda dataset: dataset["kind"]),
    ("STATUS", lambda dataset: dataset["status"]),
    ("FORMAT", lambda dataset: dataset["format"]),
    ("ROWS", lambda dataset: f"{dataset['rows']:,}"),
    ("SIZE", lambda dataset: f"{dataset['size_bytes'] / 1e6:.1f} MB"),
    ("CREATED", when),
]


def _languages(args: argparse.Namespace) -> dict[str, str]:
    given = {"source_language": args.source_language, "target_language": args.target_language}
    return {k: v for k, v in given.items() if v}


def wait_processed(client: httpx.Client, dataset: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Poll the dataset until a worker has parsed it (ready or failed), up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while dataset["status"] == "processing" and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        dataset = check(client.get(path("datasets", dataset["id"])))
    return dataset


def _report(client: httpx.Client, dataset: dict[str, Any]) -> dict[str, Any] | None:
    return check(client.get(path("datasets", dataset["id"], "report"))) if dataset["status"] == "ready" else None


def _outcome(client: httpx.Client, dataset: dict[str, Any]) -> None:
    """Say how the dataset came out, with its report's summary on stderr and its id on stdout; a failed one exits 1
    naming the line."""
    if dataset["status"] == "failed":
        sys.exit(f"dataset {dataset['id']} failed: {dataset['error']}")
    if dataset["status"] == "processing":
        print(f"dataset {dataset['id']}: still being processed; see `dataset {dataset['id']}`", file=sys.stderr)
    else:
        print("\n".join(summary_lines(dataset, _report(client, dataset))), file=sys.stderr)
    print(dataset["id"])


def cmd_upload(args: argparse.Namespace) -> None:
    file = Path(args.file)
    form = {"name": args.name or file.name, "kind": args.kind, "format": args.format, **_languages(args)}
    with connection.open_client(args) as client:
        dataset = check(post_file(client, "/v1/datasets", file, form))
        if args.wait:
            dataset = wait_processed(client, dataset, args.wait_timeout)
        _outcome(client, dataset)


def cmd_register(args: argparse.Namespace) -> None:
    body = {"name": args.name or args.uri.rsplit("/", 1)[-1], "kind": args.kind, "uri": args.uri, **_languages(args)}
    with connection.open_client(args) as client:
        dataset = check(client.post("/v1/datasets/register", json=body))
        if args.wait:
            dataset = wait_processed(client, dataset, args.wait_timeout)
        _outcome(client, dataset)


def cmd_dataset(args: argparse.Namespace) -> None:
    """A dataset and its report's summary (--json: the dataset with its whole report)."""
    with connection.open_client(args) as client:
        dataset = check(client.get(path("datasets", args.id)))
        report = _report(client, dataset)
    if args.json:
        print(json.dumps({**dataset, "report": report}, indent=2))
    else:
        print("\n".join(summary_lines(dataset, report)))


RULE_FLAGS = {
    "drop_empty": bool,
    "drop_invalid_characters": bool,
    "min_length": int,
    "max_length": int,
    "max_ratio": float,
    "deduplicate": bool,
    "drop_copies": bool,
    "drop_placeholder_mismatches": bool,
    "drop_wrong_language": bool,
    "language_odds": float,
    "language_min_chars": int,
    "drop_misaligned": bool,
}


def cmd_filter(args: argparse.Namespace) -> None:
    """A new dataset of the rows the rules keep; waits for the worker and prints what each rule removed."""
    rules = {name: getattr(args, name) for name in RULE_FLAGS if getattr(args, name) not in (None, False)}
    body: dict[str, Any] = {"rules": rules, **({"name": args.name} if args.name else {})}
    with connection.open_client(args) as client:
        dataset = check(client.post(path("datasets", args.id, "filter"), json=body))
        if args.wait:
            dataset = wait_processed(client, dataset, args.wait_timeout)
        if dataset["status"] == "failed":
            sys.exit(f"dataset {dataset['id']} failed: {dataset['error']}")
        _outcome(client, dataset)


def cmd_datasets(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        print_items(connection.page_through(client, "/v1/datasets", {}, args.limit), DATASET_COLUMNS, args.json)


def cmd_delete_dataset(args: argparse.Namespace) -> None:
    """DELETE /v1/datasets/{id}; one that a job still uses is refused (409)."""
    with connection.open_client(args) as client:
        for dataset in args.ids:
            check(client.delete(path("datasets", dataset)))
            print(f"deleted dataset {dataset}")


def _dataset_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", choices=("parallel", "monolingual"), required=True)
    p.add_argument("--name")
    p.add_argument("--source-language", help="the sources' language (BCP 47, e.g. en), for the data report")
    p.add_argument("--target-language", help="the targets' language (BCP 47, e.g. de)")
    p.add_argument("--no-wait", dest="wait", action="store_false", help="do not wait for the worker's checks")
    p.add_argument("--wait-timeout", type=float, default=3600, help="seconds to wait for them (default 3600)")


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    delete: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    p = sub.add_parser("upload", help="upload a dataset file (gzip allowed), wait for its checks; prints its id")
    p.add_argument("file")
    _dataset_arguments(p)
    p.add_argument("--format", choices=("auto", "jsonl", "tsv"), default="auto")
    p.set_defaults(func=cmd_upload)
    p = sub.add_parser("register-dataset", help="register a dataset read in place from an s3:// URI; prints its id")
    p.add_argument(
        "uri", help="s3://bucket/key, under the service's DATASET_URI_PREFIXES and the organisation's own list"
    )
    _dataset_arguments(p)
    p.set_defaults(func=cmd_register)
    p = sub.add_parser("datasets", help="list datasets, newest first (every page)")
    add_output_arguments(p)
    p.set_defaults(func=cmd_datasets)
    p = sub.add_parser("dataset", help="a dataset and a summary of its data report")
    p.add_argument("id")
    p.add_argument("--json", action="store_true", help="the dataset and its whole report as JSON")
    p.set_defaults(func=cmd_dataset)
    p = sub.add_parser("filter-dataset", help="clean a dataset into a new one by rules; prints the new id")
    p.add_argument("id")
    p.add_argument("--name")
    for name, kind in RULE_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            p.add_argument(flag, action="store_true")
        else:
            p.add_argument(flag, type=kind)
    p.add_argument("--no-wait", dest="wait", action="store_false", help="do not wait for the worker")
    p.add_argument("--wait-timeout", type=float, default=3600)
    p.set_defaults(func=cmd_filter)
    p = delete.add_parser("dataset", help="delete datasets (not one a job still uses)")
    p.add_argument("ids", nargs="+", metavar="DATASET")
    p.set_defaults(func=cmd_delete_dataset)
