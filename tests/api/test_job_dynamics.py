"""GET /v1/jobs/{id}/dynamics: the records the worker wrote, as one matrix per statistic; only the caller's jobs."""

from __future__ import annotations

from tests.api.test_job_labels import job_rows

GROUPS = [["embeddings", None, None], ["encoder.self_attn.W_Q", 0, None], ["decoder.encoder_attn.W_K", 1, None]]


def _records(job_id: str, steps: list[int]) -> None:
    """Dynamics records as the worker's lease thread writes them (app/db/dynamics_rows.record)."""
    from app.db import dynamics_rows
    from app.db.session import session_scope

    with session_scope() as session:
        dynamics_rows.record(
            session,
            job_id,
            [
                {
                    "kind": "weights",
                    "step": s,
                    "groups": GROUPS if s % 2 else GROUPS[::-1],  # any order: columns follow `groups`
                    "grad_norm": [s + 0.1, s + 0.2, s + 0.3] if s % 2 else [s + 0.3, s + 0.2, s + 0.1],
                    "weight_norm": [1.0, 2.0, 3.0] if s % 2 else [3.0, 2.0, 1.0],
                    "update_ratio": [1e-3, 2e-3, 3e-3] if s % 2 else [3e-3, 2e-3, 1e-3],
                }
                for s in steps
            ],
        )


def test_dynamics_are_one_row_per_record_and_one_column_per_group(client, alice):
    job = job_rows("alice", 1)[0]
    _records(job, [1, 25, 50, 75])
    _records(job, [50])  # a step re-run after a resume replaces its record
    body = client.get(f"/v1/jobs/{job}/dynamics", headers=alice).json()
    assert body["groups"] == [  # the last record's order
        {"group": "embeddings", "layer": None, "head": None},
        {"group": "encoder.self_attn.W_Q", "layer": 0, "head": None},
        {"group": "decoder.encoder_attn.W_K", "layer": 1, "head": None},
    ]
    assert body["steps"] == [1, 25, 50, 75] and body["total_records"] == 4
    values = body["values"]
    assert set(values) == {"grad_norm", "weight_norm", "update_ratio"}
    assert values["grad_norm"][0] == [1.1, 1.2, 1.3]
    assert values["grad_norm"][2] == [50.1, 50.2, 50.3]  # step 50 listed its groups the other way round
    assert values["weight_norm"][2] == [1.0, 2.0, 3.0] and values["update_ratio"][3] == [1e-3, 2e-3, 3e-3]


def test_dynamics_are_thinned_evenly_keeping_the_first_and_last_and_follow_since_step(client, alice):
    job = job_rows("alice", 1)[0]
    _records(job, list(range(1, 102, 5)))  # 21 records
    body = client.get(f"/v1/jobs/{job}/dynamics?max_records=5", headers=alice).json()
    assert body["steps"] == [1, 26, 51, 76, 101] and body["total_records"] == 21
    assert len(body["values"]["grad_norm"]) == 5
    live = client.get(f"/v1/jobs/{job}/dynamics?since_step=90", headers=alice).json()
    assert live["steps"] == [91, 96, 101]


def test_a_job_without_records_has_empty_dynamics(client, alice):
    job = job_rows("alice", 1)[0]
    body = client.get(f"/v1/jobs/{job}/dynamics", headers=alice).json()
    assert body == {"job_id": job, "kind": "weights", "groups": [], "steps": [], "values": {}, "total_records": 0}


def test_another_owners_dynamics_are_404_and_bad_queries_422(client, alice, make_key):
    job = job_rows("alice", 1)[0]
    _records(job, [1])
    response = client.get(f"/v1/jobs/{job}/dynamics", headers=make_key("bob"))
    assert response.status_code == 404 and job in response.json()["detail"]
    assert client.get(f"/v1/jobs/{job}/dynamics?max_records=0", headers=alice).status_code == 422
    bad_kind = client.get(f"/v1/jobs/{job}/dynamics?kind=gradients", headers=alice)
    assert bad_kind.status_code == 422 and "gradients" in bad_kind.text


def test_attention_records_are_apart_from_the_weights_and_keep_their_nulls(client, alice):
    from app.db import dynamics_rows
    from app.db.session import session_scope

    job = job_rows("alice", 1)[0]
    _records(job, [1, 25])
    heads = [["encoder_self", 0, 0], ["encoder_self", 0, 1], ["decoder_self", 0, 0]]
    with session_scope() as session:
        dynamics_rows.record(session, job, [
            {"kind": "attention", "step": 25, "groups": heads, "entropy": [0.5, 1.5, 0.1], "diagonal": [0.9, 0.2, 0.1],
             "previous": [0.0, 0.1, 0.8], "first": [0.0, 0.3, 0.1], "eos": [0.05, 0.2, None]},
        ])  # fmt: skip
    body = client.get(f"/v1/jobs/{job}/dynamics?kind=attention", headers=alice).json()
    assert body["kind"] == "attention" and body["steps"] == [25] and body["total_records"] == 1
    assert body["groups"][2] == {"group": "decoder_self", "layer": 0, "head": 0}
    assert body["values"]["eos"] == [[0.05, 0.2, None]] and body["values"]["entropy"] == [[0.5, 1.5, 0.1]]
    assert client.get(f"/v1/jobs/{job}/dynamics", headers=alice).json()["steps"] == [1, 25]


