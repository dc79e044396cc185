"""Command line: `python -m app.cli COMMAND`.

Administration (direct database access): `create-key NAME` (an organisation's first admin key; the operators'
`POST /v1/operator/organisations` does the same over the API), `create-operator-key NAME` (a key of the service's
operators, scope operator), `revoke-key PREFIX_OR_NAME`, `set-quota ORGANISATION`, `migrate`, `serve`.
Client (over HTTP, app/client/): datasets `upload`, `datasets`; jobs `submit`, `status [--watch]`, `jobs`,
`cancel`, `tag`, `compare`, `logs [--follow]`; models `models`, `translate`, `evaluate`, `export`, `import`,
`correct`, `corrections`, `adapt`, `translate-dataset`;
the registry `register` (name a model), `alias` (point a name's aliases); sweeps `sweep`, `sweeps`,
`sweep-status [--watch]`, `sweep-cancel`; pipelines `pipeline`, `pipelines`, `pipeline-status [--watch]`,
`pipeline-cancel`, `pipeline-retry`; webhooks `webhooks`, `webhook-create`, `webhook-update`, `webhook-rotate`,
`webhook-test`, `webhook-deliveries`, `webhook-redeliver`; access `whoami`, `keys`, `create-api-key`, `revoke-api-key`,
`key-rate-limit`, `members`, `member-add`, `member-role`, `audit`; `delete model|dataset|webhook`.
Every client command takes `--url` and `--key` (else $TRANSFORMER_API_KEY, else var/local-api-key); see docs/cli.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx
from pydantic import ValidationError

from app.client import (
    access,
    audit,
    corrections,
    dataset_translations,
    datasets,
    deletions,
    job_logs,
    jobs,
    models,
    pipelines,
    registry,
    sweeps,
    translations,
    webhooks,
)
from app.client.access import add_scope_argument, days_argument
from app.client.connection import add_connection_arguments
from app.core.scopes import ORGANISATION_ROLES

if TYPE_CHECKING:
    from app.core.settings import Settings


def _settings_or_exit() -> Settings:
    from app.core.settings import get_settings

    try:
        return get_settings()
    except ValidationError as exc:
        messages = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        sys.exit(f"error: {messages}")


def cmd_migrate(_args: argparse.Namespace) -> None:
    from app.db.migrations import upgrade_to_head

    settings = _settings_or_exit()
    settings.ensure_dirs()
    upgrade_to_head()
    print(f"database at head: {settings.database_url.split('@')[-1]}")


def cmd_create_key(args: argparse.Namespace) -> None:
    from datetime import timedelta

    from app.db.base import utcnow
    from app.db.keys import create_key
    from app.db.session import session_scope

    _settings_or_exit()
    expires_at = None if args.expires_in_days is None else utcnow() + timedelta(days=args.expires_in_days)
    try:
        with session_scope() as session:
            row, clear = create_key(
                session,
                args.name,
                args.owner,
                member_name=args.member,
                role=args.role,
                scopes=args.scope,
                expires_at=expires_at,
            )
            owner_name, member, role, scopes = row.owner.name, row.member.name, row.member.role, row.scopes
    except ValueError as exc:  # a bad role or scope, scopes beyond the role, a member with another role
        sys.exit(f"error: {exc}")
    print(
        f"created key {row.prefix}... named {args.name!r} for member {member!r} ({role}) of organisation "
        f"{owner_name!r} with {', '.join(scopes)}; it is shown only once:"
    )
    print(clear)


def cmd_create_operator_key(args: argparse.Namespace) -> None:
    from datetime import timedelta

    from app.db.base import utcnow
    from app.db.operators import create_operator_key
    from app.db.session import session_scope

    _settings_or_exit()
    expires_at = None if args.expires_in_days is None else utcnow() + timedelta(days=args.expires_in_days)
    try:
        with session_scope() as session:
            row, clear = create_operator_key(session, args.name, args.member, args.home, expires_at)
            member, home = row.member.name, row.owner.name
    except ValueError as exc:  # a customer's organisation as --home, a member of it with another role
        sys.exit(f"error: {exc}")
    print(
        f"created operator key {row.prefix}... named {args.name!r} for operator {member!r} of {home!r} with scope "
        "operator (organisations and their quotas: /v1/operator/organisations); it is shown only once:"
    )
    print(clear)


def cmd_revoke_key(args: argparse.Namespace) -> None:
    from app.db.keys import revoke_keys
    from app.db.session import session_scope

    settings = _settings_or_exit()
    with session_scope() as session:
        revoked = revoke_keys(session, args.key)
    if not revoked:
        sys.exit(f"error: no active key has the prefix or name {args.key!r}")
    print(
        f"revoked {len(revoked)} key(s): {', '.join(p + '...' for p in revoked)}; running API processes refuse "
        f"them within {settings.auth_cache_seconds:g} s (AUTH_CACHE_SECONDS)"
    )


def _quota(kind: type[int] | type[float]) -> Callable[[str], int | float | None]:
    """A quota's value on the command line: a number (0: unlimited) or `default` (the service's QUOTA_* setting)."""

    def parse(text: str) -> int | float | None:
        if text == "default":
            return None
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number or 'default'") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text} is negative: 0 is unlimited")
        return value

    return parse


def cmd_set_quota(args: argparse.Namespace) -> None:
    from app.db.session import session_scope
    from app.services.quotas import limits, set_own_limits

    settings = _settings_or_exit()
    changes = {
        column: getattr(args, column)
        for column in ("quota_storage_gb", "quota_active_jobs", "quota_worker_minutes_per_day")
        if hasattr(args, column)  # a flag not given: left as it is
    }
    try:
        with session_scope() as session:
            owner = set_own_limits(session, args.organisation, changes)
            now = limits(settings, owner)
    except ValueError as exc:
        sys.exit(f"error: {exc}")

    def shown(n: float, unit: str = "") -> str:
        return "unlimited" if not n else f"{n:g}{unit}"

    print(
        f"{args.organisation}: storage {shown(now.storage_bytes / 2**30, ' GiB')}, {shown(now.active_jobs)} jobs "
        f"queued or running, {shown(now.worker_minutes_per_day)} worker minutes a day"
    )


def cmd_serve(args: argparse.Namespace) -> None:
    from app.embedded import serve

    serve(_settings_or_exit(), with_workers=not args.no_workers)


def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The commands that talk to the API, each with --url and --key; `delete KIND ID...` groups the deletions."""
    before = set(sub.choices)
    delete = sub.add_parser("delete", help="delete jobs, models, names, datasets, webhooks or pipelines")
    kinds = delete.add_subparsers(dest="kind", required=True, metavar="{job,model,name,dataset,webhook,pipeline}")
    deletions.register(kinds)
    access.register(sub)
    audit.register(sub)
    datasets.register(sub, kinds)
    jobs.register(sub)
    job_logs.register(sub)
    models.register(sub)
    corrections.register(sub)
    dataset_translations.register(sub)
    registry.register(sub)
    sweeps.register(sub)
    pipelines.register(sub, kinds)
    translations.register(sub)
    webhooks.register(sub, kinds)
    for parser in [*(sub.choices[n] for n in set(sub.choices) - before - {"delete"}), *kinds.choices.values()]:
        add_connection_arguments(parser)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m app.cli", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("migrate", help="upgrade the database schema to the latest revision")
    p.set_defaults(func=cmd_migrate)
    p = sub.add_parser("create-key", help="create an API key; prints it as the last line")
    p.add_argument("name")
    p.add_argument(
        "--owner", help="organisation the key acts for (default: NAME), created if new; its keys share objects"
    )
    p.add_argument("--member", help="the member it belongs to (default: named as the organisation), created if new")
    p.add_argument("--role", choices=[r.value for r in ORGANISATION_ROLES], help="a new member's role (default: admin)")
    add_scope_argument(p, "all its member's role allows")
    p.add_argument(
        "--expires-in-days", type=days_argument, metavar="N", help="it stops working N days from now (1-3650)"
    )
    p.set_defaults(func=cmd_create_key)
    p = sub.add_parser(
        "create-operator-key",
        help="create a key of the service's operators (scope operator: organisations and their quotas); prints it last",
    )
    p.add_argument("name")
    p.add_argument("--member", help="the operator it belongs to (default: NAME), created if new")
    p.add_argument(
        "--home", default="operators", help="the operators' own organisation (default: operators), created if new"
    )
    p.add_argument(
        "--expires-in-days", type=days_argument, metavar="N", help="it stops working N days from now (1-3650)"
    )
    p.set_defaults(func=cmd_create_operator_key)
    p = sub.add_parser("revoke-key", help="revoke the active keys with this display prefix (tsk_xxxxxx) or name")
    p.add_argument("key", metavar="PREFIX_OR_NAME")
    p.set_defaults(func=cmd_revoke_key)
    p = sub.add_parser(
        "set-quota", help="give an organisation its own quotas (a number, 0 unlimited, or default: QUOTA_* again)"
    )
    p.add_argument("organisation")
    for flag, column, kind in (
        ("--storage-gb", "quota_storage_gb", float),
        ("--active-jobs", "quota_active_jobs", int),
        ("--worker-minutes-per-day", "quota_worker_minutes_per_day", int),
    ):
        p.add_argument(flag, dest=column, type=_quota(kind), default=argparse.SUPPRESS, metavar="N|default")
    p.set_defaults(func=cmd_set_quota)
    p = sub.add_parser("serve", help="migrate, then run the API and the workers (embedded mode)")
    p.add_argument("--no-workers", action="store_true", help="run only the API")
    p.set_defaults(func=cmd_serve)
    add_client_commands(sub)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except httpx.TransportError as exc:  # the API down or unreachable: a message, not a traceback
        sys.exit(f"error: cannot reach the API at {getattr(args, 'url', '?')}: {exc or type(exc).__name__}")
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
