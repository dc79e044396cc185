"""POST/GET /v1/pipelines and their steps, moved on here by the runner as the reaper would: a back-translation runs its
four steps (a reverse job, a sampled tagged translation of the target-side text, its cleaning, the forward job on the
real pairs mixed among the synthetic ones) with the dataset steps done for real and the jobs' ends written as a
worker writes them; a failed step fails the pipeline with its error and a retry makes it anew; cancel stops the
running step; bad requests are 4xx naming the problem."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from model.data.demo import reverse_task
from tests.api.test_dataset_translations import _languages, _stored_pairs, reverse  # noqa: F401 (a fixture)
from tests.api.test_datasets import _jsonl, _ready
from tests.api.test_init_model import _model_row
from tests.api.test_webhooks import _create, _deliveries
from tests.support.job_ends import end_job


def _advance(pipeline_id: str) -> list:
    from app.core.settings import get_settings
    from app.db.session import session_scope
    from app.services import pipeline_runner

    with session_scope() as session:
        return pipeline_runner.advance(session, get_settings(), pipeline_id)


def _end_job(job_id: str, status: str = "succeeded", error: str | None = None) -> str | None:
    """The job's end as its worker writes it (tests/support/job_ends.py), in a transaction of its own."""
    from app.db.session import session_scope

    with session_scope() as session:
        return end_job(session, job_id, status, error)


@pytest.fixture
def corpora(client, alice):
    """Real pairs (reverse task, languages declared), target-side text, validation pairs: their ids."""
    from app.db.session import session_scope
    from app.db.tables import Dataset

    real = _ready(client, alice, _jsonl(reverse_task(12, max_len=8, seed=1)))["id"]
    text = "\n".join(t for _, t in reverse_task(9, max_len=8, seed=2)) + "\n"
    monolingual = _ready(client, alice, text.encode(), filename="m.txt", kind="monolingual")["id"]
    valid = _ready(client, alice, _jsonl(reverse_task(4, max_len=8, seed=3)))["id"]
    with session_scope() as session:
        session.execute(update(Dataset).where(Dataset.id == real).values(source_language="en", target_language="de"))
        session.execute(update(Dataset).where(Dataset.id == monolingual).values(source_language="de"))
    return {"real": real, "monolingual": monolingual, "valid": valid}


def _backtranslation(corpora, **extra) -> dict:
    return {
        "kind": "backtranslation", "name": "bt", "dataset_id": corpora["real"],
        "monolingual_dataset_id": corpora["monolingual"], "valid_dataset_id": corpora["valid"],
        "reverse_job": {"training": {"max_steps": 5}}, "job": {"training": {"max_steps": 7}},
        "decoding": {"method": "sampling", "temperature": 0.1, "seed": 1}, **extra,
    }  # fmt: skip


