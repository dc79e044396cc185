"""Acceptance: one tiny model of two pairs (English numbers to German words and to French words, the same sources)
learns to write the language its source's token asks for (model/data/language_pairs.py), judged on held-out
numbers; trained through prepare() + train() and read back from its checkpoint as the inference worker does."""

import pytest

from model.data.demo import numbers_to_words_task, split_numbers
from model.data.language_pairs import LanguagePair, multilingual_rows, tag_source
from model.io.checkpoint import load_model
from model.train.config import TrainingError
from model.train.loop import train
from model.train.prepare import prepare
from model.train.settings import DataSettings
from tests.model.train.test_learning import exact_match, toy_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/model/conftest.py


@pytest.mark.slow
def test_one_model_writes_german_or_french_as_its_token_asks(tmp_path):
    train_numbers, held_out_numbers = split_numbers(0, 999, held_out=0.1, seed=0)
    pairs = [LanguagePair("en", "de"), LanguagePair("en", "fr")]
    rows_by_pair = [
        numbers_to_words_task(len(train_numbers), seed=0, lang_tgt=p.target, numbers=train_numbers) for p in pairs
    ]
    held_out = {
        p.target: numbers_to_words_task(len(held_out_numbers), seed=0, lang_tgt=p.target, numbers=held_out_numbers)
        for p in pairs
    }
    valid = [(tag_source(s, language), t) for language, rows in held_out.items() for s, t in rows[:40]]
    data = prepare(
        "translation",
        multilingual_rows(rows_by_pair, pairs, seed=0),
        valid,
        preset="tiny",
        vocab_size=500,
        settings=DataSettings(max_length=32),
        seed=0,
        target_languages=["de", "fr"],
    )
    assert set(data.tokenizer.language_tokens) == {"de", "fr"}
    result = train(data, toy_config(400), tmp_path)  # exact match 0.92 (de) and 0.98 (fr); 0.85 at 300
    model, tokenizer, _ = load_model(result.model_checkpoint)
    assert set(tokenizer.language_tokens) == {"de", "fr"}  # the checkpoint keeps the tokens
    for language, rows in held_out.items():
        accuracy = exact_match(model, tokenizer, [(tag_source(s, language), t) for s, t in rows])
        assert accuracy >= 0.8, f"exact match {accuracy:.3f} on {len(rows)} held-out numbers into {language}"


def test_the_tokenizer_learns_the_text_not_the_tokens_and_a_given_one_must_hold_them():
    rows = multilingual_rows(
        [numbers_to_words_task(200, lang_tgt="de"), numbers_to_words_task(200, lang_tgt="fr")],
        [LanguagePair("en", "de"), LanguagePair("en", "fr")],
    )
    data = prepare("translation", rows, preset="tiny", vocab_size=400, target_languages=["de", "fr"])
    tokenizer = data.tokenizer
    assert not any(">>" in tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size - 2))  # none learned
    source = list(data.valid_examples[0].src_ids)
    assert source[0] in tokenizer.language_tokens.values() and source.count(source[0]) == 1
    with pytest.raises(TrainingError, match=r"no token for target language\(s\) \['nl'\]"):
        prepare("translation", rows, preset="tiny", tokenizer=tokenizer, target_languages=["de", "nl"])
