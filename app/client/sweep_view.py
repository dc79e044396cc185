"""How a sweep is shown: `sweep-status`'s header (status, budget, best so far, why it stopped, importance) and its
trials table, and `sweep-status --watch`, which reads GET /v1/sweeps/{id} every `--interval` seconds until the
sweep ends (sweeps have no event stream; a read replays the study's journal, so not too often).

On a terminal the header and the table are redrawn in place (rich Live); elsewhere (a pipe, a log, a test) each
trial is a line when it appears or changes status, the one-line summary a line when it changes, and the whole
status is printed once at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import httpx
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from app.client import connection, events
from app.client.output import cell, table

STATUS_ORDER = ("queued", "running", "succeeded", "pruned", "failed", "cancelled", "invalid")
RETRIED = (429, 502, 503, 504)  # a busy or restarting API: read again, as the job events do


def _in_order(counts: dict[str, int]) -> list[str]:
    """The statuses counted, in the order a trial goes through them."""
    return [s for s in STATUS_ORDER if s in counts] + sorted(set(counts) - set(STATUS_ORDER))


def counts_text(counts: dict[str, int]) -> str:
    """`2 running, 3 succeeded`."""
    return ", ".join(f"{counts[s]} {s}" for s in _in_order(counts)) or "none"


def counts_cell(counts: dict[str, int]) -> str:
    """`running:2,succeeded:3`: one table cell."""
    return ",".join(f"{s}:{counts[s]}" for s in _in_order(counts)) or "-"


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{name}={cell(value)}" for name, value in params.items())


def best_text(sweep: dict[str, Any]) -> str | None:
    best = sweep.get("best")
    if not best:
        return None
    where = f", model {best['model_id']}" if best.get("model_id") else ""
    where += f", registered as {best['model_ref']}" if best.get("model_ref") else ""
    return f"#{best['number']} {sweep['metric']}={cell(best['value'])} ({_params(best['params'])}){where}"


def header_lines(sweep: dict[str, Any]) -> list[str]:
    """What the sweep is and how it stands, a line a fact; stop reason, error and importance once there are any."""
    budget = sweep["budget"]
    limits = [f"{budget['minutes']:g} worker minutes" if budget.get("minutes") is not None else ""]
    limits += [f"{budget['trials']} trials" if budget.get("trials") is not None else ""]
    lines = [
        f"sweep {sweep['id']} {sweep['name']}: {sweep['status']}"
        + (" (cancel requested)" if sweep["cancel_requested"] and sweep["status"] == "running" else ""),
        f"objective: {sweep['direction']} {sweep['metric']} ({sweep['objective']}); sampler {sweep['sampler']}, "
        f"pruner {sweep['pruner']}, seed {sweep['seed']}; {sweep['max_concurrent_trials']} at once",
        f"budget: {' and '.join(x for x in limits if x)}; spent {sweep['worker_minutes']:.1f} worker minutes",
        f"trials: {counts_text(sweep['trial_counts'])}",
        f"best: {best_text(sweep) or '-'}",
    ]
    if sweep.get("stop_reason"):  # set once no further trial may start, while the last ones may still run
        ended = sweep["status"] != "running"
        lines.append(f"{'stopped' if ended else 'no further trials'}: {sweep['stop_reason']}")
    if sweep.get("error"):
        lines.append(f"error: {sweep['error']}")
    if sweep.get("importance"):
        ranked = sorted(sweep["importance"].items(), key=lambda item: -item[1])
        lines.append("importance: " + ", ".join(f"{name} {share:.2f}" for name, share in ranked))
    return lines


def _short_names(names: Sequence[str]) -> list[str]:
    """`lr_scale` for `training.lr_scale`, unless two settings share the last part: then the whole name."""
    last = [name.rsplit(".", 1)[-1] for name in names]
    return [short if last.count(short) == 1 else name for name, short in zip(names, last)]


def trial_rows(sweep: dict[str, Any]) -> list[list[str]]:
    """The trials table, header first: number, status, value, best reported value, one column a setting of the
    space, worker minutes, and why a trial stopped early (not repeated where it is only its status)."""
    names = list(sweep["space"])
    rows = [["#", "STATUS", "VALUE", "BEST", *_short_names(names), "MIN", "STOP REASON"]]
    for trial in sweep.get("trials") or []:
        reason = trial.get("stop_reason")
        rows.append(
            [
                str(trial["number"]),
                trial["status"],
                cell(trial["value"]),
                cell(trial["best_value"]),
                *[cell(trial["params"].get(name)) for name in names],
                f"{trial['worker_minutes']:.1f}" if trial.get("worker_minutes") is not None else "-",
                cell(reason if reason != trial["status"] else None),
            ]
        )
    return rows


def status_text(sweep: dict[str, Any]) -> str:
    """`sweep-status`'s plain output: the header, a blank line, the trials table."""
    return "\n".join(header_lines(sweep)) + "\n\n" + table(trial_rows(sweep))


