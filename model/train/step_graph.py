"""A micro-batch's forward, loss and backward as one compiled graph (training.compile), over bucketed lengths.

torch.compile(fullgraph=True) of (model, src, tgt_in, tgt_out) -> (loss, NLL): dynamo traces the whole model and
the loss without a break, AOTAutograd derives the backward of the same graph, inductor fuses both (the loss's
float32 upcast and softmax included). Per-layer compilation left the embedding, the output projection, the loss
and every boundary between layers to eager kernels.

Shapes: dynamo compiles once per input shape. Token batches change shape at every step, so here
- the source and target lengths are padded up to one shared bucket length (bucket_length: 4 per doubling, at
  most 25% padding): a graph per bucket, static lengths inside it;
- the rows stay one symbolic size (mark_dynamic): a token batcher gives rows ~ max_tokens / length, so each bucket
  sees many row counts, and padding them to static sizes too would multiply the graphs (or the padding).
Padding is masked: source pads as keys of every attention, target pads by the causal mask and by a 0 weight in
the loss. So the loss and the gradients are those of the unpadded batch.

The loss runs over all B x T_bucket target positions with that weight, not over the N non-pad ones picked by
index_select as the eager step does (model/train/step.py, batch_logits): N is data-dependent, and a symbolic N
would cost a graph per value or a second dynamic dimension. The price is the projection on padding rows, which
the eager step avoids.

CUDA graphs (mode="reduce-overhead", CUDA_GRAPHS): on a GPU the compiled forward and backward are recorded as
CUDA graphs and replayed, so the host's kernel launches leave no idle gaps between kernels (a compiled `base`
step on an H200 was 14.7% idle). A graph is recorded per concrete shape, so the rows are padded up to buckets as
well (bucket_rows: 8 per doubling, at most 12.5% padding) and stay one symbolic size for the compiler: one
compilation per length bucket, a recording per (length, rows) bucket pair met, and inductor's graph trees share
one memory pool between the recordings. Padding rows hold one source token and carry weight 0, so the loss and
gradients stay those of the batch; the gradients stay allocated between micro-batches (StepGraph._keep_gradients).
Off by default until measured on a GPU (CUDA_GRAPHS).

Data-parallel training keeps the per-layer compilation (model/nn/compile.py): DDP's bucketing splits a
whole-model graph anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor

from model.data.batching import Batch
from model.nn.out_of_memory import is_out_of_memory
from model.nn.transformer import Transformer
from model.train.loss import label_smoothed_loss

log = logging.getLogger(__name__)

T = TypeVar("T")

# Bucket lengths per doubling: a graph per bucket (each compiles in tens of seconds for `base` on a GPU) against
# the padding (at most 1 / STEPS_PER_OCTAVE of a length). 4: 16 buckets up to 256 tokens, at most 25% padding.
STEPS_PER_OCTAVE = 4
MIN_BUCKET = 8


def _bucket(n: int, steps_per_octave: int, smallest: int) -> int:
    """The smallest bucket >= n: multiples of smallest up to 2 * steps_per_octave * smallest, then
    steps_per_octave per doubling."""
    step = smallest
    while n > 2 * steps_per_octave * step:
        step *= 2
    return -(-n // step) * step  # (n / step) rounded up, times step


def bucket_length(length: int) -> int:
    """The smallest length bucket >= length: 8, 16, ..., 64, then 80, 96, 112, 128, then 160, ..., 256, then
    320, ... (STEPS_PER_OCTAVE per doubling past 64: at most a quarter longer)."""
    if length < 1:
        raise ValueError(f"length={length} must be >= 1")
    return _bucket(length, STEPS_PER_OCTAVE, MIN_BUCKET)


# Row buckets under CUDA graphs: multiples of MIN_ROWS up to 64, then ROW_STEPS_PER_OCTAVE per doubling.
ROW_STEPS_PER_OCTAVE = 8
MIN_ROWS = 4


def bucket_rows(rows: int) -> int:
    """The smallest row bucket >= rows (so >= 2: a symbolic size must not be 0 or 1): 4, 8, ..., 64, then 72,
    80, ..., 128, then 144, ... (at most an eighth more rows past 64)."""
    if rows < 1:
        raise ValueError(f"rows={rows} must be >= 1")
    return _bucket(rows, ROW_STEPS_PER_OCTAVE, MIN_ROWS)


# "auto": a compiled step on a CUDA device replays CUDA graphs; "on": wherever compiled (on a CPU inductor skips
# the graphs, the rows are still bucketed); "off": never. "off" by default until a GPU run has measured the
# replayed step against the plain compiled one (bench/gpu_suite.py, train-base-25k-v32k-compile-graphs).
CUDA_GRAPHS: Literal["auto", "on", "off"] = "off"


def use_cuda_graphs(device: torch.device) -> bool:
    """Whether a StepGraph for a model on device replays CUDA graphs (CUDA_GRAPHS)."""
    if CUDA_GRAPHS == "off":
        return False
    return CUDA_GRAPHS == "on" or device.type == "cuda"


def _pad_to(ids: Tensor, rows: int, length: int, pad_id: int) -> Tensor:
    """ids (B, T) right-padded with pad_id to (rows, length)."""
    return F.pad(ids, (0, length - ids.size(1), 0, rows - ids.size(0)), value=pad_id)


def micro_batch_loss(
    model: Transformer, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, smoothing: float, precision: str
) -> tuple[Tensor, Tensor]:
    """(label-smoothed loss sum, NLL sum) over the non-pad targets of (src (B, S), tgt_in / tgt_out (B, T)): the
    function compiled. Autocast is entered inside it, so the graph holds the casts."""
    pad = model.config.pad_id
    with torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        src_key_padding_mask = src == pad  # (B, S)
        memory = model.encode(src, src_key_padding_mask)  # (B, S, d_model)
        logits = model.project(model.decode(tgt_in, memory, src_key_padding_mask))  # (B, T, V)
    target = tgt_out.flatten()  # (B*T,)
    return label_smoothed_loss(logits.flatten(0, 1), target, smoothing, weight=target != pad)


class StepGraph:
    """micro_batch_loss compiled; called with a Batch already on the model's device.

    backend and mode go to torch.compile (tests count compilations with a counting backend). cuda_graphs
    (default: use_cuda_graphs) buckets the rows, keeps the gradients allocated between micro-batches and, with
    inductor, asks for mode "reduce-overhead"."""

    def __init__(
        self,
        model: Transformer,
        smoothing: float,
        precision: str,
        backend: str | Callable[..., Any] = "inductor",
        mode: str | None = None,
        cuda_graphs: bool | None = None,
    ) -> None:
        self.model, self.smoothing, self.precision = model, smoothing, precision
        device = next(model.parameters()).device
        self.cuda_graphs = use_cuda_graphs(device) if cuda_graphs is None else cuda_graphs
        if self.cuda_graphs and backend == "inductor" and mode is None:
            mode = "reduce-overhead"
        self.compiled = torch.compile(micro_batch_loss, fullgraph=True, backend=backend, mode=mode)

    def shapes(self, batch: Batch) -> tuple[int, int]:
        """(rows, length) the batch is padded to: at least 2 rows (a symbolic size must not be 0 or 1), or the
        rows' bucket, and the longer of its source and target rounded up to a bucket."""
        rows, src_len = batch.src.shape
        rows = bucket_rows(rows) if self.cuda_graphs else max(rows, 2)
        return rows, bucket_length(max(src_len, batch.tgt_in.size(1)))

    def __call__(self, batch: Batch) -> tuple[Tensor, Tensor]:
        pad = self.model.config.pad_id
        rows, length = self.shapes(batch)
        src = _pad_to(batch.src, rows, length, pad)  # (rows, length)
        if rows > batch.src.size(0):  # a padding row: one source token, so no attention row is fully masked
            src[batch.src.size(0) :, 0] = self.model.config.eos_id
        tgt_in, tgt_out = (_pad_to(t, rows, length, pad) for t in (batch.tgt_in, batch.tgt_out))  # (rows, length)
        for ids in (src, tgt_in, tgt_out):
            torch._dynamo.mark_dynamic(ids, 0)  # one graph for every row count of a bucket
            torch._dynamo.mark_static(ids, 1)  # and no automatic dynamic length: one graph per bucket
        if self.cuda_graphs:
            self._keep_gradients()
            # a new step of the graph trees: the previous replay's outputs (already summed) may be overwritten
            torch.compiler.cudagraph_mark_step_begin()  # type: ignore[no-untyped-call]  # torch leaves it untyped
        loss, nll = self.compiled(self.model, src, tgt_in, tgt_out, self.smoothing, self.precision)
        return loss, nll

    def _keep_gradients(self) -> None:
        """Gradients allocated before the first micro-batch (zeros), so every backward adds into them in place.
        Into a None gradient autograd would keep the backward's output tensor itself, which lives in the CUDA
        graphs' memory pool, and the next micro-batch's replay would overwrite it."""
        for p in self.model.parameters():
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)


def compile_step(model: Transformer, smoothing: float, precision: str, **compile_kwargs: Any) -> StepGraph | None:
    """A StepGraph, or None (and eager steps) if torch.compile refuses at once; compilation itself happens at the
    first call of each bucket, where run_or_eager catches its failures."""
    try:
        return StepGraph(model, smoothing, precision, **compile_kwargs)
    except Exception as exc:  # noqa: BLE001  # any compiler failure: run eagerly instead
        log.warning("torch.compile failed, running without it: %s: %s", type(exc).__name__, exc)
        return None


def run_or_eager(
    graph: StepGraph, call: Callable[[StepGraph | None], T], keep: tuple[type[BaseException], ...] = ()
) -> tuple[T, StepGraph | None]:
    """(call(graph), graph); if that fails, (call(None), None): the same work eagerly, and no graph for the
    caller to use again. Errors of the kinds in `keep` and out-of-memory errors are raised as they are (running
    eagerly would not help). call must be safe to repeat after a failure (an update zeroes the gradients first)."""
    try:
        return call(graph), graph
    except Exception as exc:
        if isinstance(exc, keep) or is_out_of_memory(exc):
            raise
        log.warning("torch.compile failed, running without it: %s: %s", type(exc).__name__, exc)
    return call(None), None
