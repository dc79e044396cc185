"""Inference over HTTP against trained tiny models: real workers (threads pool), PostgreSQL, Redis."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from model.demo import grammar_cloze, grammar_sentences, numbers_to_words_task, split_numbers
from tests.support import services
from tests.support.client import Api, write_jsonl
from tests.support.stack import Processes, create_key, free_port, healthy_with_workers, run_cli, service_env, wait_for

LIMITS = {
    "MAX_TEXTS_PER_REQUEST": "8",
    "MAX_CHARS_PER_TEXT": "300",
    "MAX_BEAM_SIZE": "6",
    "MAX_TOP_K": "10",
    "MAX_BODY_KB": "64",
    "INFERENCE_TIMEOUT_SECONDS": "20",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory, postgres_url, redis_url):
    """A stack with one training and one inference worker, and two trained models (translation, fill-mask)."""
    tmp = tmp_path_factory.mktemp("served")
    name = f"t_{uuid.uuid4().hex[:12]}"
    services.create_database(postgres_url, name)
    env = service_env(
        DATABASE_URL=services.with_database(postgres_url, name),
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp / "var"),
        ARTIFACT_ROOT=str(tmp / "artifacts"),
        **LIMITS,
    )
    run_cli(env, "migrate")
    processes = Processes(tmp)
    url = processes.start_api(env, free_port())
    processes.start_worker(env, "training", "trainer")
    processes.start_worker(env, "inference", "server", pool="threads", concurrency=16)
    try:
        wait_for(healthy_with_workers(url, 2), timeout=90, what="workers")
        api = Api(url, create_key(env, "alice"))
        train_numbers, held_out = split_numbers(0, 999, held_out=0.1, seed=0)
        numbers = api.upload(
            write_jsonl(tmp / "n.jsonl", numbers_to_words_task(len(train_numbers), numbers=train_numbers)), "parallel"
        )
        (tmp / "g.txt").write_text("\n".join(grammar_sentences(3000, seed=0)) + "\n")
        grammar = api.upload(tmp / "g.txt", "monolingual")
        common = {
            "warmup_steps": 50,
            "eval_every": 100,
            "checkpoint_every": 100,
            "max_length": 40,
            "max_tokens_per_batch": 2048,
            "seed": 3,
        }
        translation_job = api.submit(
            {
                "objective": "translation",
                "dataset_id": numbers["id"],
                "model": {"preset": "tiny", "vocab_size": 500},
                "training": {**common, "max_steps": 300},
            }
        )
        denoising_job = api.submit(
            {
                "objective": "denoising",
                "dataset_id": grammar["id"],
                "model": {"preset": "tiny", "vocab_size": 450},
                "training": {**common, "max_steps": 300, "noise": "token"},
            }
        )
        models = {}
        for kind, job in (("translation", translation_job), ("denoising", denoising_job)):
            done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=600)
            assert done["status"] == "succeeded", done["error"]
            models[kind] = done["model_id"]
        yield {
            "url": url,
            "env": env,
            "api": api,
            "models": models,
            "held_out": held_out,
            "processes": processes,
            "artifacts": tmp / "artifacts",
        }
    finally:
        processes.stop(timeout=30)
        services.drop_database(postgres_url, name)


def test_translate_spells_held_out_numbers(served):
    from num2words import num2words

    api, model_id = served["api"], served["models"]["translation"]
    numbers = served["held_out"][:8]
    response = api.http.post(
        f"/v1/models/{model_id}/translate", json={"texts": [num2words(n, lang="en") for n in numbers], "beam_size": 4}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_id"] == model_id and body["elapsed_ms"] > 0
    correct = sum(t["text"] == num2words(n, lang="de") for t, n in zip(body["translations"], numbers))
    assert correct >= 6, body["translations"]


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


def test_fill_mask_completes_the_grammar(served):
    api, model_id = served["api"], served["models"]["denoising"]
    cloze = grammar_cloze(30, seed=7)
    correct = 0
    for masked, answer in cloze:
        response = api.http.post(f"/v1/models/{model_id}/fill-mask", json={"text": masked, "top_k": 5})
        assert response.status_code == 200, response.text
        mask = response.json()["masks"][0]
        assert sum(c["score"] for c in mask["candidates"]) <= 1.0 + 1e-6
        assert mask["candidates"][0]["sequence"].count("<mask>") == 0
        correct += mask["candidates"][0]["token"] == answer
    assert correct / len(cloze) >= 0.8


def test_anatomy_totals_equal_the_real_parameter_count(served):
    from model.checkpoint import load_model

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
    body = api.http.post(f"/v1/models/{model_id}/attention", json={"text": "forty two"}).json()
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

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(32)))
    assert {status for _, status, _ in answers} == {200}
    for text, _, translations in answers:
        assert [t["text"] for t in translations] == [t["text"] for t in alone[text]], text
    log = served["processes"].log("server")
    assert "micro-batch of" in log
    sizes = [int(line.split("micro-batch of ")[1].split()[0]) for line in log.splitlines() if "micro-batch of" in line]
    assert max(sizes) > 1, sizes


def test_a_deleted_model_is_404(served):
    api = served["api"]
    models = api.http.get("/v1/models").json()["data"]
    doomed = next(m for m in models if m["id"] == served["models"]["translation"])
    # Deleting last keeps the other tests independent of the order they run in.
    assert api.http.delete(f"/v1/models/{doomed['id']}").status_code == 204
    assert api.http.get(f"/v1/models/{doomed['id']}").status_code == 404
    assert api.http.post(f"/v1/models/{doomed['id']}/translate", json={"texts": ["one"]}).status_code == 404
