"""The training dynamics of a job (GET /v1/jobs/{id}/dynamics)."""

from __future__ import annotations

from typing import Literal

from app.schemas.common import Output

DynamicsKind = Literal["weights", "attention"]


class DynamicsGroup(Output):
    # weights: "embeddings", "encoder.self_attn.W_Q", "decoder.encoder_attn.W_K", "decoder.ffn.W_1", a LayerNorm, ...
    # attention: "encoder_self", "decoder_self" or "cross"
    group: str
    layer: int | None  # None: the shared embedding, or a pre-norm stack's final LayerNorm
    head: int | None  # attention heads only


class DynamicsPublic(Output):
    """values[stat][i][j] is the statistic at steps[i] for groups[j]: one row per record, one column per group.

    weights: grad_norm (‖∇W‖ before clipping), weight_norm (‖W‖ before the update), update_ratio (‖ΔW‖ / ‖W‖).
    attention: entropy (nats), diagonal, previous, first, eos (shares of the attention weight; null where a
    statistic does not apply to that kind of attention)."""

    job_id: str
    kind: DynamicsKind
    groups: list[DynamicsGroup]
    steps: list[int]
    values: dict[str, list[list[float | None]]]
    total_records: int  # records of this kind; `steps` holds at most max_records of them, the last always included


class EmbeddingsPublic(Output):
    """The shared embedding matrix over training, one entry per recorded checkpoint (steps[i]):
    points[i][j] is tokens[j]'s place in the 2-D projection (PCA of the most frequent tokens' embeddings, each
    record rotated onto the one before so that movement is the tokens' own), explained[i] the share of variance of
    the two axes, neighbors[i] each watched token's nearest tokens by cosine similarity, [token, similarity]."""

    job_id: str
    steps: list[int]
    tokens: list[str]  # most frequent first; "▁" marks a word start
    points: list[list[list[float]]]
    explained: list[list[float]]
    neighbors: list[dict[str, list[list[str | float]]]]  # [token, similarity], closest first
    total_records: int
