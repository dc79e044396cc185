"""POST/GET/DELETE /v1/models/{id}/dataset-translations checked before a worker is involved (ownership, the model's
objective and languages, the dataset's kind and side, the decoding's settings), and the worker's part run here: a
translation that dies part-way resumes after the parts written, no row lost or doubled, and its dataset is made with
its lineage."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from model.data.demo import reverse_task
from tests.api.test_datasets import _jsonl, _ready
from tests.api.test_init_model import _model_row
from tests.model.decode.test_beam import reverse_model
from worker.serving.model_cache import LoadedModel

PATH = "/v1/models/{}/dataset-translations"


def _post(client, headers, model: str, **body):
    return client.post(PATH.format(model), json=body, headers=headers)


def _languages(model: str, source: str | None, target: str | None) -> None:
    from app.db.session import session_scope
    from app.db.tables import TrainedModel

    with session_scope() as session:
        session.execute(
            update(TrainedModel).where(TrainedModel.id == model).values(source_language=source, target_language=target)
        )


def _stored_pairs(dataset_id: str) -> list[tuple[str, str]]:
    """The pairs of a dataset's file, in order, as a worker reads them."""
    from app.db.session import session_scope
    from app.db.tables import Dataset
    from worker.data.source import rows

    with session_scope() as session:
        stored = session.get(Dataset, dataset_id)
        session.expunge(stored)
    with rows(stored) as numbered:
        return [(source, target) for _line, source, target in numbered]


def test_a_translation_is_queued_listed_read_and_deleted(client, alice, mono_id):
    model = _model_row("alice")
    _languages(model, "en", "de")
    response = _post(client, alice, model, dataset_id=mono_id, decoding={"method": "sampling", "top_k": 10})
    assert response.status_code == 202, response.text
    row = response.json()
    assert (row["status"], row["sentences"], row["progress"], row["output_dataset_id"]) == ("queued", 1, 0.0, None)
    assert row["settings"]["decoding"] == {"method": "sampling", "temperature": 1.0, "top_k": 10, "seed": 0}
    assert row["settings"]["side"] == "text" and row["settings"]["synthetic_side"] == "target"
    assert row["settings"]["languages"] == {"source": "en", "target": "de"}  # the text declares none: the model's
    assert (row["rate"], row["eta_seconds"], row["counts"]) == (None, None, None)
    listed = client.get(PATH.format(model), headers=alice).json()
    assert listed["total"] == 1 and listed["data"][0]["id"] == row["id"]
    blocked = client.delete(f"/v1/datasets/{mono_id}", headers=alice)
    assert blocked.status_code == 409 and f"dataset translation(s) {row['id']} queued or running" in blocked.text
    assert client.delete(f"{PATH.format(model)}/{row['id']}", headers=alice).status_code == 204
    assert client.get(f"{PATH.format(model)}/{row['id']}", headers=alice).status_code == 404
    assert client.delete(f"/v1/datasets/{mono_id}", headers=alice).status_code == 204


