"""The organisation's audit trail (scope admin; docs/security.md).

audit [--action A] [--kind K] [--object ID] [--member M] [--api-key KEY] [--since T] [--until T]   newest first
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.client import connection
from app.client.output import Column, add_output_arguments, print_items, when


def _who(event: dict[str, Any]) -> str:
    prefix = f" ({event['key_prefix']}...)" if event["key_prefix"] else ""
    return f"{event['member_name'] or '-'}{prefix}"


COLUMNS: list[Column] = [
    ("WHEN", when),
    ("ACTION", lambda e: e["action"]),
    ("OBJECT", lambda e: e["object_id"]),
    ("BY", _who),
    ("FROM", lambda e: e["client"]),
    ("REQUEST", lambda e: e["request_id"]),
    ("DETAILS", lambda e: json.dumps(e["details"], separators=(",", ":"))[:80] if e["details"] else None),
]
FILTERS = {
    "action": "action",
    "kind": "kind",
    "object": "object_id",
    "member": "member",
    "api_key": "key",
    "since": "since",
    "until": "until",
}


def cmd_audit(args: argparse.Namespace) -> None:
    params = {query: getattr(args, name) for name, query in FILTERS.items() if getattr(args, name) is not None}
    with connection.open_client(args) as client:
        print_items(connection.page_through(client, "/v1/audit", params, args.limit), COLUMNS, args.json)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("audit", help="the organisation's audit trail, newest first (scope admin)")
    p.add_argument("--action", help="e.g. job.submitted, alias.moved")
    p.add_argument("--kind", help="e.g. job, model, alias, dataset, key, member, webhook, sweep")
    p.add_argument("--object", metavar="ID", help="the object's id (an alias: name@alias)")
    p.add_argument("--member", help="the member who made the change (name or id)")
    p.add_argument("--api-key", metavar="KEY", help="the key that made it (id or prefix)")
    p.add_argument("--since", metavar="TIME", help="from then on (ISO 8601 with a timezone)")
    p.add_argument("--until", metavar="TIME", help="before then (ISO 8601 with a timezone)")
    add_output_arguments(p)
    p.set_defaults(func=cmd_audit)
