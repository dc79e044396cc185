"""Deletions that need more than an id: `delete job`, `delete name`, and the alias options of `delete model`.

delete job JOB ...                                   DELETE /v1/jobs/{id}: a stopped job (its model stays)
delete model MODEL ... [--drop-aliases | --move-aliases-to REF]
delete name NAME [--versions]                        DELETE /v1/models/names/{name} (with its versions)
"""

from __future__ import annotations

import argparse
from typing import Any

from app.client import connection
from app.client.connection import check, path


def cmd_delete_job(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        for job_id in args.ids:
            check(client.delete(path("jobs", job_id)))
            print(f"deleted job {job_id}")


def _print_aliases(aliases: list[dict[str, Any]]) -> None:
    for alias in aliases:
        where = f" to v{alias['version']} {alias['model_id']}" if alias["action"] == "moved" else ""
        print(f"  alias {alias['name']}@{alias['alias']} {alias['action']}{where}")


def cmd_delete_model(args: argparse.Namespace) -> None:
    """DELETE /v1/models/{id}: refused while aliases point at it, unless they are dropped or moved."""
    params = {"aliases": "drop"} if args.drop_aliases else {}
    if args.move_aliases_to:
        params["move_aliases_to"] = args.move_aliases_to
    with connection.open_client(args) as client:
        for model in args.ids:
            deleted = check(client.delete(path("models", model), params=params))
            print(f"deleted model {model}")
            _print_aliases(deleted["aliases"])


def cmd_delete_name(args: argparse.Namespace) -> None:
    params = {"versions": "delete"} if args.versions else {}
    with connection.open_client(args) as client:
        deleted = check(client.delete(path("models", "names", args.name), params=params))
    print(f"deleted name {deleted['name']}")
    for version in deleted["versions"]:
        print(f"  version {version['version']} {version['id']}")
    _print_aliases(deleted["aliases"])


def register(delete: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = delete.add_parser("job", help="delete stopped jobs with their metrics, logs and checkpoints")
    p.add_argument("ids", nargs="+", metavar="JOB")
    p.set_defaults(func=cmd_delete_job)
    p = delete.add_parser("model", help="delete models with their exports, evaluations and translated files")
    p.add_argument("ids", nargs="+", metavar="MODEL")
    aliases = p.add_mutually_exclusive_group()
    aliases.add_argument("--drop-aliases", action="store_true", help="remove the aliases pointing at it")
    aliases.add_argument("--move-aliases-to", metavar="REF", help="another version of its name (id or name@version)")
    p.set_defaults(func=cmd_delete_model)
    p = delete.add_parser("name", help="delete a registered name, its aliases and (with --versions) its versions")
    p.add_argument("name")
    p.add_argument("--versions", action="store_true", help="delete every version of the name with it")
    p.set_defaults(func=cmd_delete_name)
