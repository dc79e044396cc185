"""Evaluations, file and dataset translations of a model of several pairs, checked before a worker is involved: the
target language resolved as translate resolves it (app/services/target_languages.py), recorded and returned; a model
of one pair goes on without it."""

from __future__ import annotations

import pytest

from tests.api.test_datasets import _jsonl, _process
from tests.api.test_init_model import _model_row

PAIRS = [("en", "de"), ("en", "fr")]
MISSING = "trained on en->de, en->fr: give target_language, one of de, fr"
UNSEEN = "cannot translate into 'nl' (one of de, fr)"


def _pairs_model(owner: str) -> str:
    """A model as a job of PAIRS leaves it: the job's pairs, the pairs' common source, no target."""
    from app.db.session import session_scope
    from app.db.tables import JobPair, TrainedModel

    model_id = _model_row(owner)
    with session_scope() as session:
        model = session.get(TrainedModel, model_id)
        assert model is not None and model.job_id is not None
        model.source_language, model.pairs = "en", [list(pair) for pair in PAIRS]
        for position, (source, target) in enumerate(PAIRS):
            session.add(JobPair(job_id=model.job_id, position=position, source_language=source, target_language=target))
    return model_id


def _dataset(client, headers, languages: tuple[str, str] | None) -> str:
    form = {"name": "test", "kind": "parallel"}
    if languages:
        form |= {"source_language": languages[0], "target_language": languages[1]}
    data = _jsonl([("one", "un"), ("two", "deux")])
    uploaded = client.post("/v1/datasets", headers=headers, data=form, files={"file": ("t.jsonl", data)})
    return _process(client, headers, uploaded)["id"]


def _detail(response) -> str:
    assert response.status_code == 422, response.text
    return str(response.json()["detail"])


def test_an_evaluation_takes_the_test_sets_pair_or_the_requests_target(client, alice):
    model = _pairs_model("alice")
    url = f"/v1/models/{model}/evaluations"
    en_fr = _dataset(client, alice, ("en", "fr"))
    picked = client.post(url, json={"dataset_id": en_fr}, headers=alice)
    assert picked.status_code == 202, picked.text
    assert (picked.json()["target_language"], picked.json()["zero_shot"]) == ("fr", False)
    assert "target_language" not in picked.json()["settings"]
    asked = client.post(url, json={"dataset_id": en_fr, "target_language": "de"}, headers=alice).json()
    assert (asked["target_language"], asked["zero_shot"]) == ("de", False)  # the sources' language: declared en
    de_fr = _dataset(client, alice, ("de", "fr"))  # no pair of the model: named, or zero-shot
    assert MISSING in _detail(client.post(url, json={"dataset_id": de_fr}, headers=alice))
    zero = client.post(url, json={"dataset_id": de_fr, "target_language": "fr"}, headers=alice).json()
    assert (zero["target_language"], zero["zero_shot"]) == ("fr", True)
    undeclared = _dataset(client, alice, None)
    assert MISSING in _detail(client.post(url, json={"dataset_id": undeclared}, headers=alice))
    unseen = client.post(url, json={"dataset_id": en_fr, "target_language": "nl"}, headers=alice)
    assert UNSEEN in _detail(unseen)
    listed = client.get(url, headers=alice).json()
    assert sorted(e["target_language"] for e in listed["data"]) == ["de", "fr", "fr"]


def test_a_file_translation_needs_a_target_the_model_has(client, alice):
    model = _pairs_model("alice")
    url = f"/v1/models/{model}/translations"

    def post(**form: str):
        return client.post(url, files={"file": ("doc.txt", b"forty two.\n")}, data=form, headers=alice)

    assert MISSING in _detail(post())
    assert UNSEEN in _detail(post(target_language="nl"))
    assert "must be a BCP 47 tag" in _detail(post(target_language="f r"))
    zero = post(target_language="fr", source_language="de")
    assert zero.status_code == 202, zero.text
    assert (zero.json()["target_language"], zero.json()["zero_shot"]) == ("fr", True)
    assert zero.json()["settings"]["language"] == "de"  # split as the source's language
    plain = post(target_language="de").json()
    assert (plain["target_language"], plain["zero_shot"], plain["settings"]["language"]) == ("de", None, "en")
    assert client.get(url, headers=alice).json()["total"] == 2


