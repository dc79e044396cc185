"""Latency and throughput of POST /v1/models/{id}/translate, backend against backend, and against a direct call.

Starts the real service (uvicorn + one inference worker with a thread pool) on this machine's PostgreSQL
and Redis, with a `small` model trained for a minute on the demo numbers task (quality is irrelevant; the
same sentence is decoded throughout). Measures, in alternating rounds, for each backend of --backends
(default `pytorch,auto`: before, PyTorch; after, the default, CTranslate2 where it serves the model):

  direct      translate() in this process, one sentence, beam 4 (PyTorch)
  http        the same sentence through HTTP -> API -> Redis -> worker -> Redis -> API, 1 client, sequentially
  concurrent  --clients clients at once (each sends its requests back to back), sentences/second

Prints human lines, then one JSON object as the last line: per backend (`backends`) p50/p95, sentences/s at 1
and --clients clients, the backend that answered, the CPU the API and the worker used per sequential request
and `batching_ratio` (concurrent / sequential, the goal >= 3 from micro-batching); `ratio` = after / before in
sentences/s at --clients clients (`ratio_1_client` at 1), higher is better. With one backend, `ratio` is that
backend's batching ratio. The first backend's figures also stand at the top level, as before.

    .venv/bin/python bench/serve_latency.py [--requests 200] [--clients 32] [--backends pytorch,auto]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import services  # noqa: E402
from bench.harness.rows import insert_model  # noqa: E402
from bench.harness.stack import (  # noqa: E402
    START_TIMEOUT_S,
    Processes,
    create_key,
    free_port,
    healthy_with_workers,
    run_cli,
    service_env,
    wait_for,
)
from model.data.demo import numbers_to_words_task  # noqa: E402
from model.decode.queries import translate  # noqa: E402
from model.io.checkpoint import load_model, save_checkpoint  # noqa: E402
from model.io.checkpoint_files import checkpoint_sha256  # noqa: E402
from model.train.config import TrainConfig  # noqa: E402
from model.train.loop import train  # noqa: E402
from model.train.prepare import prepare  # noqa: E402
from model.train.settings import DataSettings  # noqa: E402

SENTENCE = "three hundred and forty two"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) a process has used so far, all its threads together."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def train_small_model(
    folder: Path,
    preset: str = "small",
    device: str = "cpu",
    pairs: list[tuple[str, str]] | None = None,
    steps: int = 60,
    peak_lr: float | None = None,
) -> Path:
    """A model trained `steps` steps on `pairs` (default: 900 of the numbers task), saved as a model folder."""
    data = prepare(
        "translation",
        pairs or numbers_to_words_task(900),
        preset=preset,
        vocab_size=500,
        settings=DataSettings(max_length=40),
        seed=0,
    )
    result = train(
        data,
        TrainConfig(
            max_steps=steps,
            warmup_steps=min(30, steps // 2) if peak_lr is None else steps // 3,
            peak_lr=peak_lr,
            eval_every=steps,
            checkpoint_every=steps,
            max_tokens_per_batch=2048,
            eval_max_sentences=20,
            seed=0,
            eval_budget=None,
            device=device,
        ),
        folder / "ckpt",
    )
    model, tokenizer, meta = load_model(result.model_checkpoint)
    return save_checkpoint(folder / "model", model, tokenizer, "translation", step=result.step, kind="model")


def register_model(database_url: str, owner: str, model_dir: Path, artifacts: Path) -> str:
    """Rows for a model made outside a job, its files under the artifact root."""
    import shutil

    key = f"models/import-{uuid.uuid4()}"
    shutil.copytree(model_dir, artifacts / key)
    return insert_model(database_url, owner, key, checkpoint_sha256(model_dir))


def measure(
    client: httpx.Client, model_id: str, backend: str, requests: int, clients: int, pids: dict[str, int]
) -> dict[str, Any]:
    """One round for one backend: `requests` sequential requests (and the CPU each process in `pids` spent on
    them), then clients x 4 concurrent ones."""
    body = {"texts": [SENTENCE], "beam_size": 4, "backend": backend}
    answered: set[str] = set()

    def once() -> float:
        t0 = time.perf_counter()
        response = client.post(f"/v1/models/{model_id}/translate", json=body)
        response.raise_for_status()
        answered.add(response.json()["backend"])
        return (time.perf_counter() - t0) * 1000

    before = {name: cpu_ms(pid) for name, pid in pids.items()}
    t0 = time.perf_counter()
    latencies = [once() for _ in range(requests)]
    sequential = len(latencies) / (time.perf_counter() - t0)
    cpu = {name: cpu_ms(pid) - before[name] for name, pid in pids.items()}
    n = clients * 4
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda _: once(), range(n)))
    return {"latencies": latencies, "sequential": sequential, "concurrent": n / (time.perf_counter() - t0),
            "answered": answered, "cpu": cpu}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--preset", default="small", help="model size served (tiny, small, base)")
    parser.add_argument(
        "--backends",
        default="pytorch,auto",
        help="backends compared, before first and after last (auto, pytorch, ctranslate2); one measures it alone",
    )
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or set(backends) - {"auto", "pytorch", "ctranslate2"}:
        parser.error(f"--backends {args.backends!r}: name auto, pytorch or ctranslate2")
    torch.set_num_threads(1)

    tmp = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    model_dir = train_small_model(tmp, args.preset)
    model, tokenizer, _ = load_model(model_dir)

    admin = services.postgres_url()
    name = f"bench_{uuid.uuid4().hex[:8]}"
    services.create_database(admin, name)
    env = service_env(
        DATABASE_URL=services.with_database(admin, name),
        CELERY_BROKER_URL=services.redis_url(),
        DATA_DIR=str(tmp / "var"),
        ARTIFACT_ROOT=str(tmp / "artifacts"),
        OMP_NUM_THREADS="1",
        MAX_TEXTS_PER_REQUEST="64",
        INFERENCE_QUEUE_LIMIT="10000",
        RATE_LIMIT_PER_MINUTE="1000000",
    )
    run_cli(env, "migrate")
    processes = Processes(tmp)
    url = processes.start_api(env, free_port())
    worker = processes.start_worker(env, "inference", "bench-server", pool="threads", concurrency=args.clients)
    try:
        wait_for(healthy_with_workers(url, 1), timeout=START_TIMEOUT_S, what="the service")
        key = create_key(env, "bench")
        model_id = register_model(env["DATABASE_URL"], "bench", model_dir, tmp / "artifacts")
        client = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
            limits=httpx.Limits(max_connections=args.clients * 2),
        )
        for backend in backends:  # the first request of each converts or loads the model
            client.post(
                f"/v1/models/{model_id}/translate", json={"texts": [SENTENCE], "beam_size": 4, "backend": backend}
            ).raise_for_status()

        def direct_once() -> float:
            t0 = time.perf_counter()
            translate(model, tokenizer, [SENTENCE], beam_size=4)
            return (time.perf_counter() - t0) * 1000

        direct: list[float] = []
        pids = {"api": processes.children["api"].pid, "worker": worker.pid}
        runs: dict[str, dict[str, Any]] = {
            b: {"http": [], "sequential": [], "concurrent": [], "answered": set(), "cpu": dict.fromkeys(pids, 0.0)}
            for b in backends
        }
        per_round = args.requests // args.rounds
        for _ in range(args.rounds):
            direct += [direct_once() for _ in range(per_round)]
            for backend in backends:  # alternating, so that drifts of a shared machine hit every backend
                run = runs[backend]
                measured = measure(client, model_id, backend, per_round, args.clients, pids)
                for name in pids:
                    run["cpu"][name] += measured["cpu"][name]
                run["http"] += measured["latencies"]
                run["sequential"].append(measured["sequential"])
                run["concurrent"].append(measured["concurrent"])
                run["answered"] |= measured["answered"]
    finally:
        processes.stop()
        services.drop_database(admin, name)

    direct_p50 = statistics.median(direct)
    by_backend = {}
    for backend, run in runs.items():
        http = run["http"]
        figures = {
            "answered_by": sorted(run["answered"]),
            "http_p50_ms": round(statistics.median(http), 2),
            "http_p95_ms": round(percentile(http, 0.95), 2),
            "sequential_sent_per_s": round(statistics.median(run["sequential"]), 1),
            "concurrent_sent_per_s": round(statistics.median(run["concurrent"]), 1),
            "api_cpu_ms_per_request": round(run["cpu"]["api"] / len(http), 2),
            "worker_cpu_ms_per_request": round(run["cpu"]["worker"] / len(http), 2),
        }
        if backend == "pytorch":  # the direct call is PyTorch's: HTTP, Redis and the worker on top of it
            figures["overhead_p50_ms"] = round(statistics.median(http) - direct_p50, 2)
        figures["batching_ratio"] = round(figures["concurrent_sent_per_s"] / figures["sequential_sent_per_s"], 2)
        by_backend[backend] = figures
    before, after = by_backend[backends[0]], by_backend[backends[-1]]
    result: dict[str, Any] = {
        "direct_p50_ms": round(direct_p50, 2),
        "direct_p95_ms": round(percentile(direct, 0.95), 2),
        **{k: v for k, v in before.items() if k != "answered_by"},
        "backends": by_backend,
        "before": backends[0],
        "after": backends[-1],
        "clients": args.clients,
        "requests": args.requests,
        "rounds": args.rounds,
        "threads": 1,
        "preset": args.preset,
    }
    if len(backends) > 1:
        result["ratio"] = round(after["concurrent_sent_per_s"] / before["concurrent_sent_per_s"], 2)
        result["ratio_1_client"] = round(after["sequential_sent_per_s"] / before["sequential_sent_per_s"], 2)
    else:
        result["ratio"] = before["batching_ratio"]
    print(f"direct call     p50 {result['direct_p50_ms']} ms  p95 {result['direct_p95_ms']} ms  (PyTorch in process)")
    for backend, figures in by_backend.items():
        print(
            f"{backend:<12} by {'+'.join(figures['answered_by'])}: HTTP p50 {figures['http_p50_ms']} ms "
            f"p95 {figures['http_p95_ms']} ms; 1 client {figures['sequential_sent_per_s']}/s, {args.clients} clients "
            f"{figures['concurrent_sent_per_s']}/s (x{figures['batching_ratio']}); CPU a request API "
            f"{figures['api_cpu_ms_per_request']} ms, worker {figures['worker_cpu_ms_per_request']} ms"
        )
    if len(backends) > 1:
        print(
            f"{backends[-1]} / {backends[0]}: x{result['ratio']} at {args.clients} clients, "
            f"x{result['ratio_1_client']} at 1"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
