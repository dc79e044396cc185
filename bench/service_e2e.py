"""The service itself on this host, end to end over HTTP: start it on its embedded default (`python -m app.cli
serve`, one API and its Celery workers, SQLite, local artifacts) with WORKER_DEVICE=--device, upload a corpus,
train a job of --minutes over HTTP, and translate held-out sentences with each backend.

    python bench/service_e2e.py --device cuda --minutes 2
    python bench/service_e2e.py --device cpu --minutes 0.2 --preset tiny     # what the smoke test runs

The corpus is the numbers task (English number words -> German, model/data/demo.py: a known answer, nothing to
download, which a GPU host without a network needs), --pairs training pairs from 0..99,999 with a held-out
part for validation and test. The job leaves its batch size, warm-up and vocabulary to its time budget, as a
user's job at its defaults does, so the worker's own choice on this device is recorded (`auto_settings`).

Reported: how long each phase took (service up, upload, queued, training, the first translation, which loads
the model), the job's steps, tokens/s, the device the worker reported, and for each backend (the default one,
pytorch and ctranslate2) the sentences/second of translating the test set in requests of 64 and the share of
exact matches. A phase that fails is recorded with its error; the JSON is printed as the last line either way.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.run_record import write_result  # noqa: E402
from model.data.demo import numbers_to_words_task, split_numbers  # noqa: E402

BACKENDS = (None, "pytorch", "ctranslate2")  # None: the service's default
REQUEST_TEXTS = 64


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="WORKER_DEVICE of the service's workers: cpu, cuda, cuda:N")
    p.add_argument("--minutes", type=float, default=2.0, help="the job's training.max_minutes")
    p.add_argument("--preset", default="small", help="the job's model.preset")
    p.add_argument("--pairs", type=int, default=30_000, help="training pairs")
    p.add_argument("--test", type=int, default=256, help="test sentences translated per backend")
    p.add_argument("--threads", type=int, default=0, help="TORCH_THREADS of the workers; 0: the service's default")
    p.add_argument("--timeout", type=float, default=900, help="seconds for the whole run past the job's minutes")
    p.add_argument("--out", type=Path, help="also write the final JSON here")
    return p.parse_args(argv)


def write_corpus(directory: Path, pairs: int, test: int) -> tuple[dict[str, Path], list[tuple[str, str]]]:
    """train/valid jsonl files and the test pairs: disjoint numbers, so the test is held out."""
    train_numbers, held_out = split_numbers(0, 99_999, held_out=0.02, seed=0)
    files = {}
    for name, rows in (
        ("train", numbers_to_words_task(pairs, seed=1, numbers=train_numbers)),
        ("valid", numbers_to_words_task(200, seed=2, numbers=held_out[:1000])),
    ):
        files[name] = directory / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in rows))
    return files, numbers_to_words_task(test, seed=3, numbers=held_out[1000:])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from bench.harness.stack import Processes, free_port, service_env

    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="service-e2e-"))
    files, test = write_corpus(tmp, args.pairs, args.test)
    port = free_port()
    env = service_env(DATA_DIR=str(tmp / "var"), PORT=str(port), WORKER_DEVICE=args.device, MAX_TEXTS_PER_REQUEST="64")
    if args.threads:
        env["TORCH_THREADS"] = str(args.threads)
    else:
        env.pop("TORCH_THREADS", None)
    result: dict[str, Any] = {
        "bench": "service_e2e",
        "device": args.device,
        "minutes": args.minutes,
        "preset": args.preset,
        "pairs": args.pairs,
        "phases": {},
        "errors": {},
    }
    processes = Processes(tmp)
    started = time.monotonic()
    try:
        processes.start("serve", [sys.executable, "-m", "app.cli", "serve"], env)
        Run(args, result, f"http://127.0.0.1:{port}", tmp / "var" / "local-api-key").steps(files, test)
    finally:
        result["seconds"] = round(time.monotonic() - started, 1)
        if result["errors"]:
            result["service_log_tail"] = processes.log("serve")[-4000:]
        processes.stop()
    result["ok"] = not result["errors"]
    write_result(result, args.out)
    print(json.dumps(result))
    return result


class Run:
    """The phases against a running service; each records its seconds, or its error (and the run stops)."""

    def __init__(self, args: argparse.Namespace, result: dict[str, Any], url: str, key_file: Path) -> None:
        self.args, self.result, self.url, self.key_file = args, result, url, key_file

    def phase(self, name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.monotonic()
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001  # recorded: the report says which phase failed and why
            self.result["errors"][name] = f"{type(exc).__name__}: {exc}"[:2000]
            return None
        finally:
            self.result["phases"][name] = round(time.monotonic() - t0, 2)

    def steps(self, files: dict[str, Path], test: list[tuple[str, str]]) -> None:
        import httpx

        from bench.harness.stack import wait_for

        args, result, url = self.args, self.result, self.url

        def up() -> bool:
            try:
                return self.key_file.exists() and httpx.get(f"{url}/healthz").status_code == 200
            except httpx.HTTPError:
                return False

        if self.phase("service_up", lambda: wait_for(up, 420, "the service")) is None:
            return
        key = self.key_file.read_text().strip()
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=600)

        def upload(name: str) -> str:
            with open(files[name], "rb") as f:
                r = client.post("/v1/datasets", data={"name": name, "kind": "parallel"}, files={"file": (name, f)})
            return str(r.raise_for_status().json()["id"])

        ids = self.phase("upload", lambda: {name: upload(name) for name in files})
        if ids is None:
            return
        spec = {
            "objective": "translation",
            "dataset_id": ids["train"],
            "valid_dataset_id": ids["valid"],
            "model": {"preset": args.preset},
            "training": {"max_minutes": args.minutes, "seed": 0},
        }
        job_id = self.phase("submit", lambda: client.post("/v1/jobs", json=spec).raise_for_status().json()["id"])
        if job_id is None:
            return
        result["job_id"] = job_id

        def status() -> dict[str, Any]:
            return dict(client.get(f"/v1/jobs/{job_id}").raise_for_status().json())

        self.phase("queued", lambda: wait_for(lambda: status()["status"] != "queued", 300, "the job to start", 0.5))
        limit, done = args.minutes * 60 + args.timeout, ("succeeded", "failed", "cancelled")
        job = self.phase("training", lambda: wait_for(lambda: (j := status())["status"] in done and j, limit, "job", 2))
        if not job:
            return
        result["job"] = {k: job.get(k) for k in ("status", "error", "progress", "auto_settings")}
        workers = client.get("/v1/workers").json()["workers"]
        result["workers"] = [{k: w.get(k) for k in ("queues", "device_kind", "device_name")} for w in workers]
        if job["status"] != "succeeded":
            result["errors"]["job"] = f"job {job_id} {job['status']}: {job.get('error')}"
            return
        model_id = job["model_id"]
        first = {"texts": [s for s, _ in test[:8]]}
        self.phase("first_translation", lambda: client.post(f"/v1/models/{model_id}/translate", json=first))
        result["translate"] = {}
        for backend in BACKENDS:
            name = backend or "default"
            got = self.phase(f"translate_{name}", lambda b=backend: translate(client, model_id, test, b))
            if got is not None:
                result["translate"][name] = got


def translate(client: Any, model_id: str, test: list[tuple[str, str]], backend: str | None) -> dict[str, Any]:
    """Sentences/second and exact matches of one backend over the test set, in requests of REQUEST_TEXTS."""
    hyps: list[str] = []
    answered: set[str] = set()
    extra = {"backend": backend} if backend else {}
    client.post(f"/v1/models/{model_id}/translate", json={"texts": [test[0][0]], **extra}).raise_for_status()  # load
    t0 = time.monotonic()
    for start in range(0, len(test), REQUEST_TEXTS):
        texts = [s for s, _ in test[start : start + REQUEST_TEXTS]]
        body = client.post(f"/v1/models/{model_id}/translate", json={"texts": texts, **extra}).raise_for_status()
        answer = body.json()
        answered.add(answer.get("backend", "?"))
        hyps += [t["text"] for t in answer["translations"]]
    seconds = time.monotonic() - t0
    exact = sum(h.strip() == ref for h, (_, ref) in zip(hyps, test)) / len(test)
    return {"sent_per_s": round(len(test) / seconds, 2), "exact_match": round(exact, 4), "backends": sorted(answered)}


if __name__ == "__main__":
    main()
