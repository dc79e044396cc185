"""`logs JOB`: what the worker logged about a job (GET /v1/jobs/{id}/logs), and `--follow` while it runs."""

from __future__ import annotations

import argparse
import json
import time

from app.client import connection
from app.client.connection import check, path

LIVE = ("queued", "running")
SETTLE_SECONDS = 2.0  # a job's last lines are written within seconds of its final status


def line_text(line: dict[str, object]) -> str:
    """`2026-11-25 16:14:03 INFO    worker.tasks.training: message`."""
    when = str(line["time"])[:19].replace("T", " ")
    return f"{when} {str(line['level']).upper():<8} {line['logger']}: {line['message']}"


def cmd_logs(args: argparse.Namespace) -> None:
    after, settled = 0, False
    with connection.open_client(args) as client:
        while True:
            page = check(client.get(path("jobs", args.job, "logs"), params={"after": after, "level": args.level}))
            for line in page["lines"]:
                print(json.dumps(line) if args.json else line_text(line), flush=True)
            after = page["next_after"]
            if page["has_more"]:
                continue
            if not args.follow or settled:
                return
            settled = page["status"] not in LIVE  # one more read after the end: the last lines
            time.sleep(SETTLE_SECONDS if settled else args.interval)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("logs", help="what the worker logged about a job; --follow until it ends")
    p.add_argument("job")
    p.add_argument("-f", "--follow", action="store_true", help="keep reading new lines while the job runs")
    p.add_argument("--level", choices=("info", "warning", "error", "critical"), default="info", help="lowest level")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between reads with --follow")
    p.add_argument("--json", action="store_true", help="one JSON object a line, as the API gives it")
    p.set_defaults(func=cmd_logs)
