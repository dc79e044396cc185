"""A corpus of real size through the service: a 1.5 GB, 5M-pair upload streamed to the artifact store, then parsed
by a data worker; the API's and the worker's peak memory (the kernel's VmHWM of each process) measured.

    python bench/large_upload.py                      # 5M pairs of 5-36 words, about 1.5 GB of TSV
    python bench/large_upload.py --pairs 200000 --gzip
    python bench/large_upload.py --upload-only        # the API's side alone: stop once the upload is stored

The service runs on its embedded default (SQLite, the SQLite broker, a local artifact store), the API under uvicorn
and one worker of the data queue, as `make run` starts them. The client streams the file (httpx's multipart encoder
reads it a chunk at a time). The last line is one JSON object; `ratio` is the API's memory budget over its peak
(300 MB / peak RSS during the upload: above 1 is within budget).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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

API_BUDGET_MB = 300


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def write_corpus(path: Path, pairs: int, seed: int, compress: bool, max_words: int = 36) -> int:
    """TSV of `pairs` made-up sentence pairs of 5-max_words words (36: about 300 bytes a pair); returns the bytes
    written."""
    rng = random.Random(seed)
    words = [f"w{rng.randrange(36**4):x}" for _ in range(20000)]
    opener = gzip.open if compress else open
    with opener(path, "wt", encoding="utf-8") as f:  # type: ignore[operator]
        for _ in range(pairs):
            source = " ".join(rng.choices(words, k=rng.randint(5, max_words)))
            target = " ".join(rng.choices(words, k=rng.randint(5, max_words)))
            f.write(f"{source}\t{target}\n")
    return path.stat().st_size


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=5_000_000)
    p.add_argument("--gzip", action="store_true", help="upload it gzip-compressed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-words", type=int, default=36, help="longest sentence in words (30 gave 1.28 GB)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the worker's parsing")
    p.add_argument("--upload-only", action="store_true", help="measure the upload, not the worker's parsing")
    args = p.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="large-upload-"))
    corpus = tmp / ("corpus.tsv.gz" if args.gzip else "corpus.tsv")
    t0 = time.perf_counter()
    size = write_corpus(corpus, args.pairs, args.seed, args.gzip, args.max_words)
    print(f"wrote {size / 1e6:.0f} MB ({args.pairs:,} pairs) in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    env = service_env(DATA_DIR=str(tmp / "var"), RATE_LIMIT_PER_MINUTE="1000000")
    run_cli(env, "migrate")
    processes = Processes(tmp)
    url = processes.start_api(env, free_port())
    worker = processes.start_worker(env, "data", "data-worker", pool="threads", concurrency=1)
    try:
        wait_for(healthy_with_workers(url, 1), timeout=START_TIMEOUT_S, what="the service")
        api_pid = processes.children["api"].pid
        api_before = peak_rss_mb(api_pid)
        key = create_key(env, "bench")
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=3600)
        t0 = time.perf_counter()
        with open(corpus, "rb") as f:
            response = client.post(
                "/v1/datasets", data={"name": corpus.name, "kind": "parallel"}, files={"file": (corpus.name, f)}
            )
        upload_s = time.perf_counter() - t0
        response.raise_for_status()
        api_peak = peak_rss_mb(api_pid)
        dataset_id = response.json()["id"]
        result: dict[str, Any] = {
            "bench": "large_upload",
            "pairs": args.pairs,
            "gzip": args.gzip,
            "file_mb": round(size / 1e6, 1),
            "upload_s": round(upload_s, 1),
            "upload_mb_per_s": round(size / 1e6 / upload_s, 1),
            "api_rss_before_mb": round(api_before, 1),
            "api_peak_rss_mb": round(api_peak, 1),
        }
        if not args.upload_only:
            t0 = time.perf_counter()
            dataset = wait_for(
                lambda: (d := client.get(f"/v1/datasets/{dataset_id}").json())["status"] != "processing" and d,
                timeout=args.timeout,
                what="the dataset to be parsed",
                interval=1.0,
            )
            parse_s = time.perf_counter() - t0
            result |= {
                "status": dataset["status"],
                "error": dataset.get("error"),
                "rows": dataset["rows"],
                "parse_s": round(parse_s, 1),
                "parse_pairs_per_s": round(dataset["rows"] / parse_s) if parse_s else None,
                "worker_peak_rss_mb": round(peak_rss_mb(worker.pid), 1),
            }
        result |= {"api_budget_mb": API_BUDGET_MB, "ratio": round(API_BUDGET_MB / api_peak, 3)}
    finally:
        processes.stop()
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
