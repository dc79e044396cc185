"""POST /v1/jobs with init_model_id: the job takes that model's architecture and tokenizer; what conflicts is a
422 naming the field (no worker involved)."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from model.nn.config import ModelConfig
from tests.api.test_jobs import _job


def _model_row(owner: str, objective: str = "translation", **config_overrides) -> str:
    """A succeeded job and its model, as a finished run leaves them (no files: nothing here loads them)."""
    from app.db.access_tables import Owner
    from app.db.session import session_scope
    from app.db.tables import Job, TrainedModel

    config = ModelConfig.from_preset("tiny", 489, **config_overrides).to_dict()
    with session_scope() as session:
        owner_id = session.scalar(select(Owner.id).where(Owner.name == owner))
        job = Job(
            owner_id=owner_id,
            objective=objective,
            model_config={"preset": "tiny", "vocab_size": 500},
            training_config={},
            status="succeeded",
            max_attempts=3,
            total_steps=1,
            request_sha256="",
        )
        session.add(job)
        session.flush()
        model = TrainedModel(
            owner_id=owner_id,
            job_id=job.id,
            objective=objective,
            config=config,
            tokenizer_fingerprint="f",
            metrics={},
            source="last@1",
            parameters=1,
            storage_key="models/x",
            sha256="0" * 64,
            size_bytes=1,
        )
        session.add(model)
        session.flush()
        return model.id


def test_a_job_from_a_model_takes_its_architecture_and_may_change_dropout(client, alice, parallel_id):
    parent = _model_row("alice", d_model=96, n_heads=4, activation="gelu")
    body = _job(parallel_id, init_model_id=parent, model={"dropout": 0.3}, training={"max_steps": 10})
    response = client.post("/v1/jobs", json=body, headers=alice)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["init_model_id"] == parent
    assert (job["model"]["d_model"], job["model"]["n_heads"], job["model"]["activation"]) == (96, 4, "gelu")
    assert (job["model"]["dropout"], job["model"]["vocab_size"]) == (0.3, 500)  # the parent job's vocabulary
    assert job["training"]["lr_scale"] == 0.25  # fine-tuning's default: a quarter of the paper's rate
    asked = client.post("/v1/jobs", json={**body, "training": {"max_steps": 10, "lr_scale": 0.5}}, headers=alice)
    assert asked.json()["training"]["lr_scale"] == 0.5
    fresh = client.post("/v1/jobs", json=_job(parallel_id, training={"max_steps": 10}), headers=alice)
    assert fresh.json()["training"]["lr_scale"] == 1.0


@pytest.mark.parametrize(
    ("model", "loc", "message"),
    [
        ({"d_model": 128}, ["body", "model", "d_model"], "d_model=128 conflicts with init model"),
        ({"vocab_size": 8000}, ["body", "model", "vocab_size"], "keeps its architecture and tokenizer"),
        ({"norm_first": True}, ["body", "model", "norm_first"], "only dropout and attention_dropout may change"),
        ({"n_decoder_layers": 3}, ["body", "model", "n_decoder_layers"], "n_decoder_layers=3 exceeds init model"),
    ],
)
def test_an_architecture_that_differs_from_the_init_model_is_422(client, alice, parallel_id, model, loc, message):
    parent = _model_row("alice", d_model=96, n_heads=4)
    response = client.post("/v1/jobs", json=_job(parallel_id, init_model_id=parent, model=model), headers=alice)
    assert response.status_code == 422, response.text
    assert any(d["loc"] == loc and message in d["msg"] for d in response.json()["detail"]), response.json()
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 1  # the parent's own job only


def test_a_job_from_a_model_may_keep_fewer_of_its_layers(client, alice, parallel_id):
    """Shrink and fine-tune: the job's stacks are as deep as the model's or shallower (the worker starts it from a
    subset of the layers: tests/worker/test_shrunk_job.py)."""
    parent = _model_row("alice", d_model=96, n_heads=4)  # tiny: 2 encoder and 2 decoder layers
    body = _job(parallel_id, init_model_id=parent, model={"n_decoder_layers": 1}, training={"max_steps": 10})
    response = client.post("/v1/jobs", json=body, headers=alice)
    assert response.status_code == 201, response.text
    model = response.json()["model"]
    assert (model["d_model"], model["n_encoder_layers"], model["n_decoder_layers"]) == (96, 2, 1)


def test_another_owners_model_is_not_found(client, alice, parallel_id, make_key):
    make_key("bob")
    theirs = _model_row("bob")
    response = client.post("/v1/jobs", json=_job(parallel_id, init_model_id=theirs), headers=alice)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "init_model_id"]
    assert response.json()["detail"][0]["msg"] == f"model {theirs} not found"


def test_a_job_from_an_imported_model_keeps_a_vocabulary_smaller_than_a_new_tokenizer_may_have(
    client, alice, parallel_id
):
    """An imported model (no job of its own) with 142 pieces: the job takes them, and is shown as it was stored."""
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    parent = _model_row("alice")
    with session_scope() as session:
        model = session.get(TrainedModel, parent)
        model.job_id, model.config = None, ModelConfig.from_preset("tiny", 142).to_dict()
    response = client.post("/v1/jobs", json=_job(parallel_id, init_model_id=parent), headers=alice)
    assert response.status_code == 201, response.text
    assert response.json()["model"]["vocab_size"] == 142
    job_id = response.json()["id"]
    assert client.get(f"/v1/jobs/{job_id}", headers=alice).json()["model"]["vocab_size"] == 142
    assert any(j["id"] == job_id for j in client.get("/v1/jobs", headers=alice).json()["data"])


def test_a_job_starts_from_a_registry_reference_and_keeps_the_id_it_named_then(client, alice, parallel_id):
    """init_model_id takes name@version, name@alias and name@latest as every model route does: the job stores the
    id the reference named at submission, so moving the alias later does not change what the job started from."""
    first, second = _model_row("alice"), _model_row("alice", d_model=96, n_heads=4)
    for model_id in (first, second):
        assert client.patch(f"/v1/models/{model_id}", json={"name": "en-de"}, headers=alice).status_code == 200
    put = client.put("/v1/models/en-de/aliases/production", json={"version": 1}, headers=alice)
    assert put.status_code == 200, put.text

    def started_from(ref: str) -> dict:
        response = client.post("/v1/jobs", json=_job(parallel_id, init_model_id=ref), headers=alice)
        assert response.status_code == 201, response.text
        return response.json()

    job = started_from("en-de@production")
    assert job["init_model_id"] == first and job["model"]["d_model"] == 64
    assert started_from("en-de@2")["init_model_id"] == second
    assert started_from("en-de@latest")["model"]["d_model"] == 96
    assert started_from(first.upper())["init_model_id"] == first
    client.put("/v1/models/en-de/aliases/production", json={"version": 2}, headers=alice)
    assert client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["init_model_id"] == first
    for ref in ("en-de@3", "en-de@staging", "en-de@@x", "nope"):
        response = client.post("/v1/jobs", json=_job(parallel_id, init_model_id=ref), headers=alice)
        assert response.status_code == 422, (ref, response.text)
        assert response.json()["detail"][0]["loc"] == ["body", "init_model_id"]
        assert response.json()["detail"][0]["msg"] == f"model {ref} not found"


def test_a_job_takes_its_languages_from_the_request_else_from_the_model_it_starts_from(client, alice, parallel_id):
    parent = _model_row("alice")
    patched = {"source_language": "en", "target_language": "pt-BR"}
    assert client.patch(f"/v1/models/{parent}", json=patched, headers=alice).status_code == 200

    def languages(**body) -> tuple[str | None, str | None]:
        response = client.post("/v1/jobs", json=_job(parallel_id, **body), headers=alice)
        assert response.status_code == 201, response.text
        job = client.get(f"/v1/jobs/{response.json()['id']}", headers=alice).json()
        return job["source_language"], job["target_language"]

    assert languages() == (None, None)
    assert languages(source_language="en", target_language="fr") == ("en", "fr")
    assert languages(init_model_id=parent) == ("en", "pt-BR")
    assert languages(init_model_id=parent, target_language="de") == ("en", "de")
    response = client.post("/v1/jobs", json=_job(parallel_id, target_language="german!"), headers=alice)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "target_language"]
    assert "'german!' must be a BCP 47 tag" in response.json()["detail"][0]["msg"]
