"""Whether a job's steps are compiled (training.compile left out: null), chosen by the worker that first runs it.

Compiling pays on a GPU and only once the run is long enough: each length bucket the batches reach compiles its
own graph before its first step (model/train/step_graph.py), and the time that costs must come back as faster
steps. The rule: compile when the training time saved, training_seconds x (1 - 1 / COMPILED_SPEEDUP), is at least
the compile time, graphs x COMPILE_SECONDS_PER_GRAPH. On a CPU never (a compiled step is not faster there, and its
compile time is minutes on two cores).

The constants come from the GPU suite (bench/results/gpu_suite-cuda-*-2026-11-27*.json): `base` at 25k-token
batches trained 1.32x faster compiled than eager on an H100 (1.49x against 1.13x MarianMTModel's tokens/s) and
1.35x on an H200 (1.38x against 1.02x); a graph of `base` compiles in tens of seconds there. A data-parallel job
compiles each layer with dynamic shapes instead (model/nn/compile.py): a couple of graphs whatever the lengths.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

COMPILED_SPEEDUP = 1.32  # compiled / eager tokens/s of `base` on an H100 (1.35 on an H200)
COMPILE_SECONDS_PER_GRAPH = 30.0  # one length bucket's graph of `base`, forward and backward, on a GPU
DATA_PARALLEL_GRAPHS = 2  # compiled layers: a static first graph, then one with dynamic shapes


@dataclass(frozen=True)
class CompileChoice:
    compile: bool
    reason: str
    graphs: int | None = None  # graphs the run would compile
    training_seconds: float | None = None  # how long the run trains, as the budget or the measured steps say


def graphs_for(bucket_lengths: Iterable[int], data_parallel: bool) -> int:
    """Graphs a run compiles: one per length bucket its batches reach, or DATA_PARALLEL_GRAPHS for compiled layers."""
    return DATA_PARALLEL_GRAPHS if data_parallel else max(1, len(set(bucket_lengths)))


def choose_compile(device_type: str, training_seconds: float | None, graphs: int) -> CompileChoice:
    """On a GPU, compile when the time saved over training_seconds covers compiling `graphs` graphs."""
    if device_type != "cuda":
        return CompileChoice(False, f"off on a {device_type.upper()} worker: compiled steps pay on a GPU only")
    if training_seconds is None:
        return CompileChoice(False, "off: the run's length is unknown (no time budget and no measured steps)", graphs)
    cost = graphs * COMPILE_SECONDS_PER_GRAPH
    saved = training_seconds * (1 - 1 / COMPILED_SPEEDUP)
    figures = (
        f"{graphs} graph(s) x ~{COMPILE_SECONDS_PER_GRAPH:.0f} s to compile against ~{saved:.0f} s saved "
        f"over {training_seconds / 60:.1f} minutes of training at {COMPILED_SPEEDUP}x"
    )
    if saved >= cost:
        return CompileChoice(True, f"on: {figures}", graphs, round(training_seconds, 1))
    return CompileChoice(False, f"off: {figures}", graphs, round(training_seconds, 1))