def summary_line(sweep: dict[str, Any]) -> str:
    best = sweep.get("best")
    shown = f"best {sweep['metric']}={cell(best['value'])} (#{best['number']})" if best else "no best yet"
    return (
        f"{sweep['status']:<9} trials: {counts_text(sweep['trial_counts'])}; {shown}; "
        f"{sweep['worker_minutes']:.1f} worker minutes"
    )


def trial_line(trial: dict[str, Any], metric: str) -> str:
    job = f" (job {trial['job_id']})" if trial.get("job_id") else ""
    value = f" {metric}={cell(trial['value'])}" if trial.get("value") is not None else ""
    reason = f": {trial['stop_reason']}" if trial.get("stop_reason") not in (None, trial["status"]) else ""
    return f"trial {trial['number']} {trial['status']}{job}{value} {_params(trial['params'])}{reason}".rstrip()


class View(Protocol):
    def update(self, sweep: dict[str, Any]) -> None: ...
    def note(self, message: str) -> None: ...
    def finish(self, sweep: dict[str, Any]) -> None: ...
    def stop(self) -> None: ...


class PlainView:
    """A line a change: each trial when it first appears and whenever its status changes, then the summary."""

    def __init__(self) -> None:
        self.statuses: dict[int, str] = {}
        self.summary = ""

    def update(self, sweep: dict[str, Any]) -> None:
        for trial in sweep.get("trials") or []:
            if self.statuses.get(trial["number"]) != trial["status"]:
                print(trial_line(trial, sweep["metric"]), flush=True)
                self.statuses[trial["number"]] = trial["status"]
        if summary_line(sweep) != self.summary:
            self.summary = summary_line(sweep)
            print(self.summary, flush=True)

    def note(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def finish(self, sweep: dict[str, Any]) -> None:
        self.update(sweep)
        print("\n" + status_text(sweep), flush=True)

    def stop(self) -> None:
        pass


class LiveView:
    """The header and the trials table, redrawn in place; the latest trials that fit the terminal's height."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = Live(console=console, auto_refresh=False, transient=False)
        self.started = False

    def renderable(self, sweep: dict[str, Any]) -> Group:
        header, *rows = trial_rows(sweep)
        room = max(3, self.console.size.height - len(header_lines(sweep)) - 6)
        shown = rows[-room:]
        grid = Table(*header, box=None, pad_edge=False, header_style="bold")
        for row in shown:
            grid.add_row(*row, style=_STYLES.get(row[1], ""))
        parts: list[Any] = [Text("\n".join(header_lines(sweep))), Text(""), grid]
        if len(shown) < len(rows):
            parts.append(Text(f"... and {len(rows) - len(shown)} earlier trials (sweep-status without --watch)"))
        return Group(*parts)

    def update(self, sweep: dict[str, Any]) -> None:
        if not self.started:
            self.live.start()
            self.started = True
        self.live.update(self.renderable(sweep), refresh=True)

    def note(self, message: str) -> None:
        self.console.print(message, style="yellow", markup=False, highlight=False)

    def finish(self, sweep: dict[str, Any]) -> None:
        self.update(sweep)
        self.stop()

    def stop(self) -> None:
        if self.started:
            self.live.stop()


_STYLES = {"running": "cyan", "succeeded": "green", "pruned": "yellow", "failed": "red", "invalid": "red"}


def read_sweep(
    client: httpx.Client, sweep_id: str, note: Callable[[str], None], sleep: Callable[[float], None]
) -> dict[str, Any]:
    """GET /v1/sweeps/{id}, read again after an unreachable or busy API (a note each time) until
    events.GIVE_UP_AFTER failures in a row; any other error exits as every command's does."""
    reason = ""
    for failure in range(1, events.GIVE_UP_AFTER + 1):
        try:
            response = client.get(connection.path("sweeps", sweep_id))
            if response.status_code not in RETRIED:
                sweep: dict[str, Any] = connection.check(response)
                return sweep
            reason = f"HTTP {response.status_code}: {connection.detail_of(response)}"
        except httpx.TransportError as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if failure < events.GIVE_UP_AFTER:
            note(f"cannot read the sweep ({reason}); reading again in 2s")
            sleep(2.0)
    connection.fail(f"could not read sweep {sweep_id} {events.GIVE_UP_AFTER} times in a row; the last time: {reason}")


def watch(client: httpx.Client, sweep_id: str, interval: float, console: Console | None = None) -> int:
    """Show the sweep until it ends; the exit code, as `status --watch`'s: 0 if it succeeded, else 1 (130 when
    interrupted: the sweep goes on)."""
    console = console or Console()
    view: View = LiveView(console) if console.is_terminal else PlainView()
    try:
        while True:
            sweep = read_sweep(client, sweep_id, view.note, time.sleep)
            if sweep["status"] != "running":
                break
            view.update(sweep)
            time.sleep(interval)
    except KeyboardInterrupt:
        view.stop()
        view.note(f"stopped watching; sweep {sweep_id} goes on (`sweep-status {sweep_id} --watch` to follow it again)")
        return 130
    view.finish(sweep)
    return 0 if sweep["status"] == "succeeded" else 1
