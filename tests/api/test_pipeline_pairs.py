"""Pipelines whose teacher or reverse model was trained on several pairs: the pipeline's direction (its dataset's
languages) picks the target language the model is asked for, checked when the pipeline is created; a dataset that
does not say which, or a target the model never learnt, is a 422 on the model's field and leaves nothing."""

from __future__ import annotations

from sqlalchemy import update

from tests.api.test_datasets import _jsonl, _ready
from tests.api.test_init_model import _model_row
from tests.api.test_pipelines import _backtranslation, corpora  # noqa: F401 (a fixture)


def _pairs_model(owner: str, pairs: list[tuple[str, str]]) -> str:
    """A model as a job of `pairs` leaves it: the pairs, their common source and target (or none)."""
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    model_id = _model_row(owner)
    sources, targets = {source for source, _ in pairs}, {target for _, target in pairs}
    with session_scope() as session:
        session.execute(
            update(TrainedModel)
            .where(TrainedModel.id == model_id)
            .values(
                pairs=[list(pair) for pair in pairs],
                source_language=sources.pop() if len(sources) == 1 else None,
                target_language=targets.pop() if len(targets) == 1 else None,
            )
        )
    return model_id


def _distillation(teacher: str, dataset: str) -> dict:
    return {"kind": "distillation", "name": "student", "teacher_model_id": teacher, "dataset_id": dataset}


def test_a_teacher_of_several_pairs_translates_into_the_datasets_target(client, alice, corpora):  # noqa: F811
    teacher = _pairs_model("alice", [("en", "de"), ("en", "fr")])
    response = client.post("/v1/pipelines", json=_distillation(teacher, corpora["real"]), headers=alice)
    assert response.status_code == 201, response.text
    pipeline = response.json()
    assert pipeline["settings"]["translate_into"] == "de"
    assert pipeline["settings"]["languages"] == {"source": "en", "target": "de"}
    translation = client.get(pipeline["steps"][0]["url"], headers=alice).json()
    assert (translation["target_language"], translation["zero_shot"]) == ("de", False)
    assert translation["settings"]["languages"] == {"source": "en", "target": "de"}


def test_a_reverse_model_of_several_pairs_writes_the_real_pairs_source(client, alice, corpora):  # noqa: F811
    reverse = _pairs_model("alice", [("de", "en"), ("de", "fr")])
    body = _backtranslation(corpora, reverse_model_id=reverse)
    response = client.post("/v1/pipelines", json=body, headers=alice)
    assert response.status_code == 201, response.text
    pipeline = response.json()
    assert pipeline["settings"]["translate_into"] == "en"
    translation = client.get(pipeline["steps"][0]["url"], headers=alice).json()
    assert (translation["model_id"], translation["target_language"]) == (reverse, "en")
    assert translation["settings"]["languages"] == {"source": "en", "target": "de"}  # synthetic sources in en


def test_a_direction_the_pipeline_cannot_tell_or_the_model_cannot_serve_is_refused(client, alice, corpora):  # noqa: F811
    teacher = _pairs_model("alice", [("en", "de"), ("en", "fr")])
    fr_nl = _pairs_model("alice", [("en", "fr"), ("en", "nl")])
    reverse = _pairs_model("alice", [("de", "fr"), ("de", "nl")])
    jobs = client.get("/v1/jobs", headers=alice).json()["total"]  # the models' own
    undeclared = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]
    refused = client.post("/v1/pipelines", json=_distillation(teacher, undeclared), headers=alice)
    assert refused.status_code == 422, refused.text
    (detail,) = refused.json()["detail"]
    assert detail["loc"] == ["body", "teacher_model_id"]
    assert f"trained on en->de, en->fr: declare the languages of dataset {undeclared}" in detail["msg"]
    refused = client.post("/v1/pipelines", json=_distillation(fr_nl, corpora["real"]), headers=alice)
    assert refused.status_code == 422, refused.text
    assert "cannot translate into 'de' (one of fr, nl); dataset" in refused.text
    refused = client.post("/v1/pipelines", json=_backtranslation(corpora, reverse_model_id=reverse), headers=alice)
    assert refused.status_code == 422 and "reverse_model_id" in refused.text, refused.text
    assert client.get("/v1/pipelines", headers=alice).json()["total"] == 0
    assert client.get("/v1/jobs", headers=alice).json()["total"] == jobs
