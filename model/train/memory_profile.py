"""What one training step holds in memory, measured by kind, next to model/probes/anatomy.py's arithmetic estimate (both
for the measured batch and, as POST /v1/estimate gives it, for the job's max_tokens_per_batch).

One update (model/train/step.py update_on_device, the trainer's own step, under the configured autocast) runs on a fresh
copy of the model on the job's device, with the job's first batch. Its Adam moments exist before it starts, as at
every step after the first. The copy runs eager even when training.compile compiles the job's layers, and alone
even in a data-parallel job (rank 0 measures it, without DDP's gradient buckets). By kind:
- weights, gradients, Adam moments (exp_avg, exp_avg_sq): the bytes of those tensors;
- autocast weights: under bf16 autocast, the bf16 copies of the weights that the backward pass keeps;
- activations: every tensor autograd saves for the backward pass (torch.autograd.graph.saved_tensors_hooks),
  counted once per storage, under the module saving it (forward pre/post hooks keep the current one):
  attention_softmax (the softmax output of an attention layer, B x heads x T_q x T_k), attention_scores (any
  other tensor of that shape: scores, dropout masks), ffn_hidden (d_ff-wide tensors inside the FFN), logits
  (vocabulary-wide tensors: the loss's log-softmax; none where the projection and the loss are fused,
  model/train/linear_loss.py, whose saved gradients count as other), other (layer inputs, Q, K, V, the fused
  attention kernel's log-sum-exp, LayerNorm statistics, ids, masks). A query (B, heads, T_q, d_k) whose d_k
  equals the key length has the attention matrix's shape and counts as attention_scores;
- temporary: the rest of the peak (the logits themselves, gradient buffers, kernels' workspaces, the
  positional-encoding tables).
The peak: on CUDA, torch.cuda.max_memory_allocated during the step; on a CPU, the largest sum of the
profiler's allocation events minus its free events during the step (torch.profiler, profile_memory=True).
Both add the bytes held before the step starts (weights, buffers, Adam state), counted tensor by tensor.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor, nn
from torch.profiler import DeviceType, ProfilerActivity, profile

from model.data.batching import Batch
from model.nn.attention import MultiHeadAttention
from model.nn.config import ModelConfig
from model.nn.layers import PositionWiseFeedForward
from model.nn.transformer import Transformer
from model.probes.anatomy import count_parameters, estimate_memory
from model.train.config import TrainConfig
from model.train.rng_state import capture_rng_state, restore_rng_state
from model.train.step import autocast_for, build_optimizer, update_on_device

ACTIVATION_KINDS = ("attention_scores", "attention_softmax", "ffn_hidden", "logits", "other")
MiB = 2**20


class PeakMeter(Protocol):
    device: torch.device

    def measure(self, run: Callable[[], object]) -> int:
        """Run `run`; return the most bytes allocated during it beyond those allocated before it."""
        ...


class CudaPeak:
    """torch.cuda's allocator statistics: max_memory_allocated since a reset, less memory_allocated before."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def measure(self, run: Callable[[], object]) -> int:
        torch.cuda.synchronize(self.device)
        before = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        run()
        torch.cuda.synchronize(self.device)
        return int(torch.cuda.max_memory_allocated(self.device)) - int(before)


class CpuPeak:
    """The profiler's CPU memory events (one per allocation, +bytes, and per free, -bytes), summed in time order:
    their largest running sum is the peak above what was allocated before. torch has no CPU counterpart of
    max_memory_allocated; this sees every allocation of torch's CPU allocator, nothing outside it."""

    device = torch.device("cpu")

    def measure(self, run: Callable[[], object]) -> int:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            run()
        events = [
            (e.start_ns(), i, e.nbytes())
            for i, e in enumerate(prof.profiler.kineto_results.events())
            if e.name() == "[memory]" and e.device_type() == DeviceType.CPU
        ]
        level = peak = 0
        for _, _, nbytes in sorted(events):
            level += nbytes
            peak = max(peak, level)
        return peak


