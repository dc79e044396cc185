"""A dataset translation whose inference worker is killed mid-way, on a real stack (uvicorn, Celery prefork workers,
PostgreSQL, Redis). On Redis the dead worker's message comes back only after BROKER_VISIBILITY_TIMEOUT (hours): the
reaper must notice the stall and send the task again (worker/reaper.py sweep_stalled)."""

from __future__ import annotations

import gzip
import json
import os
import signal
from pathlib import Path

from num2words import num2words

from bench.harness.stack import START_TIMEOUT_S, healthy_with_workers, wait_for
from tests.reliability.conftest import open_stack
from tests.support.training import numbers_job, query

ROWS = 6 * 1024  # six parts of worker/data/translating.py's CHUNK_ROWS: the kill lands with parts written and to write
STALL = 20  # seconds without progress: far more than a part takes on a loaded CI host, or a live worker is re-sent


def test_a_translation_whose_worker_is_killed_resumes_on_another_after_its_parts_losing_and_doubling_no_row(
    tmp_path, fresh_postgres_url, redis_url, data_files
):
    """Fault: SIGKILL of the whole inference worker once a part is written. Pass: BACKGROUND_STALL_SECONDS later the
    reaper sends the task again (attempt 2), a new worker resumes after the parts written (resumed_from > 0) and
    finishes; the new dataset holds every row once, in order."""
    with open_stack(tmp_path, fresh_postgres_url, redis_url, BACKGROUND_STALL_SECONDS=str(STALL)) as stack:
        stack.start_trainer("trainer")
        api = stack.api("ivan")
        train = api.upload(data_files["train"], "parallel")
        job = api.wait(api.submit(numbers_job(train["id"], max_steps=20))["id"], ("succeeded", "failed"), timeout=180)
        assert job["status"] == "succeeded", job["error"]
        texts = [num2words(n, lang="en") for n in range(ROWS)]
        (tmp_path / "numbers.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
        source = api.upload(tmp_path / "numbers.txt", "monolingual")
        first = stack.processes.start_worker(stack.env, "inference", "doomed")
        wait_for(healthy_with_workers(stack.url, 2), timeout=START_TIMEOUT_S, what="the inference worker")
        body = {"dataset_id": source["id"], "backend": "pytorch", "decoding": {"method": "beam", "beam_size": 1}}
        created = api.http.post(f"/v1/models/{job['model_id']}/dataset-translations", json=body)
        assert created.status_code == 202, created.text
        path = f"/v1/models/{job['model_id']}/dataset-translations/{created.json()['id']}"
        wait_for(lambda: api.http.get(path).json()["translated"] > 0, timeout=120, what="a part", interval=0.1)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        killed_at = api.http.get(path).json()["translated"]
        assert 0 < killed_at < ROWS, "the translation ended before the kill: give it more rows"
        stack.processes.start_worker(stack.env, "inference", "rescuer")

        def over():
            got = api.http.get(path).json()
            return got if got["status"] in ("succeeded", "failed") else None

        done = wait_for(over, timeout=180, what="the translation's end", interval=0.5)
        assert done["status"] == "succeeded", done["error"]
        assert 0 < done["resumed_from"] <= killed_at and done["translated"] == ROWS
        assert sum(done["counts"].values()) == ROWS
        assert query(stack.env["DATABASE_URL"], "SELECT attempt FROM dataset_translations")[0][0] == 2
        assert "its task sent again" in stack.processes.log("trainer") + stack.processes.log("rescuer")
        stored = Path(stack.env["ARTIFACT_ROOT"]) / "datasets" / done["output_dataset_id"] / "data.jsonl.gz"
        sources = [json.loads(line)["source"] for line in gzip.decompress(stored.read_bytes()).decode().splitlines()]
        assert len(sources) == done["counts"]["pairs"] and sources == [t for t in texts if t in set(sources)]
        assert len(set(sources)) == len(sources)  # each row once
