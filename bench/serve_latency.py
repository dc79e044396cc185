"""Latency and throughput of POST /v1/models/{id}/translate against a direct in-process call.

Starts the real service (uvicorn + one inference worker with a thread pool) on this machine's PostgreSQL
and Redis, with a `small` model trained for a minute on the demo numbers task (quality is irrelevant; the
same sentence is decoded on both sides). Measures, alternating rounds:

  direct      translate() in this process, one sentence, beam 4
  http        the same sentence through HTTP -> API -> Redis -> worker -> Redis -> API, sequentially
  concurrent  32 clients at once (each sends its requests back to back), sentences/second

Prints human lines, then one JSON object as the last line: p50/p95 of each, the overhead
(http p50 - direct p50), the CPU the API and the worker processes used per sequential request, and
`ratio` = concurrent throughput / sequential throughput (higher is better; the goal is >= 3, from micro-batching).

    .venv/bin/python bench/serve_latency.py [--requests 200] [--clients 32]
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

import httpx
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model.data.demo import numbers_to_words_task  # noqa: E402
from model.decode.queries import translate  # noqa: E402
from model.io.checkpoint import load_model, save_checkpoint  # noqa: E402
from model.io.checkpoint_files import checkpoint_sha256  # noqa: E402
from model.train.config import TrainConfig  # noqa: E402
from model.train.loop import train  # noqa: E402
from model.train.prepare import prepare  # noqa: E402
from model.train.settings import DataSettings  # noqa: E402
from tests.support import services  # noqa: E402
from tests.support.rows import insert_model  # noqa: E402
from tests.support.stack import Processes, create_key, free_port, healthy_with_workers, run_cli, service_env, wait_for  # noqa: E402

SENTENCE = "three hundred and forty two"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) a process has used so far, all its threads together."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def train_small_model(folder: Path, preset: str = "small") -> Path:
    data = prepare(
        "translation",
        numbers_to_words_task(900),
        preset=preset,
        vocab_size=500,
        settings=DataSettings(max_length=40),
        seed=0,
    )
    result = train(
        data,
        TrainConfig(
            max_steps=60,
            warmup_steps=30,
            eval_every=60,
            checkpoint_every=60,
            max_tokens_per_batch=2048,
            eval_max_sentences=20,
            seed=0,
            eval_budget=None,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--preset", default="small", help="model size served (tiny, small, base)")
    args = parser.parse_args()
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
        wait_for(healthy_with_workers(url, 1), timeout=90, what="the service")
        key = create_key(env, "bench")
        model_id = register_model(env["DATABASE_URL"], "bench", model_dir, tmp / "artifacts")
        client = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
            limits=httpx.Limits(max_connections=args.clients * 2),
        )
        body = {"texts": [SENTENCE], "beam_size": 4}
        client.post(f"/v1/models/{model_id}/translate", json=body).raise_for_status()  # load the model

        def http_once() -> float:
            t0 = time.perf_counter()
            client.post(f"/v1/models/{model_id}/translate", json=body).raise_for_status()
            return (time.perf_counter() - t0) * 1000

        def direct_once() -> float:
            t0 = time.perf_counter()
            translate(model, tokenizer, [SENTENCE], beam_size=4)
            return (time.perf_counter() - t0) * 1000

        direct, http, sequential_rates, concurrent_rates = [], [], [], []
        pids = {"api": processes.children["api"].pid, "worker": worker.pid}
        cpu = dict.fromkeys(pids, 0.0)  # CPU the service spent on the sequential requests
        for _ in range(args.rounds):
            direct += [direct_once() for _ in range(args.requests // args.rounds)]
            before = {name: cpu_ms(pid) for name, pid in pids.items()}
            t0 = time.perf_counter()
            latencies = [http_once() for _ in range(args.requests // args.rounds)]
            sequential_rates.append(len(latencies) / (time.perf_counter() - t0))
            for name, pid in pids.items():
                cpu[name] += cpu_ms(pid) - before[name]
            http += latencies
            n = args.clients * 4
            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(lambda _: http_once(), range(n)))
            concurrent_rates.append(n / (time.perf_counter() - t0))
    finally:
        processes.stop()
        services.drop_database(admin, name)

    result = {
        "direct_p50_ms": round(statistics.median(direct), 2),
        "direct_p95_ms": round(percentile(direct, 0.95), 2),
        "http_p50_ms": round(statistics.median(http), 2),
        "http_p95_ms": round(percentile(http, 0.95), 2),
        "overhead_p50_ms": round(statistics.median(http) - statistics.median(direct), 2),
        "sequential_sent_per_s": round(statistics.median(sequential_rates), 1),
        "concurrent_sent_per_s": round(statistics.median(concurrent_rates), 1),
        "api_cpu_ms_per_request": round(cpu["api"] / len(http), 2),
        "worker_cpu_ms_per_request": round(cpu["worker"] / len(http), 2),
        "clients": args.clients,
        "requests": args.requests,
        "threads": 1,
        "preset": args.preset,
    }
    result["ratio"] = round(result["concurrent_sent_per_s"] / result["sequential_sent_per_s"], 2)
    print(f"direct call     p50 {result['direct_p50_ms']} ms  p95 {result['direct_p95_ms']} ms")
    print(
        f"HTTP + Celery   p50 {result['http_p50_ms']} ms  p95 {result['http_p95_ms']} ms  "
        f"(overhead p50 {result['overhead_p50_ms']} ms)"
    )
    print(
        f"CPU a request   API {result['api_cpu_ms_per_request']} ms, worker {result['worker_cpu_ms_per_request']} ms "
        f"(decoding included)"
    )
    print(
        f"throughput      sequential {result['sequential_sent_per_s']}/s, {args.clients} clients "
        f"{result['concurrent_sent_per_s']}/s  -> x{result['ratio']}"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
