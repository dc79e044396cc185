"""Pipelines: `pipeline FILE [--watch]` (start one from a YAML or JSON request), `pipelines`, `pipeline-status ID
[--watch]`, `pipeline-cancel ID`, `pipeline-retry ID`, `delete pipeline ID`. Each step is an ordinary job, dataset
translation or dataset: `status`, `logs` and `datasets` show them too.

    python -m app.cli pipeline backtranslation.yaml --watch      # kind: backtranslation, dataset_id: ..., ...
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from app.client import connection
from app.client.connection import check, path
from app.client.output import Column, add_output_arguments, print_items, print_json, when
from app.client.sweep_spec import SpecError, load_file

PIPELINE_COLUMNS: list[Column] = [
    ("ID", lambda p: p["id"]),
    ("KIND", lambda p: p["kind"]),
    ("NAME", lambda p: p["name"]),
    ("STATUS", lambda p: p["status"]),
    ("STEP", lambda p: _current(p)),
    ("MODEL", lambda p: p["model_id"]),
    ("CREATED", when),
]


def _current(pipeline: dict[str, Any]) -> str | None:
    """The step that runs (or failed), as `N/M name`."""
    steps = pipeline["steps"]
    for index, step in enumerate(steps, 1):
        if step["status"] in ("running", "failed", "cancelled", "waiting"):
            return f"{index}/{len(steps)} {step['name']}"
    return None


def _print_steps(pipeline: dict[str, Any]) -> None:
    print(f"pipeline {pipeline['id']} ({pipeline['kind']}, {pipeline['name']}): {pipeline['status']}")
    for index, step in enumerate(pipeline["steps"], 1):
        made = ", ".join(f"{k} {v}" for k, v in (step["output"] or {}).items())
        print(f"  {index}. {step['name']:<18} {step['kind']:<9} {step['status']:<9} {step['id'] or '':<36} {made}")
        if step["error"] and step["status"] in ("failed", "cancelled"):
            print(f"     {step['error']}")
    if pipeline["error"]:
        print(f"  error: {pipeline['error']}")
    if pipeline["model_id"]:
        print(f"  model: {pipeline['model_id']}")


def _watch(client: httpx.Client, pipeline: dict[str, Any], interval: float) -> int:
    """Follow the pipeline, a line each time a step changes; 0 once it succeeded, 1 otherwise."""
    seen = None
    while True:
        now = [(s["name"], s["status"]) for s in pipeline["steps"]]
        if now != seen:
            seen = now
            print(f"{pipeline['status']}: " + ", ".join(f"{n} {s}" for n, s in now), file=sys.stderr)
        if pipeline["status"] != "running":
            _print_steps(pipeline)
            return 0 if pipeline["status"] == "succeeded" else 1
        time.sleep(interval)
        pipeline = check(client.get(path("pipelines", pipeline["id"])))


def cmd_pipeline(args: argparse.Namespace) -> None:
    try:
        body = load_file(Path(args.file))
    except SpecError as exc:
        sys.exit(f"error: {exc}")
    with connection.open_client(args) as client:
        pipeline = check(client.post("/v1/pipelines", json=body))
        print(pipeline["id"])
        if args.watch:
            sys.exit(_watch(client, pipeline, args.interval))


def cmd_pipelines(args: argparse.Namespace) -> None:
    params = {"status": args.status} if args.status else {}
    with connection.open_client(args) as client:
        rows = connection.page_through(client, "/v1/pipelines", params, args.limit)
    print_items(rows, PIPELINE_COLUMNS, args.json)


def cmd_status(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        pipeline = check(client.get(path("pipelines", args.id)))
        if args.watch:
            sys.exit(_watch(client, pipeline, args.interval))
    print_json(pipeline) if args.json else _print_steps(pipeline)


def cmd_action(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        _print_steps(check(client.post(path("pipelines", args.id, args.action))))


def cmd_delete(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        for pipeline in args.ids:
            check(client.delete(path("pipelines", pipeline)))
            print(f"deleted pipeline {pipeline}")


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    delete: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    p = sub.add_parser("pipeline", help="start a back-translation or distillation pipeline from a YAML/JSON file")
    p.add_argument("file", metavar="FILE", help="the request (POST /v1/pipelines), .yaml, .yml or .json")
    p.add_argument("--watch", action="store_true", help="follow it until it ends (exit 1 unless it succeeds)")
    p.add_argument("--interval", type=float, default=5.0)
    p.set_defaults(func=cmd_pipeline)
    p = sub.add_parser("pipelines", help="list your pipelines, newest first")
    p.add_argument("--status", choices=("running", "succeeded", "failed", "cancelled"))
    add_output_arguments(p)
    p.set_defaults(func=cmd_pipelines)
    p = sub.add_parser("pipeline-status", help="a pipeline's steps, their objects and what they made")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="follow it until it ends (exit 1 unless it succeeds)")
    p.add_argument("--interval", type=float, default=5.0)
    p.set_defaults(func=cmd_status)
    for action, help in (("cancel", "stop a pipeline and its running step"), ("retry", "run a failed step again")):
        p = sub.add_parser(f"pipeline-{action}", help=help)
        p.add_argument("id")
        p.set_defaults(func=cmd_action, action=action)
    p = delete.add_parser("pipeline", help="delete pipelines that are over (their jobs, datasets and models stay)")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.set_defaults(func=cmd_delete)
