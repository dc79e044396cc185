"""Training jobs: `submit`, `status [--watch]`, `jobs`, `cancel`, `tag`, `compare`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from app.client import connection, watch
from app.client.connection import check, path
from app.client.output import Column, add_output_arguments, cell, print_items, print_json, table, when
from app.client.progress import _duration, preset_line
from app.schemas.jobs import PRESETS, JobCreate, JobStatus, Objective

STATUSES: tuple[str, ...] = get_args(JobStatus)
OBJECTIVES: tuple[str, ...] = get_args(Objective)
# The flags of `submit` and the field of the request (app.schemas.jobs.JobCreate) each one sets; `--set` reaches
# every field by the same dotted path.
SUBMIT_FLAGS = {
    "objective": "objective",
    "dataset": "dataset_id",
    "valid": "valid_dataset_id",
    "test_dataset": "test_dataset_id",
    "preset": "model.preset",
    "init_model": "init_model_id",
    "max_steps": "training.max_steps",
    "name": "name",
    "tag": "tags",
    "note": "note",
    "source_language": "source_language",
    "target_language": "target_language",
}


class SettingError(ValueError):
    """A --set that names no field of the request, or a value its field refuses."""


def _field(key: str) -> FieldInfo:
    """The field of JobCreate at a dotted key (`training.max_steps`); SettingError naming the bad key and what
    there is instead."""
    schema: type[BaseModel] = JobCreate
    parts = key.split(".")
    for depth, name in enumerate(parts):
        where = ".".join(parts[:depth])
        if name not in schema.model_fields:
            raise SettingError(
                f"no field {key!r}; {where + ' has' if where else 'a job has'}: {', '.join(_names(schema, where))}"
            )
        info = schema.model_fields[name]
        section = info.annotation if isinstance(info.annotation, type) else None
        if section is not None and issubclass(section, BaseModel):
            if depth == len(parts) - 1:
                raise SettingError(f"{key!r} is a section: name one of its fields, {', '.join(_names(section, key))}")
            schema = section
        elif depth < len(parts) - 1:
            raise SettingError(f"{'.'.join(parts[: depth + 1])!r} has no fields: no {key!r}")
    return info


def _names(schema: type[BaseModel], prefix: str) -> list[str]:
    return sorted(f"{prefix}.{name}" if prefix else name for name in schema.model_fields)


def _check(key: str, value: Any, given: str) -> Any:
    """The value, if the field at `key` takes it (its type and bounds, as the API checks them); else SettingError
    naming the value as `given`. Rules across fields (average_last <= keep_checkpoints, ...) are the API's to
    check."""
    info = _field(key)
    field_type = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation  # its bounds
    adapter: TypeAdapter[Any] = TypeAdapter(field_type, config=ConfigDict(strict=True))  # type: ignore[arg-type]
    try:
        adapter.validate_python(value)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise SettingError(f"{key}={given}: {message}") from exc
    return value


def parse_setting(assignment: str) -> tuple[str, Any]:
    """`KEY=VALUE` as (key, value): the value read as JSON (numbers, true, null, lists), else as the text itself,
    whichever the field at KEY (a dotted path: training.max_steps) takes."""
    key, equals, text = assignment.partition("=")
    if not equals or not key:
        raise SettingError(f"{assignment!r}: expected FIELD=VALUE, e.g. training.max_steps=100 or test_dataset_id=ID")
    _field(key)
    try:
        candidates = [json.loads(text), text]
    except ValueError:
        candidates = [text]
    errors: list[SettingError] = []
    for value in candidates:
        try:
            return key, _check(key, value, text)
        except SettingError as exc:
            errors.append(exc)
    raise errors[0]


def _put(body: dict[str, Any], key: str, value: Any) -> None:
    *sections, name = key.split(".")
    for section in sections:
        body = body.setdefault(section, {})
    body[name] = value


def submit_body(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /v1/jobs request of `submit`'s flags (the API checks their values, as it always has), then its --set
    assignments (a later one wins), each checked here against its field of the schema: SettingError names a bad key
    or value. Only what was given is sent: a setting left out may be chosen from the time budget."""
    body: dict[str, Any] = {}
    for flag, key in SUBMIT_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            _put(body, key, value)
    if args.pair:  # one model for several language pairs: each a dataset whose declared languages name it
        body["pairs"] = [{"dataset_id": dataset_id} for dataset_id in args.pair]
    for assignment in args.set or []:
        _put(body, *parse_setting(assignment))
    return body


