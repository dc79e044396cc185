"""Spec of data-parallel training (model/train/distributed.py): 2 CPU processes on gloo against 1 process.

Two processes taking alternate micro-batches of one update must train exactly like one process accumulating both
(same losses, gradient norms and weights), only rank 0 may evaluate, write checkpoints and call back, and the
checkpoints must resume on either number of processes. Dropout is off so the two runs are comparable step by
step. All 2-process runs share one torch.multiprocessing.spawn to keep the test short.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from model.data.demo import reverse_task
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import load_checkpoint
from model.io.checkpoint_files import list_checkpoints, step_dir
from model.train.config import TrainConfig
from model.train.distributed import DistributedError, destroy_process_group, file_store, init_process_group
from model.train.events import Callbacks
from model.train.loop import train
from model.train.prepare import PreparedData, prepare
from model.train.settings import MAX_KEEP_CHECKPOINTS, DataSettings

WORLD = 2
REL = 1e-4


def _data(tokenizer: Tokenizer | None = None) -> PreparedData:
    rows = reverse_task(160, vocab=12, min_len=2, max_len=8, seed=0)
    return prepare(
        "translation",
        rows,
        preset="tiny",
        model_overrides={"dropout": 0.0, "attention_dropout": 0.0},
        vocab_size=300,
        settings=DataSettings(max_length=16),
        seed=0,
        tokenizer=tokenizer,
    )


def _config(grad_accum_steps: int, **overrides) -> TrainConfig:
    """Micro-batches of at most 128 padded tokens; the global batch is grad_accum_steps x processes of them."""
    base = dict(
        max_steps=6,
        grad_accum_steps=grad_accum_steps,
        max_tokens_per_batch=128,
        warmup_steps=4,
        peak_lr=1e-3,
        eval_every=3,
        checkpoint_every=3,
        eval_max_sentences=4,
        keep_checkpoints=MAX_KEEP_CHECKPOINTS,  # every checkpoint these short runs write
        seed=0,
        eval_budget=None,  # every due evaluation runs, however long it takes
    )
    return TrainConfig(**{**base, **overrides})


class Record:
    """What one process's callbacks saw."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.evals: list[int] = []
        self.checkpoints: list[int] = []

    def callbacks(self, **extra) -> Callbacks:
        return Callbacks(
            on_step=lambda i: self.steps.append(asdict(i)),
            on_eval=lambda s, _: self.evals.append(s),
            on_checkpoint=lambda c: self.checkpoints.append(c.step),
            **extra,
        )


