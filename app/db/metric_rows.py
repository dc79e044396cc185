"""Metric rows: written idempotently (a step re-run after a resume never adds a second row)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TypedDict

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.run_record_tables import Metric


class LatestPoint(TypedDict):
    step: int
    value: float


def _insert(session: Session) -> Callable[[type[Metric]], postgresql.Insert | sqlite.Insert]:
    assert session.bind is not None  # sessions come from get_sessionmaker(), bound to the engine
    return postgresql.insert if session.bind.dialect.name == "postgresql" else sqlite.insert


def record(session: Session, job_id: str, step: int, values: dict[str, float]) -> None:
    """Upsert one value per name at `step` (the newest write wins; values of a re-run step are equal)."""
    rows = [{"job_id": job_id, "step": step, "name": name, "value": float(value)} for name, value in values.items()]
    if not rows:
        return
    statement = _insert(session)(Metric).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=["job_id", "step", "name"], set_={"value": statement.excluded.value}
    )
    session.execute(statement)


def latest(session: Session, job_id: str) -> dict[str, LatestPoint]:
    """{name: {"step", "value"}} of the last step of each series."""
    last = (
        select(Metric.name, func.max(Metric.step).label("step"))
        .where(Metric.job_id == job_id)
        .group_by(Metric.name)
        .subquery()
    )
    rows = session.execute(
        select(Metric.name, Metric.step, Metric.value)
        .join(last, (Metric.name == last.c.name) & (Metric.step == last.c.step))
        .where(Metric.job_id == job_id)
    )
    return {name: {"step": step, "value": value} for name, step, value in rows}


def series(
    session: Session, job_id: str, names: Iterable[str] | None, since_step: int, until_step: int | None = None
) -> dict[str, tuple[list[int], list[float]]]:
    """{name: (steps, values)} of the steps from since_step to until_step (both included; no end if None)."""
    query = select(Metric.name, Metric.step, Metric.value).where(Metric.job_id == job_id, Metric.step >= since_step)
    if until_step is not None:
        query = query.where(Metric.step <= until_step)
    names = [n for n in (names or []) if n]
    if names:
        query = query.where(Metric.name.in_(names))
    out: dict[str, tuple[list[int], list[float]]] = {}
    for name, step, value in session.execute(query.order_by(Metric.name, Metric.step)):
        steps, values = out.setdefault(name, ([], []))
        steps.append(step)
        values.append(value)
    return out


def recorded_at(session: Session, job_id: str) -> dict[str, dict[int, datetime]]:
    """{name: {step: when the point was written}} of every series of the job."""
    out: dict[str, dict[int, datetime]] = {}
    for name, step, created_at in session.execute(
        select(Metric.name, Metric.step, Metric.created_at).where(Metric.job_id == job_id)
    ):
        out.setdefault(name, {})[step] = created_at
    return out


def downsample(steps: Sequence[int], values: Sequence[float], max_points: int) -> tuple[list[int], list[float]]:
    """At most `max_points` points: the mean of each of `max_points` equal buckets, at its last step.

    Means keep the shape of a noisy loss curve where picking every k-th point would show noise;
    the last point of the series is always the true last value.
    """
    n = len(steps)
    if n <= max_points:
        return list(steps), list(values)
    out_steps, out_values = [], []
    for b in range(max_points):
        lo, hi = b * n // max_points, (b + 1) * n // max_points
        if hi > lo:
            out_steps.append(steps[hi - 1])
            out_values.append(sum(values[lo:hi]) / (hi - lo))
    out_values[-1] = values[-1]
    return out_steps, out_values


def downsample_extremes(
    steps: Sequence[int], values: Sequence[float], max_points: int
) -> tuple[list[int], list[float]]:
    """At most `max_points` points: the first and last points of the series, and between them the lowest and the
    highest value of each of (max_points - 2) // 2 equal buckets, at their own steps and in step order.

    A spike (a loss that jumps for a step) survives, where the mean of its bucket would flatten it; drawn one bucket
    a pixel column, the line covers the same pixels as with every point. Under 4 points: the means (`downsample`).
    """
    n, buckets = len(steps), (max_points - 2) // 2
    if n <= max_points or buckets < 1:
        return downsample(steps, values, max_points)
    kept = [0]
    for b in range(buckets):
        lo, hi = b * n // buckets, (b + 1) * n // buckets
        if hi > lo:
            low = min(range(lo, hi), key=values.__getitem__)
            high = max(range(lo, hi), key=values.__getitem__)
            kept.extend(i for i in sorted({low, high}) if i != kept[-1])
    if kept[-1] != n - 1:
        kept.append(n - 1)
    return [steps[i] for i in kept], [values[i] for i in kept]