def peak_meter(device: torch.device) -> PeakMeter:
    return CudaPeak(device) if device.type == "cuda" else CpuPeak()


def storage_bytes(tensors: Iterable[Tensor]) -> int:
    """Bytes of the distinct storages behind tensors (views and repeats counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(n for ptr, n in seen.items() if ptr)


# Autograd nodes of a cast or a view: a tensor reaching a parameter through these alone is that parameter's copy.
_COPY_OR_VIEW = {"ToCopyBackward0", "TBackward0", "TransposeBackward0", "ViewBackward0", "UnsafeViewBackward0",
                 "PermuteBackward0", "ExpandBackward0", "AliasBackward0", "ReshapeAliasBackward0"}  # fmt: skip


def _from_parameter(t: Tensor) -> bool:
    """Whether t is a whole parameter cast or viewed (autocast's bf16 weights): its graph reaches the parameter
    through casts and views only, and it has as many elements."""
    fn = t.grad_fn
    while fn is not None and type(fn).__name__ in _COPY_OR_VIEW:
        inputs = [f for f, _ in fn.next_functions if f is not None]
        fn = inputs[0] if len(inputs) == 1 else None
    variable = getattr(fn, "variable", None)
    return type(fn).__name__ == "AccumulateGrad" and variable is not None and variable.numel() == t.numel()


@dataclass
class SavedTensors:
    """Bytes autograd saves for the backward pass, once per storage, by kind (see the module docstring)."""

    model: Transformer
    bytes: Counter[str] = field(default_factory=Counter)
    _seen: set[int] = field(default_factory=set)
    _stack: list[tuple[nn.Module, int, int]] = field(default_factory=list)  # (module, T_q, T_k)

    def __post_init__(self) -> None:
        self._seen = {p.untyped_storage().data_ptr() for p in self.model.parameters()}  # weights: their own kind
        self._handles = []
        for module in self.model.modules():
            if isinstance(module, (MultiHeadAttention, PositionWiseFeedForward)):
                self._handles.append(module.register_forward_pre_hook(self._enter, with_kwargs=True))
                self._handles.append(module.register_forward_hook(self._leave))

    def _enter(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        queries = args[0]  # (B, T_q, d_model)
        keys = args[1] if len(args) > 1 and args[1] is not None else kwargs.get("key_value_states")
        t_k = (keys if keys is not None else queries).size(1)
        self._stack.append((module, queries.size(1), t_k))

    def _leave(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        self._stack.pop()

    def pack(self, t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() in self._seen or storage.nbytes() == 0:
            return t
        self._seen.add(storage.data_ptr())  # kept alive by the graph until backward: no address is reused
        self.bytes[self._kind(t)] += storage.nbytes()
        return t

    def _kind(self, t: Tensor) -> str:
        if _from_parameter(t):
            return "autocast_weights"
        module, t_q, t_k = self._stack[-1] if self._stack else (None, 0, 0)
        if isinstance(module, MultiHeadAttention) and t.dim() == 4 and tuple(t.shape[1:]) == (module.n_heads, t_q, t_k):
            return "attention_softmax" if "Softmax" in type(t.grad_fn).__name__ else "attention_scores"
        if isinstance(module, PositionWiseFeedForward) and t.dim() > 0 and t.size(-1) == module.fc1.out_features:
            return "ffn_hidden"
        if t.dim() > 0 and t.size(-1) == self.model.config.vocab_size:
            return "logits"
        return "other"

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


@dataclass
class StepMemory:
    """Peak memory of one training step and its parts, in bytes."""

    device: str
    precision: str
    tokens_per_batch: int  # the job's max_tokens_per_batch
    batch: dict[str, int]  # sentences, source_length, target_length, padded_tokens, target_tokens
    peak_bytes: int
    weights: int
    gradients: int
    adam_moments: int
    autocast_weights: int
    activations: dict[str, int]
    temporary: int
    seconds: float  # what measuring cost

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "precision": self.precision,
            "tokens_per_batch": self.tokens_per_batch,
            "batch": self.batch,
            "peak_bytes": self.peak_bytes,
            "by_kind": {
                "weights": self.weights,
                "gradients": self.gradients,
                "adam_moments": self.adam_moments,
                "autocast_weights": self.autocast_weights,
                "activations": self.activations,
                "temporary": self.temporary,
            },
            "seconds": round(self.seconds, 3),
        }

    @property
    def accounted(self) -> int:
        """Bytes of every kind but temporary."""
        return (
            self.weights + self.gradients + self.adam_moments + self.autocast_weights + sum(self.activations.values())
        )


def _batch_shape(batch: Batch) -> dict[str, int]:
    rows, src_len = batch.src.shape
    tgt_len = batch.tgt_in.shape[1]
    return {
        "sentences": rows,
        "source_length": src_len,
        "target_length": tgt_len,
        "padded_tokens": rows * max(src_len, tgt_len),  # what max_tokens_per_batch bounds (model/data/batching.py)
        "target_tokens": batch.n_tgt_tokens,
    }


def measure_step(
    model_config: ModelConfig, batch: Batch, config: TrainConfig, meter: PeakMeter | None = None
) -> StepMemory:
    """Run one update as the trainer does (config.device, config's precision) on a fresh model of model_config and
    return its peak memory by kind. The global random state is restored afterwards, so training is unchanged."""
    started = time.monotonic()
    device = torch.device(config.device)
    meter = meter or peak_meter(device)
    precision = config.resolved_precision
    rng = capture_rng_state()
    try:
        model = Transformer(model_config).to(device).train()
        optimizer = build_optimizer(model, config)
        for p in model.parameters():  # Adam's state, as at every step after the first (lr 0: nothing moves)
            p.grad = torch.zeros_like(p)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, Tensor)]
        held = storage_bytes([*model.parameters(), *model.buffers(), *state])
        saved = SavedTensors(model)
        try:
            with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
                step_peak = meter.measure(
                    lambda: update_on_device(model, optimizer, [batch], 0.0, config, autocast_for(device, precision))
                )
        finally:
            saved.close()
        params = list(model.parameters())
        moments = [s[k] for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq") if k in s]
        gradients = storage_bytes(p.grad for p in params if p.grad is not None)
        activations = {k: saved.bytes[k] for k in ACTIVATION_KINDS}
        report = StepMemory(
            device=str(meter.device),
            precision=precision,
            tokens_per_batch=config.max_tokens_per_batch,
            batch=_batch_shape(batch),
            peak_bytes=held + step_peak,
            weights=storage_bytes(params),
            gradients=gradients,
            adam_moments=storage_bytes(moments),
            autocast_weights=saved.bytes["autocast_weights"],
            activations=activations,
            temporary=0,
            seconds=0.0,
        )
        report.temporary = max(0, report.peak_bytes - report.accounted)
        report.seconds = time.monotonic() - started
        return report
    finally:
        restore_rng_state(rng)


def _mib(n: float) -> str:
    return f"{n / MiB:.2f} MiB"


def _ratio(measured: float, estimated: float) -> str:
    return f"{measured / estimated:.2f}x the estimate" if estimated else "not in the estimate"


def differences(
    measured: StepMemory, model_config: ModelConfig, estimated: dict[str, int], for_settings: dict[str, int]
) -> list[str]:
    """Where the measurement and the estimate for the same batch (`estimated`) part, each sentence computed from the
    numbers, then how the estimate for the job's settings (`for_settings`, at max_tokens_per_batch) compares."""
    m = measured
    out = []
    for kind, value, key in (
        ("weights", m.weights, "weights_bytes"),
        ("gradients", m.gradients, "gradients_bytes"),
        ("Adam moments", m.adam_moments, "adam_bytes"),
    ):
        if value != estimated[key]:
            out.append(
                f"{kind}: measured {_mib(value)}, estimated {_mib(estimated[key])} ({_ratio(value, estimated[key])})"
            )
    acts = sum(m.activations.values())
    out.append(
        f"activations measured {_mib(acts)}, {_ratio(acts, estimated['activations_bytes'])} "
        f"({_mib(estimated['activations_bytes'])})"
    )
    tokens, V = m.batch["padded_tokens"], model_config.vocab_size
    est_logits = tokens * V * 6 if m.precision == "bf16" else tokens * 2 * V * 4
    if not m.activations["logits"]:
        out.append(
            f"logits: none kept (the projection and the loss run fused, a chunk of rows at a time), where the "
            f"estimate counts {_mib(est_logits)}: logits and log-softmax for {tokens} target tokens"
        )
    elif m.activations["logits"] != est_logits:
        out.append(
            f"logits: the loss keeps {_mib(m.activations['logits'])} (its log-softmax over the "
            f"{m.batch['target_tokens']} non-pad target positions only), where the estimate counts {_mib(est_logits)}: "
            f"logits and log-softmax for {tokens} target tokens (it takes as many target tokens as padded tokens; "
            f"this batch has {m.batch['sentences'] * m.batch['target_length']} target positions)"
        )
    attention = m.activations["attention_softmax"] + m.activations["attention_scores"]
    if attention:
        out.append(
            f"attention matrices: {_mib(attention)} saved ({100 * attention / max(acts, 1):.0f}% of the activations); "
            "the estimate counts none (it assumes fused kernels that recompute them)"
        )
    else:
        out.append(
            "attention matrices: none saved, as the estimate assumes (the fused attention kernel recomputes them)"
        )
    est_copy = count_parameters(model_config)["total"] * 2 if m.precision == "bf16" else 0
    if m.autocast_weights != est_copy:
        out.append(
            f"autocast weight copies: measured {_mib(m.autocast_weights)}, estimated {_mib(est_copy)} "
            f"({_ratio(m.autocast_weights, est_copy)})"
        )
    if m.temporary:
        out.append(
            f"temporary buffers: {_mib(m.temporary)}, {100 * m.temporary / m.peak_bytes:.0f}% of the peak, "
            "which the estimate leaves out"
        )
    if m.accounted > m.peak_bytes:
        out.append(
            f"the kinds sum to {_mib(m.accounted)}, more than the peak of {_mib(m.peak_bytes)}: gradients and "
            "activations are not all alive at once"
        )
    out.append(
        f"peak measured {_mib(m.peak_bytes)}, {_ratio(m.peak_bytes, estimated['training_total_bytes'])} "
        f"({_mib(estimated['training_total_bytes'])})"
    )
    out.append(
        f"the estimate for the job's settings ({m.tokens_per_batch} tokens per batch, {m.precision}) is "
        f"{_mib(for_settings['training_total_bytes'])}; this batch has {m.batch['padded_tokens']} padded tokens "
        f"({100 * m.batch['padded_tokens'] / m.tokens_per_batch:.0f}% of {m.tokens_per_batch}), and the measured "
        f"peak is {_ratio(m.peak_bytes, for_settings['training_total_bytes'])}"
    )
    return out


def memory_report(
    model_config: ModelConfig, batch: Batch, config: TrainConfig, meter: PeakMeter | None = None
) -> dict[str, Any]:
    """{"measured": StepMemory.to_json(), "estimated", "estimated_for_batch", "differences"}.

    estimated: what POST /v1/estimate answers for the job's settings (estimate_memory at max_tokens_per_batch, in the
    precision the job trains in); estimated_for_batch: estimate_memory at the measured batch's padded tokens, the
    estimate the differences compare the measurement with."""
    measured = measure_step(model_config, batch, config, meter)
    for_settings = estimate_memory(model_config, config.max_tokens_per_batch, precision=measured.precision)
    for_batch = estimate_memory(model_config, measured.batch["padded_tokens"], precision=measured.precision)
    return {
        "measured": measured.to_json(),
        "estimated": for_settings,
        "estimated_for_batch": for_batch,
        "differences": differences(measured, model_config, for_batch, for_settings),
    }
