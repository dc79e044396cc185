"""Inference tasks, called as an inference worker runs them, on a tiny untrained model: a fault of the request is a
4xx naming it, found before decoding; whatever a backend named by the request (PyTorch, CTranslate2) raises while
decoding, a ValueError too, is a 503 naming the backend and logged with its traceback. A request leaving the
backend to the service gets CTranslate2, and PyTorch where CTranslate2 cannot answer. The failures are injected
mid-decode."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
import torch

import model.decode.fill_mask
import model.decode.queries
from model.data.tokenizer import Tokenizer
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from worker.serving import ct2, translation
from worker.serving.ct2_models import Ct2Models
from worker.serving.model_cache import LoadedModel
from worker.tasks import inference

SENTENCES = ["the dog barks", "the cat sleeps", "a bird sings", "the dog sleeps", "a cat barks", "the bird flies"]
MAX_POSITIONS = 32


class Cache:
    def __init__(self, models: dict[str, LoadedModel]) -> None:
        self.models = models

    def get(self, model_id: str) -> LoadedModel:
        return self.models[model_id]


@pytest.fixture(scope="module")
def tiny() -> tuple[Transformer, Tokenizer]:
    tokenizer = Tokenizer.train(SENTENCES * 20, 300)
    torch.manual_seed(0)
    net = Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, max_positions=MAX_POSITIONS))
    return net.eval(), tokenizer


@pytest.fixture
def served(monkeypatch, settings_env, tiny) -> dict[str, LoadedModel]:
    """Model t-1 (translation) and d-1 (span denoising) in the worker's cache."""
    net, tokenizer = tiny
    models = {
        "t-1": LoadedModel("t-1", "translation", net, tokenizer, "span", {"sha256": "1" * 64}),
        "d-1": LoadedModel("d-1", "denoising", net, tokenizer, "span", {"sha256": "2" * 64}),
    }
    monkeypatch.setattr(inference, "cache", lambda: Cache(models))
    monkeypatch.setattr(translation, "_ct2_models", Ct2Models(4))
    return models


def _raise(exc: Exception):
    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise exc

    return fail


def _logged_with_traceback(caplog, backend: str, model_id: str) -> bool:
    return any(
        r.levelno == logging.ERROR and r.exc_info and f"backend {backend!r} failed" in r.getMessage()
        for r in caplog.records
        if r.name == "worker.serving.errors" and model_id in r.getMessage()
    )


def test_every_task_answers_on_the_tiny_model(served):
    """The checks before decoding let good requests through; translations go to CTranslate2 by default (the model
    really converted), or to PyTorch when asked."""
    answer = inference.translate_task("t-1", ["the dog barks"], beam_size=2, n_best=2)
    assert "translations" in answer and answer["backend"] == "ctranslate2", answer
    assert inference.translate_task("t-1", ["the dog barks"], backend="pytorch")["backend"] == "pytorch"
    assert "masks" in inference.fill_mask_task("d-1", "the <mask> barks", top_k=3)
    assert "cross" in inference.attention_task("t-1", "the dog barks")
    assert "neighbors" in inference.neighbors_task("t-1", "dog", 3)


def test_a_target_language_the_model_has_no_token_for_is_a_422_naming_what_it_has(served):
    """A model of one pair (or an imported one the API knows no pairs of) holds no language token."""
    answer = inference.translate_task("t-1", ["the dog barks"], target_language="fr")
    detail = "model t-1 has no token for target language 'fr' (none: it was trained on one pair)"
    assert answer == {"error": {"status": 422, "detail": detail}}


@pytest.mark.parametrize(
    "failure",
    [ValueError("the decoder's cache has 7 positions, not 8"), RuntimeError("CUDA error: an illegal memory access")],
)
def test_a_pytorch_failure_mid_decode_is_a_503_naming_the_backend(served, monkeypatch, caplog, failure):
    monkeypatch.setattr(model.decode.queries, "beam_search", _raise(failure))  # after translate() checked its input
    answer = inference.translate_task("t-1", ["the dog barks"], backend="pytorch")
    assert answer == {
        "error": {
            "status": 503,
            "detail": f"inference backend 'pytorch' failed on model t-1: {type(failure).__name__}: {failure}",
        }
    }
    assert _logged_with_traceback(caplog, "pytorch", "t-1")


