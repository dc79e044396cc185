"""Adam as in the paper, fused into one kernel on a GPU and on a CPU."""

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


def test_adam_is_fused_on_a_gpu_and_on_a_cpu(monkeypatch):
    made: list[dict] = []
    monkeypatch.setattr(step.torch.optim, "Adam", lambda params, **kwargs: made.append(kwargs))
    step.build_optimizer(_OnGpu(), TrainConfig())  # type: ignore[arg-type]
    step.build_optimizer(Transformer(ModelConfig.from_preset("tiny", 40)), TrainConfig())
    assert [m["fused"] for m in made] == [True, True]
    assert made[0]["betas"] == (0.9, 0.98) and made[0]["eps"] == 1e-9  # the paper's Sec. 5.3


def test_fused_adam_on_a_cpu_takes_the_steps_torchs_loop_takes():
    """The fused kernel against torch's per-parameter loop (its CPU default), weight decay included: same weights
    after five steps of the same gradients, to float32 rounding."""
    torch.manual_seed(0)
    models = [Transformer(ModelConfig.from_preset("tiny", 40)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    start = [p.detach().clone() for p in models[0].parameters()]
    config = TrainConfig(weight_decay=0.01)
    fused = step.build_optimizer(models[0], config)
    loop = torch.optim.Adam(
        models[1].parameters(), lr=0.0, betas=config.adam_betas, eps=config.adam_eps, weight_decay=0.01, foreach=False
    )
    assert fused.defaults["fused"] and not loop.defaults["fused"]
    for i in range(5):
        grads = [torch.randn_like(p) for p in models[0].parameters()]
        for optimizer, model in ((fused, models[0]), (loop, models[1])):
            for group in optimizer.param_groups:
                group["lr"] = 1e-3 * (i + 1)
            for p, g in zip(model.parameters(), grads):
                p.grad = g.clone()
            optimizer.step()
    apart = max((a - b).abs().max().item() for a, b in zip(models[0].parameters(), models[1].parameters()))
    moved = min((a - b).abs().max().item() for a, b in zip(models[0].parameters(), start))
    assert apart < 1e-6 and moved > 1e-3, (apart, moved)  # every parameter moved, both alike
