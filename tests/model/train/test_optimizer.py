"""Adam as in the paper, fused into one kernel where the parameters live on a GPU."""

from __future__ import annotations

import torch

from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from model.train import step
from model.train.config import TrainConfig


class _OnGpu(torch.nn.Module):
    """Parameters that say they live on a GPU, as a model moved to cuda:0 would (no GPU here)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(2))

    def parameters(self, recurse: bool = True):
        class Param:
            device = torch.device("cuda", 0)

        yield Param()


def test_adam_is_fused_on_a_gpu_and_plain_on_a_cpu(monkeypatch):
    made: list[dict] = []
    monkeypatch.setattr(step.torch.optim, "Adam", lambda params, **kwargs: made.append(kwargs))
    step.build_optimizer(_OnGpu(), TrainConfig())  # type: ignore[arg-type]
    step.build_optimizer(Transformer(ModelConfig.from_preset("tiny", 40)), TrainConfig())
    assert [m["fused"] for m in made] == [True, None]  # None: torch's own choice (foreach) on a CPU
    assert made[0]["betas"] == (0.9, 0.98) and made[0]["eps"] == 1e-9  # the paper's Sec. 5.3
