"""A job's training dynamics: how each weight matrix's gradient and update, and each attention head, change."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from app.api.deps import SessionDep
from app.api.jobs import NOT_FOUND, owned_job
from app.api.models import owned_model
from app.api.scopes import JobKey, ReadKey
from app.db import dynamics_rows
from app.db.run_record_tables import JobDynamics
from app.schemas.dynamics import DynamicsGroup, DynamicsKind, DynamicsPublic, EmbeddingsPublic

router = APIRouter(tags=["jobs"])


def evenly(n: int, k: int) -> list[int]:
    """k indices of range(n) spread evenly, the first and the last included (all of them if n <= k)."""
    if n <= k:
        return list(range(n))
    if k == 1:
        return [n - 1]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


@router.get("/v1/jobs/{job_id}/dynamics", response_model=DynamicsPublic, responses=NOT_FOUND)
def read_dynamics(
    job_id: str,
    session: SessionDep,
    key: JobKey,
    kind: Annotated[DynamicsKind, Query(description="weights (per matrix and layer) or attention (per head)")] = (
        "weights"
    ),
    since_step: Annotated[int, Query(ge=0, description="only records at this step or later")] = 0,
    max_records: Annotated[int, Query(ge=1, le=10_000, description="records spread evenly over training")] = 500,
) -> DynamicsPublic:
    """kind=weights: the gradient norm, weight norm and update-to-weight ratio of every W_Q, W_K, W_V, W_O (encoder
    self-, decoder self- and cross-attention), FFN W_1 and W_2, LayerNorm and the shared embedding, per layer, at
    step 1 and every `training.dynamics_every` updates. kind=attention: per layer and head, the mean attention
    entropy and the shares of weight on the diagonal, previous, first and end-of-sentence token, on a fixed probe
    batch of validation sentences, at every evaluation."""
    owned_job(session, job_id, key)
    rows = [r for r in dynamics_rows.read(session, job_id, kind) if r.step >= since_step]
    groups = [tuple(g) for g in rows[-1].groups] if rows else []
    stats = [k for k in rows[-1].values] if rows else []
    values: dict[str, list[list[float | None]]] = {s: [] for s in stats}
    steps = []
    for row in (rows[i] for i in evenly(len(rows), max_records)):
        column = {tuple(g): j for j, g in enumerate(row.groups)}
        if set(column) != set(groups) or set(row.values) != set(stats):  # another architecture: never one job's
            continue
        steps.append(row.step)
        for s in stats:
            values[s].append([row.values[s][column[g]] for g in groups])
    return DynamicsPublic(
        job_id=job_id,
        kind=kind,
        groups=[DynamicsGroup(group=g, layer=layer, head=head) for g, layer, head in groups],
        steps=steps,
        values=values,
        total_records=len(rows),
    )


def _embeddings(job_id: str, rows: list[JobDynamics]) -> EmbeddingsPublic:
    tokens = [g[0] for g in rows[-1].groups] if rows else []
    kept = [r for r in rows if [g[0] for g in r.groups] == tokens]  # the same cloud: always, within one job
    return EmbeddingsPublic(
        job_id=job_id,
        steps=[r.step for r in kept],
        tokens=tokens,
        points=[r.values["points"] for r in kept],
        explained=[r.values["explained"] for r in kept],
        neighbors=[r.values["neighbors"] for r in kept],
        total_records=len(rows),
    )


@router.get("/v1/jobs/{job_id}/embeddings", response_model=EmbeddingsPublic, responses=NOT_FOUND)
def read_embeddings(
    job_id: str,
    session: SessionDep,
    key: JobKey,
    max_records: Annotated[int, Query(ge=1, le=1000, description="checkpoints spread evenly over training")] = 50,
) -> EmbeddingsPublic:
    """At each checkpoint: a 2-D map (PCA) of the most frequent tokens' embeddings and the nearest neighbours of
    the watched tokens (`training.probe_tokens`, else the most frequent words), so related words can be seen
    moving together as training goes."""
    owned_job(session, job_id, key)
    rows = dynamics_rows.read(session, job_id, "embeddings")
    return _embeddings(job_id, [rows[i] for i in evenly(len(rows), max_records)])


@router.get("/v1/models/{model_id}/embeddings", response_model=EmbeddingsPublic, responses=NOT_FOUND, tags=["models"])
def read_model_embeddings(model_id: str, session: SessionDep, key: ReadKey) -> EmbeddingsPublic:
    """The last embeddings record of the job that trained the model (its final checkpoint). A model imported
    rather than trained here has none: 404 saying so."""
    model = owned_model(session, model_id, key.owner_id)
    rows = dynamics_rows.read(session, model.job_id, "embeddings") if model.job_id else []
    if not rows:
        detail = f"model {model_id} has no recorded embeddings: only a model trained here by a job records them"
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail)
    return _embeddings(model.job_id or "", rows[-1:])