def _rank_main(rank: int, store_path: str, tokenizer_dir: str, out: str) -> None:
    """One spawned rank: the 2-process runs, each rank writing what it saw to out/<run>-rank<r>.json."""
    torch.set_num_threads(1)
    out_dir = Path(out)
    store = file_store(store_path, WORLD)
    ctx = init_process_group(rank, WORLD, "cpu", store=store, timeout=timedelta(seconds=60))
    data = _data(Tokenizer.load(tokenizer_dir))
    try:
        for name, cfg in (("fresh", _config(1)), ("from-single", _config(1)), ("preempt", _config(1, max_steps=100))):
            record = Record()
            # "preempt": after step 4 rank 0 hears that its process is going away (rank 1's hooks are never polled)
            preempt = (lambda r=record: len(r.steps) >= 4) if name == "preempt" else None
            result = train(data, cfg, out_dir / name, record.callbacks(should_preempt=preempt), dist=ctx)
            (out_dir / f"{name}-rank{rank}.json").write_text(
                json.dumps(
                    {
                        "steps": record.steps,
                        "evals": record.evals,
                        "checkpoints": record.checkpoints,
                        "stop_reason": result.stop_reason,
                        "step": result.step,
                        "last_checkpoint": result.last_checkpoint,
                    }
                )
            )
        try:  # rank 1 with another seed has another batch order: both ranks must refuse to train
            train(data, _config(1, seed=rank), None, dist=ctx)
            error = None
        except DistributedError as e:
            error = str(e)
        (out_dir / f"mismatch-rank{rank}.json").write_text(json.dumps({"error": error}))
    finally:
        destroy_process_group()
    # As worker/training/rank.py does: leave without C++ destructors, as gloo threads still winding down after
    # destroy_process_group() abort the interpreter's exit now and then ("terminate called without an active
    # exception"), which spawn reports as a crashed rank. An exception above still reaches spawn's error file.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _read(out: Path, name: str, rank: int) -> dict:
    return json.loads((out / f"{name}-rank{rank}.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """One process with 2 micro-batches per update (the reference), then 2 processes with 1 each."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("ddp")
    data = _data()
    data.tokenizer.save(out / "tokenizer")
    single = Record()
    train(data, _config(2), out / "single", single.callbacks())
    shutil.copytree(step_dir(out / "single", 3), step_dir(out / "from-single", 3))  # resumed by 2 processes

    store = str(out / "rendezvous")  # the processes meet in this file, as a job's ranks on one host do
    mp.spawn(_rank_main, args=(store, str(out / "tokenizer"), str(out)), nprocs=WORLD, join=True)

    shutil.copytree(step_dir(out / "fresh", 3), step_dir(out / "from-ddp", 3))  # resumed by 1 process
    from_ddp = Record()
    train(_data(Tokenizer.load(out / "tokenizer")), _config(2), out / "from-ddp", from_ddp.callbacks())
    torch.set_num_threads(threads)
    return {"out": out, "single": single.steps, "from_ddp": from_ddp.steps}


def _curve(steps: list[dict]) -> list[tuple[int, float, float, int]]:
    return [(s["step"], s["loss"], s["grad_norm"], s["tokens"]) for s in steps]


def _same_curve(a: list[dict], b: list[dict]) -> None:
    assert [s[0] for s in _curve(a)] == [s[0] for s in _curve(b)]
    assert [s[3] for s in _curve(a)] == [s[3] for s in _curve(b)], "another global batch"
    assert [s[1] for s in _curve(a)] == pytest.approx([s[1] for s in _curve(b)], rel=REL), "losses differ"
    assert [s[2] for s in _curve(a)] == pytest.approx([s[2] for s in _curve(b)], rel=REL), "gradient norms differ"


def test_two_processes_train_like_one_process_with_the_same_global_batch(runs):
    """Fault: per-rank loss normalisation, a missing token all-reduce or another batch order. Pass: losses,
    gradient norms (Adam alone would hide a gradient scale) and token counts of steps 1-6 match the 1-process run
    accumulating both micro-batches within 1e-4, and so do the final weights and the data position."""
    out = runs["out"]
    fresh = _read(out, "fresh", 0)
    _same_curve(fresh["steps"], runs["single"])
    assert fresh["stop_reason"] == "max_steps" and fresh["step"] == 6
    a, b = load_checkpoint(step_dir(out / "fresh", 6)), load_checkpoint(step_dir(out / "single", 6))
    assert all(torch.allclose(a.model_state[k], b.model_state[k], rtol=1e-4, atol=1e-6) for k in b.model_state)
    assert a.trainer_state["batcher"] == b.trainer_state["batcher"]


def test_only_rank_0_evaluates_writes_checkpoints_and_calls_back(runs):
    """Fault: every rank writing checkpoints or reporting. Pass: rank 0 saw steps 1-6, evaluations and
    checkpoints at 3 and 6; rank 1's callbacks never ran and it names no checkpoint; the folder holds exactly
    the two checkpoints, whole (hashes verified), keyed like a 1-process model (no `module.` prefixes)."""
    out = runs["out"]
    rank0, rank1 = _read(out, "fresh", 0), _read(out, "fresh", 1)
    assert [s["step"] for s in rank0["steps"]] == [1, 2, 3, 4, 5, 6]
    assert rank0["evals"] == [3, 6] and rank0["checkpoints"] == [3, 6]
    assert rank0["last_checkpoint"] == str(step_dir(out / "fresh", 6))
    assert rank1["steps"] == rank1["evals"] == rank1["checkpoints"] == [] and rank1["last_checkpoint"] is None
    assert sorted(p.name for p in (out / "fresh").iterdir()) == [step_dir(out, 3).name, step_dir(out, 6).name]
    state = load_checkpoint(step_dir(out / "fresh", 6)).model_state
    assert set(state) == set(load_checkpoint(step_dir(out / "single", 6)).model_state)
    assert not any(k.startswith("module.") for k in state)


def test_a_two_process_checkpoint_resumes_in_one_process_on_the_same_curve(runs):
    """Pass: 1 process (2 micro-batches per update) resumed from the 2-process checkpoint of step 3 trains steps
    4-6 as the uninterrupted 1-process run did."""
    assert [s["step"] for s in runs["from_ddp"]] == [4, 5, 6]
    _same_curve(runs["from_ddp"], runs["single"][3:])


def test_a_one_process_checkpoint_resumes_in_two_processes_on_the_same_curve(runs):
    """Pass: 2 processes resumed from the 1-process checkpoint of step 3 train steps 4-6 as 1 process did."""
    resumed = _read(runs["out"], "from-single", 0)
    assert [s["step"] for s in resumed["steps"]] == [4, 5, 6]
    _same_curve(resumed["steps"], runs["single"][3:])


def test_a_stop_seen_by_rank_0_alone_stops_every_rank_at_the_same_step(runs):
    """Fault: rank 1 never polls should_preempt, so without agreement it would run on (and hang). Pass: both
    ranks stop at step 4 as "preempted", and rank 0 checkpointed step 4."""
    out = runs["out"]
    rank0, rank1 = _read(out, "preempt", 0), _read(out, "preempt", 1)
    assert (rank0["stop_reason"], rank0["step"]) == (rank1["stop_reason"], rank1["step"]) == ("preempted", 4)
    assert [p.name for p in list_checkpoints(out / "preempt")] == [step_dir(out, 3).name, step_dir(out, 4).name]


def test_ranks_with_different_training_data_refuse_to_train(runs):
    """Fault: a rank prepared its data differently (here another seed, so another batch order). Pass: every rank
    raises DistributedError naming rank 1 before any update."""
    for rank in range(WORLD):
        error = _read(runs["out"], "mismatch", rank)["error"]
        assert error is not None and "rank(s) [1]" in error and "training data" in error
