"""A request's id, owner and the ids it names reach every process's JSON log lines about it: the API's, and the
worker's that ran the task the request sent (the id travels in the Celery message)."""

from __future__ import annotations

import json
import time

import httpx
from sqlalchemy import create_engine, text


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_one_request_id_finds_the_request_in_the_api_log_and_its_task_in_the_worker_log(debug_stack):
    url, key = debug_stack.url, debug_stack.key("tracer")
    good = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, timeout=30) as http:
        assert http.get("/v1/me", headers=good).json()["owner"] == "tracer"
        ping = http.post("/v1/pings", headers={**good, "X-Request-ID": "trace-ping-1"}, json={"queue": "inference"})
        assert ping.status_code == 202 and ping.headers["X-Request-ID"] == "trace-ping-1", ping.text
        missing = http.get("/v1/jobs/no-such-job", headers={**good, "X-Request-ID": "trace-job-1"})
        assert missing.status_code == 404
        minted = http.get("/healthz").headers["X-Request-ID"]
        for _ in range(60):
            if http.get(f"/v1/pings/{ping.json()['id']}", headers=good).json()["answered_at"]:
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the inference worker never answered the ping")
    time.sleep(1)  # the worker's last lines reach its log file
    engine = create_engine(debug_stack.env["DATABASE_URL"])
    with engine.connect() as connection:
        owner_id = connection.execute(text("SELECT id FROM owners WHERE name = 'tracer'")).scalar_one()
    engine.dispose()
    api_text = debug_stack.processes.log("api")
    api = _json_lines(api_text)
    assert api and len(api) == len([line for line in api_text.splitlines() if line.strip()]), "a non-JSON API line"
    by_request = {}
    for line in api:
        by_request.setdefault(line.get("request_id"), []).append(line)
    access = [line for line in by_request["trace-ping-1"] if line["logger"] == "uvicorn.access"]
    assert access and "POST /v1/pings" in access[0]["message"] and access[0]["owner_id"] == owner_id
    (job_line,) = [line for line in by_request["trace-job-1"] if line["logger"] == "uvicorn.access"]
    assert job_line["job_id"] == "no-such-job" and " 404" in job_line["message"]
    assert any("GET /healthz" in line["message"] for line in by_request[minted]), "a minted id is logged too"

    worker = _json_lines(debug_stack.processes.log("inference"))
    answered = [line for line in worker if line["message"].startswith(f"ping {ping.json()['id']} answered")]
    assert answered and answered[0]["request_id"] == "trace-ping-1", answered
    assert all(line.get("request_id") != "trace-job-1" for line in worker), "a request that sent no task"
