"""Webhooks: the endpoints that receive your events, and their deliveries.

webhooks                                                  every endpoint, newest first
webhook-create URL --event TYPE [--event TYPE ...] [--description TEXT]    prints its secret, once
webhook-update ID [--endpoint-url URL] [--event TYPE ...] [--enable | --disable] [--description TEXT]
webhook-rotate ID                                         a new secret, printed once
webhook-test ID                                           send it a webhook.test event
webhook-deliveries ID [--status S] [--event TYPE]         its deliveries, newest first
webhook-redeliver ID DELIVERY                             a new attempt of a delivery now
delete webhook ID ...                                     remove endpoints (and their deliveries)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.client import connection
from app.client.connection import check, path
from app.client.output import Column, add_output_arguments, print_items, print_json, when
from app.schemas.webhooks import EVENT_TYPES

WEBHOOK_COLUMNS: list[Column] = [
    ("ID", lambda w: w["id"]),
    ("URL", lambda w: w["url"]),
    ("EVENTS", lambda w: ",".join(w["events"])),
    ("ENABLED", lambda w: "yes" if w["enabled"] else "no"),
    ("DESCRIPTION", lambda w: w["description"]),
    ("CREATED", when),
]
DELIVERY_COLUMNS: list[Column] = [
    ("ID", lambda d: d["id"]),
    ("EVENT", lambda d: d["event_type"]),
    ("STATUS", lambda d: d["status"]),
    ("ATTEMPTS", lambda d: f"{d['attempts']}/{d['max_attempts']}"),
    ("CODE", lambda d: d["last_status_code"]),
    ("MS", lambda d: None if d["last_latency_ms"] is None else round(d["last_latency_ms"])),
    ("NEXT", lambda d: when(d, "next_attempt_at") if d["next_attempt_at"] else None),
    ("ERROR", lambda d: (d["last_error"] or "")[:60] or None),
    ("CREATED", when),
]


def _print_secret(webhook: dict[str, Any], as_json: bool, action: str) -> None:
    if as_json:
        print_json(webhook)
        return
    print(f"{action} webhook {webhook['id']} for {webhook['url']} ({', '.join(webhook['events'])})", file=sys.stderr)
    print("its signing secret is shown only this once:", file=sys.stderr)
    print(webhook["secret"])


def cmd_webhooks(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        print_items(connection.page_through(client, "/v1/webhooks", {}, args.limit), WEBHOOK_COLUMNS, args.json)


def cmd_create(args: argparse.Namespace) -> None:
    body: dict[str, Any] = {"url": args.url_, "events": args.event}
    if args.description is not None:
        body["description"] = args.description
    with connection.open_client(args) as client:
        _print_secret(check(client.post("/v1/webhooks", json=body)), args.json, "created")


def cmd_update(args: argparse.Namespace) -> None:
    body: dict[str, Any] = {}
    if args.url_ is not None:
        body["url"] = args.url_
    if args.event is not None:
        body["events"] = args.event
    if args.enabled is not None:
        body["enabled"] = args.enabled
    if args.description is not None:
        body["description"] = args.description or None
    if not body:
        connection.fail("nothing to change: give --endpoint-url, --event, --enable, --disable or --description")
    with connection.open_client(args) as client:
        print_items([check(client.patch(path("webhooks", args.webhook), json=body))], WEBHOOK_COLUMNS, args.json)


def cmd_rotate(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        _print_secret(check(client.post(path("webhooks", args.webhook, "rotate-secret"))), args.json, "rotated")


def cmd_test(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        delivery = check(client.post(path("webhooks", args.webhook, "test")))
    print(f"sent webhook.test to webhook {args.webhook}: delivery {delivery['id']}", file=sys.stderr)
    print(delivery["id"])


def cmd_deliveries(args: argparse.Namespace) -> None:
    params = {name: value for name, value in (("status", args.status), ("event_type", args.event)) if value}
    with connection.open_client(args) as client:
        route = path("webhooks", args.webhook, "deliveries")
        print_items(connection.page_through(client, route, params, args.limit), DELIVERY_COLUMNS, args.json)


def cmd_redeliver(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        check(client.post(path("webhooks", args.webhook, "deliveries", args.delivery, "redeliver")))
    print(f"delivery {args.delivery}: a new attempt is on its way")


def cmd_delete_webhook(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        for webhook in args.ids:
            check(client.delete(path("webhooks", webhook)))
            print(f"deleted webhook {webhook}")


def _add_fields(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "--event",
        action="append",
        choices=EVENT_TYPES,
        metavar="TYPE",
        required=required,
        help=f"an event to receive (repeat for several){'' if required else '; replaces the list'}: "
        + ", ".join(EVENT_TYPES),
    )
    p.add_argument("--description", help="a note for people (an empty one clears it)" if not required else None)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    delete: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    p = sub.add_parser("webhooks", help="list your webhook endpoints, newest first")
    add_output_arguments(p)
    p.set_defaults(func=cmd_webhooks)
    p = sub.add_parser("webhook-create", help="register an endpoint for events; prints its secret, once")
    p.add_argument("url_", metavar="URL", help="an http(s) URL of a public receiver")
    _add_fields(p, required=True)
    p.add_argument("--json", action="store_true", help="the API's answer as JSON, secret included")
    p.set_defaults(func=cmd_create)
    p = sub.add_parser("webhook-update", help="change an endpoint's URL, events, description, or enable/disable it")
    p.add_argument("webhook", metavar="ID")
    p.add_argument("--endpoint-url", dest="url_", metavar="URL", help="a new receiver URL (--url is the API's)")
    _add_fields(p, required=False)
    enabled = p.add_mutually_exclusive_group()
    enabled.add_argument("--enable", dest="enabled", action="store_const", const=True, help="deliver to it again")
    enabled.add_argument("--disable", dest="enabled", action="store_const", const=False, help="stop delivering")
    p.add_argument("--json", action="store_true", help="one JSON object a line")
    p.set_defaults(func=cmd_update)
    p = sub.add_parser("webhook-rotate", help="give an endpoint a new secret, printed once (the old one signs a day)")
    p.add_argument("webhook", metavar="ID")
    p.add_argument("--json", action="store_true", help="the API's answer as JSON, secret included")
    p.set_defaults(func=cmd_rotate)
    p = sub.add_parser("webhook-test", help="send an endpoint a webhook.test event; prints the delivery's id")
    p.add_argument("webhook", metavar="ID")
    p.set_defaults(func=cmd_test)
    p = sub.add_parser("webhook-deliveries", help="an endpoint's deliveries, newest first (every page)")
    p.add_argument("webhook", metavar="ID")
    p.add_argument("--status", choices=("pending", "retrying", "succeeded", "failed"))
    p.add_argument("--event", metavar="TYPE", help="only this event type")
    add_output_arguments(p)
    p.set_defaults(func=cmd_deliveries)
    p = sub.add_parser("webhook-redeliver", help="make a new attempt of a delivery now (the same webhook-id)")
    p.add_argument("webhook", metavar="ID")
    p.add_argument("delivery", metavar="DELIVERY")
    p.set_defaults(func=cmd_redeliver)
    p = delete.add_parser("webhook", help="delete webhook endpoints and their deliveries")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.set_defaults(func=cmd_delete_webhook)