def cmd_submit(args: argparse.Namespace) -> None:
    try:
        body = submit_body(args)
    except SettingError as exc:
        sys.exit(f"error: {exc}")
    headers = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else {}
    with connection.open_client(args) as client:
        job = check(client.post("/v1/jobs", json=body, headers=headers))
    print(f"job {job['id']}: {job['status']}", file=sys.stderr)
    if line := preset_line(job):
        print(line, file=sys.stderr)
    print(job["id"])


def cmd_status(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        if not args.watch:
            print_json(check(client.get(path("jobs", args.job))))
            return
        code = watch.watch(client, args.job, args.interval)
    sys.exit(code)


JOB_COLUMNS: list[Column] = [
    ("ID", lambda job: job["id"]),
    ("NAME", lambda job: job.get("name")),
    ("OBJECTIVE", lambda job: job["objective"]),
    ("DATASET", lambda job: job.get("dataset_name")),
    ("STATUS", lambda job: job["status"]),
    ("STEP", lambda job: f"{job['progress']['step']}/{job['progress']['total_steps']}"),
    ("DONE", lambda job: f"{job['progress']['fraction']:.0%}"),
    ("ETA", lambda job: _duration(job["progress"]["eta_seconds"]) if job["status"] == "running" else None),
    ("TAGS", lambda job: ",".join(job.get("tags") or []) or None),
    ("CREATED", when),
]


def cmd_jobs(args: argparse.Namespace) -> None:
    params: dict[str, Any] = {"tag": args.tag or []}
    if args.status:
        params["status"] = args.status
    if args.objective:
        params["objective"] = args.objective
    with connection.open_client(args) as client:
        print_items(connection.page_through(client, "/v1/jobs", params, args.limit), JOB_COLUMNS, args.json)


def cmd_cancel(args: argparse.Namespace) -> None:
    """Ask each job to stop (POST /v1/jobs/{id}/cancel): a queued job is cancelled at once, a running one at its
    next step; one already finished is an error (409) naming its status."""
    with connection.open_client(args) as client:
        for job_id in args.jobs:
            job = check(client.post(path("jobs", job_id, "cancel")))
            print(f"{job['id']}  {job['status']}{' (cancel requested)' if job['cancel_requested'] else ''}")


def cmd_tag(args: argparse.Namespace) -> None:
    """Add and remove tags, set the name or the note (PATCH /v1/jobs/{id}); prints the job's labels."""
    body: dict[str, Any] = {}
    with connection.open_client(args) as client:
        if args.add:  # applied by the API to the tags the job has then: a concurrent change is kept
            body["add_tags"] = args.add
        if args.remove:
            body["remove_tags"] = args.remove
        if args.name is not None:
            body["name"] = args.name
        if args.note is not None:
            body["note"] = args.note
        if not body:
            sys.exit("error: nothing to change: give --add, --remove, --name or --note")
        job = check(client.patch(path("jobs", args.job), json=body))
    print(f"{job['id']}  name={job['name']!r} tags={','.join(job['tags'])}")


def comparison_table(comparison: dict[str, Any]) -> str:
    """The settings that differ, then each metric's best and final value, one column per job."""
    jobs = comparison["jobs"]
    rows = [["", *[job["name"] or job["id"][:8] for job in jobs]]]
    rows += [[key, *[cell(job["settings"].get(key)) for job in jobs]] for key in comparison["differing"]]
    for name in sorted({name for job in jobs for name in job["metrics"]}):
        for which in ("best", "final"):
            cells = [job["metrics"].get(name, {}).get(which) for job in jobs]
            if any(c is not None for c in cells):
                rows.append([f"{name} ({which})", *[cell(c) for c in cells]])
    return table(rows)


def cmd_compare(args: argparse.Namespace) -> None:
    with connection.open_client(args) as client:
        comparison = check(client.get("/v1/jobs/compare", params={"ids": ",".join(args.jobs)}))
    if args.json:
        print_json(comparison)
    else:
        print(comparison_table(comparison))


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("submit", help="submit a training job; prints its id")
    data = p.add_mutually_exclusive_group(required=True)
    data.add_argument("--dataset", metavar="ID")
    data.add_argument(
        "--pair",
        action="append",
        metavar="ID",
        help="one model for several language pairs: a parallel dataset a pair, its declared languages naming it "
        "(repeat for each, 2 to 16)",
    )
    p.add_argument("--valid", metavar="ID", help="a validation dataset (default: held out of --dataset)")
    p.add_argument(
        "--test-dataset", metavar="ID", help="a parallel dataset the trained model is evaluated on if the job succeeds"
    )
    p.add_argument("--objective", choices=OBJECTIVES, default="translation")
    p.add_argument(
        "--preset",
        choices=PRESETS,
        help="the model's size (default: auto, the worker chooses from its throughput, the budget and the corpus; "
        "`status JOB` shows its choice and why)",
    )
    p.add_argument("--init-model", metavar="MODEL", help="start from this model's weights and tokenizer (fine-tuning)")
    p.add_argument("--max-steps", type=int)
    p.add_argument(
        "--set",
        action="append",
        metavar="FIELD=VALUE",
        help="any field of the job by its dotted path, e.g. --set training.warmup_steps=100 "
        "--set model.vocab_size=2000 --set test_dataset_id=ID (values are read as JSON, else as text; repeatable)",
    )
    p.add_argument("--name", help="a name for the job, shown by `jobs` and the dashboard")
    p.add_argument("--tag", action="append", metavar="TAG", help="a tag (repeat for several); `jobs --tag` filters")
    p.add_argument("--note", help="free text kept with the job")
    p.add_argument(
        "--source-language", metavar="LANG", help="what it translates from (BCP 47, e.g. en); its model keeps it"
    )
    p.add_argument("--target-language", metavar="LANG", help="what it translates to (BCP 47, e.g. de)")
    p.add_argument("--idempotency-key")
    p.set_defaults(func=cmd_submit)
    p = sub.add_parser("status", help="show a job (JSON); --watch follows it with a progress bar until it ends")
    p.add_argument("job")
    p.add_argument("--watch", action="store_true", help="follow the job's events; exit 0 if it succeeds, else 1")
    p.add_argument(
        "--interval", type=float, default=2.0, help="without a terminal: at most one line every SECONDS (default 2)"
    )
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("jobs", help="list jobs, newest first (every page)")
    p.add_argument("--status", choices=STATUSES)
    p.add_argument("--objective", choices=OBJECTIVES)
    p.add_argument("--tag", action="append", help="only jobs with this tag (repeat: with every one of them)")
    add_output_arguments(p)
    p.set_defaults(func=cmd_jobs)
    p = sub.add_parser("cancel", help="cancel jobs (a running job stops at its next step)")
    p.add_argument("jobs", nargs="+", metavar="JOB")
    p.set_defaults(func=cmd_cancel)
    p = sub.add_parser("tag", help="add or remove a job's tags, set its name or note")
    p.add_argument("job")
    p.add_argument("--add", action="append", metavar="TAG")
    p.add_argument("--remove", action="append", metavar="TAG")
    p.add_argument("--name")
    p.add_argument("--note")
    p.set_defaults(func=cmd_tag)
    p = sub.add_parser("compare", help="compare 2 to 10 jobs: the settings that differ, best and final metrics")
    p.add_argument("jobs", nargs="+", metavar="JOB")
    p.add_argument("--json", action="store_true", help="the API's answer as JSON")
    p.set_defaults(func=cmd_compare)
