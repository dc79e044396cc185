"""The random generators' states (Python, torch CPU, CUDA) as JSON-friendly lists, for an exact resume."""

from __future__ import annotations

import random
from typing import Any

import torch


def capture_rng_state() -> dict[str, Any]:
    """Python, torch CPU and (if present) CUDA generator states as JSON-friendly lists of ints."""
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {"python": [version, list(internal), gauss], "torch": torch.get_rng_state().tolist()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]  # torch: untyped
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        # Saved on a host with any number of GPUs, resumed on one with any other: devices both hosts have get
        # their saved state; set_rng_state_all would raise IndexError for a GPU this host lacks.
        for index, saved in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(torch.tensor(saved, dtype=torch.uint8), index)
