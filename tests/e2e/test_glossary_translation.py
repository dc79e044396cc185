"""Glossaries in translate requests over HTTP (real workers, PostgreSQL, Redis), on the served English -> German
numbers model: every glossary term found in a text is in its translation, whichever backend translated, each said
how; a glossary that cannot serve is refused naming the problem (a term too long for the model:
tests/worker/test_inference_failures.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def glossary(served) -> dict:
    body = {
        "name": "numbers",
        "source_language": "en",
        "target_language": "de",
        "case_sensitive": True,  # SIEBEN is not the model's sieben
        "entries": [{"source": "seven", "target": "SIEBEN"}, {"source": "hundred", "target": "hundert"}],
    }
    response = served["api"].http.post("/v1/glossaries", json=body)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.mark.parametrize("backend", ["pytorch", "ctranslate2"])
def test_every_term_of_the_glossary_found_in_a_text_is_in_its_translation(served, glossary, backend):
    api, model_id = served["api"], served["models"]["translation"]
    texts = ["seven", "three hundred and seven", "twelve"]
    plain = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": texts, "backend": backend}).json()
    body = {"texts": texts, "backend": backend, "glossary_id": glossary["id"]}
    response = api.http.post(f"/v1/models/{model_id}/translate", json=body)
    assert response.status_code == 200, response.text
    first, second, third = response.json()["translations"]
    assert [t["source"] for t in first["glossary_terms"]] == ["seven"] and "SIEBEN" in first["text"]
    assert first["glossary_terms"][0]["how"] == "replaced"  # the model writes "sieben", not "SIEBEN"
    assert [t["source"] for t in second["glossary_terms"]] == ["hundred", "seven"]
    assert "SIEBEN" in second["text"] and "hundert" in second["text"]
    assert second["glossary_terms"][0]["how"] == "present"  # the model wrote "hundert" itself
    assert third["glossary_terms"] == [] and third["text"] == plain["translations"][2]["text"]


def test_a_glossary_that_cannot_serve_is_refused_naming_it(served, glossary):
    api, model_id = served["api"], served["models"]["translation"]
    url = f"/v1/models/{model_id}/translate"
    missing = api.http.post(url, json={"texts": ["seven"], "glossary_id": "0" * 36})
    assert missing.status_code == 422 and f"glossary {'0' * 36} not found" in missing.text
    other = api.http.post(
        "/v1/glossaries",
        json={
            "name": "fr",
            "source_language": "en",
            "target_language": "fr",
            "entries": [{"source": "a", "target": "b"}],
        },
    ).json()
    assert api.http.patch(f"/v1/models/{model_id}", json={"target_language": "de"}).status_code == 200
    try:
        response = api.http.post(url, json={"texts": ["seven"], "glossary_id": other["id"]})
        assert response.status_code == 422 and "is en-fr, but the model's target language is de" in response.text
    finally:
        api.http.patch(f"/v1/models/{model_id}", json={"target_language": None})


def test_a_file_translation_and_an_evaluation_follow_the_glossary_they_name(served, glossary, tmp_path):
    from tests.support.client import write_jsonl

    api, model_id = served["api"], served["models"]["translation"]

    text = "seven\n\nthree hundred and seven\ntwelve\n"
    response = api.http.post(
        f"/v1/models/{model_id}/translations",
        files={"file": ("numbers.txt", text.encode())},
        data={"glossary_id": glossary["id"]},
    )
    assert response.status_code == 202, response.text
    done = api.succeeded(f"/v1/models/{model_id}/translations/{response.json()['id']}")
    lines = api.http.get(done["result_url"]).text.split("\n")
    assert "SIEBEN" in lines[0] and "SIEBEN" in lines[2] and "hundert" in lines[2] and "SIEBEN" not in lines[3]
    assert done["settings"]["glossary_id"] == glossary["id"]
    assert done["settings"]["glossary_terms"]["terms"] == 3  # seven, hundred, seven

    test_set = api.upload(
        write_jsonl(tmp_path / "t.jsonl", [("seven", "SIEBEN"), ("seventeen", "siebzehn"), ("twelve", "zwölf")]),
        "parallel",
    )
    plain = api.http.post(f"/v1/models/{model_id}/evaluations", json={"dataset_id": test_set["id"]}).json()
    body = {"dataset_id": test_set["id"], "glossary_id": glossary["id"]}
    response = api.http.post(f"/v1/models/{model_id}/evaluations", json=body)
    assert response.status_code == 202, response.text
    with_terms = api.succeeded(f"/v1/models/{model_id}/evaluations/{response.json()['id']}")
    plain = api.succeeded(f"/v1/models/{model_id}/evaluations/{plain['id']}")
    assert with_terms["scores"]["glossary"]["terms"] == 1  # "seven" alone: "seventeen" is another word
    assert with_terms["scores"]["glossary"]["glossary_id"] == glossary["id"] and "glossary" not in plain["scores"]
    hypotheses = api.http.get(f"/v1/models/{model_id}/evaluations/{with_terms['id']}/hypotheses").text.split("\n")
    assert hypotheses[0] == "SIEBEN" and "SIEBEN" not in hypotheses[1]
    assert with_terms["scores"]["chrf"]["score"] >= plain["scores"]["chrf"]["score"]
    missing = api.http.post(f"/v1/models/{model_id}/evaluations", json={**body, "glossary_id": "0" * 36})
    assert missing.status_code == 422 and "not found" in missing.text
    refused = api.http.post(
        f"/v1/models/{model_id}/translations",
        files={"file": ("n.txt", b"seven\n")},
        data={"glossary_id": "0" * 36},
    )
    assert refused.status_code == 422 and "not found" in refused.text
