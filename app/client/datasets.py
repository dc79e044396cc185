"""Datasets: `upload`, `datasets`, `delete dataset`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.client import connection
from app.client.connection import check, path
from app.client.output import Column, add_output_arguments, print_items, when

DATASET_COLUMNS: list[Column] = [
    ("ID", lambda dataset: dataset["id"]),
    ("NAME", lambda dataset: dataset["name"]),
    ("KIND", lambda dataset: dataset["kind"]),
    ("FORMAT", lambda dataset: dataset["format"]),
    ("ROWS", lambda dataset: f"{dataset['rows']:,}"),
    ("SIZE", lambda dataset: f"{dataset['size_bytes'] / 1e6:.1f} MB"),
    ("CREATED", when),
]


def cmd_upload(args: argparse.Namespace) -> None:
    file = Path(args.file)
    with connection.open_client(args) as client, open(file, "rb") as f:
        dataset = check(
            client.post(
                "/v1/datasets", data={"name": args.name or file.name, "kind": args.kind}, files={"file": (file.name, f)}
            )
        )
    print(f"dataset {dataset['id']}: {dataset['rows']} rows ({dataset['kind']}, {dataset['format']})", file=sys.stderr)
    print(dataset["id"])


def cmd_datasets(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        print_items(connection.page_through(client, "/v1/datasets", {}, args.limit), DATASET_COLUMNS, args.json)


def cmd_delete_dataset(args: argparse.Namespace) -> None:
    """DELETE /v1/datasets/{id}; one that a job still uses is refused (409)."""
    with connection.open_client(args) as client:
        for dataset in args.ids:
            check(client.delete(path("datasets", dataset)))
            print(f"deleted dataset {dataset}")


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    delete: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    p = sub.add_parser("upload", help="upload a dataset file; prints its id")
    p.add_argument("file")
    p.add_argument("--kind", choices=("parallel", "monolingual"), required=True)
    p.add_argument("--name")
    p.set_defaults(func=cmd_upload)
    p = sub.add_parser("datasets", help="list datasets, newest first (every page)")
    add_output_arguments(p)
    p.set_defaults(func=cmd_datasets)
    p = delete.add_parser("dataset", help="delete datasets (not one a job still uses)")
    p.add_argument("ids", nargs="+", metavar="DATASET")
    p.set_defaults(func=cmd_delete_dataset)
