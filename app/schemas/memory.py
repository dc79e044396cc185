"""The memory of one training step of a job, measured next to the estimate (GET /v1/jobs/{id}/memory)."""

from __future__ import annotations

from pydantic import Field

from app.schemas.common import Output


class ActivationBytes(Output):
    """Tensors saved for the backward pass, once per storage, by the component that saved them."""

    attention_scores: int  # attention-matrix-shaped tensors other than the softmax output (scores, dropout masks)
    attention_softmax: int  # softmax outputs, B x heads x T_q x T_k each (none with a fused attention kernel)
    ffn_hidden: int  # d_ff-wide tensors of the FFN (activation input/output, its dropout mask)
    logits: int  # vocabulary-wide tensors (the loss's log-softmax)
    other: int  # layer inputs, Q, K, V, LayerNorm statistics, the fused kernel's log-sum-exp, ids, masks


class MemoryByKind(Output):
    weights: int
    gradients: int
    adam_moments: int  # exp_avg and exp_avg_sq
    autocast_weights: int  # bf16 copies of the weights kept for the backward pass (0 in fp32)
    activations: ActivationBytes
    temporary: int  # the rest of the peak: the logits themselves, gradient buffers, kernel workspaces


class BatchShape(Output):
    sentences: int
    source_length: int
    target_length: int
    padded_tokens: int  # sentences x the longer length: what max_tokens_per_batch bounds
    target_tokens: int  # non-pad target tokens: the positions the loss is computed at


class MeasuredMemory(Output):
    device: str
    precision: str
    tokens_per_batch: int = Field(description="the job's training.max_tokens_per_batch")
    batch: BatchShape = Field(description="the batch measured: the job's first")
    peak_bytes: int
    by_kind: MemoryByKind
    seconds: float = Field(description="what measuring cost the job")


class EstimatedMemory(Output):
    """model/probes/anatomy.py estimate_memory for the job's model config and precision, at some tokens per batch."""

    weights_bytes: int
    gradients_bytes: int
    adam_bytes: int
    activations_bytes: int
    training_total_bytes: int
    inference_bytes: int


class JobMemoryPublic(Output):
    """measured, estimated, estimated_for_batch and differences are null and empty until the worker has measured the
    job (before its first step); error says why a measurement failed (the job trained on)."""

    job_id: str
    measured: MeasuredMemory | None
    estimated: EstimatedMemory | None = Field(
        description="what POST /v1/estimate gives for the job's settings: its model, max_tokens_per_batch and "
        "precision (null for a report stored before it was kept)"
    )
    estimated_for_batch: EstimatedMemory | None = Field(
        description="the same estimate at the measured batch's padded_tokens: what the differences compare with"
    )
    differences: list[str] = Field(description="where the two part, each computed from the numbers")
    error: str | None
