"""GET /v1/jobs/compare: settings side by side with the keys that differ, each metric's series with its best and
final value; only the caller's jobs; and the CLI's `compare` (no worker involved)."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import timedelta

import pytest

from tests.api.test_job_labels import job_rows


def _metric_rows(job_id: str, started, points: list[tuple[int, str, float, float]]) -> None:
    """Metric rows (step, name, value, seconds after `started`), as the worker's lease thread writes them."""
    from app.db.run_record_tables import Metric
    from app.db.session import session_scope

    with session_scope() as session:
        session.add_all(
            Metric(job_id=job_id, step=step, name=name, value=value, created_at=started + timedelta(seconds=seconds))
            for step, name, value, seconds in points
        )


@pytest.fixture
def two_jobs(client, alice):
    from app.db.base import utcnow

    started = utcnow() - timedelta(hours=1)
    model = {"preset": "tiny", "vocab_size": 500, "d_model": 64}
    training = {"max_steps": 300, "max_tokens_per_batch": 4096, "seed": 1}
    a = job_rows(
        "alice",
        1,
        ("lr",),
        name="small",
        status="succeeded",
        model_config=model,
        training_config=training,
        started_at=started,
    )[0]
    b = job_rows(
        "alice",
        1,
        ("lr", "big"),
        model_config={**model, "d_model": 128},
        training_config={**training, "max_tokens_per_batch": 8192},
    )[0]
    _metric_rows(
        a,
        started,
        [
            (100, "train_loss", 5.0, 10),
            (200, "train_loss", 3.5, 20.5),
            (300, "train_loss", 3.75, 30),
            (100, "bleu", 10.0, 12),
            (200, "bleu", 25.0, 22),
            (300, "bleu", 20.0, 32),
            (300, "lr", 0.001, 31),
        ],
    )
    _metric_rows(b, started, [(100, "train_loss", 4.0, 5)])
    return a, b


def test_compare_shows_settings_the_keys_that_differ_and_each_series_with_best_and_final(client, alice, two_jobs):
    a, b = two_jobs
    response = client.get(f"/v1/jobs/compare?ids={a},{b}", headers=alice)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["differing"] == ["model.d_model", "training.max_tokens_per_batch"]
    first, second = body["jobs"]
    assert (first["id"], first["name"], first["tags"], first["status"], first["objective"]) == (
        a,
        "small",
        ["lr"],
        "succeeded",
        "translation",
    )
    assert (second["id"], second["name"], second["tags"], second["status"]) == (b, None, ["lr", "big"], "queued")
    assert first["settings"] == {
        "model.preset": "tiny",
        "model.vocab_size": 500,
        "model.d_model": 64,
        "training.max_steps": 300,
        "training.max_tokens_per_batch": 4096,
        "training.seed": 1,
    }
    assert second["settings"]["model.d_model"] == 128
    assert first["metrics"]["train_loss"] == {
        "steps": [100, 200, 300],
        "values": [5.0, 3.5, 3.75],
        "seconds": [10.0, 20.5, 30.0],
        "total_points": 3,
        "best": 3.5,  # a loss: the lowest
        "best_step": 200,
        "final": 3.75,
        "final_step": 300,
    }
    bleu = first["metrics"]["bleu"]
    assert (bleu["best"], bleu["best_step"], bleu["final"]) == (25.0, 200, 20.0)  # a score: the highest
    assert (first["metrics"]["lr"]["best"], first["metrics"]["lr"]["final"]) == (None, 0.001)
    never_started = second["metrics"]["train_loss"]
    assert (never_started["seconds"], never_started["best"], never_started["final"]) == (None, 4.0, 4.0)
    # The order asked for is the order given back.
    again = client.get(f"/v1/jobs/compare?ids={b},{a}", headers=alice).json()
    assert [job["id"] for job in again["jobs"]] == [b, a]


