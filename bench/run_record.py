"""Where a benchmark's final JSON goes, and the facts about the machine it carries.

On a GPU every run is kept: bench/results/<bench>-<device>-<date>.json unless --out names another file. On a
CPU a file is written only when --out is given (CPU runs are quick to repeat and mostly smoke tests).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import torch

from bench.gpu_info import DeviceInfo

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def result_path(bench: str, device_kind: str, out: Path | None, today: dt.date | None = None) -> Path | None:
    """--out when given; else bench/results/<bench>-<device_kind>-<YYYY-MM-DD>.json on a GPU; else None."""
    if out is not None:
        return out
    if device_kind != "cuda":
        return None
    day = today or dt.datetime.now(dt.UTC).date()
    return RESULTS_DIR / f"{bench}-{device_kind}-{day.isoformat()}.json"


def environment(device: str, info: DeviceInfo) -> dict[str, Any]:
    """Device, its name and memory, and the versions that decide the kernels (torch, CUDA, CTranslate2)."""
    import ctranslate2
    import transformers

    return {
        "device": device,
        "device_kind": info.device_kind,
        "device_name": info.device_name,
        "device_memory_total": info.device_memory_total,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "ctranslate2": ctranslate2.__version__,
    }


def write_result(result: dict[str, Any], path: Path | None) -> None:
    """The same JSON the benchmark prints last, written to `path` (folders created) when there is one."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written to {path}")