@pytest.mark.usefixtures("reverse")
def test_a_backtranslation_runs_its_four_steps_and_ends_with_the_forward_model(client, alice, corpora, monkeypatch):
    from worker.data import filtering, ingest, translating

    monkeypatch.setattr(translating, "resolve", lambda _backend: "pytorch")  # the reverse fixture's model, on PyTorch
    hook = _create(client, alice, events=["pipeline.succeeded"]).json()
    response = client.post("/v1/pipelines", json=_backtranslation(corpora, register_as="numbers-bt"), headers=alice)
    assert response.status_code == 201, response.text
    pipeline = response.json()
    assert [(s["name"], s["kind"], s["status"]) for s in pipeline["steps"]] == [
        ("reverse", "train", "running"), ("back-translate", "translate", "waiting"), ("clean", "filter", "waiting"),
        ("train", "train", "waiting"),
    ]  # fmt: skip
    url = f"/v1/pipelines/{pipeline['id']}"
    reverse_job = client.get(pipeline["steps"][0]["url"], headers=alice).json()
    assert reverse_job["training"]["reverse"] is True and reverse_job["training"]["max_steps"] == 5
    assert (reverse_job["source_language"], reverse_job["target_language"]) == ("de", "en")
    assert _advance(pipeline["id"]) == []  # nothing new: the job still runs
    reverse_model = _end_job(reverse_job["id"])
    (started,) = _advance(pipeline["id"])
    assert started.kind == "translate"
    step = client.get(url, headers=alice).json()["steps"][1]
    assert step["status"] == "running" and step["url"].startswith(f"/v1/models/{reverse_model}/dataset-translations/")
    assert translating.make(started.id) == "succeeded"
    assert _advance(pipeline["id"]) == []  # its dataset is still being parsed
    synthetic = client.get(step["url"], headers=alice).json()["output_dataset_id"]
    assert ingest.process(synthetic) == "ready"
    (cleaning,) = _advance(pipeline["id"])
    assert cleaning.kind == "filter" and filtering.make(cleaning.id) == "ready"
    cleaned = client.get(f"/v1/datasets/{cleaning.id}", headers=alice).json()
    assert cleaned["parent_id"] == synthetic and set(cleaned["filter_rules"]) == {
        "drop_empty", "deduplicate", "drop_copies", "max_ratio"
    }  # fmt: skip
    pairs = _stored_pairs(synthetic)
    assert all(source.startswith("<BT> ") for source, _ in pairs)  # tagged synthetic sources, real targets
    (forward,) = _advance(pipeline["id"])
    job = client.get(f"/v1/jobs/{forward.id}", headers=alice).json()
    assert (job["dataset_id"], job["mix_dataset_id"], job["mix_share"]) == (corpora["real"], cleaning.id, 0.5)
    assert (job["valid_dataset_id"], job["register_as"], job["training"]["max_steps"]) == (
        corpora["valid"], "numbers-bt", 7
    )  # fmt: skip
    assert (job["source_language"], job["target_language"], job["training"]["reverse"]) == ("en", "de", False)
    model = _end_job(forward.id)
    assert _advance(pipeline["id"]) == []
    done = client.get(url, headers=alice).json()
    assert (done["status"], done["model_id"], done["error"]) == ("succeeded", model, None)
    assert [s["status"] for s in done["steps"]] == ["succeeded"] * 4
    assert done["steps"][2]["output"] == {"dataset_id": cleaning.id}
    assert [(e["type"], e["data"]["model_id"]) for e in _pipeline_events(client, alice, hook)] == [
        ("pipeline.succeeded", model)
    ]
    assert client.get("/v1/pipelines", headers=alice).json()["total"] == 1
    assert client.post(f"{url}/cancel", headers=alice).status_code == 409
    assert client.delete(url, headers=alice).status_code == 204
    assert client.get(f"/v1/jobs/{forward.id}", headers=alice).status_code == 200  # its steps' objects stay


def _pipeline_events(client, alice, hook: dict) -> list[dict]:
    """The pipeline events recorded for a webhook endpoint, oldest first."""
    deliveries = _deliveries(client, alice, hook["id"])
    return [d["payload"] for d in reversed(deliveries) if d["event_type"].startswith("pipeline.")]


def test_a_failed_step_fails_the_pipeline_and_a_retry_makes_it_anew(client, alice, corpora):
    hook = _create(client, alice, events=["pipeline.failed", "pipeline.succeeded"]).json()
    pipeline = client.post("/v1/pipelines", json=_backtranslation(corpora), headers=alice).json()
    url = f"/v1/pipelines/{pipeline['id']}"
    first = pipeline["steps"][0]["id"]
    assert client.post(f"{url}/retry", headers=alice).status_code == 409  # running, not failed
    assert client.delete(url, headers=alice).status_code == 409  # running: cancel it first
    _end_job(first, "failed", "CUDA out of memory")
    _advance(pipeline["id"])
    failed = client.get(url, headers=alice).json()
    assert failed["status"] == "failed" and failed["finished_at"] is not None
    assert failed["error"] == f"step 1 (reverse) failed: job {first} failed: CUDA out of memory"
    (event,) = _pipeline_events(client, alice, hook)  # once, however often the runner looks again
    _advance(pipeline["id"])
    assert len(_pipeline_events(client, alice, hook)) == 1
    assert event["type"] == "pipeline.failed" and event["data"] == {
        "pipeline_id": pipeline["id"], "name": "bt", "kind": "backtranslation", "status": "failed", "model_id": None,
        "error": failed["error"], "link": url,
    }  # fmt: skip
    retried = client.post(f"{url}/retry", headers=alice)
    assert retried.status_code == 202, retried.text
    step = retried.json()["steps"][0]
    assert retried.json()["status"] == "running" and step["earlier"] == [first] and step["id"] not in (None, first)
    assert client.get(step["url"], headers=alice).json()["status"] == "queued"


