"""A distillation's student started from its teacher (student_init "teacher": shrink and fine-tune): the student's job
starts from the teacher's model with the layers the pipeline asks for, and a student that cannot be cut from the
teacher is refused when the pipeline is made; the student is served with the beam the pipeline gives it."""

from __future__ import annotations

import pytest

from tests.api import test_pipelines
from tests.api.test_dataset_translations import _languages, reverse  # noqa: F401 (a fixture)
from tests.api.test_datasets import _jsonl, _ready
from tests.api.test_init_model import _model_row
from tests.api.test_pipelines import _advance

corpora = test_pipelines.corpora  # the fixture: real pairs, target-side text, validation pairs


def _distillation(teacher: str, corpora, **extra) -> dict:
    return {
        "kind": "distillation", "name": "shrunk", "teacher_model_id": teacher, "dataset_id": corpora["real"],
        "cleaning": None, "student_init": "teacher", **extra,
    }  # fmt: skip


@pytest.mark.usefixtures("reverse")
def test_the_student_starts_from_the_teacher_with_fewer_layers(client, alice, corpora):
    from app.db.dataset_translation_tables import DatasetTranslation
    from app.db.session import session_scope

    teacher = _model_row("alice", d_model=96, n_heads=4)  # tiny's 2 encoder and 2 decoder layers
    _languages(teacher, "en", "de")
    body = _distillation(teacher, corpora, job={"model": {"n_decoder_layers": 1}, "training": {"max_steps": 5}})
    response = client.post("/v1/pipelines", json=body, headers=alice)
    assert response.status_code == 201, response.text
    pipeline = response.json()
    assert pipeline["settings"]["student_init"] == "teacher"
    assert [s["name"] for s in pipeline["steps"]] == ["teacher-translate", "train-student"]
    distilled = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]
    with session_scope() as session:  # the teacher's translations, as a worker leaves them
        row = session.get(DatasetTranslation, pipeline["steps"][0]["id"])
        row.status, row.output_dataset_id = "succeeded", distilled
    (student,) = _advance(pipeline["id"])
    job = client.get(f"/v1/jobs/{student.id}", headers=alice).json()
    assert (job["init_model_id"], job["dataset_id"]) == (teacher, distilled)
    model = job["model"]
    assert (model["d_model"], model["n_heads"], model["n_encoder_layers"], model["n_decoder_layers"]) == (96, 4, 2, 1)
    assert job["training"]["max_steps"] == 5


@pytest.mark.parametrize(
    ("model", "loc", "message"),
    [
        ({"n_decoder_layers": 3}, ["job", "model", "n_decoder_layers"], "n_decoder_layers=3 exceeds init model"),
        ({"d_model": 64}, ["job", "model", "d_model"], "d_model=64 conflicts with init model"),
    ],
)
def test_a_student_the_teacher_cannot_give_is_refused_and_leaves_nothing(client, alice, corpora, model, loc, message):
    teacher = _model_row("alice", d_model=96, n_heads=4)
    _languages(teacher, "en", "de")
    jobs = client.get("/v1/jobs", headers=alice).json()["total"]
    response = client.post("/v1/pipelines", json=_distillation(teacher, corpora, job={"model": model}), headers=alice)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"][-len(loc) :] == loc and message in d["msg"] for d in detail), detail
    assert client.get("/v1/pipelines", headers=alice).json()["total"] == 0
    assert client.get("/v1/jobs", headers=alice).json()["total"] == jobs


def test_student_init_takes_fresh_or_teacher_only(client, alice, corpora):
    teacher = _model_row("alice")
    _languages(teacher, "en", "de")
    response = client.post("/v1/pipelines", json=_distillation(teacher, corpora, student_init="parent"), headers=alice)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "student_init"


@pytest.mark.usefixtures("reverse")
def test_the_student_is_served_with_the_beam_the_pipeline_gives_it(client, alice, corpora):
    """student_beam_size becomes the student's model's default beam once the pipeline succeeds."""
    from app.db.dataset_translation_tables import DatasetTranslation
    from app.db.session import session_scope
    from tests.api.test_pipelines import _end_job

    teacher = _model_row("alice")
    _languages(teacher, "en", "de")
    job = {"training": {"max_steps": 5}}
    body = _distillation(teacher, corpora, student_init="fresh", student_beam_size=1, job=job)
    pipeline = client.post("/v1/pipelines", json=body, headers=alice).json()
    assert pipeline["settings"]["student_beam_size"] == 1
    distilled = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]
    with session_scope() as session:
        row = session.get(DatasetTranslation, pipeline["steps"][0]["id"])
        row.status, row.output_dataset_id = "succeeded", distilled
    (student,) = _advance(pipeline["id"])
    model_id = _end_job(student.id)
    assert client.get(f"/v1/models/{model_id}", headers=alice).json()["beam_size"] is None  # until the pipeline ends
    assert _advance(pipeline["id"]) == []
    done = client.get(f"/v1/pipelines/{pipeline['id']}", headers=alice).json()
    assert (done["status"], done["model_id"]) == ("succeeded", model_id)
    assert client.get(f"/v1/models/{model_id}", headers=alice).json()["beam_size"] == 1
    assert client.get(f"/v1/models/{teacher}", headers=alice).json()["beam_size"] is None


@pytest.mark.parametrize(("beam", "message"), [(0, "greater than or equal to 1"), (17, "exceeds MAX_BEAM_SIZE=16")])
def test_a_student_beam_out_of_range_is_refused(client, alice, corpora, beam, message):
    teacher = _model_row("alice")
    _languages(teacher, "en", "de")
    response = client.post("/v1/pipelines", json=_distillation(teacher, corpora, student_beam_size=beam), headers=alice)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"][-1] == "student_beam_size" and message in d["msg"] for d in detail), detail
    assert client.get("/v1/pipelines", headers=alice).json()["total"] == 0
