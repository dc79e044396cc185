"""Hyperparameter sweeps: `sweep` (start one from a file and flags), `sweeps`, `sweep-status [--watch]`,
`sweep-cancel`. A sweep's trials are jobs: `jobs`, `logs`, `compare` and `cancel` work on them too."""

from __future__ import annotations

import argparse
import sys
from typing import Any, get_args

import httpx

from app.client import connection, sweep_view
from app.client.connection import check, path
from app.client.jobs import OBJECTIVES, SettingError
from app.client.output import Column, add_output_arguments, cell, print_items, print_json, when
from app.client.sweep_spec import EXAMPLES, FORMS, SpecError, sweep_body
from app.schemas.sweeps import Direction, Metric, SweepCreate, SweepStatus

STATUSES: tuple[str, ...] = get_args(SweepStatus)
METRICS: tuple[str, ...] = get_args(Metric)
DIRECTIONS: tuple[str, ...] = get_args(Direction)
SAMPLERS: tuple[str, ...] = get_args(SweepCreate.model_fields["sampler"].annotation)
PRUNERS: tuple[str, ...] = get_args(SweepCreate.model_fields["pruner"].annotation)
FULL_ID = 36  # a sweep id is a UUID; anything shorter is a prefix of one


def resolve(client: httpx.Client, ref: str) -> str:
    """The sweep id `ref` names: itself, or the one sweep whose id starts with it (as `sweeps` shows ids);
    an error naming a prefix that matches none, or several."""
    if len(ref) >= FULL_ID:
        return ref
    matches = [s["id"] for s in connection.page_through(client, "/v1/sweeps", {}, None) if s["id"].startswith(ref)]
    if len(matches) == 1:
        return str(matches[0])
    if not matches:
        connection.fail(f"no sweep's id starts with {ref!r}")
    connection.fail(f"{ref!r} starts the ids of {len(matches)} sweeps: {', '.join(matches)}")


def cmd_sweep(args: argparse.Namespace) -> None:
    try:
        body = sweep_body(args)
    except (SpecError, SettingError) as exc:
        sys.exit(f"error: {exc}")
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else {}
    with connection.open_client(args) as client:
        sweep = check(client.post("/v1/sweeps", json=body, headers=headers))
    if args.json:
        print_json(sweep)
        return
    trials = sweep.get("trials") or []
    print(f"sweep {sweep['id']} {sweep['name']}: {sweep['status']}, {len(trials)} trials queued", file=sys.stderr)
    for trial in trials:
        print("  " + sweep_view.trial_line(trial, sweep["metric"]), file=sys.stderr)
    print(sweep["id"])


SWEEP_COLUMNS: list[Column] = [
    ("ID", lambda sweep: sweep["id"][:8]),
    ("NAME", lambda sweep: sweep["name"]),
    ("STATUS", lambda sweep: sweep["status"]),
    ("METRIC", lambda sweep: f"{sweep['metric']}:{sweep['direction'][:3]}"),
    ("TRIALS", lambda sweep: sweep_view.counts_cell(sweep["trial_counts"])),
    ("BEST", lambda sweep: cell(sweep["best"]["value"]) if sweep.get("best") else None),
    ("MINUTES", lambda sweep: f"{sweep['worker_minutes']:.1f}"),
    ("CREATED", when),
]