def test_a_dataset_translation_needs_a_target_and_declares_it(client, alice):
    model = _pairs_model("alice")
    url = f"/v1/models/{model}/dataset-translations"
    en_fr = _dataset(client, alice, ("en", "fr"))
    assert MISSING in _detail(client.post(url, json={"dataset_id": en_fr}, headers=alice))
    assert UNSEEN in _detail(client.post(url, json={"dataset_id": en_fr, "target_language": "nl"}, headers=alice))
    made = client.post(url, json={"dataset_id": en_fr, "target_language": "de"}, headers=alice)
    assert made.status_code == 202, made.text
    assert (made.json()["target_language"], made.json()["zero_shot"]) == ("de", False)
    assert made.json()["settings"]["languages"] == {"source": "en", "target": "de"}
    # the French side, zero-shot into German; a side in a language the model never saw is refused
    zero = client.post(url, json={"dataset_id": en_fr, "side": "target", "target_language": "de"}, headers=alice)
    assert (zero.json()["target_language"], zero.json()["zero_shot"]) == ("de", True)
    ja = _dataset(client, alice, ("ja", "fr"))
    refused = client.post(url, json={"dataset_id": ja, "target_language": "fr"}, headers=alice)
    assert "'s source is in ja (declared); model" in _detail(refused) and "knows de, en, fr" in _detail(refused)


@pytest.mark.parametrize("route", ["evaluations", "translations", "dataset-translations"])
def test_a_model_of_one_pair_needs_no_target_and_records_none(client, alice, parallel_id, route):
    model = _model_row("alice")
    if route == "translations":
        response = client.post(f"/v1/models/{model}/{route}", files={"file": ("d.txt", b"one.\n")}, headers=alice)
    else:
        response = client.post(f"/v1/models/{model}/{route}", json={"dataset_id": parallel_id}, headers=alice)
    assert response.status_code == 202, response.text
    assert (response.json()["target_language"], response.json()["zero_shot"]) == (None, None)


def _serving_tokens(module, model: str, tokens: dict[str, int]) -> None:
    """The stand-in model fake_decoder serves to `module`, given the language tokens of a model of several pairs."""
    loaded = module.cache().get(model)
    loaded.model_id, loaded.tokenizer.language_tokens = model, tokens


def test_the_workers_put_the_targets_token_before_each_source_and_count_it_in_what_fits(client, alice, monkeypatch):
    import worker.tasks.evaluation as evaluation_task
    import worker.tasks.file_translation as file_task
    from tests.api.test_evaluations import fake_decoder

    model = _pairs_model("alice")
    calls = fake_decoder(monkeypatch, file_task, max_positions=4)  # 3 tokens and </s>: the tag is one of them
    _serving_tokens(file_task, model, {"de": 5, "fr": 6})
    form = {"target_language": "fr"}
    row = client.post(f"/v1/models/{model}/translations", files={"file": ("d.txt", b"one two three\n")}, data=form,
                      headers=alice).json()  # fmt: skip
    file_task.translate_file_task.run(row["id"])
    assert client.get(f"/v1/models/{model}/translations/{row['id']}", headers=alice).json()["status"] == "succeeded"
    assert [t for call in calls for t in call["texts"]] == [">>fr<< one two", ">>fr<< three"]
    calls = fake_decoder(monkeypatch, evaluation_task)
    _serving_tokens(evaluation_task, model, {"de": 5, "fr": 6})
    en_fr = _dataset(client, alice, ("en", "fr"))
    evaluation = client.post(f"/v1/models/{model}/evaluations", json={"dataset_id": en_fr}, headers=alice).json()
    evaluation_task.evaluate_task.run(evaluation["id"])
    assert calls[0]["texts"] == [">>fr<< one", ">>fr<< two"]


def test_a_worker_whose_model_has_no_token_for_the_target_fails_the_row_naming_those_it_has(client, alice, monkeypatch):
    import worker.tasks.file_translation as file_task
    from tests.api.test_evaluations import fake_decoder

    model = _pairs_model("alice")
    calls = fake_decoder(monkeypatch, file_task)
    _serving_tokens(file_task, model, {"de": 5})  # a model the API knows other pairs of than its files hold
    row = client.post(f"/v1/models/{model}/translations", files={"file": ("d.txt", b"one\n")},
                      data={"target_language": "fr"}, headers=alice).json()  # fmt: skip
    file_task.translate_file_task.run(row["id"])
    failed = client.get(f"/v1/models/{model}/translations/{row['id']}", headers=alice).json()
    assert failed["status"] == "failed" and not calls
    assert failed["error"] == f"model {model} has no token for target language 'fr' (de)"
