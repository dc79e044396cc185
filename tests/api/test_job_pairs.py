"""POST /v1/jobs with `pairs`: one model for several language pairs, each a dataset known by its declared
languages; what cannot make such a job is a 422 naming the pair (no worker involved: the datasets are parsed here
as the data queue's task would)."""

from __future__ import annotations

import pytest

from tests.api.test_datasets import _jsonl, _process

ROWS = [("one", "eins"), ("two", "zwei"), ("three", "drei")]
# Long enough for the language identifier (model/data/language.py): French declared as German is found out.
FRENCH = [
    ("The cat sleeps on the warm kitchen floor.", "Le chat dort sur le sol chaud de la cuisine."),
    ("We are going to the market tomorrow morning.", "Nous allons au marché demain matin avec nos amis."),
    ("My brother reads a book every evening.", "Mon frère lit un livre chaque soir avant de dormir."),
    ("The train leaves the station at noon.", "Le train quitte la gare à midi et arrive ce soir."),
]


def _dataset(client, headers, rows=ROWS, languages: tuple[str, str] | None = ("en", "de"), name="pair") -> str:
    form = {"name": name, "kind": "parallel"}
    if languages is not None:
        form |= {"source_language": languages[0], "target_language": languages[1]}
    response = client.post(
        "/v1/datasets", headers=headers, data=form, files={"file": ("p.jsonl", _jsonl(rows), "application/jsonl")}
    )
    assert response.status_code == 201, response.text
    return _process(client, headers, response)["id"]


def _job(*dataset_ids: str, **extra) -> dict:
    return {"objective": "translation", "pairs": [{"dataset_id": d} for d in dataset_ids], **extra}


def _refused(client, headers, body: dict, loc: list, message: str) -> None:
    response = client.post("/v1/jobs", json=body, headers=headers)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"][: len(loc)] == loc and message in d["msg"] for d in detail), detail


def test_a_job_of_several_pairs_records_each_pair_from_its_datasets_languages(client, alice):
    de = _dataset(client, alice)
    fr = _dataset(client, alice, [("one", "un"), ("two", "deux")], ("en", "fr"))
    response = client.post("/v1/jobs", json=_job(de, fr, training={"max_steps": 10}), headers=alice)
    assert response.status_code == 201, response.text
    job = response.json()
    pairs = [
        {"dataset_id": de, "dataset_name": "pair", "source_language": "en", "target_language": "de"},
        {"dataset_id": fr, "dataset_name": "pair", "source_language": "en", "target_language": "fr"},
    ]
    assert job["pairs"] == pairs and job["dataset_id"] == de
    assert (job["source_language"], job["target_language"]) == ("en", None)  # their common source; targets differ
    assert job["training"]["pair_temperature"] == 5.0  # Arivazhagan et al.'s
    assert client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["pairs"] == pairs
    listed = client.get("/v1/jobs", headers=alice).json()["data"]
    assert [j["pairs"] for j in listed if j["id"] == job["id"]] == [pairs]
    by_second = client.get("/v1/jobs", params={"dataset_id": fr}, headers=alice).json()["data"]
    assert [j["id"] for j in by_second] == [job["id"]]  # the jobs that train on a dataset include jobs of pairs
    one = client.post("/v1/jobs", json={"objective": "translation", "dataset_id": de}, headers=alice).json()
    assert one["pairs"] is None
    # a reverse job learns each pair the other way
    back = client.post("/v1/jobs", json=_job(de, fr, training={"reverse": True}), headers=alice).json()
    assert [(p["source_language"], p["target_language"]) for p in back["pairs"]] == [("de", "en"), ("fr", "en")]
    assert back["source_language"] is None


def test_a_dataset_a_running_job_of_pairs_trains_on_cannot_be_deleted(client, alice):
    de = _dataset(client, alice)
    fr = _dataset(client, alice, [("one", "un"), ("two", "deux")], ("en", "fr"))
    job = client.post("/v1/jobs", json=_job(de, fr), headers=alice).json()
    response = client.delete(f"/v1/datasets/{fr}", headers=alice)
    assert response.status_code == 409 and job["id"] in response.json()["detail"], response.text
    assert client.post(f"/v1/jobs/{job['id']}/cancel", headers=alice).status_code in (200, 202)
    assert client.delete(f"/v1/datasets/{fr}", headers=alice).status_code == 204
    gone = client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["pairs"][1]
    assert gone["dataset_id"] is None and gone["dataset_name"] is None


def test_a_dataset_without_languages_or_of_a_pair_given_twice_is_422(client, alice):
    de = _dataset(client, alice)
    bare = _dataset(client, alice, languages=None)
    _refused(client, alice, _job(de, bare), ["body", "pairs", "1", "dataset_id"], "declares no source_language")
    de_again = _dataset(client, alice, [("four", "vier"), ("five", "fünf")])
    _refused(client, alice, _job(de, de_again), ["body", "pairs", "1", "dataset_id"], "are both en->de")
    _refused(client, alice, _job(de, de), ["body", "pairs", "1", "dataset_id"], "is listed twice (pairs.0 too)")
    same = _dataset(client, alice, languages=("en", "en"))
    _refused(client, alice, _job(de, same), ["body", "pairs", "1", "dataset_id"], "a pair needs two languages")
    missing = "00000000-0000-0000-0000-000000000000"
    _refused(client, alice, _job(de, missing), ["body", "pairs", "1", "dataset_id"], f"dataset {missing} not found")


