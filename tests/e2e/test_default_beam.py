"""A translation that names no beam decodes with its model's default beam (PATCH /v1/models/{id} `beam_size`), on a
real worker: the same translations and scores as a request naming that beam. tests/api/test_default_beam.py checks
the setting itself."""

from __future__ import annotations

import json


def _translate(api, model_id: str, texts: list[str], **body) -> dict:
    response = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": texts, "backend": "pytorch", **body})
    assert response.status_code == 200, response.text
    return response.json()


def _hypotheses(answer: dict) -> list[list[tuple[str, float]]]:
    """Each text's translation and alternatives, with their scores."""
    return [
        [(h["text"], round(h["score"], 4)) for h in [t, *(t.get("alternatives") or [])]] for t in answer["translations"]
    ]


def test_a_translation_naming_no_beam_decodes_with_the_models_default(served):
    """With a default of 6 the worker returns 6 hypotheses a text for n_best 6 (a beam of 4 would refuse it), the
    same as a request naming beam 6; with a default of 1, what a request naming beam 1 gets."""
    from num2words import num2words

    api, model_id = served["api"], served["models"]["translation"]
    texts = [num2words(n, lang="en") for n in served["held_out"][:8]]  # MAX_TEXTS_PER_REQUEST
    greedy = _translate(api, model_id, texts, beam_size=1)
    widest = _translate(api, model_id, texts, beam_size=6, n_best=6)
    assert _translate(api, model_id, texts)["beam_size"] == 4  # no default set: the service's
    try:
        assert api.http.patch(f"/v1/models/{model_id}", json={"beam_size": 6}).status_code == 200
        answer = _translate(api, model_id, texts, n_best=6)
        assert answer["beam_size"] == 6 and _hypotheses(answer) == _hypotheses(widest)
        assert all(len(t["alternatives"]) == 5 for t in answer["translations"])
        assert api.http.patch(f"/v1/models/{model_id}", json={"beam_size": 1}).json()["beam_size"] == 1
        answer = _translate(api, model_id, texts)
        assert answer["beam_size"] == 1 and _hypotheses(answer) == _hypotheses(greedy)
        asked = _translate(api, model_id, texts, beam_size=6, n_best=6)  # the request's own beam wins
        assert asked["beam_size"] == 6 and _hypotheses(asked) == _hypotheses(widest)
        response = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": texts[:1], "n_best": 2})
        assert response.status_code == 422
        assert "n_best=2 cannot exceed beam_size=1, the model's default" in json.dumps(response.json())
    finally:
        assert api.http.patch(f"/v1/models/{model_id}", json={"beam_size": None}).json()["beam_size"] is None
    assert _translate(api, model_id, texts)["beam_size"] == 4