@pytest.mark.parametrize(
    "failure", [ValueError("No position encodings are defined for positions >= 32"), RuntimeError("CUDA failed")]
)
def test_a_ctranslate2_failure_mid_decode_is_a_503_naming_the_backend(served, monkeypatch, caplog, tmp_path, failure):
    """The real CT2Translator loads (a stand-in for ctranslate2.Translator), then its translate_batch raises."""
    decoded = _ct2_that_fails(monkeypatch, tmp_path, failure)
    answer = inference.translate_task("t-1", ["the dog barks"], backend="ctranslate2")
    assert decoded, "the backend never started decoding"
    assert answer["error"]["status"] == 503
    assert answer["error"]["detail"] == (
        f"inference backend 'ctranslate2' failed on model t-1: {type(failure).__name__}: {failure}"
    )
    assert _logged_with_traceback(caplog, "ctranslate2", "t-1")


def _ct2_that_fails(monkeypatch, tmp_path, failure: Exception) -> list[list[list[str]]]:
    """ctranslate2.Translator replaced by one that loads and whose translate_batch raises `failure`; returns the
    batches it was given."""
    import ctranslate2

    decoded: list[list[list[str]]] = []

    class Translator:
        def __init__(self, path: str, **_kwargs: Any) -> None:
            self.path = path

        def translate_batch(self, batch: list[list[str]], **_kwargs: Any) -> Any:
            decoded.append(batch)
            raise failure

    monkeypatch.setattr(ct2, "available", lambda: True)
    monkeypatch.setattr(ct2, "_converted_dir", lambda loaded: tmp_path)
    monkeypatch.setattr(ctranslate2, "Translator", Translator)
    return decoded


def test_by_default_a_ctranslate2_failure_mid_decode_is_answered_by_pytorch(served, monkeypatch, caplog, tmp_path):
    """Fault: CTranslate2 raises mid-decode on a request that left the backend to the service. Pass: PyTorch
    answers it, the answer says so, and the failure is logged with its traceback; the next request tries
    CTranslate2 again (a failure may be the input's alone)."""
    decoded = _ct2_that_fails(monkeypatch, tmp_path, RuntimeError("CUDA error: an illegal memory access"))
    answer = inference.translate_task("t-1", ["the dog barks"], beam_size=2)
    assert answer["backend"] == "pytorch" and len(answer["translations"]) == 1, answer
    assert len(decoded) == 1  # CTranslate2 was asked first
    assert any(
        r.levelno == logging.ERROR and r.exc_info and "backend 'ctranslate2' failed mid-decode" in r.getMessage()
        for r in caplog.records
    )
    assert inference.translate_task("t-1", ["the dog sleeps"], beam_size=2)["backend"] == "pytorch"
    assert len(decoded) == 2


def test_by_default_a_model_ctranslate2_cannot_convert_is_served_by_pytorch(served, monkeypatch, caplog):
    """Fault: the conversion fails (a model the export does not take, a full disk). Pass: PyTorch answers, the
    reason is logged once, and later requests do not convert again; one naming CTranslate2 gets the 503."""
    tries: list[str] = []

    def cannot_convert(loaded: LoadedModel) -> Any:
        tries.append(loaded.model_id)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ct2, "_converted_dir", cannot_convert)
    with caplog.at_level(logging.WARNING):
        first = inference.translate_task("t-1", ["the dog barks"])
        second = inference.translate_task("t-1", ["the cat sleeps"])
    assert (first["backend"], second["backend"]) == ("pytorch", "pytorch") and tries == ["t-1"]
    assert "model t-1: CTranslate2 cannot serve it (OSError: [Errno 28] No space left on device)" in caplog.text
    named = inference.translate_task("t-1", ["the dog barks"], backend="ctranslate2")
    assert named["error"]["status"] == 503 and "No space left on device" in named["error"]["detail"]
    assert tries == ["t-1", "t-1"]


