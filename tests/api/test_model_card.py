"""A model's card (GET /v1/models/{id}/card, the README.md of its exports) and its licence (PATCH /v1/models/{id}).

Rows are made as a finished job and evaluation leave them; tests/e2e/test_model_export.py checks the card inside
real archives."""

from __future__ import annotations

from datetime import timedelta

import pytest
from huggingface_hub import ModelCard

from app.db.background_tables import Evaluation
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import Dataset, Job, TrainedModel, Worker
from app.services.card_facts import card_facts
from app.services.model_card import card_digest, render_card
from model.train.shrink import cut_from
from tests.api.test_init_model import _model_row

SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.5.1"


def _trained_on(model_id: str, dataset_id: str, parent_id: str | None = None) -> None:
    """Give the model's job its dataset, a run on a device, and the model an evaluation and a parent."""
    with session_scope() as session:
        model = session.get(TrainedModel, model_id)
        job = session.get(Job, model.job_id)
        started = utcnow() - timedelta(minutes=12)
        job.dataset_id, job.test_dataset_id = dataset_id, dataset_id
        job.started_at, job.finished_at, job.device, job.step, job.tokens_seen = started, utcnow(), "cuda", 300, 45678
        job.worker = "gpu-host-1"
        session.add(
            Worker(hostname="gpu-host-1", queues="training", pid=1, device_kind="cuda", device_name="NVIDIA H100")
        )
        job.training_config = {"max_steps": 300, "lr": 0.0007}
        model.metrics = {"valid_loss": 1.23456, "valid_bleu": 31.5}
        model.source_language, model.target_language, model.parent_model_id = "en", "de", parent_id
        session.get(Dataset, dataset_id).source_language = "en"
        session.get(Dataset, dataset_id).target_language = "de"
        session.add(
            Evaluation(
                owner_id=model.owner_id,
                model_id=model_id,
                dataset_id=dataset_id,
                settings={"beam_size": 4},
                status="succeeded",
                sentences=2,
                scores={"bleu": {"score": 27.3, "signature": SIGNATURE}, "chrf": {"score": 51.2, "signature": "c"}},
                finished_at=utcnow(),
            )
        )


def test_the_card_says_data_settings_run_scores_parent_and_licence(client, alice, parallel_id):
    parent = _model_row("alice")
    model_id = _model_row("alice")
    _trained_on(model_id, parallel_id, parent_id=parent)
    with session_scope() as session:
        session.delete(session.get(TrainedModel, parent))
        sha = session.get(Dataset, parallel_id).sha256
    response = client.get(f"/v1/models/{model_id}/card", headers=alice)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/markdown")
    card = ModelCard(response.text)
    assert card.data.language == ["en", "de"] and card.data.pipeline_tag == "translation"
    assert card.data.license is None and card.data.library_name is None  # native: no library loads it
    results = {r.metric_type: r for r in card.data.eval_results}
    assert results["bleu"].metric_value == 27.3 and results["bleu"].metric_args == {"signature": SIGNATURE}
    assert results["chrf"].metric_value == 51.2 and results["chrf"].metric_name == "chrF"
    text = card.text
    assert "| training | " in text and sha in text and "| test | " in text and "en → de" in text
    assert (
        "- device: cuda (NVIDIA H100)" in text
        and "- worker: gpu-host-1" in text
        and "- training time: 12.0 minutes" in text
        and "- tokens seen: 45,678" in text
    )
    assert '"lr": 0.0007' in text and "| valid_loss | 1.2346 |" in text
    assert "`" + SIGNATURE.replace("|", "\\|") + "`" in text and "| bleu | 27.3 |" in text  # escaped in a table
    assert f"Trained starting from model `{parent}`, deleted since." in text
    assert "Not set by its owner" in text
    assert client.get(f"/v1/models/{model_id}/card", headers=alice).text == response.text  # the same facts, bytes


def test_a_model_cut_from_its_parent_names_the_layers_it_kept(client, alice):
    """In its card and in GET /v1/models (the dashboard's "cut from")."""
    parent = _model_row("alice", n_encoder_layers=6, n_decoder_layers=3)
    model_id = _model_row("alice", n_encoder_layers=3, n_decoder_layers=1)
    with session_scope() as session:
        session.get(TrainedModel, model_id).parent_model_id = parent
    text = client.get(f"/v1/models/{model_id}/card", headers=alice).text
    assert (
        f"Cut from model `{parent}`: it kept encoder layers 0, 2 and 5 of 6 and decoder layer 0 of 3 (the first,"
        in text
    ), text
    assert "Trained starting from" not in text
    kept = {"encoder": [0, 2, 5], "decoder": [0], "encoder_of": 6, "decoder_of": 3}
    assert client.get(f"/v1/models/{model_id}", headers=alice).json()["cut_from"] == kept  # the dashboard's too
    listed = {m["id"]: m["cut_from"] for m in client.get("/v1/models", headers=alice).json()["data"]}
    assert listed[model_id] == kept and listed[parent] is None
    with session_scope() as session:
        session.delete(session.get(TrainedModel, parent))
    assert client.get(f"/v1/models/{model_id}", headers=alice).json()["cut_from"] is None  # nothing left to read
    whole = {"n_encoder_layers": 2, "n_decoder_layers": 2}
    assert cut_from(whole, whole) is None  # fine-tuned whole: "Trained starting from", as before
    assert cut_from(whole, {**whole, "n_encoder_layers": 1}) == {
        "encoder": [0], "encoder_of": 2, "decoder": [0, 1], "decoder_of": 2
    }  # fmt: skip


