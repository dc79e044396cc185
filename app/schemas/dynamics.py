"""The per-component training dynamics of a job (GET /v1/jobs/{id}/dynamics)."""

from __future__ import annotations

from app.schemas.common import Output


class DynamicsGroup(Output):
    group: str  # "embeddings", "encoder.self_attn.W_Q", "decoder.encoder_attn.W_K", "decoder.ffn.W_1", ...
    layer: int | None  # None: the shared embedding, or a pre-norm stack's final LayerNorm


class DynamicsPublic(Output):
    """values[i][j] is the statistic at steps[i] for groups[j]: one row per record, one column per group."""

    job_id: str
    groups: list[DynamicsGroup]
    steps: list[int]
    grad_norm: list[list[float]]  # ‖∇W‖ before clipping
    weight_norm: list[list[float]]  # ‖W‖ before the update
    update_ratio: list[list[float]]  # ‖ΔW‖ / ‖W‖ of the optimizer's update
    total_records: int  # records the job has; `steps` holds at most max_records of them, the last always included
