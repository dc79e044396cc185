"""The CTranslate2 conversion an inference worker caches per model: made once, reused while it was made from the
same weights by the same CTranslate2 and conversion code, made again otherwise, and replaced when it no longer
loads. Real conversions of a tiny untrained model, on the CPU."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from model.data.tokenizer import Tokenizer
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from worker.serving import ct2
from worker.serving.model_cache import LoadedModel

pytest.importorskip("ctranslate2")
SENTENCES = ["the dog barks", "the cat sleeps", "a bird sings", "the dog sleeps", "a cat barks", "the bird flies"]


@pytest.fixture(scope="module")
def tiny() -> tuple[Transformer, Tokenizer]:
    tokenizer = Tokenizer.train(SENTENCES * 20, 300)
    torch.manual_seed(0)
    return Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, max_positions=32)).eval(), tokenizer


@pytest.fixture
def conversions(monkeypatch, settings_env, tiny) -> list[str]:
    """Every conversion made (by model id), the CPU's auto type being int8 on any host."""
    made: list[str] = []
    export = ct2.export_marian

    def counted(model, tokenizer, folder):
        made.append(str(folder))
        return export(model, tokenizer, folder)

    monkeypatch.setattr(ct2, "export_marian", counted)
    monkeypatch.setattr(ct2, "amd_cpu", lambda: False)
    monkeypatch.setattr(ct2, "cpu_int8_exact", lambda: True)
    return made


def _loaded(tiny, sha: str = "a" * 64) -> LoadedModel:
    net, tokenizer = tiny
    return LoadedModel("m-1", "translation", net, tokenizer, "span", {"sha256": sha})


def test_a_model_is_converted_once_and_its_cached_conversion_reused(tiny, conversions):
    loaded = _loaded(tiny)
    first = ct2.CT2Translator(loaded)
    assert len(conversions) == 1
    folder = ct2.conversion_dir(loaded)
    assert folder.name == "m-1-aaaaaaaaaaaa" and ct2.cached(folder, loaded)
    assert json.loads((folder / ct2.STAMP).read_text())["sha256"] == "a" * 64
    again = ct2.CT2Translator(loaded)
    assert len(conversions) == 1  # the cache, not a second conversion
    assert again.translate(["the dog barks"], 2, 1, None, False) == first.translate(
        ["the dog barks"], 2, 1, None, False
    )
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left


def test_other_weights_another_ctranslate2_or_conversion_code_convert_again(tiny, conversions, monkeypatch):
    loaded = _loaded(tiny)
    ct2.CT2Translator(loaded)
    ct2.CT2Translator(_loaded(tiny, sha="b" * 64))  # other weights: their own folder
    assert len(conversions) == 2
    stamp = ct2.conversion_dir(loaded) / ct2.STAMP
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "ctranslate2": "3.0.0"}))
    assert not ct2.cached(ct2.conversion_dir(loaded), loaded)
    ct2.CT2Translator(loaded)
    assert len(conversions) == 3 and ct2.cached(ct2.conversion_dir(loaded), loaded)
    monkeypatch.setattr(ct2, "CONVERSION", ct2.CONVERSION + 1)  # the export changed what it writes
    ct2.CT2Translator(loaded)
    assert len(conversions) == 4


def test_a_cached_conversion_that_no_longer_loads_is_converted_again(tiny, conversions, caplog):
    """Fault: model.bin of a cached conversion is corrupt, its stamp intact (a disk fault). Pass: the worker logs
    it, converts again and serves the model."""
    loaded = _loaded(tiny)
    ct2.CT2Translator(loaded)
    (ct2.conversion_dir(loaded) / "model.bin").write_bytes(b"not a CTranslate2 model")
    with caplog.at_level(logging.WARNING, logger="worker.serving.ct2"):
        healed = ct2.CT2Translator(loaded)
    assert len(conversions) == 2
    assert "did not load" in caplog.text and "converting it again" in caplog.text
    assert healed.translate(["the dog barks"], 2, 1, None, False)[0]["tokens"] is not None


def test_a_conversion_that_cannot_be_put_in_place_fails_and_leaves_nothing(tiny, conversions):
    """Fault: something that is not a folder holds the conversion's place. Pass: the conversion raises (auto then
    serves with PyTorch) and leaves no temporary folder."""
    loaded = _loaded(tiny)
    folder = ct2.conversion_dir(loaded)
    folder.parent.mkdir(parents=True)
    folder.write_text("in the way")
    with pytest.raises(OSError):
        ct2.CT2Translator(loaded)
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]