@pytest.mark.parametrize(
    ("body", "loc", "message"),
    [
        ({"decoding": {"beam_size": 99}}, ["decoding", "beam_size"], "beam_size=99 exceeds MAX_BEAM_SIZE"),
        ({"decoding": {"temperature": 0.5}}, ["decoding"], "['temperature'] do not apply to method 'beam'"),
        ({"decoding": {"method": "sampling", "beam_size": 2}}, ["decoding"], "['beam_size'] do not apply"),
        ({"decoding": {"method": "sampling", "temperature": 0}}, ["temperature"], "greater than 0"),
        ({"tag": "<BT>"}, ["body"], "tag marks synthetic sources: it needs synthetic_side 'source'"),
        ({"tag": "two words", "synthetic_side": "source"}, ["tag"], "should match pattern"),
        ({"side": "target", "dataset_id": "mono"}, ["side"], "is monolingual: it has one side"),
        ({"dataset_id": "00000000-0000-0000-0000-000000000000"}, ["dataset_id"], "not found"),
        ({"side": "target"}, ["dataset_id"], "'s target is in de (declared); model"),
    ],
)
def test_a_bad_request_is_422_naming_the_field_and_leaves_nothing(client, alice, mono_id, body, loc, message):
    model = _model_row("alice")
    _languages(model, "en", "fr")
    parallel = _ready(client, alice, _jsonl([("one", "eins")]))["id"]
    from app.db.session import session_scope
    from app.db.tables import Dataset

    with session_scope() as session:
        session.execute(update(Dataset).where(Dataset.id == parallel).values(target_language="de"))
    body = {"dataset_id": parallel, **body}
    if body["dataset_id"] == "mono":
        body["dataset_id"] = mono_id
    response = _post(client, alice, model, **body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"][-len(loc) :] == loc and message in d["msg"] for d in detail), detail
    assert client.get(PATH.format(model), headers=alice).json()["total"] == 0


def test_a_denoising_model_or_another_owners_is_refused(client, alice, mono_id, make_key):
    denoising = _post(client, alice, _model_row("alice", objective="denoising"), dataset_id=mono_id)
    assert denoising.status_code == 422 and "not translation" in denoising.text
    model = _model_row("alice")
    row = _post(client, alice, model, dataset_id=mono_id).json()
    bob = make_key("bob")
    assert _post(client, bob, model, dataset_id=mono_id).status_code == 404
    for method, path in (("get", ""), ("get", f"/{row['id']}"), ("delete", f"/{row['id']}")):
        assert getattr(client, method)(PATH.format(model) + path, headers=bob).status_code == 404
    theirs = _model_row("bob")
    assert "not found" in _post(client, bob, theirs, dataset_id=mono_id).text  # alice's dataset


class Died(BaseException):
    """The worker's process dying mid-way: nothing of the task's own error handling runs."""


@pytest.fixture
def reverse(monkeypatch) -> LoadedModel:
    """The reverse task's model as the worker's model cache would give it for any model id."""
    from worker.data import translating

    model, tokenizer = reverse_model()
    loaded = LoadedModel("m-reverse", "translation", model, tokenizer, "span", {"sha256": "d" * 64})
    monkeypatch.setattr(translating, "cache", lambda: type("Cache", (), {"get": lambda self, _id: loaded})())
    monkeypatch.setattr(translating, "CHUNK_ROWS", 4)
    return loaded


def test_a_translation_that_dies_resumes_after_its_parts_and_makes_its_dataset(client, alice, reverse, monkeypatch):
    from worker.data import ingest, translating
    from worker.serving.translation import Options, translate

    limit = reverse.model.config.max_positions
    texts = [s for s, _ in reverse_task(9, max_len=8, seed=5)]
    texts[5] = " ".join(["a"] * limit)  # too long for the model: no pair
    data = _ready(client, alice, ("\n".join(texts) + "\n").encode(), filename="m.txt", kind="monolingual")
    model = _model_row("alice")
    _languages(model, None, "yy")
    body = {"dataset_id": data["id"], "backend": "pytorch", "name": "reversed"}
    response = _post(client, alice, model, **body)
    assert response.status_code == 202, response.text
    row = response.json()
    chunks: list[int] = []
    real = translating.translate_chunk

    def dies_at_the_second_chunk(loaded, chunk, settings, index, backend, references=None, target=None):
        chunks.append(index)
        if index == 1 and chunks.count(1) == 1:
            raise Died
        return real(loaded, chunk, settings, index, backend, references, target)

    monkeypatch.setattr(translating, "translate_chunk", dies_at_the_second_chunk)
    with pytest.raises(Died):
        translating.make(row["id"])
    stopped = client.get(f"{PATH.format(model)}/{row['id']}", headers=alice).json()
    assert (stopped["status"], stopped["translated"], stopped["resumed_from"]) == ("running", 4, 0)
    assert stopped["rate"] > 0 and stopped["eta_seconds"] == round(5 / stopped["rate"], 1)  # 4 of 9 rows done
    assert translating.make(row["id"]) == "succeeded"
    assert chunks == [0, 1, 1, 2]  # the first chunk's part was kept: never translated again
    done = client.get(f"{PATH.format(model)}/{row['id']}", headers=alice).json()
    assert (done["status"], done["translated"], done["resumed_from"], done["backend"]) == ("succeeded", 9, 4, "pytorch")
    assert done["counts"] == {"pairs": 8, "empty": 0, "too_long": 1}
    assert done["reference_scores"] is None  # a monolingual dataset: nothing to score against
    assert translating.make(row["id"]) == "skipped"  # a redelivery finds it over
    made = done["output_dataset_id"]
    assert ingest.process(made) == "ready"
    dataset = client.get(f"/v1/datasets/{made}", headers=alice).json()
    assert (dataset["name"], dataset["rows"], dataset["parent_id"]) == ("reversed", 8, data["id"])
    assert (dataset["source_language"], dataset["target_language"]) == (None, "yy")
    assert dataset["lineage"] == {
        "kind": "translation", "translation_id": row["id"], "model_id": model, "dataset_id": data["id"],
        "side": "text", "decoding": {"method": "beam", "beam_size": 4}, "synthetic_side": "target",
    }  # fmt: skip
    pairs = _stored_pairs(made)
    kept = texts[:5] + texts[6:]
    expected = [r["text"] for r in translate(reverse, kept, Options(beam_size=4), "pytorch")[0]]
    assert pairs == list(zip(kept, expected))  # in order, each row once
    from app.artifacts import get_store

    assert get_store().list_files(f"translations/{model}") == []  # the parts are gone


def test_sampled_back_translations_are_tagged_sources_beside_the_real_text(client, alice, reverse):
    from worker.data import translating

    pairs = reverse_task(6, max_len=8, seed=6)
    data = _ready(client, alice, _jsonl(pairs))
    model = _model_row("alice")
    body = {
        "dataset_id": data["id"], "side": "target", "synthetic_side": "source", "tag": "<BT>", "backend": "pytorch",
        "decoding": {"method": "sampling", "temperature": 0.1, "seed": 3},
    }  # fmt: skip
    row = _post(client, alice, model, **body).json()
    assert translating.make(row["id"]) == "succeeded"
    done = client.get(f"{PATH.format(model)}/{row['id']}", headers=alice).json()
    made = _stored_pairs(done["output_dataset_id"])
    assert [t for _, t in made] == [t for _, t in pairs]  # the real text is the target
    assert all(s.startswith("<BT> ") for s, _ in made)
    # the reverse model reverses the targets back into the sources, at a cool temperature nearly always
    assert sum(s == f"<BT> {source}" for (s, _), (source, _) in zip(made, pairs)) >= 5
    scores = done["reference_scores"]  # the synthetic sources against the real ones, the tag left out
    assert scores == _scores([s.removeprefix("<BT> ") for s, _ in made], [source for source, _ in pairs])
    assert scores["pairs"] == 6 and scores["chrf"] > 80


def _scores(hypotheses: list[str], references: list[str]) -> dict:
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(hypotheses, [references])
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {
        "pairs": len(hypotheses), "bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2),
        "length_ratio": round(bleu.sys_len / bleu.ref_len, 3),
    }  # fmt: skip


def test_a_parallel_datasets_translations_are_scored_against_its_other_side(client, alice, reverse):
    """A teacher's translations of a dataset's sources beside its targets: half the targets here are not what the
    model says (nor the reversal): the scores are those of the translations against the dataset's own targets."""
    from worker.data import translating

    pairs = reverse_task(8, max_len=8, seed=7)
    planted = [(s, t) if i % 2 else (s, "x y z w v u") for i, (s, t) in enumerate(pairs)]
    data = _ready(client, alice, _jsonl(planted))
    model = _model_row("alice")
    row = _post(client, alice, model, dataset_id=data["id"], side="source", backend="pytorch", name="taught").json()
    assert translating.make(row["id"]) == "succeeded"
    done = client.get(f"{PATH.format(model)}/{row['id']}", headers=alice).json()
    made = [t for _, t in _stored_pairs(done["output_dataset_id"])]
    assert done["reference_scores"] == _scores(made, [t for _, t in planted])
    truth = _scores(made, [t for _, t in pairs])  # the model reverses well: the planted targets cost it
    assert done["reference_scores"]["chrf"] < truth["chrf"] - 20 and truth["chrf"] > 80


def test_a_reverse_job_reads_every_dataset_target_first(client, alice, parallel_id):
    """training.reverse: the model a back-translation needs learns target -> source from the same datasets (its
    training, validation and mixed rows all swapped)."""
    from worker.training.job_data import load_job

    valid = _ready(client, alice, _jsonl([("three", "drei")]))["id"]
    mix = _ready(client, alice, _jsonl([("four", "vier")]))["id"]
    body = {
        "objective": "translation", "dataset_id": parallel_id, "valid_dataset_id": valid, "mix_dataset_id": mix,
        "training": {"reverse": True, "max_steps": 5},
    }  # fmt: skip
    job = client.post("/v1/jobs", json=body, headers=alice).json()
    rows = load_job(job["id"])
    assert sorted(set(rows.train_rows)) == [("eins", "one"), ("vier", "four"), ("zwei", "two")]
    assert list(rows.valid_rows) == [("drei", "three")]
    forward = client.post("/v1/jobs", json={**body, "training": {"max_steps": 5}}, headers=alice).json()
    assert sorted(set(load_job(forward["id"]).train_rows)) == [("four", "vier"), ("one", "eins"), ("two", "zwei")]
