"""A model of two pairs (en->de, en->fr) in the background routes, with real workers: an evaluation, a file and a
dataset translated into the language asked for (the test set's own pair by default for an evaluation), each
sentence as POST /translate translates it with that target_language; without one, 422 naming the pairs."""

from __future__ import annotations

import gzip
import json

import pytest
from num2words import num2words

from model.data.demo import numbers_to_words_task
from tests.support.client import write_jsonl

NUMBERS = [3, 17, 42, 99, 250, 613]
TEXTS = [num2words(n, lang="en") for n in NUMBERS]
MISSING = "trained on en->de, en->fr: give target_language, one of de, fr"


@pytest.fixture(scope="module")
def two_pairs(served, tmp_path_factory):
    """The served stack's api and a tiny model of en->de and en->fr, trained once for the module."""
    api, tmp = served["api"], tmp_path_factory.mktemp("two_pairs")
    de = api.upload(write_jsonl(tmp / "de.jsonl", numbers_to_words_task(400, seed=1)), "parallel",
                    languages=("en", "de"))  # fmt: skip
    fr = api.upload(write_jsonl(tmp / "fr.jsonl", numbers_to_words_task(400, seed=2, lang_tgt="fr")), "parallel",
                    languages=("en", "fr"))  # fmt: skip
    # long enough to read its token (300 steps, as the served models; 20 leave every translation empty): each
    # target's translations differ, so a background route tagging wrongly, or not at all, fails the checks below
    training = {"max_steps": 300, "eval_every": 300, "checkpoint_every": 300, "max_length": 40, "warmup_steps": 50,
                "max_tokens_per_batch": 2048, "seed": 3, "lr_scale": 1.0}  # fmt: skip
    body = {"objective": "translation", "pairs": [{"dataset_id": de["id"]}, {"dataset_id": fr["id"]}],
            "model": {"preset": "tiny", "vocab_size": 500}, "training": training}  # fmt: skip
    done = api.wait(api.submit(body)["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert done["status"] == "succeeded", done["error"]
    german, french = (_translate(api, done["model_id"], TEXTS, target) for target in ("de", "fr"))
    assert all(g != f for g, f in zip(german, french)), (german, french)
    return api, done["model_id"]


def _translate(api, model_id: str, texts: list[str], target: str) -> list[str]:
    body = {"texts": texts, "target_language": target, "beam_size": 4, "backend": "pytorch"}
    answer = api.http.post(f"/v1/models/{model_id}/translate", json=body)
    assert answer.status_code == 200, answer.text
    return [t["text"] for t in answer.json()["translations"]]


def test_an_evaluation_translates_into_its_test_sets_target(two_pairs, tmp_path):
    api, model_id = two_pairs
    url = f"/v1/models/{model_id}/evaluations"
    pairs = [(text, num2words(n, lang="fr")) for text, n in zip(TEXTS, NUMBERS)]
    en_fr = api.upload(write_jsonl(tmp_path / "fr.jsonl", pairs), "parallel", languages=("en", "fr"))
    created = api.http.post(url, json={"dataset_id": en_fr["id"], "backend": "pytorch"})
    assert created.status_code == 202, created.text
    assert (created.json()["target_language"], created.json()["zero_shot"]) == ("fr", False)
    done = api.succeeded(f"{url}/{created.json()['id']}")
    assert done["target_language"] == "fr"
    hypotheses = api.http.get(done["hypotheses_url"]).text.split("\n")[:-1]
    assert hypotheses == _translate(api, model_id, TEXTS, "fr")
    undeclared = api.upload(write_jsonl(tmp_path / "any.jsonl", pairs), "parallel")
    missing = api.http.post(url, json={"dataset_id": undeclared["id"]})
    assert missing.status_code == 422 and MISSING in missing.text
    unseen = api.http.post(url, json={"dataset_id": en_fr["id"], "target_language": "nl"})
    assert unseen.status_code == 422 and "cannot translate into 'nl'" in unseen.text


def test_a_file_is_translated_into_the_target_asked_for(two_pairs):
    api, model_id = two_pairs
    url = f"/v1/models/{model_id}/translations"
    file = {"file": ("numbers.txt", ("\n".join(TEXTS) + "\n").encode())}
    missing = api.http.post(url, files=file, data={"backend": "pytorch"})
    assert missing.status_code == 422 and MISSING in missing.text
    created = api.http.post(url, files=file, data={"backend": "pytorch", "target_language": "de"})
    assert created.status_code == 202, created.text
    done = api.succeeded(f"{url}/{created.json()['id']}")
    assert (done["target_language"], done["zero_shot"]) == ("de", None)
    assert api.http.get(done["result_url"]).text == "\n".join(_translate(api, model_id, TEXTS, "de")) + "\n"


def test_a_dataset_is_translated_into_the_target_asked_for(served, two_pairs, tmp_path):
    api, model_id = two_pairs
    url = f"/v1/models/{model_id}/dataset-translations"
    (tmp_path / "numbers.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    source = api.upload(tmp_path / "numbers.txt", "monolingual")
    missing = api.http.post(url, json={"dataset_id": source["id"]})
    assert missing.status_code == 422 and MISSING in missing.text
    body = {"dataset_id": source["id"], "target_language": "fr", "backend": "pytorch"}
    created = api.http.post(url, json=body)
    assert created.status_code == 202, created.text
    done = api.succeeded(f"{url}/{created.json()['id']}")
    assert done["target_language"] == "fr" and done["settings"]["languages"] == {"source": "en", "target": "fr"}
    made = api.processed(done["output_dataset_id"])
    assert (made["source_language"], made["target_language"], made["rows"]) == ("en", "fr", len(TEXTS))
    stored = served["artifacts"] / "datasets" / made["id"] / "data.jsonl.gz"
    pairs = [json.loads(line) for line in gzip.decompress(stored.read_bytes()).decode().splitlines()]
    assert pairs == [{"source": t, "target": a} for t, a in zip(TEXTS, _translate(api, model_id, TEXTS, "fr"))]
