"""Spec of the export: MarianMTModel.from_pretrained gives our logits, AutoTokenizer our tokens, and the
CTranslate2 conversion our translations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from model.data.batching import pad_sequences
from model.data.demo import reverse_task
from model.data.tokenizer import Tokenizer
from model.decode.beam import beam_search
from model.decode.greedy import greedy_decode
from model.io.checkpoint import save_checkpoint
from model.io.export import convert_to_ctranslate2, export_marian, main, marian_config
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from tests.model.decode.test_beam import one_thread, reverse_model  # noqa: F401 (autouse: one torch thread)

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

EOS = 2
TEXTS = ["a b c d", "e f", "zwölf Äpfel 🍎", "", "t s r q p o n m"]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    pairs = reverse_task(300, seed=0)
    return Tokenizer.train([t for p in pairs for t in p] + ["zwölf Äpfel 🍎"], 300)


def random_model(vocab_size: int, **overrides) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig.from_preset("tiny", vocab_size, max_positions=64, **overrides)).eval()


def batch(tokenizer: Tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded sources (ids + </s>) and decoder inputs (<s> + ids) of different lengths."""
    src = pad_sequences([tokenizer.encode(t) + [EOS] for t in TEXTS])
    tgt_in = pad_sequences([[1] + tokenizer.encode(t)[::-1] for t in TEXTS])
    return src, tgt_in


def load_hf(directory: Path):
    hf, info = transformers.MarianMTModel.from_pretrained(str(directory), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    return hf.eval()


@pytest.mark.parametrize(
    "overrides", [{}, {"share_embeddings": False, "activation": "gelu"}, {"activation": "swish", "n_decoder_layers": 3}]
)
def test_exported_marian_model_gives_our_logits(tokenizer, tmp_path, overrides):
    model = random_model(tokenizer.vocab_size, **overrides)
    with torch.no_grad():  # random biases and LayerNorm parameters too, so every tensor's mapping is checked
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(std=0.2)
    hf = load_hf(export_marian(model, tokenizer, tmp_path))
    src, tgt_in = batch(tokenizer)
    with torch.no_grad():
        ours = model(src, tgt_in)
        theirs = hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt_in).logits
    keep = tgt_in != 0  # padded target positions are unspecified in both
    assert (ours[keep] - theirs[keep]).abs().max().item() < 1e-4


def test_config_json_matches_our_config(tokenizer, tmp_path):
    model = random_model(tokenizer.vocab_size, d_ff=128, n_encoder_layers=3)
    export_marian(model, tokenizer, tmp_path)
    config = transformers.AutoConfig.from_pretrained(str(tmp_path))
    assert type(config).__name__ == "MarianConfig"
    assert (
        config.d_model,
        config.encoder_layers,
        config.decoder_layers,
        config.encoder_attention_heads,
        config.encoder_ffn_dim,
        config.max_position_embeddings,
    ) == (64, 3, 2, 4, 128, 64)
    assert config.vocab_size == config.decoder_vocab_size == tokenizer.vocab_size
    assert config.scale_embedding and config.share_encoder_decoder_embeddings
    assert (config.pad_token_id, config.eos_token_id, config.decoder_start_token_id) == (0, 2, 1)
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["activation_function"] == "relu" and written["forced_eos_token_id"] is None


def test_pre_norm_models_are_refused(tokenizer, tmp_path):
    model = random_model(tokenizer.vocab_size, norm_first=True)
    with pytest.raises(ValueError, match="norm_first=True.*post-norm only"):
        export_marian(model, tokenizer, tmp_path)
    with pytest.raises(ValueError, match="pre-norm"):
        marian_config(model.config)


def test_auto_tokenizer_round_trips_and_appends_eos(tokenizer, tmp_path):
    export_marian(random_model(tokenizer.vocab_size), tokenizer, tmp_path)
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    for text in TEXTS:
        ids = hf_tok(text).input_ids
        assert ids == tokenizer.encode(text) + [EOS]  # the source convention of collate
        assert hf_tok.decode(ids, skip_special_tokens=True) == text
    assert (
        hf_tok.pad_token_id,
        hf_tok.bos_token_id,
        hf_tok.eos_token_id,
        hf_tok.unk_token_id,
        hf_tok.mask_token_id,
    ) == (0, 1, 2, 3, 4)
    assert hf_tok("a <mask> b").input_ids == tokenizer.encode("a <mask> b") + [EOS]
    padded = hf_tok(TEXTS[:2], padding=True, return_tensors="pt")
    assert padded.input_ids.tolist() == pad_sequences([tokenizer.encode(t) + [EOS] for t in TEXTS[:2]]).tolist()


