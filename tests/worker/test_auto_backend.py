"""`backend: auto` on a GPU worker: CTranslate2 only where it translates on the GPU. Where it cannot (it sees no GPU,
or a model loaded there fails the probe translation: no cuBLAS 12 on a CUDA 13 host), auto is PyTorch on the GPU,
not CTranslate2 on the worker's CPU, and the worker's record says why; a request naming CTranslate2 is still served
by it, on the CPU, logged once. A CPU worker is unchanged. No GPU here: the worker's device and what CTranslate2
reports are injected, as a GPU host would report them; the translations are real (a tiny untrained model)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from model.data.tokenizer import Tokenizer
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from worker import warm
from worker.serving import ct2, translation
from worker.serving.ct2_models import Ct2Models
from worker.serving.model_cache import LoadedModel, ModelCache
from worker.tasks import inference

SENTENCES = ["the dog barks", "the cat sleeps", "a bird sings", "the dog sleeps"]
MISSING = "Library libcublas.so.12 is not found or cannot be loaded"


class Translator:
    """ctranslate2.Translator: on the GPU its translations raise `gpu_fails`; on the CPU it echoes the source."""

    made: list[str] = []

    def __init__(self, path: str, gpu_fails: str | None = None, **kwargs: Any) -> None:
        self.device, self.gpu_fails = kwargs["device"], gpu_fails
        Translator.made.append(self.device)

    def translate_batch(self, batch: list[list[str]], **_kwargs: Any) -> list[Any]:
        if self.device == "cuda" and self.gpu_fails:
            raise RuntimeError(self.gpu_fails)
        return [SimpleNamespace(hypotheses=[tokens[:-1]], scores=[-1.0]) for tokens in batch]


@pytest.fixture(scope="module")
def tiny() -> LoadedModel:
    tokenizer = Tokenizer.train(SENTENCES * 20, 300)
    torch.manual_seed(0)
    net = Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, max_positions=32)).eval()
    return LoadedModel("t-1", "translation", net, tokenizer, "span", {"sha256": "1" * 64})


def worker_on(monkeypatch, settings_env, tmp_path, tiny, device: str, ct2_gpus: int = 1, gpu_fails: str | None = None):
    """An inference worker computing on `device` (torch reports one GPU where it is cuda:0), whose CTranslate2
    counts `ct2_gpus` GPUs and whose translations on the GPU raise `gpu_fails`; model t-1 in its cache."""
    import ctranslate2

    settings_env(WORKER_DEVICE=device)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1 if device != "cpu" else 0)
    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: ct2_gpus)
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", lambda d: {"float16", "float32", "int8"})
    monkeypatch.setattr(ctranslate2, "Translator", lambda path, **kw: Translator(path, gpu_fails, **kw))
    monkeypatch.setattr(Translator, "made", [])
    monkeypatch.setattr(ct2, "available", lambda: True)
    monkeypatch.setattr(ct2, "_converted_dir", lambda loaded: tmp_path)
    monkeypatch.setattr(ct2, "amd_cpu", lambda: False)
    monkeypatch.setattr(ct2, "cpu_int8_exact", lambda: True)
    monkeypatch.setattr(ct2, "preload_cublas_once", lambda: None)
    monkeypatch.setattr(translation, "_ct2_models", Ct2Models(4))
    monkeypatch.setattr(translation, "_off_gpu", {})
    monkeypatch.setattr(translation, "_on_gpu", set())
    cache = ModelCache(4, load=lambda model_id: tiny)
    monkeypatch.setattr(inference, "cache", lambda: cache)


def _translate(backend: str = "auto") -> dict[str, Any]:
    answer = inference.translate_task("t-1", ["the dog barks"], beam_size=2, backend=backend)
    assert "translations" in answer, answer
    return answer


def _off_gpu_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "CTranslate2 cannot translate on cuda:0" in r.getMessage()]


def test_a_cpu_worker_is_unchanged(monkeypatch, settings_env, tmp_path, tiny):
    worker_on(monkeypatch, settings_env, tmp_path, tiny, "cpu", ct2_gpus=0)
    assert translation.auto_backend() == translation.Auto("ctranslate2", None)
    assert translation.resolve("auto") == "auto"
    assert _translate()["backend"] == "ctranslate2" and Translator.made == ["cpu"]
    record = warm.report(warm.State())
    assert (record["backend_auto"], record["backend_note"]) == ("ctranslate2", None)
    (model,) = record["warm_models"]  # loaded by the request: warm too, not pinned
    assert (model["model_id"], model["pinned"], model["backend"]) == ("t-1", False, "ctranslate2")


def test_a_gpu_worker_whose_ctranslate2_sees_no_gpu_serves_auto_with_pytorch(
    monkeypatch, settings_env, tmp_path, tiny, caplog
):
    """CTranslate2's own CUDA runtime sees no GPU (a wheel without CUDA, a driver too old for it): auto is PyTorch
    from the first request, and CTranslate2 is not even loaded for it."""
    worker_on(monkeypatch, settings_env, tmp_path, tiny, "cuda:0", ct2_gpus=0)
    with caplog.at_level(logging.WARNING, logger="worker.serving.translation"):
        auto = translation.auto_backend()
        assert auto.backend == "pytorch"
        assert auto.note == (
            "CTranslate2 cannot translate on cuda:0 (CTranslate2 sees 0 CUDA device(s), not cuda:0); PyTorch "
            "translates on cuda:0"
        )
        assert translation.resolve("auto") == "pytorch"  # shares PyTorch's micro-batches
        assert _translate()["backend"] == "pytorch" and Translator.made == []
        # Named, CTranslate2 still serves, from the CPU: the answer says which backend, the log why (once).
        assert _translate("ctranslate2")["backend"] == "ctranslate2" and Translator.made == ["cpu"]
        assert _translate("ctranslate2")["backend"] == "ctranslate2"
    assert len(_off_gpu_warnings(caplog)) == 1
    record = warm.report(warm.State())
    assert (record["backend_auto"], record["backend_note"]) == ("pytorch", auto.note)
    assert [m["backend"] for m in record["warm_models"]] == ["pytorch"]  # auto would use PyTorch for it


def test_a_gpu_worker_whose_ctranslate2_fails_the_probe_moves_auto_to_pytorch(
    monkeypatch, settings_env, tmp_path, tiny, caplog
):
    """As on an H200 with CUDA 13 alone: CTranslate2 counts the GPU and lists float16, so auto first tries it; the
    probe translation at load fails for want of libcublas.so.12 and the translator lands on the CPU. That request,
    and every later one leaving the backend to the service, is answered by PyTorch on the GPU."""
    worker_on(monkeypatch, settings_env, tmp_path, tiny, "cuda:0", ct2_gpus=1, gpu_fails=MISSING)
    assert translation.auto_backend() == translation.Auto("ctranslate2", None)  # nothing says otherwise yet
    with caplog.at_level(logging.WARNING, logger="worker.serving.translation"):
        assert _translate()["backend"] == "pytorch"
        assert Translator.made == ["cuda", "cpu"]  # probed on the GPU, then loaded on the CPU
        auto = translation.auto_backend()
        assert auto.backend == "pytorch" and f"translating on cuda:0 failed: RuntimeError: {MISSING}" in auto.note
        assert not auto.note.endswith("serving on the CPU)")
        assert translation.resolve("auto") == "pytorch"
        assert _translate()["backend"] == "pytorch"
        assert _translate("ctranslate2")["backend"] == "ctranslate2"  # the CPU translator, as asked
    assert len(_off_gpu_warnings(caplog)) == 1 and Translator.made == ["cuda", "cpu"]
    assert warm.report(warm.State())["backend_note"] == auto.note


def test_a_gpu_worker_whose_ctranslate2_translates_on_the_gpu_keeps_it_for_auto(
    monkeypatch, settings_env, tmp_path, tiny
):
    worker_on(monkeypatch, settings_env, tmp_path, tiny, "cuda:0", ct2_gpus=1)
    assert _translate()["backend"] == "ctranslate2" and Translator.made == ["cuda"]
    assert translation.auto_backend() == translation.Auto("ctranslate2", None)


def test_serving_backend_ctranslate2_keeps_it_on_the_cpu_and_says_so(monkeypatch, settings_env, tmp_path, tiny):
    worker_on(monkeypatch, settings_env, tmp_path, tiny, "cuda:0", ct2_gpus=0)
    settings_env(WORKER_DEVICE="cuda:0", SERVING_BACKEND="ctranslate2")
    auto = translation.auto_backend()
    assert auto.backend == "ctranslate2" and auto.note is not None
    assert auto.note.endswith("SERVING_BACKEND=ctranslate2 keeps it, on the CPU")
    assert _translate()["backend"] == "ctranslate2" and Translator.made == ["cpu"]