def test_a_dataset_whose_text_is_another_language_than_declared_is_422(client, alice):
    de = _dataset(client, alice)
    wrong = _dataset(client, alice, FRENCH, ("en", "nl"))
    _refused(client, alice, _job(de, wrong), ["body", "pairs", "1", "dataset_id"], "of its target sides as 'fr'")
    right = _dataset(client, alice, FRENCH, ("en", "fr"))
    assert client.post("/v1/jobs", json=_job(de, right), headers=alice).status_code == 201


@pytest.mark.parametrize(
    ("extra", "loc", "message"),
    [
        ({"objective": "denoising"}, ["body", "pairs"], "a denoising job learns one language"),
        ({"target_language": "de"}, ["body", "target_language"], "does not go with pairs"),
        ({"valid_dataset_id": "SELF"}, ["body", "valid_dataset_id"], "held out of its own rows"),
        ({"dataset_id": "00000000-0000-0000-0000-000000000001"}, ["body"], "give dataset_id or pairs, not both"),
        ({"training": {"pair_temperature": 0.5}}, ["body", "training", "pair_temperature"], "greater than or equal"),
        ({"training": {"best_pair": "en-nl"}}, ["body", "training", "best_pair"], "not one of the job's pairs"),
        ({"training": {"best_pair": "de-en"}}, ["body", "training", "best_pair"], "['en-de', 'en-fr']"),
    ],
)
def test_what_a_job_of_pairs_cannot_take_is_422(client, alice, extra, loc, message):
    de = _dataset(client, alice)
    fr = _dataset(client, alice, [("one", "un"), ("two", "deux")], ("en", "fr"))
    extra = {k: (de if v == "SELF" else v) for k, v in extra.items()}
    _refused(client, alice, {**_job(de, fr), **extra}, loc, message)


def test_one_pair_or_none_is_422(client, alice):
    de = _dataset(client, alice)
    _refused(client, alice, _job(de), ["body", "pairs"], "at least 2 items")
    _refused(client, alice, {"objective": "translation"}, ["body"], "give dataset_id (or pairs")
    one = {"objective": "translation", "dataset_id": de, "training": {"best_pair": "en-de"}}
    _refused(client, alice, one, ["body", "training", "best_pair"], "names one of a job's pairs: give them in pairs")


def test_best_pair_is_kept_with_the_job(client, alice):
    de = _dataset(client, alice)
    fr = _dataset(client, alice, [("one", "un"), ("two", "deux")], ("en", "fr"))
    body = _job(de, fr, training={"best_pair": "en-fr", "best_metric": "chrf", "early_stopping_patience": 3})
    response = client.post("/v1/jobs", json=body, headers=alice)
    assert response.status_code == 201, response.text
    assert response.json()["training"]["best_pair"] == "en-fr"


def _model_of_pairs(*targets: str) -> str:
    """A model row as a finished job of the pairs en->each target leaves it."""
    from app.db.session import session_scope
    from app.db.tables import Job, JobPair, TrainedModel
    from tests.api.test_init_model import _model_row

    model_id = _model_row("alice")
    with session_scope() as session:
        model = session.get(TrainedModel, model_id)
        job = session.get(Job, model.job_id)
        model.source_language = job.source_language = "en"
        model.pairs = [["en", target] for target in targets]
        for position, target in enumerate(targets):
            session.add(JobPair(job_id=job.id, position=position, source_language="en", target_language=target))
    return model_id


def test_a_fine_tune_of_a_model_of_pairs_on_one_dataset_is_a_job_of_that_one_pair(client, alice):
    model_id = _model_of_pairs("de", "fr")
    de = _dataset(client, alice)
    body = {"objective": "translation", "dataset_id": de, "init_model_id": model_id, "training": {"max_steps": 5}}
    response = client.post("/v1/jobs", json=body, headers=alice)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["pairs"] == [
        {"dataset_id": de, "dataset_name": "pair", "source_language": "en", "target_language": "de"}
    ]
    assert (job["source_language"], job["target_language"]) == ("en", "de")
    # pairs starting from it: their targets must be among its tokens
    fr = _dataset(client, alice, [("one", "un"), ("two", "deux")], ("en", "fr"))
    both = client.post("/v1/jobs", json=_job(de, fr, init_model_id=model_id), headers=alice)
    assert both.status_code == 201, both.text
    nl = _dataset(client, alice, [("one", "een"), ("two", "twee")], ("en", "nl"))
    _refused(client, alice, {**body, "dataset_id": nl}, ["body", "target_language"], "has no token for 'nl'")
    _refused(
        client,
        alice,
        _job(de, nl, init_model_id=model_id),
        ["body", "pairs", "1", "dataset_id"],
        "(its targets: de, fr)",
    )
    bare = _dataset(client, alice, languages=None)
    _refused(
        client, alice, {**body, "dataset_id": bare}, ["body", "target_language"], "name the pair this job fine-tunes"
    )
    given = client.post("/v1/jobs", json={**body, "dataset_id": bare, "target_language": "fr"}, headers=alice)
    assert given.status_code == 201 and given.json()["pairs"][0]["target_language"] == "fr", given.text
    _refused(
        client,
        alice,
        {**body, "valid_dataset_id": de},
        ["body", "valid_dataset_id"],
        "a fine-tune of a model of several pairs",
    )


def test_pairs_cannot_start_from_a_model_of_one_pair(client, alice):
    from tests.api.test_init_model import _model_row

    de = _dataset(client, alice)
    fr = _dataset(client, alice, [("one", "un"), ("two", "deux")], ("en", "fr"))
    body = _job(de, fr, init_model_id=_model_row("alice"))
    _refused(
        client, alice, body, ["body", "init_model_id"], "was trained on one pair: it has no target-language tokens"
    )