@pytest.fixture(scope="module")
def trained_export(tmp_path_factory) -> tuple[Transformer, Tokenizer, Path]:
    model, tok = reverse_model()
    return model, tok, export_marian(model, tok, tmp_path_factory.mktemp("marian"))


def held_out(tok: Tokenizer) -> tuple[list[str], torch.Tensor]:
    texts = [s for s, _ in reverse_task(40, max_len=8, seed=11)]
    return texts, pad_sequences([tok.encode(t) + [EOS] for t in texts])


def test_transformers_generate_matches_our_greedy_decoding(trained_export):
    model, tok, directory = trained_export
    hf = load_hf(directory)
    texts, src = held_out(tok)
    ours = greedy_decode(model, src)
    out = hf.generate(input_ids=src, attention_mask=(src != 0).long(), num_beams=1, do_sample=False, max_new_tokens=30)
    theirs = [[t for t in row[1:] if t not in (0, EOS)] for row in out.tolist()]  # drop <s>, pads and </s>
    assert theirs == ours


def test_transformers_beam_search_finds_our_beam_search_hypotheses(trained_export):
    # Without a length penalty both rank by log-probability, keep the same 2 * beam candidates, and stop a
    # sentence once beam_size hypotheses have ended (early_stopping=True), so the 1-best lists agree.
    model, tok, directory = trained_export
    hf = load_hf(directory)
    _, src = held_out(tok)
    ours = [hyps[0].tokens for hyps in beam_search(model, src, beam_size=4, alpha=0.0)]
    out = hf.generate(
        input_ids=src,
        attention_mask=(src != 0).long(),
        num_beams=4,
        do_sample=False,
        early_stopping=True,
        length_penalty=0.0,
        max_new_tokens=30,
    )
    assert [[t for t in row[1:] if t not in (0, EOS)] for row in out.tolist()] == ours


@pytest.mark.parametrize("quantization", [None, "int8"])
def test_ctranslate2_conversion_loads_and_translates_like_us(trained_export, tmp_path, quantization):
    """int8 agreement fails on AMD CPUs without the worker's CT2_USE_MKL choice (0.725 here): the worker's own
    setting is applied first, as the inference worker does when it imports its CTranslate2 backend."""
    from worker.serving.ct2 import cpu_int8_exact, prefer_exact_int8_gemm

    prefer_exact_int8_gemm()  # before ctranslate2 is loaded in this process
    ct2 = pytest.importorskip("ctranslate2")
    model, tok, directory = trained_export
    out = convert_to_ctranslate2(directory, tmp_path / "ct2", quantization=quantization)
    # int8 weights multiplied in int8 where this CPU's int8 sums do not saturate, else in float32 (as workers serve)
    compute_type = "default" if cpu_int8_exact() else "float32"
    translator = ct2.Translator(str(out), device="cpu", intra_threads=1, compute_type=compute_type)
    texts, src = held_out(tok)
    sources = [[tok.id_to_token(t) for t in tok.encode(text)] + ["</s>"] for text in texts]
    results = translator.translate_batch(sources, beam_size=1, max_decoding_length=30)
    theirs = [[tok.token_to_id(t) for t in r.hypotheses[0]] for r in results]
    ours = greedy_decode(model, src)
    agree = sum(a == b for a, b in zip(theirs, ours)) / len(ours)
    assert agree == 1.0 if quantization is None else agree >= 0.9, f"{agree:.3f} of {len(ours)} agree"


def test_command_line_exports_a_checkpoint(trained_export, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    model, tok, _ = trained_export
    checkpoint = save_checkpoint(tmp_path / "ckpt", model, tok, "translation")
    main([str(checkpoint), str(tmp_path / "hf"), "--ct2", str(tmp_path / "ct2"), "--quantization", "int8"])
    assert (tmp_path / "hf" / "model.safetensors").is_file() and (tmp_path / "ct2" / "model.bin").is_file()
    assert "ctranslate2" in capsys.readouterr().out