def test_serving_backend_sets_what_auto_means(served, monkeypatch, settings_env, tmp_path):
    """SERVING_BACKEND=pytorch: auto never touches CTranslate2. SERVING_BACKEND=ctranslate2: auto is CTranslate2
    named, so its failure mid-decode is a 503."""
    decoded = _ct2_that_fails(monkeypatch, tmp_path, ValueError("No position encodings are defined"))
    settings_env(SERVING_BACKEND="pytorch")
    assert inference.translate_task("t-1", ["the dog barks"])["backend"] == "pytorch" and decoded == []
    settings_env(SERVING_BACKEND="ctranslate2")
    answer = inference.translate_task("t-1", ["the dog barks"])
    assert answer["error"]["status"] == 503 and "backend 'ctranslate2' failed" in answer["error"]["detail"]


def test_without_ctranslate2_installed_auto_is_pytorch_and_naming_it_is_a_422(served, monkeypatch):
    monkeypatch.setattr(ct2, "available", lambda: False)
    monkeypatch.setattr(ct2, "_converted_dir", _raise(AssertionError("converted without CTranslate2")))
    assert inference.translate_task("t-1", ["the dog barks"])["backend"] == "pytorch"
    named = inference.translate_task("t-1", ["the dog barks"], backend="ctranslate2")
    assert named["error"]["status"] == 422 and "not installed on the inference workers" in named["error"]["detail"]
    unknown = inference.translate_task("t-1", ["the dog barks"], backend="marian")
    assert unknown["error"] == {
        "status": 422,
        "detail": "backend='marian' is not one of 'auto', 'pytorch', 'ctranslate2'",
    }


@pytest.mark.parametrize(
    ("task", "args", "where", "name"),
    [
        (inference.fill_mask_task, ("d-1", "the <mask> barks"), model.decode.fill_mask, "_span_candidates"),
        (inference.attention_task, ("t-1", "the dog barks"), model.decode.queries, "greedy_decode"),
        (inference.neighbors_task, ("t-1", "dog", 3), inference, "embedding_neighbors"),
    ],
)
@pytest.mark.parametrize("failure", [ValueError("expected a 2-D tensor"), RuntimeError("CUDA error: out of range")])
def test_fill_mask_attention_and_neighbours_failures_are_a_503_naming_the_backend(
    served, monkeypatch, caplog, task, args, where, name, failure
):
    monkeypatch.setattr(where, name, _raise(failure))
    answer = task(*args)
    assert answer == {
        "error": {
            "status": 503,
            "detail": f"inference backend 'pytorch' failed on model {args[0]}: {type(failure).__name__}: {failure}",
        }
    }
    assert _logged_with_traceback(caplog, "pytorch", args[0])


TOO_LONG = " ".join(["the dog barks"] * 20)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: inference.fill_mask_task("d-1", "the dog barks"), "text has no <mask> to fill"),
        (lambda: inference.fill_mask_task("d-1", TOO_LONG + " <mask>"), f"more than max_positions={MAX_POSITIONS}"),
        (lambda: inference.fill_mask_task("d-1", "the <mask> barks", top_k=0), "top_k=0 must be >= 1"),
        (lambda: inference.attention_task("t-1", TOO_LONG), f"more than max_positions={MAX_POSITIONS}"),
        (lambda: inference.attention_task("t-1", "the dog", TOO_LONG), f"more than max_positions={MAX_POSITIONS}"),
        (lambda: inference.neighbors_task("t-1", "zzqqxx"), "token 'zzqqxx' is not in the vocabulary"),
        (lambda: inference.neighbors_task("t-1", "dog", 0), "k=0 must be >= 1"),
        (lambda: inference.translate_task("t-1", ["the dog"], beam_size=2, n_best=3), "n_best=3"),
        (lambda: inference.translate_task("t-1", ["the dog"], beam_size=1000), "beam_size=1000 must be in [1, "),
        (lambda: inference.translate_task("t-1", [TOO_LONG.replace(" ", "")]), "cannot be split further"),
    ],
)
def test_a_bad_request_is_a_422_naming_it_before_any_decoding(served, monkeypatch, call, needle):
    for where, name in [
        (model.decode.queries, "beam_search"),
        (model.decode.queries, "greedy_decode"),
        (inference, "fill_mask"),
    ]:
        monkeypatch.setattr(where, name, _raise(AssertionError("decoded a request that should have been refused")))
    monkeypatch.setattr(inference, "embedding_neighbors", _raise(AssertionError("searched for a refused request")))
    answer = call()
    assert answer["error"]["status"] == 422, answer
    assert needle in answer["error"]["detail"]


