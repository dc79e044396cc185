"""Who you are and your API keys (organisation members: docs/security.md).

whoami                                                        organisation, member, role, the key's scopes
keys                                                          your keys (an admin: the organisation's), newest first
create-api-key NAME [--scope S[,S...] ...] [--member M] [--expires-in-days N | --expires-at TIME]   prints it, once
revoke-api-key ID                                             revoke a key at once
key-rate-limit ID N|default                                   a key's own requests per minute (admin)
members                                                       the organisation's members (admin)
member-add NAME [--role R]                                    add a member (admin)
member-role ID ROLE                                           change a member's role (admin)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.client import connection
from app.client.connection import check, path
from app.client.output import Column, add_output_arguments, print_items, print_json, when
from app.core.scopes import ALL_SCOPES, ORGANISATION_ROLES, Role, expiry_days, key_rate_limit, parse_scopes

KEY_COLUMNS: list[Column] = [
    ("ID", lambda k: k["id"]),
    ("PREFIX", lambda k: k["prefix"] + "..."),
    ("NAME", lambda k: k["name"]),
    ("MEMBER", lambda k: k["member"]),
    ("SCOPES", lambda k: ",".join(k["scopes"])),
    ("CREATED", when),
    ("LAST USED", lambda k: when(k, "last_used_at")),
    ("EXPIRES", lambda k: when(k, "expires_at") if k["expires_at"] else None),
    ("REVOKED", lambda k: when(k, "revoked_at") if k["revoked_at"] else None),
    ("LIMIT/MIN", lambda k: k["rate_limit_per_minute"]),  # -: the service's RATE_LIMIT_PER_MINUTE
]
MEMBER_COLUMNS: list[Column] = [("ID", lambda m: m["id"]), ("NAME", lambda m: m["name"]), ("ROLE", lambda m: m["role"])]


def cmd_whoami(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        me = check(client.get("/v1/me"))
    if args.json:
        print_json(me)
        return
    print(f"organisation {me['organisation']}, member {me['member']} ({me['role']})")
    print(f"key {me['key_name']} ({me['key_prefix']}...): {', '.join(me['scopes']) or 'no scope'}")
    unused = [s for s in me["key_scopes"] if s not in me["scopes"]]
    if unused:
        print(f"held but not allowed by the role {me['role']}: {', '.join(unused)}")
    if me["expires_at"]:
        print(f"expires {when(me, 'expires_at')} UTC")


def cmd_keys(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        print_items(connection.page_through(client, "/v1/keys", {}, args.limit), KEY_COLUMNS, args.json)


def cmd_create(args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"name": args.name}
    for field, value in (
        ("scopes", args.scope),
        ("member", args.member),
        ("expires_in_days", args.expires_in_days),
        ("expires_at", args.expires_at),
    ):
        if value is not None:
            body[field] = value
    with connection.open_client(args) as client:
        key = check(client.post("/v1/keys", json=body))
    if args.json:
        print_json(key)
        return
    expiry = f", expires {when(key, 'expires_at')} UTC" if key["expires_at"] else ""
    print(
        f"created key {key['prefix']}... named {key['name']!r} for member {key['member']!r} with "
        f"{', '.join(key['scopes'])}{expiry}; it is shown only once:",
        file=sys.stderr,
    )
    print(key["key"])


def cmd_revoke(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        key = check(client.delete(path("keys", args.key_id)))
    print(f"revoked key {key['prefix']}... ({key['name']})")


def cmd_rate_limit(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        body = {"rate_limit_per_minute": args.per_minute}
        key = check(client.patch(path("keys", args.key_id), json=body))
    limit = key["rate_limit_per_minute"]
    print(
        f"key {key['prefix']}... ({key['name']}) may make "
        + (f"{limit} requests per minute" if limit else "the service's RATE_LIMIT_PER_MINUTE requests per minute")
    )


def cmd_members(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        print_items(connection.page_through(client, "/v1/members", {}, args.limit), MEMBER_COLUMNS, args.json)


def cmd_member_add(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        member = check(client.post("/v1/members", json={"name": args.name, "role": args.role}))
    print(member["id"])


def cmd_member_role(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        member = check(client.patch(path("members", args.member), json={"role": args.role}))
    print(f"member {member['name']} is now a {member['role']}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    json_help = "the API's answer as JSON"
    p = sub.add_parser("whoami", help="the key's organisation, member, role and scopes")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(func=cmd_whoami)
    p = sub.add_parser("keys", help="your API keys (an admin's: the organisation's), newest first")
    add_output_arguments(p)
    p.set_defaults(func=cmd_keys)
    p = sub.add_parser("create-api-key", help="create an API key over the API; prints it, once, as the last line")
    p.add_argument("name")
    add_scope_argument(p, "all of yours its member's role allows")
    p.add_argument("--member", help="the member it is for (name or id; another than yours needs scope admin)")
    expiry = p.add_mutually_exclusive_group()
    expiry.add_argument(
        "--expires-in-days", type=days_argument, metavar="N", help="it stops working N days from now (1-3650)"
    )
    expiry.add_argument("--expires-at", metavar="TIME", help="it stops working then (ISO 8601 with a timezone)")
    p.add_argument("--json", action="store_true", help=f"{json_help}, key included")
    p.set_defaults(func=cmd_create)
    p = sub.add_parser("revoke-api-key", help="revoke an API key by its id (see `keys`)")
    p.add_argument("key_id", metavar="ID")
    p.set_defaults(func=cmd_revoke)
    p = sub.add_parser("key-rate-limit", help="set a key's own requests per minute (scope admin)")
    p.add_argument("key_id", metavar="ID")
    p.add_argument(
        "per_minute",
        type=rate_limit_argument,
        metavar="N|default",
        help="1-1000000, or default: the service's RATE_LIMIT_PER_MINUTE",
    )
    p.set_defaults(func=cmd_rate_limit)
    p = sub.add_parser("members", help="the organisation's members and their roles (scope admin)")
    add_output_arguments(p)
    p.set_defaults(func=cmd_members)
    p = sub.add_parser("member-add", help="add a member to the organisation (scope admin); prints its id")
    p.add_argument("name")
    p.add_argument("--role", choices=[r.value for r in ORGANISATION_ROLES], default=Role.MEMBER.value)
    p.set_defaults(func=cmd_member_add)
    p = sub.add_parser("member-role", help="change a member's role (scope admin); its keys follow at once")
    p.add_argument("member", metavar="ID")
    p.add_argument("role", choices=[r.value for r in ORGANISATION_ROLES])
    p.set_defaults(func=cmd_member_role)


def add_scope_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """--scope/--scopes SCOPE[,SCOPE...], repeatable, into args.scope (a key's scopes when it is created)."""
    parser.add_argument(
        "--scope",
        "--scopes",
        dest="scope",
        action="extend",
        type=scopes_argument,
        metavar="SCOPE[,SCOPE...]",
        help=f"scopes it holds, of {', '.join(ALL_SCOPES)} (repeatable; default: {default})",
    )


def days_argument(value: str) -> int:
    """argparse's type for --expires-in-days: a refused value is a usage error naming it (exit 2)."""
    try:
        return expiry_days(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def rate_limit_argument(value: str) -> int | None:
    """argparse's type for key-rate-limit: `default` (None) or 1 to MAX_KEY_RATE_LIMIT; a usage error naming it."""
    if value == "default":
        return None
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"rate limit {value!r} is neither a whole number nor default") from None
    try:
        return key_rate_limit(number)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def scopes_argument(value: str) -> list[str]:
    """argparse's type for --scope: one scope or several, comma-separated; an unknown one is a usage error naming
    it and the scopes there are (exit 2)."""
    try:
        return [scope.value for scope in parse_scopes(part.strip() for part in value.split(",") if part.strip())]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
