"""train(): one run from prepared data, as the service and the tests start it: the model built (seeded by the
config), a fine-tuned model's starting weights, the newest good checkpoint to resume from chosen (data-parallel: by
rank 0, for all), then the Trainer (model/train/trainer.py) runs the updates. Typical use:

    data = prepare("translation", pairs, preset="small", vocab_size=8000)
    result = train(data, TrainConfig(max_steps=20000), checkpoint_root, Callbacks(on_step=...))
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from model.io.checkpoint import resume_point
from model.io.checkpoint_files import remove_stale_temp_dirs
from model.nn.transformer import Transformer
from model.train.config import TrainConfig
from model.train.events import Callbacks, TrainResult
from model.train.prepare import PreparedData
from model.train.trainer import Trainer

if TYPE_CHECKING:
    from model.train.distributed import DistContext


def train(
    data: PreparedData,
    config: TrainConfig,
    checkpoint_root: str | Path | None = None,
    callbacks: Callbacks | None = None,
    resume: bool = True,
    meta: dict[str, Any] | None = None,
    dist: DistContext | None = None,
) -> TrainResult:
    """Build the model (seeded by config.seed) and train it; with resume, continue from the newest good step
    checkpoint under checkpoint_root (newer, corrupted ones are deleted, as the run will rewrite them).

    To resume a job, call prepare() with the same rows and seed and tokenizer=Tokenizer.load(checkpoint), then
    train() with the same config and checkpoint_root. Data-parallel (dist, see model/train/distributed.py): every rank
    calls it with the same arguments but its own config.device; rank 0 picks the checkpoint all resume from.
    """
    torch.manual_seed(config.seed)
    model = Transformer(data.model_config)
    if data.init_state is not None:  # fine-tuning: a checkpoint of this run, if any, still wins below
        model.load_state_dict(data.init_state)
    trainer = Trainer(
        model,
        data.tokenizer,
        data.objective,
        data.train_examples,
        data.valid_examples,
        config,
        checkpoint_root,
        callbacks,
        meta,
        dist,
        valid_groups=data.valid_groups,
    )
    if checkpoint_root is not None:
        good = resume_point(checkpoint_root) if trainer.is_main and resume else None
        if trainer.is_main and not resume:
            remove_stale_temp_dirs(checkpoint_root)
        if dist is not None:  # by name: each host's ranks read their own copy of the job's checkpoints
            name = dist.broadcast(None if good is None else Path(good).name)
            good = None if name is None else Path(checkpoint_root) / name
        if good is not None:
            trainer.restore(good)
    return trainer.fit()
