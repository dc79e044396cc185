"""Training dynamics per component: how each weight matrix of the paper moves during training.

For each group — the shared embedding E, W_Q, W_K, W_V, W_O of encoder self-, decoder self- and cross-attention,
the FFN's W_1 and W_2, each LayerNorm — and each layer, one optimizer update gives:

    grad_norm     ‖∇W‖ of the update's gradient, before clipping (the loss per target token, Sec. 5.4)
    weight_norm   ‖W‖ before the update
    update_ratio  ‖ΔW‖ / ‖W‖, ΔW the change the optimizer made (Adam's step, Sec. 5.3)

A module's weight and bias count as one group (W_Q with b_Q; gamma with beta). Norms are L2 over all elements.
`DynamicsProbe.before` copies the weights just before an update and `DynamicsProbe.after` measures it, on the
device, in one tensor: the caller reads it back with the rest of the step (model/train/step.to_host).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from model.probes.anatomy import component_of

_SYMBOLS = {"q_proj": "W_Q", "k_proj": "W_K", "v_proj": "W_V", "out_proj": "W_O", "fc1": "W_1", "fc2": "W_2"}
STATS = ("grad_norm", "weight_norm", "update_ratio")


def group_of(name: str) -> tuple[str, int | None]:
    """(group, layer) of a parameter: "decoder.layers.2.encoder_attn.k_proj.weight" -> ("decoder.encoder_attn.W_K",
    2); "shared.weight" -> ("embeddings", None); a final LayerNorm of a pre-norm stack has no layer either."""
    component = component_of(name)  # validates the name
    if component == "embeddings":
        return "embeddings", None
    parts = name.split(".")
    if parts[1] != "layers":
        return component, None  # "encoder.layer_norm"
    stack, layer, module = parts[0], int(parts[2]), parts[3]
    if module.endswith("layer_norm"):
        return f"{stack}.{module}", layer
    return f"{stack}.{module}.{_SYMBOLS[parts[4]]}", layer  # self_attn / encoder_attn / ffn


Group = tuple[str, int | None, int | None]  # (group, layer, head): ("decoder.ffn.W_1", 2, None), ("cross", 0, 3)


@dataclass(frozen=True)
class DynamicsRecord:
    """One record at one step: groups[i] and stats[name][i] its value (None where a statistic does not apply).
    kind "weights": this module's per-matrix statistics; "attention": per-head ones (probes/attention_stats.py)."""

    kind: str
    step: int
    groups: list[Group]
    stats: dict[str, list[float | None]]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "step": self.step, "groups": [list(g) for g in self.groups], **self.stats}


class DynamicsProbe:
    """Measures one update of `model`'s parameters (tied ones counted once, as model.parameters() gives them)."""

    def __init__(self, model: nn.Module) -> None:
        named = list(model.named_parameters())
        self.params: list[Tensor] = [p for _, p in named]
        self.groups: list[Group] = []
        index: dict[Group, int] = {}
        members = []
        for name, _ in named:
            group = (*group_of(name), None)
            members.append(index.setdefault(group, len(index)))
            if len(index) > len(self.groups):
                self.groups.append(group)
        device = self.params[0].device
        self._members = torch.tensor(members, device=device)  # (P,) parameter -> group

    def before(self) -> list[Tensor]:
        """The weights as they are before the update (a copy on the device: as large as the model)."""
        return [p.detach().clone() for p in self.params]

    def _group_norms(self, norms: list[Tensor]) -> Tensor:
        squares = torch.stack(norms).double().square()  # (P,)
        total = torch.zeros(len(self.groups), dtype=torch.float64, device=squares.device)
        return total.index_add_(0, self._members, squares).sqrt()  # (G,)

    @torch.no_grad()
    def after(self, weights_before: list[Tensor], grad_norm: Tensor, clip_norm: float | None) -> Tensor:
        """(3, G) float64 on the device: grad_norm, weight_norm and update_ratio of each group, for the update that
        changed weights_before (from `before`) into the current weights. grad_norm is the update's global norm
        before clipping (what clip_grad_norm_ returned): the gradients left on the parameters were scaled by
        min(1, clip_norm / (grad_norm + 1e-6)), as clip_grad_norm_ does, and are scaled back here."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        grad = self._group_norms(list(torch._foreach_norm(grads)))
        if clip_norm is not None:
            coef = (clip_norm / (grad_norm.double() + 1e-6)).clamp(max=1.0)
            grad = grad / coef
        weight = self._group_norms(list(torch._foreach_norm(weights_before)))
        deltas = [w.detach() - b for w, b in zip(self.params, weights_before, strict=True)]
        delta = self._group_norms(list(torch._foreach_norm(deltas)))
        return torch.stack([grad, weight, delta / weight.clamp(min=1e-30)])

    def record(self, step: int, values: list[float]) -> DynamicsRecord:
        """The record of `after`'s values read back to the host (3 * G floats, row by row)."""
        g = len(self.groups)
        stats: dict[str, list[float | None]] = {s: list(values[i * g : (i + 1) * g]) for i, s in enumerate(STATS)}
        return DynamicsRecord("weights", step, list(self.groups), stats)