def _model_row(owner: str, job_id: str | None) -> str:
    from sqlalchemy import select

    from app.db.access_tables import Owner
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    with session_scope() as session:
        model = TrainedModel(
            owner_id=session.scalar(select(Owner.id).where(Owner.name == owner)), job_id=job_id,
            objective="translation", config={}, tokenizer_fingerprint="f", metrics={}, source="last@1", parameters=1,
            storage_key="models/x", sha256="0" * 64, size_bytes=1,
        )  # fmt: skip
        session.add(model)
        session.flush()
        return model.id


def _embedding_records(job_id: str, steps: list[int]) -> None:
    from app.db import dynamics_rows
    from app.db.session import session_scope

    with session_scope() as session:
        dynamics_rows.record(session, job_id, [
            {"kind": "embeddings", "step": s, "groups": [["▁the", 7, None], ["▁cat", 9, None]],
             "points": [[s, 0.0], [0.0, -s]], "explained": [0.6, 0.3],
             "neighbors": {"▁cat": [["▁dog", 0.9 + s / 10_000], ["▁the", 0.1]]}}
            for s in steps
        ])  # fmt: skip


def test_embeddings_of_a_job_and_the_final_ones_of_its_model(client, alice, make_key):
    job = job_rows("alice", 1)[0]
    _records(job, [1])  # weights records are apart
    _embedding_records(job, [100, 200, 300])
    body = client.get(f"/v1/jobs/{job}/embeddings", headers=alice).json()
    assert body["steps"] == [100, 200, 300] and body["tokens"] == ["▁the", "▁cat"] and body["total_records"] == 3
    assert body["points"][1] == [[200, 0.0], [0.0, -200]] and body["explained"][0] == [0.6, 0.3]
    assert body["neighbors"][2]["▁cat"][0] == ["▁dog", 0.93]
    assert client.get(f"/v1/jobs/{job}/embeddings?max_records=2", headers=alice).json()["steps"] == [100, 300]
    model = _model_row("alice", job)
    final = client.get(f"/v1/models/{model}/embeddings", headers=alice).json()
    assert final["steps"] == [300] and final["job_id"] == job
    imported = _model_row("alice", None)
    response = client.get(f"/v1/models/{imported}/embeddings", headers=alice)
    assert response.status_code == 404 and "no recorded embeddings" in response.json()["detail"]
    for route in (f"/v1/jobs/{job}/embeddings", f"/v1/models/{model}/embeddings"):
        assert client.get(route, headers=make_key("bob")).status_code == 404


def test_the_watched_tokens_are_kept_in_the_jobs_training_config_and_bad_ones_are_a_422_naming_them(
    client, alice, parallel_id
):
    """A word, a word after a space, a vocabulary entry: kept as given (the worker resolves them); an empty token,
    one over 50 characters or over 20 tokens are refused, the error pointing at the field and the value."""
    training = {"max_steps": 5, "probe_tokens": ["the", " cat", "Ġdog"]}
    job = {"objective": "translation", "dataset_id": parallel_id, "training": training}
    created = client.post("/v1/jobs", json=job, headers=alice)
    assert created.status_code == 201, created.text
    assert created.json()["training"]["probe_tokens"] == ["the", " cat", "Ġdog"]
    read = client.get(f"/v1/jobs/{created.json()['id']}", headers=alice).json()
    assert read["training"]["probe_tokens"] == ["the", " cat", "Ġdog"]

    def refusal(tokens: list[str]) -> dict:
        response = client.post("/v1/jobs", json={**job, "training": {"probe_tokens": tokens}}, headers=alice)
        assert response.status_code == 422, response.text
        (error,) = response.json()["detail"]
        return error

    empty = refusal(["the", ""])
    assert empty["loc"] == ["body", "training", "probe_tokens", 1] and empty["input"] == ""
    too_long = refusal(["x" * 51])
    assert too_long["loc"] == ["body", "training", "probe_tokens", 0] and too_long["input"] == "x" * 51
    assert "at most 50 characters" in too_long["msg"]
    too_many = refusal([f"t{i}" for i in range(21)])
    assert too_many["loc"] == ["body", "training", "probe_tokens"] and "at most 20 items" in too_many["msg"]
