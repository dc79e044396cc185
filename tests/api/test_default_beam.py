"""A model's default beam (PATCH /v1/models/{id} `beam_size`): set, shown, cleared and checked, and what an
evaluation, a translated file and the model's card take from it. tests/e2e/test_default_beam.py decodes with it."""

from __future__ import annotations

import pytest
from huggingface_hub import ModelCard

from tests.api.test_init_model import _model_row


def test_the_default_beam_is_set_shown_on_the_card_and_cleared(client, alice):
    model_id = _model_row("alice")
    assert client.get(f"/v1/models/{model_id}", headers=alice).json()["beam_size"] is None
    before = client.get(f"/v1/models/{model_id}/card?format=huggingface", headers=alice).text
    assert "when a request names no beam" not in before
    response = client.patch(f"/v1/models/{model_id}", json={"beam_size": 1}, headers=alice)
    assert response.status_code == 200, response.text
    assert response.json()["beam_size"] == 1
    assert client.get(f"/v1/models/{model_id}", headers=alice).json()["beam_size"] == 1
    listed = client.get("/v1/models", headers=alice).json()["data"]
    assert [m["beam_size"] for m in listed if m["id"] == model_id] == [1]
    card = ModelCard(client.get(f"/v1/models/{model_id}/card?format=huggingface", headers=alice).text).text
    assert "Its owner serves it greedily (beam 1) when a request names no beam." in card
    assert "`num_beams: 1`" in card  # what the export's generation_config.json carries
    ct2 = client.get(f"/v1/models/{model_id}/card?format=ctranslate2", headers=alice).text
    assert "Pass `beam_size=1` to `translate_batch`." in ct2
    client.patch(f"/v1/models/{model_id}", json={"description": "greedy"}, headers=alice)  # other fields: kept
    assert client.get(f"/v1/models/{model_id}", headers=alice).json()["beam_size"] == 1
    cleared = client.patch(f"/v1/models/{model_id}", json={"beam_size": None}, headers=alice)
    assert cleared.status_code == 200 and cleared.json()["beam_size"] is None


@pytest.mark.parametrize(
    ("objective", "beam", "message"),
    [
        ("translation", 0, "greater than or equal to 1"),
        ("translation", 17, "beam_size=17 exceeds 16, the widest beam this model serves (MAX_BEAM_SIZE=16"),
        ("translation", "four", "valid integer"),
        ("denoising", 2, "was trained for denoising; a beam is translation's"),
    ],
)
def test_a_default_beam_no_request_could_ask_for_is_422_naming_it_and_changes_nothing(
    client, alice, objective, beam, message
):
    model_id = _model_row("alice", objective=objective)
    response = client.patch(f"/v1/models/{model_id}", json={"beam_size": beam, "license": "mit"}, headers=alice)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert any(d["loc"][-1] == "beam_size" and message in d["msg"] for d in detail), detail
    model = client.get(f"/v1/models/{model_id}", headers=alice).json()
    assert model["beam_size"] is None and model["license"] is None


def test_a_beam_wider_than_half_the_vocabulary_is_422(client, alice, settings_env):
    model_id = _model_row("alice")
    settings_env(MAX_BEAM_SIZE="300")
    response = client.patch(f"/v1/models/{model_id}", json={"beam_size": 250}, headers=alice)
    assert response.status_code == 422 and "half its vocabulary of 489" in response.text, response.text
    assert client.patch(f"/v1/models/{model_id}", json={"beam_size": 244}, headers=alice).status_code == 200


def test_an_evaluation_and_a_file_naming_no_beam_record_the_models(client, alice, parallel_id):
    model_id = _model_row("alice")
    client.patch(f"/v1/models/{model_id}", json={"beam_size": 2}, headers=alice)
    evaluation = client.post(f"/v1/models/{model_id}/evaluations", json={"dataset_id": parallel_id}, headers=alice)
    assert evaluation.status_code == 202 and evaluation.json()["settings"]["beam_size"] == 2
    asked = client.post(
        f"/v1/models/{model_id}/evaluations", json={"dataset_id": parallel_id, "beam_size": 3}, headers=alice
    )
    assert asked.json()["settings"]["beam_size"] == 3  # the request's own wins
    files = {"file": ("doc.txt", b"forty two\n")}
    translation = client.post(f"/v1/models/{model_id}/translations", files=files, headers=alice)
    assert translation.status_code == 202 and translation.json()["settings"]["beam_size"] == 2
    other = _model_row("alice")  # none set: the service's 4
    plain = client.post(f"/v1/models/{other}/evaluations", json={"dataset_id": parallel_id}, headers=alice)
    assert plain.json()["settings"]["beam_size"] == 4
