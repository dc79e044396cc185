"""The export of a model of several language pairs follows Marian's multilingual convention: the exported
tokenizer reads a target language's token at the start of a source (`>>fr<< …`, as the OPUS-MT models) as the one
id the model was trained on, and transformers and CTranslate2 then translate as we do, into the language asked."""

from __future__ import annotations

import pytest
import torch

from model.data.batching import pad_sequences
from model.data.demo import numbers_to_words_task
from model.data.language_pairs import LanguagePair, multilingual_rows, tag_source
from model.data.tokenizer import Tokenizer
from model.decode.greedy import greedy_decode
from model.io.checkpoint import load_model
from model.io.export import convert_to_ctranslate2, export_marian
from model.train.loop import train
from model.train.prepare import prepare
from model.train.settings import DataSettings
from tests.model.train.test_learning import toy_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

EOS = 2
TEXTS = ["forty two", "one hundred and seven", "nine"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny model of en->de and en->fr, trained until it ends its translations (a random one writes to the
    length limit, where the libraries' limits differ from ours)."""
    pairs = [LanguagePair("en", "de"), LanguagePair("en", "fr")]
    rows = [numbers_to_words_task(300, seed=0, lang_tgt=p.target) for p in pairs]
    data = prepare("translation", multilingual_rows(rows, pairs), preset="tiny", vocab_size=400,
                   settings=DataSettings(max_length=32), target_languages=["de", "fr"])  # fmt: skip
    result = train(data, toy_config(150), tmp_path_factory.mktemp("run"))
    model, tokenizer, _ = load_model(result.model_checkpoint)
    return model.eval(), tokenizer, export_marian(model, tokenizer, tmp_path_factory.mktemp("marian"))


def _sources(tokenizer: Tokenizer, language: str) -> torch.Tensor:
    return pad_sequences([tokenizer.encode(tag_source(t, language)) + [EOS] for t in TEXTS])


def test_the_exported_tokenizer_reads_a_target_token_as_the_one_id_we_trained_on(exported):
    _, tokenizer, directory = exported
    hf = transformers.AutoTokenizer.from_pretrained(str(directory))
    for language in ("de", "fr"):
        ids = hf([tag_source(t, language) for t in TEXTS])["input_ids"]
        assert ids == [tokenizer.encode(tag_source(t, language)) + [EOS] for t in TEXTS]
        assert {row[0] for row in ids} == {tokenizer.language_tokens[language]}
    assert hf.decode(hf(">>fr<< nine")["input_ids"], skip_special_tokens=True) == "nine"


def test_transformers_and_ctranslate2_translate_into_the_language_asked_as_we_do(exported, tmp_path):
    from worker.serving.ct2 import prefer_exact_int8_gemm

    prefer_exact_int8_gemm()
    ct2 = pytest.importorskip("ctranslate2")
    model, tokenizer, directory = exported
    hf = transformers.MarianMTModel.from_pretrained(str(directory)).eval()
    translator = ct2.Translator(str(convert_to_ctranslate2(directory, tmp_path / "ct2")), device="cpu", intra_threads=1)
    ours_by_language = {}
    for language in ("de", "fr"):
        src = _sources(tokenizer, language)
        ours = greedy_decode(model, src)
        out = hf.generate(
            input_ids=src, attention_mask=(src != 0).long(), num_beams=1, do_sample=False, max_new_tokens=30
        )
        assert [[t for t in row[1:] if t not in (0, EOS)] for row in out.tolist()] == ours
        tokens = [
            [tokenizer.id_to_token(i) for i in tokenizer.encode(tag_source(t, language))] + ["</s>"] for t in TEXTS
        ]
        assert tokens[0][0] == f">>{language}<<"
        results = translator.translate_batch(tokens, beam_size=1, max_decoding_length=30)
        assert [[tokenizer.token_to_id(t) for t in r.hypotheses[0]] for r in results] == ours
        ours_by_language[language] = ours
    assert ours_by_language["de"] != ours_by_language["fr"]  # the token steers the model
