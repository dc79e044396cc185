"""Inference over HTTP against trained tiny models: real workers (threads pool), PostgreSQL, Redis."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.harness.rows import insert_model
from bench.harness.stack import batch_sizes, create_key
from model.data.demo import grammar_cloze
from tests.e2e.conftest import METRICS_TOKEN
from tests.support.client import Api
from tests.support.collect import collect_now


def server_timing(header: str) -> dict[str, float]:
    """`queue;dur=1.20;desc="...", compute;dur=3.40` -> {"queue": 1.2, "compute": 3.4}."""
    parts = {}
    for metric in header.split(","):
        name, *params = (p.strip() for p in metric.split(";"))
        parts[name] = next(float(p[4:]) for p in params if p.startswith("dur="))
    return parts


def test_translate_spells_held_out_numbers(served):
    from num2words import num2words

    api, model_id = served["api"], served["models"]["translation"]
    numbers = served["held_out"][:32]  # 8 were too few to tell a model that learned: 5 or 6 of them by the CPU
    translations = []
    for start in range(0, len(numbers), 8):  # MAX_TEXTS_PER_REQUEST
        texts = [num2words(n, lang="en") for n in numbers[start : start + 8]]
        response = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": texts, "beam_size": 4})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["model_id"] == model_id and body["elapsed_ms"] > 0
        timing = server_timing(response.headers["Server-Timing"])
        assert set(timing) == {"queue", "compute", "total"}
        assert 0 < body["compute_ms"] == pytest.approx(timing["compute"], abs=0.01)  # the worker's, in both
        assert timing["queue"] + timing["compute"] == pytest.approx(timing["total"], abs=0.02)
        assert timing["total"] == pytest.approx(body["elapsed_ms"], abs=0.01)
        assert body["backend"] == "ctranslate2"  # the default where the model converts
        translations += body["translations"]
    correct = sum(t["text"] == num2words(n, lang="de") for t, n in zip(translations, numbers))
    assert correct >= 16, (correct, translations)  # half of 32 numbers it never saw (untrained: none)


def test_translate_gives_alternatives_and_alignments_when_asked(served):
    api, model_id = served["api"], served["models"]["translation"]
    response = api.http.post(
        f"/v1/models/{model_id}/translate",
        json={"texts": ["three hundred and twelve"], "beam_size": 4, "n_best": 3, "return_alignment": True},
    )
    assert response.status_code == 200, response.text
    translation = response.json()["translations"][0]
    scores = [translation["score"]] + [a["score"] for a in translation["alternatives"]]
    assert len(translation["alternatives"]) == 2 and scores == sorted(scores, reverse=True)
    alignment = translation["alignment"]
    assert len(alignment["pairs"]) == len(alignment["target_tokens"])
    assert all(0 <= s < len(alignment["source_tokens"]) for _, s in alignment["pairs"])
    plain = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": ["seven"]}).json()["translations"][0]
    assert plain.get("alternatives") is None and plain.get("alignment") is None


def test_a_broken_backend_is_a_503_naming_it_and_the_default_falls_back_to_the_other(served):
    """Fault: an inference worker cannot put a model's CTranslate2 conversion in place (something that is not a
    folder holds its place on the worker's disk). Pass: a request naming CTranslate2 answers 503 naming it, with
    Retry-After, never a 500; one leaving the backend to the service is answered by PyTorch, and says so."""
    from sqlalchemy import create_engine, text

    api, trained = served["api"], served["models"]["translation"]
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        key, sha = c.execute(text("SELECT storage_key, sha256 FROM models WHERE id = :m"), {"m": trained}).one()
    model_id = insert_model(served["env"]["DATABASE_URL"], "alice", key, sha)  # the same files, another model
    converted = Path(served["env"]["DATA_DIR"]) / "ctranslate2" / f"{model_id}-{sha[:12]}"
    converted.parent.mkdir(parents=True, exist_ok=True)
    converted.write_text("not a CTranslate2 model")
    body = {"texts": ["seven"], "backend": "ctranslate2"}
    response = api.http.post(f"/v1/models/{model_id}/translate", json=body)
    assert response.status_code == 503, response.text
    assert response.json()["detail"].startswith(f"inference backend 'ctranslate2' failed on model {model_id}: ")
    assert response.headers["retry-after"] == "10"
    default = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": ["seven"]})
    assert default.status_code == 200 and default.json()["backend"] == "pytorch", default.text
    body["backend"] = "pytorch"
    assert api.http.post(f"/v1/models/{model_id}/translate", json=body).status_code == 200


def test_a_corrupt_cached_conversion_is_converted_again(served):
    """Fault: a model's CTranslate2 conversion cached on the inference worker is corrupt, its stamp intact (a disk
    fault). Pass: the worker converts it again, and CTranslate2 answers."""
    import shutil

    from sqlalchemy import create_engine, text

    api, trained = served["api"], served["models"]["translation"]
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        key, sha = c.execute(text("SELECT storage_key, sha256 FROM models WHERE id = :m"), {"m": trained}).one()
    assert (
        api.http.post(f"/v1/models/{trained}/translate", json={"texts": ["seven"]}).json()["backend"] == "ctranslate2"
    )
    model_id = insert_model(served["env"]["DATABASE_URL"], "alice", key, sha)  # the same files, another model
    folder = Path(served["env"]["DATA_DIR"]) / "ctranslate2"
    converted = folder / f"{model_id}-{sha[:12]}"
    shutil.copytree(folder / f"{trained}-{sha[:12]}", converted)  # a cached conversion of the same weights
    (converted / "model.bin").write_bytes(b"not a CTranslate2 model")
    response = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": ["seven"]})
    assert response.status_code == 200 and response.json()["backend"] == "ctranslate2", response.text
    assert (converted / "model.bin").read_bytes() != b"not a CTranslate2 model"


def test_ctranslate2_backend_translates_like_pytorch(served):
    from num2words import num2words

    api, model_id = served["api"], served["models"]["translation"]
    texts = [num2words(n, lang="en") for n in served["held_out"][:8]]
    answers = {}
    for backend in ("pytorch", "ctranslate2"):
        response = api.http.post(
            f"/v1/models/{model_id}/translate", json={"texts": texts, "beam_size": 4, "n_best": 2, "backend": backend}
        )
        assert response.status_code == 200, response.text
        assert response.json()["backend"] == backend
        answers[backend] = [t["text"] for t in response.json()["translations"]]
        assert all(len(t["alternatives"]) == 1 for t in response.json()["translations"])
    agree = sum(a == b for a, b in zip(answers["pytorch"], answers["ctranslate2"]))
    assert agree >= 7, answers  # the length penalties differ (GNMT vs len^alpha): a near-tie may flip
    aligned = api.http.post(
        f"/v1/models/{model_id}/translate",
        json={"texts": texts[:1], "backend": "ctranslate2", "return_alignment": True},
    ).json()
    assert len(aligned["translations"][0]["alignment"]["pairs"]) == len(
        aligned["translations"][0]["alignment"]["target_tokens"]
    )


def test_token_probabilities_come_from_the_backend_that_translated_and_agree_across_backends(served):
    """Pass: with return_token_probs each translation lists a probability for each of its tokens (the alignment's
    target tokens) and for </s>, and their geometric mean as `confidence`; PyTorch and CTranslate2 (int8) give
    close figures for the same translation; a plain request carries no token probabilities and the same confidence
    (within int8's noise for CTranslate2), taken from the search's log-probability (CTranslate2's from its
    length-normalised score)."""
    from num2words import num2words

    api, model_id = served["api"], served["models"]["translation"]
    texts = [num2words(n, lang="en") for n in served["held_out"][:8]]
    answers = {}
    for backend in ("pytorch", "ctranslate2"):
        body = {"texts": texts, "backend": backend, "return_token_probs": True, "return_alignment": True}
        response = api.http.post(f"/v1/models/{model_id}/translate", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["backend"] == backend
        answers[backend] = response.json()["translations"]
        for t in answers[backend]:
            assert [p["token"] for p in t["token_probs"]] == [*t["alignment"]["target_tokens"], "</s>"]
            probs = [p["prob"] for p in t["token_probs"]]
            assert all(0 < p <= 1 for p in probs)
            assert t["confidence"] == pytest.approx(math.prod(probs) ** (1 / len(probs)), rel=1e-6)
    same = [(a, b) for a, b in zip(answers["pytorch"], answers["ctranslate2"]) if a["text"] == b["text"]]
    assert len(same) >= 6
    assert all(abs(a["confidence"] - b["confidence"]) < 0.05 for a, b in same), same
    for backend in ("pytorch", "ctranslate2"):  # without token probabilities: the search's own confidence
        body = {"texts": texts, "backend": backend}
        plain = api.http.post(f"/v1/models/{model_id}/translate", json=body).json()["translations"]
        assert all(p.get("token_probs") is None for p in plain)
        # PyTorch's search and its forward pass agree to rounding; CTranslate2 int8's search and its score_batch run
        # different kernels: 0.4596 against 0.4277 was seen for a two-token translation (a machine's trained model)
        tolerance = 2e-3 if backend == "pytorch" else 0.05
        assert [p["text"] for p in plain] == [t["text"] for t in answers[backend]]
        assert [p["confidence"] for p in plain] == pytest.approx(
            [t["confidence"] for t in answers[backend]], abs=tolerance
        )


def test_a_trained_model_flags_translations_below_its_calibrated_confidence(served):
    """Pass: the job calibrated its model's low-confidence flag on its validation pairs (the model shows the
    threshold and how it split them); every translation carries low_confidence = confidence < threshold; numbers of
    the kind it trained on pass, while most inputs unlike anything it saw are flagged; the numbers it never saw get a
    lower confidence on average than those it trained on (this briefly trained model is less sure of them)."""
    from num2words import num2words

    from model.data.demo import split_numbers

    api, model_id = served["api"], served["models"]["translation"]
    calibration = api.http.get(f"/v1/models/{model_id}").json()["confidence_calibration"]
    assert calibration is not None and calibration["sentences"] >= 20 and calibration["backend"] == "pytorch"
    assert 0 < calibration["threshold"] <= 1 and 0 < calibration["flagged_share"] <= 0.5, calibration
    assert calibration["flagged_chrf"] < calibration["other_chrf"], calibration
    trained = split_numbers(0, 999, held_out=0.1, seed=0)[0]
    groups = {
        "trained": [num2words(n, lang="en") for n in trained[::37][:24]],
        "held_out": [num2words(n, lang="en") for n in served["held_out"][:24]],
        "strange": [
            "purple elephants dance quietly",
            "zq xv wk",
            "the the the the the the",
            "where is the railway station",
            "qwertyuiop asdfgh",
            "Guten Morgen, wie geht es dir?",
            "12 + 7 = 19",
            "colourless green ideas sleep furiously",
        ],
    }
    flagged, confidence = {}, {}
    for name, texts in groups.items():  # 24 of each kind (8 each had the shares tie at 1/8 on some runs)
        translations = []
        for start in range(0, len(texts), 8):  # at most 8 texts a request in this stack
            response = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": texts[start : start + 8]})
            assert response.status_code == 200, response.text
            translations += response.json()["translations"]
        for t in translations:
            assert t["low_confidence"] == (t["confidence"] < calibration["threshold"]), (t, calibration)
        flagged[name] = sum(t["low_confidence"] for t in translations) / len(translations)
        confidence[name] = sum(t["confidence"] for t in translations) / len(translations)
    # most of them, not every one: a briefly trained model is sometimes sure of a translation of nonsense
    assert flagged["trained"] <= 0.25 and flagged["strange"] >= 0.75, flagged
    # numbers it never saw: less sure of them on average than of those it trained on
    assert confidence["strange"] < confidence["held_out"] < confidence["trained"], confidence


def test_fill_mask_completes_the_grammar(served):
    api, model_id = served["api"], served["models"]["denoising"]
    cloze = grammar_cloze(30, seed=7)
    correct = 0
    for masked, answer in cloze:
        response = api.http.post(f"/v1/models/{model_id}/fill-mask", json={"text": masked, "top_k": 5})
        assert response.status_code == 200, response.text
        mask = response.json()["masks"][0]
        assert server_timing(response.headers["Server-Timing"])["compute"] == response.json()["compute_ms"] > 0
        assert sum(c["score"] for c in mask["candidates"]) <= 1.0 + 1e-6
        assert mask["candidates"][0]["sequence"].count("<mask>") == 0
        correct += mask["candidates"][0]["token"] == answer
    assert correct / len(cloze) >= 0.8


def test_anatomy_totals_equal_the_real_parameter_count(served):
    from model.io.checkpoint import load_model

    api, model_id = served["api"], served["models"]["translation"]
    anatomy = api.http.get(f"/v1/models/{model_id}/anatomy").json()
    model, _, _ = load_model(served["artifacts"] / "models" / model_id)
    real = sum(p.numel() for p in model.parameters())
    assert anatomy["total_parameters"] == real == sum(anatomy["by_component"].values())
    components = {g["component"] for g in anatomy["parameters"]}
    assert "encoder.layers.0.self_attn" in components and "decoder.layers.1.encoder_attn" in components
    assert {g["symbol"] for g in anatomy["parameters"]} >= {"W_Q", "W_K", "W_V", "W_O"}
    assert anatomy["memory"]["training_total_bytes"] > anatomy["memory"]["weights_bytes"] > 0


def test_attention_rows_sum_to_one(served):
    api, model_id = served["api"], served["models"]["translation"]
    response = api.http.post(f"/v1/models/{model_id}/attention", json={"text": "forty two"})
    assert server_timing(response.headers["Server-Timing"])["compute"] > 0
    body = response.json()
    assert "compute_ms" not in body  # in the header only: the attention maps are the body
    assert body["target"] and body["source_tokens"][-1] == "</s>"
    for name in ("encoder_self", "decoder_self", "cross"):
        layers = body[name]
        assert len(layers) == 2 and len(layers[0]) == 4  # tiny: 2 layers, 4 heads
        for row in (r for layer in layers for head in layer for r in head):
            assert abs(sum(row) - 1.0) < 1e-2
    assert len(json.dumps(body)) < 200_000


def test_neighbors_exclude_the_token_itself(served):
    api, model_id = served["api"], served["models"]["denoising"]
    body = api.http.get(f"/v1/models/{model_id}/neighbors", params={"token": "dog", "k": 5}).json()
    assert len(body["neighbors"]) == 5
    assert all(n["token"].strip("\u2581") != "dog" for n in body["neighbors"])
    sims = [n["similarity"] for n in body["neighbors"]]
    assert sims == sorted(sims, reverse=True)
    missing = api.http.get(f"/v1/models/{model_id}/neighbors", params={"token": "zzqqxx"})
    assert missing.status_code == 422 and "zzqqxx" in missing.json()["detail"]


def test_geometry_says_the_projections_are_not_the_embedding_and_how_far_they_overlap(served):
    api, model_id = served["api"], served["models"]["translation"]
    body = api.http.get(f"/v1/models/{model_id}/geometry").json()
    d = body["d_model"]
    assert body["embedding_shape"][1] == d and body["projection_shape"] == [d, d]
    assert body["embedding_tied_to_output"] and body["source_and_target_embeddings_shared"]
    assert {(g["stack"], g["attention"]) for g in body["layers"]} == {
        ("encoder", "self_attn"), ("decoder", "self_attn"), ("decoder", "encoder_attn")
    }  # fmt: skip
    for g in body["layers"]:
        assert not g["shares_storage_with_embedding"]
        assert all(0 <= v <= 1 for v in g["overlap_with_embedding"].values()) and 0 <= g["overlap_q_k"] <= 1


@pytest.mark.parametrize(
    ("route", "body", "status", "needle"),
    [
        ("translate", {"texts": ["one"] * 9}, 422, "MAX_TEXTS_PER_REQUEST"),
        ("translate", {"texts": ["one " * 100]}, 422, "MAX_CHARS_PER_TEXT"),
        ("translate", {"texts": ["one"], "beam_size": 7}, 422, "MAX_BEAM_SIZE=6"),
        ("translate", {"texts": ["one"], "beam_size": 2, "n_best": 3}, 422, "n_best=3"),
        ("translate", {"texts": []}, 422, "at least 1"),
        ("translate", {"texts": ["one"], "temperature": 1}, 422, "Extra inputs"),
        ("translate", {"texts": ["x" * 70_000]}, 413, "MAX_BODY_KB=64"),
        ("fill-mask", {"text": "the dog barks"}, 422, "no <mask>"),
        ("fill-mask", {"text": "the dog <mask>", "top_k": 11}, 422, "MAX_TOP_K=10"),
    ],
)
def test_limits_answer_with_their_status_and_name(served, route, body, status, needle):
    kind = "denoising" if route == "fill-mask" else "translation"
    response = served["api"].http.post(f"/v1/models/{served['models'][kind]}/{route}", json=body)
    assert response.status_code == status, response.text
    assert needle in json.dumps(response.json())


def test_wrong_model_kind_is_422(served):
    api, models = served["api"], served["models"]
    response = api.http.post(f"/v1/models/{models['denoising']}/translate", json={"texts": ["one"]})
    assert response.status_code == 422 and "translate needs a translation model" in json.dumps(response.json())
    response = api.http.post(f"/v1/models/{models['translation']}/fill-mask", json={"text": "a <mask>"})
    assert response.status_code == 422 and "fill-mask needs a denoising model" in json.dumps(response.json())


def test_another_owner_gets_404(served):
    other = Api(served["url"], create_key(served["env"], "mallory"))
    model_id = served["models"]["translation"]
    for method, path, body in [
        ("GET", "", None),
        ("POST", "/translate", {"texts": ["one"]}),
        ("POST", "/attention", {"text": "one"}),
        ("GET", "/anatomy", None),
        ("GET", "/neighbors?token=one", None),
        ("GET", "/geometry", None),
        ("DELETE", "", None),
    ]:
        response = other.http.request(method, f"/v1/models/{model_id}{path}", json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json() == {"detail": f"model {model_id} not found"}


def test_concurrent_requests_share_batches(served):
    api, model_id = served["api"], served["models"]["translation"]

    """32 requests from 16 clients at once: batched together (in the API's groups and the worker's micro-batches),
    yet each gets exactly the translation it gets alone."""
    texts = [f"{n} " for n in ("one", "two", "three hundred", "forty two", "seven", "ninety nine", "five", "twelve")]
    alone = {
        text: api.http.post(f"/v1/models/{model_id}/translate", json={"texts": [text]}).json()["translations"]
        for text in texts
    }

    def one(i: int) -> tuple[str, int, list]:
        text = texts[i % len(texts)]
        response = api.http.post(f"/v1/models/{model_id}/translate", json={"texts": [text]})
        return text, response.status_code, response.json().get("translations")

    before = batch_sizes(api.http, METRICS_TOKEN)
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(32)))
    assert {status for _, status, _ in answers} == {200}
    for text, _, translations in answers:
        assert [t["text"] for t in translations] == [t["text"] for t in alone[text]], text
    after = batch_sizes(api.http, METRICS_TOKEN)
    total, requests = after[0] - before[0], after[1] - before[1]
    assert total / requests > 1, (total, requests)  # some were decoded with others


def test_a_deleted_model_is_404(served, tmp_path):
    """On a copy of the translation model (its own files): the stack's models stay for the other test files."""
    import shutil

    from sqlalchemy import create_engine, text

    api, trained = served["api"], served["models"]["translation"]
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        key, sha = c.execute(text("SELECT storage_key, sha256 FROM models WHERE id = :m"), {"m": trained}).one()
    shutil.copytree(served["artifacts"] / key, served["artifacts"] / "models" / "doomed-copy")
    doomed = insert_model(served["env"]["DATABASE_URL"], "alice", "models/doomed-copy", sha)
    assert api.http.post(f"/v1/models/{doomed}/translate", json={"texts": ["one"]}).status_code == 200
    assert api.http.delete(f"/v1/models/{doomed}").status_code == 200
    assert api.http.get(f"/v1/models/{doomed}").status_code == 404
    assert api.http.post(f"/v1/models/{doomed}/translate", json={"texts": ["one"]}).status_code == 404
    assert (served["artifacts"] / "models" / "doomed-copy").exists()  # left to the collector
    assert "models/doomed-copy" in collect_now(served["env"])
    assert not (served["artifacts"] / "models" / "doomed-copy").exists()
    assert api.http.get(f"/v1/models/{trained}").status_code == 200
