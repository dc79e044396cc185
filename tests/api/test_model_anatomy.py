"""GET /v1/models/{id}/anatomy: the memory estimate is for the training job's own settings, in its precision."""

from __future__ import annotations

import pytest

from model.nn.config import ModelConfig
from model.probes.anatomy import estimate_memory
from tests.api.test_job_labels import job_rows

CONFIG = ModelConfig.from_preset("tiny", 300)


def _model_of(job_id: str | None, device: str | None = None) -> str:
    """A model row of alice's with CONFIG, trained by job_id, which ran on `device`."""
    from sqlalchemy import select

    from app.db.access_tables import Owner
    from app.db.session import session_scope
    from app.db.tables import Job, TrainedModel

    with session_scope() as session:
        if job_id is not None:
            session.get_one(Job, job_id).device = device
        model = TrainedModel(
            owner_id=session.scalar(select(Owner.id).where(Owner.name == "alice")), job_id=job_id,
            objective="translation", config=CONFIG.to_dict(), tokenizer_fingerprint="f", metrics={},
            source="last@1", parameters=1, storage_key="models/x", sha256="0" * 64, size_bytes=1,
        )  # fmt: skip
        session.add(model)
        session.flush()
        return model.id


@pytest.mark.parametrize(
    ("training", "device", "precision"),
    [
        ({"max_tokens_per_batch": 512}, "cuda:0", "bf16"),  # none asked for: bf16 on a GPU, as the trainer resolves it
        ({"max_tokens_per_batch": 512}, "cpu", "fp32"),  # and fp32 on a CPU
        ({"max_tokens_per_batch": 512, "precision": "fp32"}, "cuda:0", "fp32"),  # the one the job asked for
    ],
)
def test_the_estimate_is_for_the_jobs_batch_size_and_precision(client, alice, training, device, precision):
    model = _model_of(job_rows("alice", 1, training_config=training)[0], device)
    body = client.get(f"/v1/models/{model}/anatomy", headers=alice).json()
    assert body["precision"] == precision and body["tokens_per_batch"] == 512
    assert body["memory"] == estimate_memory(CONFIG, 512, precision=precision)


def test_the_query_overrides_the_jobs_settings_and_an_imported_model_is_4096_tokens_in_fp32(client, alice):
    model = _model_of(job_rows("alice", 1, training_config={"max_tokens_per_batch": 512})[0], "cuda:0")
    body = client.get(f"/v1/models/{model}/anatomy?precision=fp32&tokens_per_batch=100", headers=alice).json()
    assert body["precision"] == "fp32" and body["memory"] == estimate_memory(CONFIG, 100, precision="fp32")
    imported = client.get(f"/v1/models/{_model_of(None)}/anatomy", headers=alice).json()
    assert imported["precision"] == "fp32" and imported["tokens_per_batch"] == 4096
    assert client.get(f"/v1/models/{model}/anatomy?precision=fp16", headers=alice).status_code == 422
