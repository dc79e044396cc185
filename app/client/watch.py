"""`status --watch`: follow a job's events until it ends, then print its model id.

On a terminal, a rich progress bar: the API's `fraction` (of whichever budget binds, steps or max_minutes, so
not step/total), step/total or the minutes spent of max_minutes, the API's ETA, tokens/s and the latest losses.
Elsewhere (a pipe, a log, a test), plain `status_line` lines: at once when the status changes, else at most one
every `--interval` seconds.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Protocol

import httpx
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn

from app.client import connection, events
from app.client.progress import TERMINAL, _duration, done_text, preset_line, status_line

SHOWN_METRICS = ("train_loss", "valid_loss")


class View(Protocol):
    def update(self, job: dict[str, Any]) -> None: ...
    def note(self, message: str) -> None: ...
    def finish(self, job: dict[str, Any]) -> None: ...
    def stop(self) -> None: ...


class PlainView:
    def __init__(self, interval: float) -> None:
        self.interval, self.printed_at, self.printed_status, self.printed = interval, -float("inf"), "", ""

    def _print(self, line: str) -> None:
        print(line, flush=True)
        self.printed = line

    def update(self, job: dict[str, Any]) -> None:
        now = time.monotonic()
        if job["status"] != self.printed_status or now - self.printed_at >= self.interval:
            self._print(status_line(job))
            self.printed_at, self.printed_status = now, job["status"]

    def note(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def finish(self, job: dict[str, Any]) -> None:
        if status_line(job) != self.printed:  # the final state, once
            self._print(status_line(job))

    def stop(self) -> None:
        pass


def _fields(job: dict[str, Any]) -> dict[str, Any]:
    p, metrics = job["progress"], job.get("latest_metrics") or {}
    return {
        "status": job["status"],
        "steps": done_text(p) if p.get("bound_by") == "time" else f"step {done_text(p)}",
        "eta": _duration(p["eta_seconds"]),
        "speed": f"{p['tokens_per_second']:,.0f} tok/s" if p["tokens_per_second"] else "",
        "losses": " ".join(f"{n}={metrics[n]['value']:.4g}" for n in SHOWN_METRICS if n in metrics),
    }


class RichView:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.fields[status]:<9}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[steps]}"),
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("{task.fields[speed]}"),
            TextColumn("{task.fields[losses]}"),
            console=console,
        )
        self.task: TaskID | None = None

    def update(self, job: dict[str, Any]) -> None:
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task(job["id"], total=1.0, **_fields(job))
        self.progress.update(self.task, completed=job["progress"]["fraction"], **_fields(job))

    def note(self, message: str) -> None:
        self.progress.console.print(message, style="yellow", markup=False, highlight=False)

    def finish(self, job: dict[str, Any]) -> None:
        self.update(job)
        self.stop()

    def stop(self) -> None:
        self.progress.stop()


def follow_job(client: httpx.Client, job_id: str, view: View) -> dict[str, Any]:
    """The job's final state, the view updated with every change on the way."""
    # the metric ids first, then the job: a point recorded between the two is streamed again, never lost
    last = connection.check(client.get(connection.path("jobs", job_id, "metrics"), params={"max_points": 2}))
    job: dict[str, Any] = connection.check(client.get(connection.path("jobs", job_id)))
    job["latest_metrics"] = dict(job.get("latest_metrics") or {})
    view.update(job)
    if job["status"] in TERMINAL:
        return job
    state = events.StreamState(last_event_id=str(last["last_event_id"] or ""))
    for event in events.follow(client, connection.path("jobs", job_id, "events"), state, view.note):
        if event.event == "metric":
            point = json.loads(event.data)
            job["latest_metrics"][point["name"]] = {"step": point["step"], "value": point["value"]}
        elif event.event == "progress":
            job.update(json.loads(event.data))
            view.update(job)
    final: dict[str, Any] = connection.check(client.get(connection.path("jobs", job_id)))  # its model, last metrics
    return {**final, "latest_metrics": final.get("latest_metrics") or job["latest_metrics"]}


def watch(client: httpx.Client, job_id: str, interval: float, console: Console | None = None) -> int:
    """Follow the job, print how it ended and its model; the exit code: 0 if it succeeded, else 1."""
    console = console or Console()
    view: View = RichView(console) if console.is_terminal else PlainView(interval)
    try:
        job = follow_job(client, job_id, view)
    except KeyboardInterrupt:
        view.stop()
        view.note(f"stopped watching; job {job_id} goes on (`status {job_id} --watch` to follow it again)")
        return 130
    if line := preset_line(job):  # beside the progress, as a note: the last lines stay the status and the model
        view.note(line)
    view.finish(job)
    lines = [f"error: {job['error']}"] if job["error"] else []
    lines += [f"model: {job['model_id']}"] if job["model_id"] else []
    for line in lines:
        if console.is_terminal:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line)
    return 0 if job["status"] == "succeeded" else 1
