"""Sampled translations through the serving backends (worker/serving/translation.py): CTranslate2's sampling and
ours draw from the same model's distribution (a cool temperature translates as well as search, top_k=1 is greedy, a
hot temperature wanders; our seed repeats the draws, CTranslate2's generator is its threads'), on the reverse task's
trained model."""

from __future__ import annotations

import pytest

from model.decode.sampling import Sampling
from tests.model.decode.test_beam import one_thread, reverse_model  # noqa: F401 (one_thread: autouse)
from tests.model.decode.test_inference import HELD_OUT
from worker.serving import ct2
from worker.serving.model_cache import LoadedModel
from worker.serving.translation import CTRANSLATE2, PYTORCH, Options, translate

pytest.importorskip("ctranslate2")
REVERSED = [" ".join(reversed(s.split())) for s in HELD_OUT]


@pytest.fixture
def loaded(settings_env, monkeypatch) -> LoadedModel:
    monkeypatch.setattr(ct2, "amd_cpu", lambda: False)
    model, tokenizer = reverse_model()
    return LoadedModel("m-sampled", "translation", model, tokenizer, "span", {"sha256": "c" * 64})


def texts(loaded: LoadedModel, backend: str, sampling: Sampling) -> list[str]:
    results, by = translate(loaded, HELD_OUT, Options(beam_size=1, sampling=sampling), backend)
    assert by == backend
    return [r["text"] for r in results]


def exact(made: list[str]) -> float:
    return sum(m == r for m, r in zip(made, REVERSED)) / len(REVERSED)


@pytest.mark.parametrize("backend", [PYTORCH, CTRANSLATE2])
def test_each_backend_samples_from_the_model(loaded, backend):
    greedy = [r["text"] for r in translate(loaded, HELD_OUT, Options(beam_size=1), backend)[0]]
    assert texts(loaded, backend, Sampling(top_k=1, seed=5)) == greedy
    cool = texts(loaded, backend, Sampling(temperature=0.1, seed=1))
    assert exact(cool) >= 0.9
    hot = Sampling(temperature=3.0, seed=2)
    first = texts(loaded, backend, hot)
    assert exact(first) < exact(cool) - 0.2  # drawn from the whole vocabulary, hot samples wander
    assert texts(loaded, backend, Sampling(temperature=3.0, seed=3)) != first
    if backend == PYTORCH:
        assert texts(loaded, backend, hot) == first  # the seed repeats the draws