def test_cancel_stops_the_running_step(client, alice, corpora):
    hook = _create(client, alice, events=["pipeline.cancelled"]).json()
    pipeline = client.post("/v1/pipelines", json=_backtranslation(corpora), headers=alice).json()
    url = f"/v1/pipelines/{pipeline['id']}"
    cancelled = client.post(f"{url}/cancel", headers=alice)
    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["steps"][0]["status"] == "cancelled"
    assert client.get(pipeline["steps"][0]["url"], headers=alice).json()["status"] == "cancelled"
    assert client.post(f"{url}/cancel", headers=alice).status_code == 409
    assert [(e["type"], e["data"]["status"]) for e in _pipeline_events(client, alice, hook)] == [
        ("pipeline.cancelled", "cancelled")
    ]
    assert client.delete(url, headers=alice).status_code == 204


def test_a_distillation_translates_with_the_teacher_cleans_then_trains_the_student(client, alice, corpora):
    from worker.data import filtering

    teacher = _model_row("alice")
    _languages(teacher, "en", "de")
    body = {
        "kind": "distillation", "name": "small", "teacher_model_id": teacher, "dataset_id": corpora["real"],
        "original_share": 0.25,
    }  # fmt: skip
    response = client.post("/v1/pipelines", json=body, headers=alice)
    assert response.status_code == 201, response.text
    pipeline = response.json()
    assert [s["name"] for s in pipeline["steps"]] == ["teacher-translate", "clean", "train-student"]
    assert pipeline["settings"]["cleaning"] == {
        "drop_empty": True, "drop_invalid_characters": False, "min_length": None, "max_length": None,
        "max_ratio": 3.0, "deduplicate": False, "drop_copies": False, "drop_placeholder_mismatches": True,
        "drop_wrong_language": False, "language_odds": None, "language_min_chars": None, "drop_misaligned": False,
    }  # fmt: skip
    translation = client.get(pipeline["steps"][0]["url"], headers=alice).json()
    assert translation["model_id"] == teacher and translation["settings"]["synthetic_side"] == "target"
    assert translation["settings"]["decoding"] == {"method": "beam", "beam_size": 4}
    from app.db.dataset_translation_tables import DatasetTranslation
    from app.db.session import session_scope
    from app.db.tables import Dataset

    # the teacher's translations as a worker leaves them: the translation succeeded, its dataset parsed and ready
    distilled = _ready(client, alice, _jsonl([("one", "eins"), ("Delete %s?", "Löschen?")]))["id"]
    with session_scope() as session:
        row = session.get(DatasetTranslation, translation["id"])
        row.status, row.output_dataset_id = "succeeded", distilled
        session.execute(update(Dataset).where(Dataset.id == distilled).values(parent_id=corpora["real"]))
    (cleaning,) = _advance(pipeline["id"])
    assert cleaning.kind == "filter" and filtering.make(cleaning.id) == "ready"
    cleaned = client.get(f"/v1/datasets/{cleaning.id}", headers=alice).json()
    assert (cleaned["name"], cleaned["parent_id"]) == ("small: distilled pairs, cleaned", distilled)
    assert set(cleaned["filter_rules"]) >= {"drop_empty", "max_ratio", "drop_placeholder_mismatches"}
    assert cleaned["filter_counts"]["removed"]["placeholder_mismatches"] == 1 and cleaned["rows"] == 1
    (student,) = _advance(pipeline["id"])
    job = client.get(f"/v1/jobs/{student.id}", headers=alice).json()
    assert (job["dataset_id"], job["mix_dataset_id"], job["mix_share"]) == (cleaning.id, corpora["real"], 0.75)
    assert job["model"]["preset"] == "tiny" and (job["source_language"], job["target_language"]) == ("en", "de")


