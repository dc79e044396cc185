"""Tiny models that tests in several files train the same way, trained once a run: the first process that asks trains
and saves the model; the others (pytest-xdist's workers, which take files one by one) load the same weights. The
training is seeded, so a loaded model is the one the process would have trained itself."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from filelock import FileLock

from model.data.tokenizer import Tokenizer
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

Trained = tuple[Transformer, Tokenizer]


def _root() -> Path:
    """A folder this run's processes share (xdist gives them one run id), new for each run."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    return Path(tempfile.gettempdir()) / f"tests-trained-{run}"


@functools.cache
def trained_once(name: str, train: Callable[[], Trained]) -> Trained:
    """`train()`'s model and tokenizer, trained by one process of the run and loaded by the others (and kept in
    memory by each, as functools.cache kept it before)."""
    folder = _root() / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if (folder / "model.pt").exists():
            saved = torch.load(folder / "model.pt", weights_only=True)
            model = Transformer(ModelConfig.from_dict(saved["config"]))
            model.load_state_dict(saved["state"])
            return model.eval(), Tokenizer.load(folder)
        model, tokenizer = train()
        partial = folder.with_name(folder.name + ".partial")
        partial.mkdir(exist_ok=True)
        tokenizer.save(partial)
        torch.save({"config": model.config.to_dict(), "state": model.state_dict()}, partial / "model.pt")
        partial.rename(folder)
        return model, tokenizer