def test_the_licence_is_set_shown_cleared_and_a_bad_one_named(client, alice):
    model_id = _model_row("alice")
    bad = client.patch(f"/v1/models/{model_id}", json={"license": "Apache 2.0"}, headers=alice)
    assert bad.status_code == 422 and "license" in bad.text and "Apache 2.0" in bad.text
    set_ = client.patch(f"/v1/models/{model_id}", json={"license": "apache-2.0"}, headers=alice)
    assert set_.status_code == 200 and set_.json()["license"] == "apache-2.0"
    card = ModelCard(client.get(f"/v1/models/{model_id}/card", headers=alice).text)
    assert card.data.license == "apache-2.0" and "`apache-2.0`, as its owner set it." in card.text
    assert client.patch(f"/v1/models/{model_id}", json={"license": None}, headers=alice).json()["license"] is None


@pytest.mark.parametrize(("fmt", "library"), [("huggingface", "transformers"), ("ctranslate2", "ctranslate2")])
def test_each_format_says_what_loads_it(client, alice, fmt, library):
    model_id = _model_row("alice")
    text = client.get(f"/v1/models/{model_id}/card", params={"format": fmt}, headers=alice).text
    assert ModelCard(text).data.library_name == library and f'"{model_id}-{fmt}"' in text
    # int8 sums saturate on an x86 CPU without VNNI: only the CTranslate2 export's card says how to load it there
    assert ('compute_type="float32"' in text) == (fmt == "ctranslate2") and ("VNNI" in text) == (fmt == "ctranslate2")


def test_a_card_is_404_for_another_organisation_and_422_for_an_unknown_format(client, alice, make_key):
    model_id = _model_row("alice")
    assert client.get(f"/v1/models/{model_id}/card", headers=make_key("bob")).status_code == 404
    bad = client.get(f"/v1/models/{model_id}/card", params={"format": "onnx"}, headers=alice)
    assert bad.status_code == 422 and "onnx" in bad.text


def test_an_imported_model_says_it_cannot_name_its_data_and_a_changed_card_a_new_digest(client, alice):
    model_id = _model_row("alice")
    with session_scope() as session:
        model = session.get(TrainedModel, model_id)
        model.job_id = None
        before = render_card(card_facts(session, model), "native", "x")
        model.license = "mit"
        after = render_card(card_facts(session, model), "native", "x")
    assert "Imported: this service did not train it" in before and "## Training data" not in before
    assert card_digest(before) != card_digest(after) and len(card_digest(before)) == 12


def test_the_card_of_a_model_of_several_pairs_lists_each_pair_with_its_scores(client, alice):
    from app.db.tables import JobPair
    from tests.api.test_datasets import _jsonl, _ready

    de = _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]
    fr = _ready(client, alice, _jsonl([("one", "un"), ("two", "deux"), ("three", "trois")]))["id"]
    model_id = _model_row("alice")
    with session_scope() as session:
        model = session.get(TrainedModel, model_id)
        job = session.get(Job, model.job_id)
        job.dataset_id, model.source_language = de, "en"
        for position, (dataset_id, target) in enumerate(((de, "de"), (fr, "fr"))):
            session.add(JobPair(job_id=job.id, position=position, dataset_id=dataset_id, source_language="en",
                                target_language=target))  # fmt: skip
        model.metrics = {"bleu": 20.0, "bleu/en-de": 25.0, "bleu/en-fr": 15.0, "chrf/en-fr": 40.123,
                         "valid_loss": 2.5, "valid_loss/en-de": 2.0, "valid_loss/en-fr": 3.0}  # fmt: skip
    card = ModelCard(client.get(f"/v1/models/{model_id}/card", headers=alice).text)
    assert card.data.language == ["en", "de", "fr"]
    text = card.text
    assert "languages: en → de, en → fr." in text
    assert "| en → de | demo | 2 | 25.0 | – | 2.0 |" in text and "| en → fr | demo | 3 | 15.0 | 40.12 | 3.0 |" in text
    assert "On the validation set, the mean of the pairs" in text and "| bleu | 20.0 |" in text
    assert "bleu/en-de" not in text  # each pair's scores are in its row
    assert text.count("| training | demo |") == 2  # both pairs' datasets, the first not twice
    hf = ModelCard(client.get(f"/v1/models/{model_id}/card", params={"format": "huggingface"}, headers=alice).text)
    assert 'tokenizer([">>de<< Hello world."]' in hf.text  # a source begins with its target's token
    # its job deleted, the model's own pairs keep the table (the datasets no longer known through the job)
    with session_scope() as session:
        model = session.get(TrainedModel, model_id)
        model.pairs, job_id = [["en", "de"], ["en", "fr"]], model.job_id
    assert client.delete(f"/v1/jobs/{job_id}", headers=alice).status_code == 204
    text = ModelCard(client.get(f"/v1/models/{model_id}/card", headers=alice).text).text
    assert "| en → de | – | – | 25.0 | – | 2.0 |" in text and "| en → fr | – | – | 15.0 | 40.12 | 3.0 |" in text
    assert "languages: en → de, en → fr." in text
