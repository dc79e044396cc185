"""A job's per-component training dynamics: what each weight matrix's gradient and update look like over training."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import CurrentKey, SessionDep
from app.api.jobs import NOT_FOUND, owned_job
from app.db import dynamics_rows
from app.schemas.dynamics import DynamicsGroup, DynamicsPublic

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
STATS = ("grad_norm", "weight_norm", "update_ratio")


def evenly(n: int, k: int) -> list[int]:
    """k indices of range(n) spread evenly, the first and the last included (all of them if n <= k)."""
    if n <= k:
        return list(range(n))
    if k == 1:
        return [n - 1]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


@router.get("/{job_id}/dynamics", response_model=DynamicsPublic, responses=NOT_FOUND)
def read_dynamics(
    job_id: str,
    session: SessionDep,
    key: CurrentKey,
    since_step: Annotated[int, Query(ge=0, description="only records at this step or later")] = 0,
    max_records: Annotated[int, Query(ge=1, le=10_000, description="records spread evenly over training")] = 500,
) -> DynamicsPublic:
    """Gradient norm, weight norm and update-to-weight ratio of every W_Q, W_K, W_V, W_O (encoder self-, decoder
    self- and cross-attention), FFN W_1 and W_2, LayerNorm and the shared embedding, per layer, recorded at step 1
    and every `training.dynamics_every` updates."""
    owned_job(session, job_id, key.owner_id)
    rows = [r for r in dynamics_rows.read(session, job_id) if r.step >= since_step]
    groups = [tuple(g) for g in rows[-1].groups] if rows else []
    out: dict[str, list[list[float]]] = {s: [] for s in STATS}
    steps = []
    for row in (rows[i] for i in evenly(len(rows), max_records)):
        column = {tuple(g): j for j, g in enumerate(row.groups)}
        if set(column) != set(groups):  # a record of another architecture (never from one job): left out
            continue
        steps.append(row.step)
        for s in STATS:
            out[s].append([row.values[s][column[g]] for g in groups])
    return DynamicsPublic(
        job_id=job_id,
        groups=[DynamicsGroup(group=g, layer=layer) for g, layer in groups],
        steps=steps,
        total_records=len(rows),
        **out,
    )
