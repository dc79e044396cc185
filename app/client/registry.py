"""The model registry: `register` (name, tags, description of a model) and `alias` (list, point, remove, history).

register MODEL NAME [--tag T ...] [--description TEXT]   PATCH /v1/models/{model}: the next version of NAME
alias NAME                                               the aliases of NAME
alias NAME ALIAS --version N | --model ID                point ALIAS at a version (PUT)
alias NAME ALIAS --delete                                remove it
alias NAME ALIAS --history                               every move of ALIAS, newest first
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.client import connection
from app.client.connection import check, path
from app.client.output import Column, print_items, when

ALIAS_COLUMNS: list[Column] = [
    ("ALIAS", lambda a: f"{a['name']}@{a['alias']}"),
    ("VERSION", lambda a: a["version"]),
    ("MODEL", lambda a: a["model_id"]),
    ("UPDATED", lambda a: when(a, "updated_at")),
]
HISTORY_COLUMNS: list[Column] = [
    ("WHEN", when),
    ("FROM", lambda e: None if e["from_version"] is None else f"v{e['from_version']} {e['from_model_id']}"),
    ("TO", lambda e: None if e["to_version"] is None else f"v{e['to_version']} {e['to_model_id']}"),
    ("BY KEY", lambda e: e["key_prefix"]),
]


def cmd_register(args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"name": args.name}
    if args.tag is not None:
        body["tags"] = args.tag
    if args.description is not None:
        body["description"] = args.description
    with connection.open_client(args) as client:
        model = check(client.patch(path("models", args.model), json=body))
    print(f"{model['name']}@{model['version']}: model {model['id']}", file=sys.stderr)
    print(f"{model['name']}@{model['version']}")


def cmd_alias(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        if args.alias is None:
            print_items(check(client.get(path("models", args.name, "aliases"))), ALIAS_COLUMNS, args.json)
            return
        route = path("models", args.name, "aliases", args.alias)
        if args.delete:
            check(client.delete(route))
            print(f"removed {args.name}@{args.alias}", file=sys.stderr)
        elif args.history:
            events, offset, total = [], 0, 1
            while offset < total:  # the moves are only ever added: offset paging sees each once
                page = check(client.get(f"{route}/history", params={"limit": 200, "offset": offset}))
                if not page["data"]:
                    break
                events += page["data"]
                offset, total = offset + len(page["data"]), page["total"]
            print_items(events, HISTORY_COLUMNS, args.json)
        elif args.version is not None or args.model is not None:
            body = {"version": args.version} if args.version is not None else {"model_id": args.model}
            alias = check(client.put(route, json=body))
            print(f"{alias['name']}@{alias['alias']} -> version {alias['version']} (model {alias['model_id']})")
        else:
            print_items([check(client.get(route))], ALIAS_COLUMNS, args.json)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("register", help="name a model: it becomes the next version of NAME; prints NAME@VERSION")
    p.add_argument("model", help="a model id (or name@version, name@alias)")
    p.add_argument("name", help="lower-case letters, digits and . _ - (e.g. my-en-de)")
    p.add_argument("--tag", action="append", help="a tag (repeat for several; replaces the model's tags)")
    p.add_argument("--description")
    p.set_defaults(func=cmd_register)
    p = sub.add_parser("alias", help="list a name's aliases, point one at a version, remove it, or show its moves")
    p.add_argument("name")
    p.add_argument("alias", nargs="?")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--version", type=int, help="point ALIAS at this version of NAME")
    target.add_argument("--model", help="point ALIAS at this model (one of NAME's versions)")
    target.add_argument("--delete", action="store_true", help="remove ALIAS")
    target.add_argument("--history", action="store_true", help="every move of ALIAS: who, when, from, to")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(func=cmd_alias)
