"""Schemathesis against the service's own OpenAPI: a real API process on PostgreSQL and Redis, a valid key,
every check Schemathesis has (server errors, status codes, response schemas and headers, content types,
schema-valid data accepted, invalid data rejected, auth enforced, use after delete) and all its phases.

tests/security/schemathesis.toml gives it real objects of its key and says why each adjustment is there.
The run is bounded by MAX_EXAMPLES per operation: about 2,000 requests, 20-40 s on two busy cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from bench.harness.stack import run_cli
from tests.security.rows import insert_job_outputs

CONFIG = Path(__file__).with_name("schemathesis.toml")
MAX_EXAMPLES = 25
SEED = 20240611  # fixed: a failure reproduces with the same cases
CORPUS = "".join(json.dumps({"source": f"{n} apples", "target": f"{n} Äpfel"}) + "\n" for n in range(40))


def _fuzz_objects(url: str, key: str, database_url: str) -> dict[str, str]:
    """A dataset, a queued job with a checkpoint and metrics, a ping and a spare key, all of the fuzzing key."""
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    dataset = http.post(
        "/v1/datasets", data={"name": "fuzz", "kind": "parallel"}, files={"file": ("corpus.jsonl", CORPUS.encode())}
    )
    assert dataset.status_code == 201, dataset.text
    job = http.post(
        "/v1/jobs",
        json={
            "objective": "translation",
            "dataset_id": dataset.json()["id"],
            "model": {"preset": "tiny", "vocab_size": 500},
            "training": {"max_steps": 10},
        },
    )
    assert job.status_code == 201, job.text
    ping = http.post("/v1/pings", json={"queue": "training"})
    assert ping.status_code == 202, ping.text
    spare = http.post("/v1/keys", json={"name": "spare"})  # the one key the fuzzing may revoke
    assert spare.status_code == 201, spare.text
    insert_job_outputs(database_url, job.json()["id"], f"jobs/{job.json()['id']}/step-00000010")
    return {"FUZZ_JOB_ID": job.json()["id"], "FUZZ_PING_ID": ping.json()["id"], "FUZZ_SPARE_KEY_ID": spare.json()["id"]}


def test_openapi_fuzzing_finds_no_server_error_and_no_schema_violation(api_stack, tmp_path):
    """Fails on any 5xx, any status code or body the OpenAPI does not declare, and any other failed check."""
    metrics_token = "fuzz-metrics-token"
    # The rate limiter stays on (counting in Redis), with a limit this run cannot reach.
    stack = api_stack(RATE_LIMIT_PER_MINUTE="1000000", METRICS_TOKEN=metrics_token)
    key = stack.key("fuzz")
    variables = _fuzz_objects(stack.url, key, stack.env["DATABASE_URL"])
    variables["FUZZ_OPERATOR_KEY"] = run_cli(stack.env, "create-operator-key", "fuzz-operator").strip().splitlines()[-1]
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(CONFIG),
        "run",
        f"{stack.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {key}",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path / "report"),
    ]
    env = {**os.environ, **variables, "FUZZ_METRICS_TOKEN": metrics_token, "NO_COLOR": "1"}
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"schemathesis found problems (exit {done.returncode}):\n{output[-20000:]}"
    tested = output.split("Tested:", 1)[1].split()[0] if "Tested:" in output else "0"
    selected = output.split("Selected:", 1)[1].split()[0] if "Selected:" in output else "?"
    assert int(tested) >= 20 and selected.startswith(tested + "/"), f"not every operation was tested:\n{output[-5000:]}"
    assert stack.processes.children["api"].poll() is None, "the API process died during fuzzing"
