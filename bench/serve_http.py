"""What a user's translate request gets over HTTP, against the same engine called in this process.

For each stack of --stacks (`embedded`: `python -m app.cli serve` on SQLite and its local broker, as `make run`
starts it; `redis`: the API and one inference worker on this machine's PostgreSQL and Redis) and each backend of
--backends, the same model (trained here for a minute; quality is irrelevant) is imported over HTTP, as a user
would, and measured three ways, each also called in this process through the worker's own decoding path
(worker/serving/translation.py, the model loaded as the worker loads it):

  one sentence   p50 and p99 latency of a one-sentence request, 1 client
  32 sentences   sentences/s of 32-sentence requests at each --clients count (each client sends --per-client of
                 them back to back)
  in-process     the same calls with no HTTP, broker or worker: one sentence, and 32 x clients sentences at once
                 (what the worker could at best decode for those clients together)

--task numbers (the default) translates number words into German ones: each output is 1 to 3 tokens, so a
search ends after a step or two and the engine's rate is mostly its fixed cost a call. --task copy trains the model
to copy sequences of 16 to 28 symbols and asks for at most 32 tokens: outputs as long as a sentence's (the JSON's
`output_tokens` has their mean), the work a real translation asks of the engine.

Prints human lines, then one JSON object last: per stack and backend the figures, `timing` (the median of the
Server-Timing header's queue, compute and total parts for the 32-sentence requests, by clients, and `client`, what
the client waited: the difference is the time before and after the route, in the API and on the way), `mean_batch` (the
sentences a request was decoded with, from /metrics), and `ratio` = HTTP / in-process in
sentences/s for 32-sentence requests from one client (the lowest of all stacks and backends; `ratios` has each,
at every client count). Goals: p50 <= 30 ms for one sentence on a CPU, ratio >= 0.7 (>= 0.8 at 8 clients).

    .venv/bin/python bench/serve_http.py [--stacks embedded,redis] [--backends pytorch,ctranslate2]
        [--device cpu|cuda] [--preset tiny] [--task numbers|copy] [--clients 1,8,32] [--requests 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import services  # noqa: E402
from bench.harness.stack import (  # noqa: E402
    START_TIMEOUT_S,
    Processes,
    batch_sizes,
    create_key,
    free_port,
    healthy_with_workers,
    run_cli,
    service_env,
    wait_for,
)
from bench.serve_latency import cpu_ms, percentile, train_small_model  # noqa: E402
from bench.service_session import embedded_stack  # noqa: E402
from model.data.demo import numbers_to_words_task, reverse_task  # noqa: E402

METRICS_TOKEN = "serve-http-bench"


@dataclass(frozen=True)
class Workload:
    """What the benchmark's model learns (`pairs`, for `steps` steps), and what each request asks of it."""

    pairs: Callable[[], list[tuple[str, str]]]
    steps: int
    peak_lr: float | None  # None: the default schedule's (a short warm-up: `base` then learns to stop at once)
    sentence: str  # the one-sentence requests'
    texts: list[str]  # each 32-sentence request's
    max_length: int | None  # most target tokens a request asks for


def _symbols(n: int, seed: int) -> list[str]:
    return [source for source, _ in reverse_task(n, vocab=40, min_len=16, max_len=28, seed=seed)]


WORKLOADS = {
    "numbers": Workload(
        lambda: numbers_to_words_task(900),
        60,
        None,
        "three hundred and forty two",
        [f"{n} hundred and {m}" for n, m in zip(["one", "two", "five", "nine"] * 8, ["six", "ten", "eight"] * 11)],
        None,
    ),
    "copy": Workload(
        lambda: [(s, s) for s in _symbols(3000, seed=0)], 300, 7e-4, _symbols(1, seed=2)[0], _symbols(32, seed=1), 32
    ),
}


def native_archive(model_dir: Path, folder: Path) -> Path:
    """The model as GET /v1/models/{id}/export?format=native gives it: one folder in a .tar.gz."""
    out = folder / "model.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        tar.add(model_dir, arcname="bench-model")
    return out


def import_model(client: httpx.Client, archive: Path) -> str:
    with open(archive, "rb") as f:
        r = client.post("/v1/models/import", files={"file": ("model.tar.gz", f, "application/gzip")}, timeout=600)
    r.raise_for_status()
    model_id = str(r.json()["id"])
    wait_for(lambda: client.get(f"/v1/models/{model_id}").status_code == 200, 300, "the imported model")
    return model_id