def cmd_sweeps(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {"status": args.status} if args.status else {}
    with connection.open_client(args) as client:
        print_items(connection.page_through(client, "/v1/sweeps", params, args.limit), SWEEP_COLUMNS, args.json)


def cmd_sweep_status(args: argparse.Namespace) -> None:
    if args.watch and args.json:
        sys.exit("error: --json shows the sweep once; leave out --watch")
    with connection.open_client(args) as client:
        sweep_id = resolve(client, args.sweep)
        if args.watch:
            code = sweep_view.watch(client, sweep_id, args.interval)
        else:
            sweep = check(client.get(path("sweeps", sweep_id)))
            if args.json:
                print_json(sweep)
            else:
                print(sweep_view.status_text(sweep))
            return
    sys.exit(code)


def cmd_sweep_cancel(args: argparse.Namespace) -> None:
    """No further trial starts; queued trials are cancelled at once, running ones at their next lease renewal. A sweep
    already ended is an error (409) naming its status."""
    with connection.open_client(args) as client:
        for ref in args.sweeps:
            sweep = check(client.post(path("sweeps", resolve(client, ref), "cancel")))
            print(f"{sweep['id']}  {sweep['status']}{' (cancel requested)' if sweep['cancel_requested'] else ''}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sweep",
        help="start a hyperparameter sweep from a YAML/JSON file and flags; prints its id",
        description="Start a sweep (POST /v1/sweeps). FILE holds the request as YAML or JSON; the flags override "
        f"its values. A --space dimension is SETTING=TYPE:..., TYPE:... being {FORMS}; e.g. {EXAMPLES}.",
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="the sweep's request (.yaml, .yml or .json)")
    p.add_argument("--name", help="the registry name its best model gets (NAME@best); trials are named NAME #N")
    p.add_argument("--dataset", metavar="ID", help="the trials' training dataset (job.dataset_id)")
    p.add_argument("--valid-dataset", metavar="ID", help="their validation dataset (job.valid_dataset_id)")
    p.add_argument("--objective", choices=OBJECTIVES, help="the trials' objective (default: translation)")
    p.add_argument("--max-minutes", type=float, metavar="M", help="each trial's training time (job.training)")
    p.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="a field every trial shares, by its dotted path in a job, as `submit --set`: "
        "--set training.max_steps=300 (repeatable)",
    )
    p.add_argument(
        "--space",
        action="append",
        metavar="SETTING=TYPE:...",
        help=f"a dimension searched: {FORMS}, e.g. {EXAMPLES} (repeatable; replaces the file's of that setting)",
    )
    p.add_argument(
        "--first-trial",
        action="append",
        metavar="SETTING=VALUE,...",
        help="settings to try before the sampler's own, e.g. the values you use today: "
        "--first-trial training.lr_scale=1,model.dropout=0.1 (repeatable: one trial each, in order)",
    )
    p.add_argument("--budget-minutes", type=float, metavar="M", help="worker minutes over all trials")
    p.add_argument("--budget-trials", type=int, metavar="N", help="trials started, pruned and failed included")
    p.add_argument("--concurrent", type=int, metavar="N", help="trials queued or running at once (default 1)")
    p.add_argument("--metric", choices=METRICS, help="default: bleu for translation, valid_loss otherwise")
    p.add_argument("--direction", choices=DIRECTIONS, help="default: maximize scores, minimize losses")
    p.add_argument("--sampler", choices=SAMPLERS, help="default: tpe")
    p.add_argument("--pruner", choices=PRUNERS, help="default: asha")
    p.add_argument("--seed", type=int, help="the sampler's seed (default 0)")
    p.add_argument("--idempotency-key")
    p.add_argument("--json", action="store_true", help="print the created sweep as the API gives it")
    p.set_defaults(func=cmd_sweep)
    p = sub.add_parser("sweeps", help="list sweeps, newest first (every page)")
    p.add_argument("--status", choices=STATUSES)
    add_output_arguments(p)
    p.set_defaults(func=cmd_sweeps)
    p = sub.add_parser("sweep-status", help="a sweep and its trials; --watch redraws them until it ends")
    p.add_argument("sweep", metavar="SWEEP", help="its id, or the start of it that `sweeps` shows")
    p.add_argument("--watch", action="store_true", help="follow it until it ends; exit 0 if it succeeds, else 1")
    p.add_argument("--interval", type=float, default=5.0, help="with --watch: seconds between reads (default 5)")
    p.add_argument("--json", action="store_true", help="the API's answer as JSON")
    p.set_defaults(func=cmd_sweep_status)
    p = sub.add_parser("sweep-cancel", help="cancel sweeps: no further trial starts, their trials are cancelled")
    p.add_argument("sweeps", nargs="+", metavar="SWEEP")
    p.set_defaults(func=cmd_sweep_cancel)
