"""The downloadable archives (model/io/export_archive.py): one folder each, that loads where it says it does."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import torch

from app.services.exports import CT2_QUANTIZATIONS, EXPORT_FORMATS
from model.data.demo import reverse_task
from model.data.tokenizer import Tokenizer
from model.decode.greedy import greedy_decode
from model.io.checkpoint import load_model, save_checkpoint
from model.io.checkpoint_files import CheckpointError, checkpoint_sha256
from model.io.export_archive import FORMATS, build_export
from tests.model.decode.test_beam import reverse_model
from tests.model.io.test_export import EOS, TEXTS, batch, held_out, load_hf, random_model


def _extract(archive: Path, into: Path, name: str) -> Path:
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        assert all(m.name == name or m.name.startswith(f"{name}/") for m in members)  # one folder, nothing else
        assert all(m.isfile() or m.isdir() for m in members) and all(m.uname == "" for m in members)
        tar.extractall(into, filter="data")
    return into / name


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.train([t for p in reverse_task(300, seed=0) for t in p] + TEXTS, 300)


@pytest.fixture
def checkpoint(tokenizer, tmp_path) -> Path:
    return save_checkpoint(tmp_path / "ckpt", random_model(tokenizer.vocab_size), tokenizer, "translation")


def test_the_api_offers_the_formats_the_builder_makes():
    assert EXPORT_FORMATS == FORMATS and "int8" in CT2_QUANTIZATIONS


def test_native_is_the_verified_checkpoint_itself(checkpoint, tmp_path):
    archive = build_export(checkpoint, "native", tmp_path / "n.tar.gz", "m-native")
    folder = _extract(archive, tmp_path / "out", "m-native")
    assert checkpoint_sha256(folder) == checkpoint_sha256(checkpoint)
    load_model(folder)  # every file matches the manifest


def test_huggingface_loads_with_from_pretrained_and_gives_our_logits(checkpoint, tokenizer, tmp_path):
    transformers = pytest.importorskip("transformers")
    folder = _extract(build_export(checkpoint, "huggingface", tmp_path / "h.tar.gz", "m-hf"), tmp_path / "o", "m-hf")
    hf, ours = load_hf(folder), load_model(checkpoint)[0]
    auto = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert auto("a b c d").input_ids == tokenizer.encode("a b c d") + [EOS]
    src, tgt_in = batch(tokenizer)
    with torch.no_grad():
        theirs = hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt_in).logits
        mine = ours(src, tgt_in)
    keep = tgt_in != 0
    assert (mine[keep] - theirs[keep]).abs().max().item() <= 1e-4


def test_a_huggingface_export_carries_the_models_default_beam_for_generate(checkpoint, tmp_path):
    transformers = pytest.importorskip("transformers")
    plain = _extract(build_export(checkpoint, "huggingface", tmp_path / "p.tar.gz", "p"), tmp_path / "o", "p")
    assert "num_beams" not in json.loads((plain / "generation_config.json").read_text())  # generate()'s own default
    archive = build_export(checkpoint, "huggingface", tmp_path / "b.tar.gz", "b", num_beams=3)
    assert transformers.GenerationConfig.from_pretrained(_extract(archive, tmp_path / "o", "b")).num_beams == 3


@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory) -> Path:
    model, tok = reverse_model()
    return save_checkpoint(tmp_path_factory.mktemp("trained") / "ckpt", model, tok, "translation")


@pytest.mark.parametrize("quantization", [None, "int8"])
def test_ctranslate2_loads_with_its_tokenizer_and_decodes_like_us(trained_checkpoint, tmp_path, quantization):
    """On the trained reverse-task model (a random one's near-ties flip under int8)."""
    from worker.serving.ct2 import cpu_int8_exact, prefer_exact_int8_gemm

    prefer_exact_int8_gemm()  # as the inference worker does, before ctranslate2 loads
    ct2 = pytest.importorskip("ctranslate2")
    name = f"m-ct2-{quantization}"
    checkpoint = trained_checkpoint
    model, tokenizer, _ = load_model(checkpoint)
    archive = build_export(checkpoint, "ctranslate2", tmp_path / "c.tar.gz", name, quantization)
    folder = _extract(archive, tmp_path / "o", name)
    assert (folder / "model.bin").is_file() and (folder / "tokenizer.json").is_file()
    # int8 weights multiplied in int8 where this CPU's int8 sums do not saturate, else in float32 (as workers serve)
    compute_type = "default" if cpu_int8_exact() else "float32"
    translator = ct2.Translator(str(folder), device="cpu", intra_threads=1, compute_type=compute_type)
    texts, src = held_out(tokenizer)
    sources = [[tokenizer.id_to_token(t) for t in tokenizer.encode(text)] + ["</s>"] for text in texts]
    results = translator.translate_batch(sources, beam_size=1, max_decoding_length=30)
    theirs = [[tokenizer.token_to_id(t) for t in r.hypotheses[0]] for r in results]
    ours = greedy_decode(model, src, max_len=30)
    agree = sum(a == b for a, b in zip(theirs, ours)) / len(ours)
    assert agree == 1.0 if quantization is None else agree >= 0.9, f"{agree:.3f}"


def test_what_cannot_be_exported_is_named_and_leaves_no_file(tokenizer, tmp_path):
    pre_norm = save_checkpoint(
        tmp_path / "pre", random_model(tokenizer.vocab_size, norm_first=True), tokenizer, "translation"
    )
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError, match="norm_first=True"):
        build_export(pre_norm, "huggingface", out / "x.tar.gz", "x")
    build_export(pre_norm, "native", out / "n.tar.gz", "n")  # its own format takes any model
    with pytest.raises(ValueError, match="format='onnx'"):
        build_export(pre_norm, "onnx", out / "y.tar.gz", "y")
    with pytest.raises(ValueError, match="applies to format='ctranslate2' only"):
        build_export(pre_norm, "huggingface", out / "z.tar.gz", "z", quantization="int8")
    (pre_norm / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(CheckpointError):
        build_export(pre_norm, "native", out / "t.tar.gz", "t")
    assert sorted(p.name for p in out.iterdir()) == ["n.tar.gz"]


def test_export_keys_hold_the_model_version_and_refuse_what_no_builder_makes():
    from app.services.exports import export_key

    assert export_key("m1", "ab" * 32, "ctranslate2", "int8") == f"exports/m1/{'ab' * 8}/m1-ctranslate2-int8.tar.gz"
    with pytest.raises(ValueError, match="format='onnx'"):
        export_key("m1", "ab" * 32, "onnx", None)
    with pytest.raises(ValueError, match="only format=ctranslate2 takes one"):
        export_key("m1", "ab" * 32, "native", "int8")
