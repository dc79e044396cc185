"""What a beam search costs at a shape it has run before and at one it has not: the decoders' attention kernels
(every backend of scaled_dot_product_attention but cuDNN's, model/decode/greedy.py) against PyTorch's own choice,
each with the step replayed as a CUDA graph and eagerly.

    .venv/bin/python bench/decode_shapes.py --device cuda [--preset base] [--rounds 6] [--fresh 6]

The model is trained for a minute on the numbers task (bench/serve_latency.py) and served as an inference worker
serves it (SERVING_DTYPE: bf16 on a GPU); beam 4. For each kernel choice and graph setting: the median of --rounds
searches of 1, 32 and 256 sentences after a first one (which is reported too), and the first search at each of
--fresh batch sizes no case has run before (an inference worker's micro-batches change size all the time). cuDNN
builds an attention plan for each new shape: on an H200 a first search at a new size took 375-386 ms with it and
30-35 ms without. Prints one JSON object last; ratio = the median first search at a new size under PyTorch's
choice / under the decoders' (higher: the decoders pay less for a new shape).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.nn.attention import SDPBackend

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.serve_http import WORKLOADS  # noqa: E402
from bench.serve_latency import train_small_model  # noqa: E402
from model.data.batching import pad_sequences  # noqa: E402
from model.decode import greedy  # noqa: E402
from model.decode.beam import beam_search  # noqa: E402
from model.decode.queries import sources_ids  # noqa: E402

EVERY_BACKEND = [
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
    SDPBackend.CUDNN_ATTENTION,
]
KERNELS = {"decoders": None, "pytorch_default": EVERY_BACKEND}


@contextlib.contextmanager
def kernels(backends: list[SDPBackend] | None) -> Iterator[None]:
    """The decoders' choice (None), or the given backends in its place (every one: PyTorch's own choice)."""
    if backends is None:
        yield
        return
    chosen = greedy.DECODING_ATTENTION
    greedy.DECODING_ATTENTION = backends
    try:
        yield
    finally:
        greedy.DECODING_ATTENTION = chosen


def timed_search(model: Any, src: torch.Tensor, graphs: bool) -> float:
    if src.device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.inference_mode():
        beam_search(model, src, 4, cuda_graphs=graphs)
    if src.device.type == "cuda":
        torch.cuda.synchronize()
    return round((time.perf_counter() - t0) * 1000, 2)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--preset", default="base")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--fresh", type=int, default=6, help="new batch sizes timed at their first search, per case")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    from app.core.settings import get_settings
    from model.io.checkpoint import load_model
    from worker.serving.model_cache import prepare_for_serving

    device = torch.device(args.device)
    model_dir = train_small_model(Path(tempfile.mkdtemp(prefix="decode-shapes-")), args.preset, args.device)
    model, tokenizer, _ = load_model(model_dir, device)
    model = prepare_for_serving(model, device, get_settings())

    def sources(texts: list[str]) -> torch.Tensor:
        return pad_sequences(sources_ids(model, tokenizer, texts), model.config.pad_id).to(device)

    numbers = WORKLOADS["numbers"]
    pool = numbers.texts * 16  # 512 texts: each fresh size takes its first n
    timed_search(model, sources(pool[:2]), False)  # the process's own first-call costs (CUDA, cuBLAS), in no case
    sizes = iter(range(3, 3 + 2 * args.fresh * len(KERNELS) * 2, 2))  # odd sizes from 3, a new one per search
    cases: dict[str, Any] = {}
    for name, backends in KERNELS.items():
        with kernels(backends):
            for graphs in (True, False):
                case: dict[str, Any] = {}
                for label, texts in (("one", [numbers.sentence]), ("b32", numbers.texts), ("b256", numbers.texts * 8)):
                    src = sources(texts)
                    first = timed_search(model, src, graphs)
                    runs = [timed_search(model, src, graphs) for _ in range(args.rounds)]
                    case[label] = {"first_ms": first, "median_ms": statistics.median(runs)}
                new_sizes = [next(sizes) for _ in range(args.fresh)]
                fresh = {str(n): timed_search(model, sources(pool[:n]), graphs) for n in new_sizes}
                case["fresh_sizes_first_ms"] = fresh
                case["fresh_median_ms"] = statistics.median(fresh.values())
                cases[f"{name}/{'graphs' if graphs else 'eager'}"] = case
                print(f"{name:<16} {'graphs' if graphs else 'eager':<7} {json.dumps(case)}", flush=True)
    ratio = statistics.median(cases[f"pytorch_default/{g}"]["fresh_median_ms"] for g in ("graphs", "eager")) / (
        statistics.median(cases[f"decoders/{g}"]["fresh_median_ms"] for g in ("graphs", "eager"))
    )
    result = {
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "preset": args.preset,
        "dtype": str(next(model.parameters()).dtype),
        "torch": torch.__version__,
        "cases": cases,
        "ratio": round(ratio, 3),
    }
    print(json.dumps(result))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
