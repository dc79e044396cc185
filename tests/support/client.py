"""A small HTTP helper for end-to-end tests: upload, submit, poll."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from bench.harness.stack import wait_for

# How long a worker may take to parse an upload: a hang guard, not a speed check (a small upload's parse took over
# 60 s on two cores loaded by other processes).
PARSE_TIMEOUT_S = 180.0


class Api:
    def __init__(self, url: str, key: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    def upload(
        self,
        path: Path,
        kind: str,
        name: str | None = None,
        timeout: float = PARSE_TIMEOUT_S,
        wait: bool = True,
        languages: tuple[str, str] | None = None,
    ) -> dict:
        """Upload, then wait while a worker of the data queue parses it; the dataset, ready or failed (wait=False:
        as the upload answered, processing; a job on it waits for it). `languages`: its declared (source, target)."""
        form = {"name": name or path.name, "kind": kind}
        if languages is not None:
            form |= {"source_language": languages[0], "target_language": languages[1]}
        with open(path, "rb") as f:
            response = self.http.post("/v1/datasets", data=form, files={"file": (path.name, f)})
        assert response.status_code == 201, response.text
        return self.processed(response.json()["id"], timeout) if wait else response.json()

    def processed(self, dataset_id: str, timeout: float = PARSE_TIMEOUT_S) -> dict:
        """The dataset once a worker has parsed it (or failed to)."""
        return wait_for(
            lambda: (d := self.http.get(f"/v1/datasets/{dataset_id}").json())["status"] != "processing" and d,
            timeout=timeout,
            what=f"dataset {dataset_id} to be parsed",
            interval=0.2,
        )

    def submit(self, body: dict, **headers: str) -> dict:
        response = self.http.post("/v1/jobs", json=body, headers=headers)
        assert response.status_code == 201, response.text
        return response.json()

    def job(self, job_id: str) -> dict:
        return self.http.get(f"/v1/jobs/{job_id}").json()

    def wait(self, job_id: str, statuses: tuple[str, ...], timeout: float) -> dict:
        return wait_for(
            lambda: (job := self.job(job_id))["status"] in statuses and job,
            timeout=timeout,
            what=f"job {job_id} to reach {statuses}",
            interval=0.5,
        )

    def succeeded(self, url: str, timeout: float = 120) -> dict:
        """A background task's row (an evaluation, a file or dataset translation) once it ends; it must succeed."""

        def over() -> dict | None:
            got = self.http.get(url).json()
            return got if got["status"] in ("succeeded", "failed") else None

        done = wait_for(over, timeout=timeout, what=url, interval=0.5)
        assert done["status"] == "succeeded", done["error"]
        return done

    def checkpoints(self, job_id: str) -> list[dict]:
        return self.http.get(f"/v1/jobs/{job_id}/checkpoints").json()

    def metrics(self, job_id: str, **params) -> dict:
        return self.http.get(f"/v1/jobs/{job_id}/metrics", params=params).json()["series"]


def write_jsonl(path: Path, pairs) -> Path:
    path.write_text("".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in pairs))
    return path
