"""The beam search's step replayed as a CUDA graph: one launch per step instead of a few hundred.

On a GPU a step of a small model is bound by kernel launches (about 4 ms per step on an H200 whatever the
batch, docs/gpu.md). From the second step on, the step (model/decode/beam_state.py) has static shapes, writes
its state in place and never reads back to the host, so it can be recorded once per search and replayed.
The first steps after the first run eagerly (warm-up: kernels chosen, workspaces allocated), then the next
one is recorded; if recording fails the search goes on eagerly and logs why. Unmeasured: no GPU has run it
yet (docs/gpu.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)

Step = Callable[[], None]
WARMUP_STEPS = 2  # eager steps before recording, as torch.cuda.graphs' documentation asks for at least one


def use_graph(device: torch.device, wanted: bool, static_cache: bool, compiled: bool) -> bool:
    """Whether to record the step: on a GPU, when asked, with the static KV cache (a grown cache changes
    shape every step) and with eager layers (torch.compile's dynamic shapes and graphs do not mix)."""
    return wanted and device.type == "cuda" and static_cache and not compiled


def warm_up(step: Step, device: torch.device) -> None:
    """One eager step; on a GPU on a side stream, as graph capture expects of the work before it."""
    if device.type != "cuda":
        step()
        return
    side = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream(device).wait_stream(side)


def record(step: Step, device: torch.device) -> Step:
    """The step recorded as a CUDA graph (recording runs nothing); returns what replays it."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


class StepRunner:
    """Runs the step eagerly, or, when graphs are used, WARMUP_STEPS times eagerly and then as a graph."""

    def __init__(self, step: Step, device: torch.device, graphs: bool) -> None:
        self.step, self.device, self.graphs = step, device, graphs
        self.replay: Step | None = None
        self.warmed = 0

    def __call__(self) -> None:
        if self.replay is not None:
            self.replay()
        elif not self.graphs:
            self.step()
        elif self.warmed < WARMUP_STEPS:
            warm_up(self.step, self.device)
            self.warmed += 1
        else:
            try:
                self.replay = record(self.step, self.device)
            except Exception as exc:  # noqa: BLE001  # any capture failure: the search goes on eagerly
                log.warning("CUDA graph capture of the beam search step failed, running eagerly: %s: %s",
                            type(exc).__name__, exc)  # fmt: skip
                self.graphs = False
                self.step()
                return
            self.replay()
