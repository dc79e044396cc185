"""GET /v1/jobs/{id}/logs: a job's log lines, oldest first, paged by `after`, filtered by level; only the job's
owner sees them (another owner's job is 404, as on the other job routes); secrets never shown."""

from __future__ import annotations

import logging

import pytest

from app.core import logs
from tests.api.test_job_labels import job_rows


def append(job_id: str, *lines: tuple[str, str]) -> None:
    """(level, message) lines appended to the job's log as a worker's batch would be."""
    from app.db import log_rows
    from app.db.base import utcnow
    from app.db.session import session_scope

    with session_scope() as session:
        batch = [log_rows.LogLine(level, "worker.tasks.training", message, 1, utcnow()) for level, message in lines]
        assert log_rows.append(session, job_id, batch)


@pytest.fixture
def job_id(client, alice) -> str:
    (job_id,) = job_rows("alice", 1)
    append(job_id, ("info", "one"), ("warning", "two"), ("error", "three"), ("info", "four"), ("critical", "five"))
    return job_id


def test_lines_come_oldest_first_in_pages_that_a_client_follows_with_after(client, alice, job_id):
    url = f"/v1/jobs/{job_id}/logs"
    first = client.get(url, params={"limit": 2}, headers=alice)
    assert first.status_code == 200, first.text
    body = first.json()
    assert (body["job_id"], body["status"], body["next_after"], body["has_more"]) == (job_id, "queued", 2, True)
    line = body["lines"][0]
    assert line["seq"] == 1 and line["level"] == "info" and line["message"] == "one" and line["attempt"] == 1
    assert line["logger"] == "worker.tasks.training" and line["time"].endswith(("Z", "+00:00"))
    seen, after = [], 0
    while True:
        page = client.get(url, params={"after": after, "limit": 2}, headers=alice).json()
        seen += [line["message"] for line in page["lines"]]
        after = page["next_after"]
        if not page["has_more"]:
            break
    assert seen == ["one", "two", "three", "four", "five"] and after == 5
    append(job_id, ("info", "six"))  # a follower asking again gets only what is new
    again = client.get(url, params={"after": after}, headers=alice).json()
    assert [(line["seq"], line["message"]) for line in again["lines"]] == [(6, "six")]
    idle = client.get(url, params={"after": 6}, headers=alice).json()
    assert (idle["lines"], idle["next_after"], idle["has_more"]) == ([], 6, False)


def test_level_is_the_lowest_level_shown(client, alice, job_id):
    page = client.get(f"/v1/jobs/{job_id}/logs", params={"level": "warning"}, headers=alice).json()
    assert [(line["seq"], line["level"]) for line in page["lines"]] == [(2, "warning"), (3, "error"), (5, "critical")]
    page = client.get(f"/v1/jobs/{job_id}/logs", params={"level": "critical"}, headers=alice).json()
    assert [line["message"] for line in page["lines"]] == ["five"]


@pytest.mark.parametrize(
    ("params", "name"),
    [({"level": "debug"}, "level"), ({"limit": 0}, "limit"), ({"limit": 2001}, "limit"), ({"after": -1}, "after")],
)
def test_bad_query_parameters_are_422_naming_them(client, alice, job_id, params, name):
    response = client.get(f"/v1/jobs/{job_id}/logs", params=params, headers=alice)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", name]


def test_another_owners_job_is_404_like_an_unknown_one(client, alice, make_key, job_id):
    bob = make_key("bob")
    response = client.get(f"/v1/jobs/{job_id}/logs", headers=bob)
    assert response.status_code == 404 and response.json() == {"detail": f"job {job_id} not found"}
    assert "one" not in response.text
    unknown = client.get("/v1/jobs/00000000-0000-0000-0000-000000000000/logs", headers=alice)
    assert unknown.status_code == 404
    assert client.get(f"/v1/jobs/{job_id}/logs").status_code == 401


def test_a_secret_logged_through_the_worker_handler_is_shown_redacted(client, alice):
    from worker.training.job_log import JobLogHandler

    (job_id,) = job_rows("alice", 1)
    key, handler = "tsk_" + "AliceKey" * 5, JobLogHandler()
    logger = logging.getLogger("worker.tasks.training")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with logs.bound_to(job_id=job_id):
            logger.info("database postgresql://user:password@db:5432/jobs, key %s", key)
        handler.write(job_id)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    response = client.get(f"/v1/jobs/{job_id}/logs", headers=alice)
    (line,) = response.json()["lines"]
    assert line["message"] == "database postgresql://user:[redacted]@db:5432/jobs, key tsk_[redacted]"
    assert "password" not in response.text and key not in response.text
