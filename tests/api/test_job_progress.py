"""A job's progress is the fraction of whichever budget binds: max_steps, or max_minutes at the current pace."""

from __future__ import annotations

import pytest


def _running(client, alice, parallel_id, training, **progress):
    """A job with `training` whose row says it trained so far as `progress` says (as the worker writes it)."""
    from app.db.session import session_scope
    from app.db.tables import Job

    body = {"objective": "translation", "dataset_id": parallel_id, "training": training}
    job_id = client.post("/v1/jobs", json=body, headers=alice).json()["id"]
    with session_scope() as session:
        job = session.get(Job, job_id)
        job.status = "running"
        for name, value in progress.items():
            setattr(job, name, value)
    return client.get(f"/v1/jobs/{job_id}", headers=alice).json()["progress"]


def test_time_binds_a_huge_step_limit_and_the_fraction_is_the_minutes_spent(client, alice, parallel_id):
    """Step 86 of 10,000,000 with 8 of 20 minutes left: 60% done by time, not 0% by steps."""
    progress = _running(
        client,
        alice,
        parallel_id,
        {"max_steps": 10_000_000, "max_minutes": 20},
        step=86,
        tokens_seen=86 * 4000,
        tokens_per_second=2000.0,
        eta_seconds=8 * 60.0,
    )
    assert progress["bound_by"] == "time"
    assert progress["fraction"] == pytest.approx(0.6)
    assert (progress["elapsed_seconds"], progress["budget_seconds"]) == (pytest.approx(720.0), 1200.0)


def test_steps_bind_a_short_run_under_a_long_time_budget(client, alice, parallel_id):
    """1,000 steps at 2 s a step under 60 minutes: at step 250 the steps end first (25 minutes left of them), so
    the fraction is 25% by steps, not 1 - eta / budget."""
    progress = _running(
        client,
        alice,
        parallel_id,
        {"max_steps": 1000, "max_minutes": 60},
        step=250,
        tokens_seen=250 * 4000,
        tokens_per_second=2000.0,
        eta_seconds=750 * 2.0,
    )
    assert progress["bound_by"] == "steps"
    assert progress["fraction"] == pytest.approx(0.25)
    assert (progress["elapsed_seconds"], progress["budget_seconds"]) == (None, 3600.0)


def test_without_a_time_budget_the_steps_bind(client, alice, parallel_id):
    progress = _running(
        client,
        alice,
        parallel_id,
        {"max_steps": 400},
        step=100,
        tokens_seen=100 * 4000,
        tokens_per_second=2000.0,
        eta_seconds=600.0,
    )
    assert (progress["bound_by"], progress["fraction"], progress["budget_seconds"]) == ("steps", 0.25, None)


def test_the_cli_status_line_shows_the_minutes_when_time_binds(client, alice, parallel_id):
    from app.client.progress import status_line

    progress = _running(
        client,
        alice,
        parallel_id,
        {"max_steps": 10_000_000, "max_minutes": 20},
        step=86,
        tokens_seen=86 * 4000,
        tokens_per_second=2000.0,
        eta_seconds=8 * 60.0,
    )
    line = status_line({"status": "running", "progress": progress})
    assert line == "running   [" + "#" * 18 + "." * 12 + "] 12.0/20 min (step 86) 2000 tok/s ETA 08:00", line
    by_steps = {**progress, "bound_by": "steps", "fraction": 86 / 10_000_000}
    assert "86/10000000" in status_line({"status": "running", "progress": by_steps})