@contextmanager
def redis_service(tmp: Path, env_extra: dict[str, str]) -> Iterator[tuple[httpx.Client, int]]:
    admin = services.postgres_url()
    name = f"bench_{uuid.uuid4().hex[:8]}"
    services.create_database(admin, name)
    env = service_env(
        DATABASE_URL=services.with_database(admin, name),
        CELERY_BROKER_URL=services.redis_url(),
        DATA_DIR=str(tmp / "var"),
        ARTIFACT_ROOT=str(tmp / "artifacts"),
        RATE_LIMIT_PER_MINUTE="1000000",
        INFERENCE_QUEUE_LIMIT="10000",
        METRICS_TOKEN=METRICS_TOKEN,
        **{k: v for k, v in env_extra.items() if k != "TORCH_THREADS"},
    )
    env["TORCH_THREADS"] = env_extra["TORCH_THREADS"]
    run_cli(env, "migrate")
    processes = Processes(tmp)
    try:
        url = processes.start_api(env, free_port())
        worker = processes.start_worker(env, "inference,data", "bench-http", pool="threads", concurrency=32)
        wait_for(healthy_with_workers(url, 1), timeout=START_TIMEOUT_S, what="the service")
        key = create_key(env, "bench")
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120,
                          limits=httpx.Limits(max_connections=64)) as client:  # fmt: skip
            yield client, worker.pid
    finally:
        processes.stop()
        services.drop_database(admin, name)


@contextmanager
def stack(kind: str, tmp: Path, env_extra: dict[str, str]) -> Iterator[tuple[httpx.Client, int | None]]:
    if kind == "redis":
        with redis_service(tmp, env_extra) as pair:
            yield pair
    else:
        device = env_extra["WORKER_DEVICE"]  # its threads follow this process's torch threads
        with embedded_stack("serve-http-", WORKER_DEVICE=device, METRICS_TOKEN=METRICS_TOKEN) as (client, serve):
            yield client, inference_worker_pid(serve)


def inference_worker_pid(serve: int) -> int | None:
    """The embedded service's inference worker (`celery ... worker -Q inference`), found by its command line among
    the descendants of its `serve` process: other services on this machine (a test suite runs several at once) have
    inference workers of their own, which may end while this one is measured."""
    parents: dict[int, int] = {}
    workers = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"celery" in b" ".join(args) and b"-Q" in args and args[args.index(b"-Q") + 1] == b"inference":
            workers.append(int(proc.name))

    def under_serve(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == serve:
                return True
        return False

    # The worker's main process, not its pool's children (whose command line is the same).
    return next((pid for pid in sorted(workers) if under_serve(pid) and parents.get(pid) not in workers), None)


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def server_timing(header: str) -> dict[str, float]:
    """`queue;dur=1.2, compute;dur=3.4` -> {"queue": 1.2, "compute": 3.4}."""
    parts: dict[str, float] = {}
    for metric in filter(None, (m.strip() for m in header.split(","))):
        name, *params = (p.strip() for p in metric.split(";"))
        for param in params:
            if param.startswith("dur="):
                parts[name] = float(param[4:])
    return parts


def over_http(
    client: httpx.Client,
    model_id: str,
    backend: str,
    requests: int,
    clients: list[int],
    per_client: int = 4,
    work: Workload = WORKLOADS["numbers"],
) -> dict[str, Any]:
    seen: set[str] = set()
    timing: dict[str, list[float]] = {}
    asked = {"beam_size": 4, "backend": backend, "max_length": work.max_length}

    def post(texts: list[str]) -> None:
        t0 = time.perf_counter()
        r = client.post(f"/v1/models/{model_id}/translate", json={"texts": texts, **asked})
        r.raise_for_status()
        seen.add(r.json()["backend"])
        if len(texts) > 1:
            for name, ms in server_timing(r.headers.get("server-timing", "")).items():
                timing.setdefault(name, []).append(ms)
            timing.setdefault("client", []).append((time.perf_counter() - t0) * 1000)  # what the client waited

    for _ in range(3):  # loads (and converts) the model, and warms the path
        post(work.texts)
    one = [timed(lambda: post([work.sentence])) for _ in range(requests)]
    rates, timings, batches = {}, {}, {}
    for n in clients:
        total = max(n * per_client, 8)
        timing.clear()
        before = batch_sizes(client, METRICS_TOKEN)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda _: post(work.texts), range(total)))
        rates[n] = total * len(work.texts) / (time.perf_counter() - t0)
        timings[str(n)] = {name: round(statistics.median(v), 2) for name, v in timing.items()}
        after = batch_sizes(client, METRICS_TOKEN)
        batches[str(n)] = round((after[0] - before[0]) / max(1.0, after[1] - before[1]), 1)
    return {
        "answered_by": sorted(seen),
        "one_p50_ms": round(statistics.median(one), 2),
        "one_p99_ms": round(percentile(one, 0.99), 2),
        "sent_per_s": {str(n): round(r, 1) for n, r in rates.items()},
        "timing_ms": timings,  # the medians of the Server-Timing parts of the 32-sentence requests, by clients
        "mean_batch": batches,  # sentences in the micro-batch a request was decoded in, on average, by clients
    }


