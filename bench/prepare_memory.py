"""Memory a prepared translation corpus takes: synthetic pairs (5-30 words a side from 20,000 random words,
vocabulary 8000, preset small) through model.train.prepare, measured as the process's resident size.

    PYTHONPATH=. python bench/prepare_memory.py 200000

rows_mb is the raw rows, prepare_mb what prepare() added on top of them (the tokenizer, the examples, and what
the allocator kept of its transient objects), peak_mb the process's highest resident size. The last line is one
JSON object; with --before BYTES_A_PAIR (an earlier run's bytes_a_pair) it also gives ratio = before / now.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pairs", type=int)
    parser.add_argument("--before", type=float, help="bytes a pair of an earlier run, to report the ratio")
    args = parser.parse_args()
    import torch  # noqa: F401  (loaded before the baseline, as a worker has it)

    from model.train.prepare import prepare

    base = rss_mb()
    rng = random.Random(0)
    words = [f"w{rng.randrange(36**4):x}" for _ in range(20000)]
    rows = [
        (" ".join(rng.choices(words, k=rng.randint(5, 30))), " ".join(rng.choices(words, k=rng.randint(5, 30))))
        for _ in range(args.pairs)
    ]
    after_rows = rss_mb()
    start = time.time()
    data = prepare("translation", rows, None, preset="small", vocab_size=8000)
    prepare_s = time.time() - start
    prepare_mb = rss_mb() - after_rows
    result = {
        "pairs": args.pairs,
        "train_examples": data.stats["train_examples"],
        "rows_mb": round(after_rows - base),
        "prepare_mb": round(prepare_mb),
        "bytes_a_pair": round(prepare_mb * 2**20 / args.pairs),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "prepare_s": round(prepare_s, 1),
    }
    if args.before:
        result["ratio"] = round(args.before / result["bytes_a_pair"], 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
