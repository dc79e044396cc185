"""Evaluations with a real inference worker: the served numbers model scored on its held-out numbers."""

from __future__ import annotations

import pytest
from num2words import num2words
from sacrebleu.metrics import BLEU, CHRF

from bench.harness.stack import wait_for
from tests.support.client import write_jsonl


def _wait(api, model_id: str, evaluation_id: str) -> dict:
    def over():
        got = api.http.get(f"/v1/models/{model_id}/evaluations/{evaluation_id}").json()
        return got if got["status"] in ("succeeded", "failed") else None

    return wait_for(over, timeout=180, what=f"evaluation {evaluation_id}", interval=0.5)


def test_a_model_is_scored_on_a_test_set_as_sacrebleu_scores_its_hypotheses(served, tmp_path):
    api, model_id = served["api"], served["models"]["translation"]
    numbers = served["held_out"][:40]
    pairs = [(num2words(n, lang="en"), num2words(n, lang="de")) for n in numbers]
    dataset = api.upload(write_jsonl(tmp_path / "test.jsonl", pairs), "parallel")
    created = api.http.post(
        f"/v1/models/{model_id}/evaluations", json={"dataset_id": dataset["id"], "beam_size": 4, "tokenize": "intl"}
    )
    assert created.status_code == 202, created.text
    done = _wait(api, model_id, created.json()["id"])
    assert done["status"] == "succeeded", done["error"]
    assert (done["sentences"], done["translated"], done["progress"]) == (40, 40, 1.0)
    scores = done["scores"]
    assert scores["chrf"]["score"] >= 80, scores  # the model spells most held-out numbers (test_inference_api)
    assert "tok:intl" in scores["bleu"]["signature"] and "nw:2" in scores["chrf++"]["signature"]
    # the hypotheses: one per row, in order, what /translate answers, and the stored scores are theirs
    text = api.http.get(done["hypotheses_url"])
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    hypotheses = text.text.split("\n")[:-1]
    assert len(hypotheses) == 40
    first = api.http.post(
        f"/v1/models/{model_id}/translate", json={"texts": [s for s, _ in pairs[:8]], "beam_size": 4}
    ).json()
    assert [t["text"] for t in first["translations"]] == hypotheses[:8]
    assert done["backend"] == first["backend"] == "ctranslate2"  # both left it to the service
    references = [[t for _, t in pairs]]
    assert round(BLEU(tokenize="intl").corpus_score(hypotheses, references).score, 4) == scores["bleu"]["score"]
    assert round(CHRF().corpus_score(hypotheses, references).score, 4) == scores["chrf"]["score"]
    assert round(CHRF(word_order=2).corpus_score(hypotheses, references).score, 4) == scores["chrf++"]["score"]
    # how the model's low-confidence flag splits this test set, computed again from /translate's confidences
    split = scores["confidence"]
    threshold = api.http.get(f"/v1/models/{model_id}").json()["confidence_calibration"]["threshold"]
    confidences = []
    for start in range(0, 40, 8):  # at most 8 texts a request in this stack
        body = {"texts": [s for s, _ in pairs[start : start + 8]], "beam_size": 4}
        confidences += [
            t["confidence"] for t in api.http.post(f"/v1/models/{model_id}/translate", json=body).json()["translations"]
        ]
    chrfs = [CHRF().sentence_score(h, [r]).score for h, (_, r) in zip(hypotheses, pairs)]
    low = [q for q, c in zip(chrfs, confidences) if c < threshold]
    rest = [q for q, c in zip(chrfs, confidences) if c >= threshold]
    assert (split["sentences"], split["threshold"]) == (40, threshold)
    assert split["mean"] == pytest.approx(sum(confidences) / 40, abs=1e-3)
    assert split["flagged_share"] == len(low) / 40, (split, confidences, threshold)
    assert split["other_chrf"] == pytest.approx(sum(rest) / len(rest), abs=0.01)
    assert split["flagged_chrf"] == (pytest.approx(sum(low) / len(low), abs=0.01) if low else None)