def in_process(
    model_dir: Path, backend: str, requests: int, clients: list[int], work: Workload = WORKLOADS["numbers"]
) -> dict[str, Any]:
    """The worker's decoding path (model loaded as the worker loads it, on WORKER_DEVICE), called directly."""
    from app.core.settings import get_settings
    from model.io.checkpoint import load_model
    from worker.device import worker_device
    from worker.serving import translation
    from worker.serving.model_cache import LoadedModel, prepare_for_serving

    device = worker_device()
    model, tokenizer, meta = load_model(model_dir, device)
    loaded = LoadedModel("bench", "translation", prepare_for_serving(model, device, get_settings()), tokenizer,
                         "span", meta)  # fmt: skip
    options = translation.Options(beam_size=4, max_length=work.max_length)
    answered: set[str] = set()
    lengths: list[int] = []

    def run(texts: list[str]) -> None:
        results, backend_used = translation.translate(loaded, texts, options, backend)
        answered.add(backend_used)
        lengths.extend(len(r["tokens"]) for r in results)

    for _ in range(3):
        run(work.texts)
    output_tokens = statistics.mean(lengths)
    one = [timed(lambda: run([work.sentence])) for _ in range(requests)]
    rates = {}
    for n in clients:
        texts = work.texts * n
        rates[n] = len(texts) * 1000 / statistics.median(timed(lambda t=texts: run(t)) for _ in range(3))
    return {
        "answered_by": sorted(answered),
        "output_tokens": round(output_tokens, 1),  # the mean length of a 32-sentence request's translations
        "one_p50_ms": round(statistics.median(one), 2),
        "one_p99_ms": round(percentile(one, 0.99), 2),
        "sent_per_s": {str(n): round(r, 1) for n, r in rates.items()},
    }


def idle_cpu_percent(pid: int | None, seconds: float = 10.0, settle: float = 10.0) -> float | None:
    """The share of one core a process used while nothing was asked of it (after `settle` seconds of quiet)."""
    if pid is None:
        return None
    time.sleep(settle)
    before = cpu_ms(pid)
    time.sleep(seconds)
    return round((cpu_ms(pid) - before) / (seconds * 10), 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stacks", default="embedded,redis")
    p.add_argument("--backends", default="pytorch,ctranslate2")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--preset", default="tiny")
    p.add_argument("--task", default="numbers", choices=sorted(WORKLOADS), help="what the model learns (above)")
    p.add_argument("--train-steps", type=int, default=None, help="steps the model trains (default: the task's)")
    p.add_argument("--clients", default="1,8,32")
    p.add_argument("--requests", type=int, default=100, help="one-sentence requests timed per stack and backend")
    p.add_argument("--threads", type=int, default=1, help="torch threads, here and in the worker")
    p.add_argument("--per-client", type=int, default=4, help="32-sentence requests each client sends, per count")
    p.add_argument("--idle-seconds", type=float, default=10.0, help="quiet before, then measured, for the idle CPU")
    args = p.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    stacks = [s for s in args.stacks.split(",") if s]
    backends = [b for b in args.backends.split(",") if b]
    env_extra = {"WORKER_DEVICE": args.device, "TORCH_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    os.environ.update(env_extra)  # the in-process engine reads the same settings as the worker
    import torch

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="serve-http-"))
    work = WORKLOADS[args.task]
    model_dir = train_small_model(
        tmp, args.preset, args.device, work.pairs(), args.train_steps or work.steps, work.peak_lr
    )
    archive = native_archive(model_dir, tmp)
    engine = {b: in_process(model_dir, b, args.requests, clients, work) for b in backends}
    results: dict[str, Any] = {}
    for kind in stacks:
        with stack(kind, tmp / kind, env_extra) as (client, worker_pid):
            model_id = import_model(client, archive)
            idle = idle_cpu_percent(worker_pid, args.idle_seconds, args.idle_seconds)
            results[kind] = {
                b: over_http(client, model_id, b, args.requests, clients, args.per_client, work) for b in backends
            }
            results[kind]["worker_idle_cpu_percent"] = idle
            print(f"{kind}: {json.dumps(results[kind])}", flush=True)
    ratios: dict[str, Any] = {}
    for kind in stacks:
        for b in backends:
            http, local = results[kind][b], engine[b]
            ratios[f"{kind}/{b}"] = {
                n: round(http["sent_per_s"][n] / rate, 3) for n, rate in local["sent_per_s"].items()
            }
            print(
                f"{kind:<9}{b:<12} by {'+'.join(http['answered_by'])}: one sentence p50 {http['one_p50_ms']} ms "
                f"(in-process {local['one_p50_ms']}), p99 {http['one_p99_ms']} ms; 32 sentences/s "
                f"{http['sent_per_s']} (in-process {local['sent_per_s']}); Server-Timing {http['timing_ms']}"
            )
    first = str(clients[0])
    result = {
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "preset": args.preset,
        "task": args.task,
        "threads": args.threads,
        "clients": clients,
        "in_process": engine,
        "http": results,
        "ratios": ratios,
        "ratio": min(r[first] for r in ratios.values()),
        "one_sentence_p50_ms": max(results[k][b]["one_p50_ms"] for k in stacks for b in backends),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
