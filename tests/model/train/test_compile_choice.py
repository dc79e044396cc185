"""The rule that decides training.compile when a job leaves it out (model/train/compile_choice.py)."""

from __future__ import annotations

from model.train.compile_choice import (
    COMPILE_SECONDS_PER_GRAPH,
    COMPILED_SPEEDUP,
    DATA_PARALLEL_GRAPHS,
    choose_compile,
    graphs_for,
)

BREAK_EVEN = COMPILE_SECONDS_PER_GRAPH / (1 - 1 / COMPILED_SPEEDUP)  # training seconds that win back one graph


def test_a_cpu_never_compiles_however_long_the_run():
    choice = choose_compile("cpu", 10**7, 1)
    assert choice.compile is False and "CPU" in choice.reason


def test_a_gpu_compiles_exactly_when_the_saved_time_covers_the_graphs():
    """Fault: the rule ignores the graphs or the speed-up. Pass: just above break-even (graphs x seconds per graph
    won back at COMPILED_SPEEDUP) compiles, just below does not, and more graphs need a longer run."""
    assert choose_compile("cuda", 1.01 * BREAK_EVEN * 4, 4).compile is True
    assert choose_compile("cuda", 0.99 * BREAK_EVEN * 4, 4).compile is False
    assert choose_compile("cuda", 1.01 * BREAK_EVEN * 4, 8).compile is False
    on = choose_compile("cuda", 3600, 4)
    assert on.reason.startswith("on:") and "4 graph(s)" in on.reason and on.training_seconds == 3600


def test_an_unknown_run_length_does_not_compile():
    assert choose_compile("cuda", None, 3).compile is False


def test_graphs_count_the_length_buckets_or_the_compiled_layers():
    assert graphs_for([8, 16, 16, 24, 8], data_parallel=False) == 3
    assert graphs_for([], data_parallel=False) == 1
    assert graphs_for([8, 16, 24], data_parallel=True) == DATA_PARALLEL_GRAPHS
