"""Memory a prepared translation corpus takes: synthetic pairs (5-30 words a side from 20,000 random words,
vocabulary 8000, preset small) through model.train.prepare, measured as the process's resident size.

    PYTHONPATH=. python bench/prepare_memory.py 200000 [--rows list|disk]

rows_mb is the raw rows, prepare_mb what prepare() added on top of them (the tokenizer, the examples, and what
the allocator kept of its transient objects), peak_mb the process's highest resident size. --rows list holds the
rows as a list of (source, target) strings, as jobs did; --rows disk (the default) writes them as a job reads its
dataset now (model/data/text_rows.py: a memory-mapped temporary file, never a list). The last line is one JSON
object; with --before PEAK_MB (an earlier run's peak_mb, e.g. of --rows list) it also gives ratio = before / now.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import random
import resource
import time


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def trimmed_rss_mb() -> float:
    """The resident size once the C allocator has returned what it keeps of freed objects (glibc's malloc_trim):
    what the process holds, not what it once touched."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_mb()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", type=int)
    parser.add_argument("--rows", choices=["list", "disk"], default="disk", help="how the raw rows are held")
    parser.add_argument("--before", type=float, help="peak_mb of an earlier run, to report the ratio")
    args = parser.parse_args()
    import torch  # noqa: F401  (loaded before the baseline, as a worker has it)

    from model.data.text_rows import TextRows
    from model.train.prepare import prepare

    base = trimmed_rss_mb()
    rng = random.Random(0)
    words = [f"w{rng.randrange(36**4):x}" for _ in range(20000)]
    generated = (
        (" ".join(rng.choices(words, k=rng.randint(5, 30))), " ".join(rng.choices(words, k=rng.randint(5, 30))))
        for _ in range(args.pairs)
    )
    rows = list(generated) if args.rows == "list" else TextRows.write(generated, 2)
    after_rows = trimmed_rss_mb()
    start = time.time()
    data = prepare("translation", rows, None, preset="small", vocab_size=8000)
    prepare_s = time.time() - start
    prepare_mb = trimmed_rss_mb() - after_rows
    result = {
        "pairs": args.pairs,
        "rows": args.rows,
        "train_examples": data.stats["train_examples"],
        "base_mb": round(base),
        "rows_mb": round(after_rows - base),
        "prepare_mb": round(prepare_mb),
        "bytes_a_pair": round(prepare_mb * 2**20 / args.pairs),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "prepare_s": round(prepare_s, 1),
        "examples_mb": round(getattr(data.train_examples, "nbytes", 0) / 2**20, 1),  # an ExampleStore's arrays
    }
    if args.before:
        result["ratio"] = round(args.before / result["peak_mb"], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