@pytest.mark.parametrize(
    ("change", "status", "loc", "message"),
    [
        ({"monolingual_dataset_id": "real"}, 422, ["monolingual_dataset_id"], "must be a monolingual dataset"),
        ({"dataset_id": "00000000-0000-0000-0000-000000000000"}, 422, ["dataset_id"], "not found"),
        ({"monolingual_dataset_id": "french"}, 422, ["monolingual_dataset_id"], "is in fr (declared); back-trans"),
        ({"reverse_model_id": "nobody@latest"}, 422, ["reverse_model_id"], "model nobody@latest not found"),
        ({"reverse_model_id": "forward"}, 422, ["reverse_model_id"], "it must read the target language"),
        ({"job": {"training": {"max_length": 4000}}}, 422, ["job", "training", "max_length"], "max_length"),
        ({"real_share": 1.0}, 422, ["real_share"], "less than 1"),
        ({"kind": "translation"}, 422, ["body"], "does not match any of the expected tags"),
        ({"register_as": "bt"}, 403, None, "register_as needs scope 'models:write'"),
    ],
)
def test_a_bad_pipeline_is_refused_naming_the_problem_and_leaves_nothing(
    client, alice, corpora, change, status, loc, message
):
    from app.db.session import session_scope
    from app.db.tables import Dataset

    headers = alice
    if change.get("monolingual_dataset_id") == "real":
        change = {"monolingual_dataset_id": corpora["real"]}
    if change.get("monolingual_dataset_id") == "french":
        french = _ready(client, alice, b"bonjour le monde\n", filename="f.txt", kind="monolingual")["id"]
        with session_scope() as session:
            session.execute(update(Dataset).where(Dataset.id == french).values(source_language="fr"))
        change = {"monolingual_dataset_id": french}
    if change.get("reverse_model_id") == "forward":
        forward = _model_row("alice")
        _languages(forward, "en", "de")
        change = {"reverse_model_id": forward}
    if "register_as" in change:
        key = client.post("/v1/keys", headers=alice, json={"name": "t", "scopes": ["read", "train"]}).json()["key"]
        headers = {"Authorization": f"Bearer {key}"}
    jobs = client.get("/v1/jobs", headers=alice).json()["total"]
    response = client.post("/v1/pipelines", json=_backtranslation(corpora, **change), headers=headers)
    assert response.status_code == status, response.text
    if loc is None:
        assert message in response.json()["detail"]
    else:
        detail = response.json()["detail"]
        assert any(d["loc"][-len(loc) :] == loc and message in d["msg"] for d in detail), detail
    assert client.get("/v1/pipelines", headers=alice).json()["total"] == 0
    assert client.get("/v1/jobs", headers=alice).json()["total"] == jobs


def test_a_missing_teacher_or_another_owners_pipeline_is_refused(client, alice, corpora, make_key):
    body = {"kind": "distillation", "name": "s", "teacher_model_id": "teacher@latest", "dataset_id": corpora["real"]}
    missing = client.post("/v1/pipelines", json=body, headers=alice)
    assert missing.status_code == 422 and "model teacher@latest not found" in missing.text
    pipeline = client.post("/v1/pipelines", json=_backtranslation(corpora), headers=alice).json()
    bob = make_key("bob")
    for method, path in (("get", ""), ("post", "/cancel"), ("post", "/retry"), ("delete", "")):
        assert getattr(client, method)(f"/v1/pipelines/{pipeline['id']}{path}", headers=bob).status_code == 404
    assert client.get("/v1/pipelines", headers=bob).json()["total"] == 0


def test_the_command_line_starts_lists_shows_cancels_and_deletes_a_pipeline(cli, alice, corpora, tmp_path):
    key = alice["Authorization"].removeprefix("Bearer ")
    spec = tmp_path / "bt.yaml"
    spec.write_text(
        f"kind: backtranslation\nname: numbers-bt\ndataset_id: {corpora['real']}\n"
        f"monolingual_dataset_id: {corpora['monolingual']}\njob:\n  training:\n    max_steps: 7\n"
    )
    code, out, err = cli("pipeline", str(spec), "--key", key)
    assert code == 0, err
    pipeline_id = out.strip()
    code, out, _ = cli("pipelines", "--key", key)
    assert code == 0 and pipeline_id in out and "1/4 reverse" in out
    code, out, _ = cli("pipeline-status", pipeline_id, "--key", key)
    assert code == 0 and f"pipeline {pipeline_id} (backtranslation, numbers-bt): running" in out
    assert "1. reverse            train     running" in out and "4. train" in out
    code, out, _ = cli("pipeline-cancel", pipeline_id, "--key", key)
    assert code == 0 and "cancelled" in out.splitlines()[0]
    code, _, err = cli("pipeline-retry", pipeline_id, "--key", key)
    assert code == 1 and "only a failed pipeline can be retried" in err
    code, out, _ = cli("delete", "pipeline", pipeline_id, "--key", key)
    assert code == 0 and out.strip() == f"deleted pipeline {pipeline_id}"