def test_a_model_that_cannot_be_loaded_keeps_its_own_status(served, monkeypatch):
    """A RequestError raised while decoding (the model's files gone, say) passes through as it is."""
    from worker.serving.errors import ModelUnavailable

    monkeypatch.setattr(model.decode.queries, "beam_search", _raise(ModelUnavailable(404, "model t-1 not found")))
    assert inference.translate_task("t-1", ["the dog barks"], backend="pytorch") == {
        "error": {"status": 404, "detail": "model t-1 not found"}
    }


@pytest.mark.parametrize("backend", ["pytorch", "ctranslate2"])
def test_a_split_texts_token_probabilities_are_its_sentences_in_turn(served, backend):
    """A text past the model's length, translated sentence by sentence: its token probabilities are each sentence's
    (its tokens, then </s>) in turn, and its confidence their geometric mean."""
    sentences = ["the dog barks and the cat sleeps and a bird sings."] * 3
    answer = inference.translate_task("t-1", [" ".join(sentences)], backend=backend, return_token_probs=True)
    (merged,) = answer["translations"]
    single = inference.translate_task(
        "t-1", sentences[:1], backend=backend, return_token_probs=True, return_alignment=True
    )
    (one,) = single["translations"]
    assert merged["split"] and merged["pieces"] == 3 and answer["backend"] == backend, answer
    assert merged["token_probs"] == one["token_probs"] * 3
    assert merged["confidence"] == pytest.approx(one["confidence"], rel=1e-6)
    (plain,) = inference.translate_task("t-1", [" ".join(sentences)], backend=backend)["translations"]
    assert "token_probs" not in plain and plain["confidence"] == pytest.approx(one["confidence"], abs=2e-3)
    tokens = one["alignment"]["target_tokens"]
    # This untrained model's translations may fill its 32 positions: then nothing follows them, not even </s>.
    assert [p["token"] for p in one["token_probs"]] == tokens + ["</s>"] * (len(tokens) < MAX_POSITIONS)


def test_a_memory_lookup_without_rapidfuzz_is_a_503_naming_it(served, monkeypatch):
    """A GPU host's image lacks rapidfuzz (bench/gpu_wheels.sh): a request with a memory is refused saying so,
    not answered as a decoder's failure; one without a memory is translated as ever."""
    from model.data.translation_memory import TranslationMemory

    memory = TranslationMemory([("the dog barks", "der Hund bellt"), ("the cat sleeps", "die Katze schläft")])
    monkeypatch.setattr(inference, "memories", lambda: type("M", (), {"get": lambda self, _: memory})())
    monkeypatch.setitem(sys.modules, "rapidfuzz", None)  # `import rapidfuzz` raises ImportError
    answer = inference.translate_task("t-1", ["the dog sleeps"], backend="pytorch", memory={"dataset_id": "d"})
    assert answer["error"]["status"] == 503 and "pip install rapidfuzz" in answer["error"]["detail"], answer
    exact_only = {"dataset_id": "d", "replace_at": 100, "max_matches": 1}  # an exact match needs no scoring
    exact = inference.translate_task("t-1", ["the dog barks"], backend="pytorch", memory=exact_only)
    assert exact["translations"][0]["text"] == "der Hund bellt" and exact["backend"] == "memory", exact
    assert "translations" in inference.translate_task("t-1", ["the dog barks"], backend="pytorch")


def test_a_glossary_term_longer_than_the_model_can_write_is_a_422_naming_it(served):
    """The 32-position model: a target term of more tokens than it writes is refused before anything is decoded."""
    long_term = " ".join(["barks"] * 40)
    answer = inference.translate_task("t-1", ["the dog barks"], glossary={"entries": [["dog", long_term]]})
    assert answer["error"]["status"] == 422 and "glossary term 'barks barks" in answer["error"]["detail"], answer
    assert f"more than this model's {MAX_POSITIONS - 1}" in answer["error"]["detail"]
    fine = inference.translate_task("t-1", ["the dog barks"], glossary={"entries": [["dog", "Hund"]]})
    (translation,) = fine["translations"]
    assert "Hund" in translation["text"] and translation["glossary_terms"][0]["source"] == "dog"