def test_compare_of_another_owners_or_an_unknown_job_is_404_naming_it(client, alice, make_key, two_jobs):
    a, _b = two_jobs
    make_key("bob")
    bobs = job_rows("bob", 1)[0]
    for other in (bobs, "00000000-0000-0000-0000-000000000000"):
        response = client.get(f"/v1/jobs/compare?ids={a},{other}", headers=alice)
        assert response.status_code == 404
        assert response.json()["detail"] == f"job {other} not found"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("ids={a}", "give 2 to 10 comma-separated job ids, got 1"),
        ("ids={a},{a}", "job ids given more than once: {a}"),
        ("ids=" + ",".join(f"id{i}" for i in range(11)), "got 11"),
        ("", "Field required"),
    ],
)
def test_compare_wants_two_to_ten_distinct_ids(client, alice, two_jobs, query, message):
    a, _b = two_jobs
    response = client.get(f"/v1/jobs/compare?{query.format(a=a)}", headers=alice)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["query", "ids"] and message.format(a=a) in detail["msg"], detail


def test_cli_compare_prints_the_differing_settings_and_best_and_final_metrics(
    client, alice, two_jobs, monkeypatch, capsys
):
    import app.client.connection as connection
    from app.cli import main

    a, b = two_jobs
    client.headers.update(alice)
    monkeypatch.setattr(connection, "open_client", lambda args: nullcontext(client))  # requests in process
    main(["compare", a, b])
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        ["small", b[:8]],
        ["model.d_model", "64", "128"],
        ["training.max_tokens_per_batch", "4096", "8192"],
        ["bleu", "(best)", "25", "-"],
        ["bleu", "(final)", "20", "-"],
        ["lr", "(final)", "0.001", "-"],
        ["train_loss", "(best)", "3.5", "4"],
        ["train_loss", "(final)", "3.75", "4"],
    ]
    with pytest.raises(SystemExit, match=f"error 404: job {b[:8]}x not found"):
        main(["compare", a, b[:8] + "x"])


def test_compare_averages_each_series_into_max_points_and_keeps_best_and_final_of_the_whole(client, alice, two_jobs):
    a, b = two_jobs
    whole = client.get(f"/v1/jobs/compare?ids={a},{b}", headers=alice).json()["jobs"][0]["metrics"]["train_loss"]
    thin = client.get(f"/v1/jobs/compare?ids={a},{b}&max_points=2", headers=alice).json()["jobs"][0]["metrics"]
    loss = thin["train_loss"]
    assert whole["steps"] == [100, 200, 300] and loss["steps"] == [100, 300] and loss["total_points"] == 3
    assert loss["values"] == [5.0, 3.75]  # the last point is the true last value
    assert len(loss["seconds"]) == 2 and loss["seconds"][-1] == whole["seconds"][-1]
    assert (loss["best"], loss["best_step"], loss["final"]) == (whole["best"], whole["best_step"], whole["final"])
    assert client.get(f"/v1/jobs/compare?ids={a},{b}&max_points=1", headers=alice).status_code == 422


def test_compare_of_a_running_job_holds_a_point_written_while_it_reads(client, alice, two_jobs, monkeypatch):
    """The worker writes points while the API reads: one that lands just after the timestamps were read is not
    shown yet (the series are read first), never a 500 for a step without a timestamp."""
    from app.db import metric_rows
    from app.db.base import utcnow

    a, b = two_jobs
    real_recorded_at = metric_rows.recorded_at

    def recorded_then_a_worker_writes(session, job_id):
        out = real_recorded_at(session, job_id)
        _metric_rows(job_id, utcnow(), [(400, "train_loss", 3.0, 0)])
        return out

    monkeypatch.setattr(metric_rows, "recorded_at", recorded_then_a_worker_writes)
    reply = client.get(f"/v1/jobs/compare?ids={a},{b}", headers=alice)
    assert reply.status_code == 200, reply.text
    loss = reply.json()["jobs"][0]["metrics"]["train_loss"]
    assert loss["steps"] == [100, 200, 300] and len(loss["seconds"]) == 3
    monkeypatch.setattr(metric_rows, "recorded_at", real_recorded_at)
    again = client.get(f"/v1/jobs/compare?ids={a},{b}", headers=alice).json()["jobs"][0]["metrics"]["train_loss"]
    assert again["steps"][-1] == 400 and len(again["seconds"]) == 4
