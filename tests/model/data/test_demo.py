import subprocess
import sys

import pytest
from num2words import num2words

from model.data.corpus import read_monolingual, read_parallel
from model.data.demo import (
    ADJECTIVES,
    ANIMALS,
    DETERMINERS,
    PLACES,
    grammar_cloze,
    grammar_sentences,
    numbers_to_words_task,
    reverse_task,
    split_numbers,
    write_demo_files,
)


def test_reverse_task_targets_are_reversals():
    pairs = reverse_task(200, vocab=12, min_len=2, max_len=7, seed=0)
    assert len(pairs) == 200
    symbols = set()
    for src, tgt in pairs:
        assert tgt.split() == src.split()[::-1]
        assert 2 <= len(src.split()) <= 7
        symbols.update(src.split())
    assert len(symbols) <= 12
    assert reverse_task(200, vocab=12, min_len=2, max_len=7, seed=0) == pairs
    assert reverse_task(200, vocab=12, min_len=2, max_len=7, seed=1) != pairs
    assert {s for p in reverse_task(50, vocab=["x", "y"], seed=2) for s in p[0].split()} <= {"x", "y"}


def test_numbers_to_words_match_num2words():
    assert numbers_to_words_task(1, numbers=[312]) == [("three hundred and twelve", "dreihundertzwölf")]
    pairs = numbers_to_words_task(300, seed=0)
    assert len(pairs) == 300 and len(set(pairs)) == 300  # drawn without replacement when n fits
    words_to_number = {num2words(x, lang="en"): x for x in range(1000)}
    for src, tgt in pairs:
        assert tgt == num2words(words_to_number[src], lang="de")
    assert numbers_to_words_task(3, seed=0, lang_tgt="fr", numbers=[80]) == [("eighty", "quatre-vingts")] * 3


def test_held_out_numbers_are_disjoint_from_training_numbers():
    train, held_out = split_numbers(0, 999, held_out=0.1, seed=0)
    assert set(train).isdisjoint(held_out)
    assert sorted(train + held_out) == list(range(1000))
    assert len(held_out) == 100
    train_src = {s for s, _ in numbers_to_words_task(2000, seed=1, numbers=train)}
    held_src = {s for s, _ in numbers_to_words_task(100, seed=1, numbers=held_out)}
    assert train_src.isdisjoint(held_src)
    assert split_numbers(0, 999, 0.1, seed=0) == (train, held_out)


def _check_agreement(words: list[str]) -> None:
    det, adj, noun, verb = words[:4]
    assert adj in ADJECTIVES and " ".join(words[4:]) in PLACES
    singular = noun in ANIMALS
    base = noun if singular else next(k for k, v in ANIMALS.items() if v[0] == noun)
    assert det in DETERMINERS[not singular]
    assert verb == ANIMALS[base][1 if singular else 2]


def test_grammar_sentences_follow_the_agreement_rules():
    sentences = grammar_sentences(500, seed=0)
    for sentence in sentences:
        _check_agreement(sentence.split())
    assert sentences == grammar_sentences(500, seed=0)
    assert {s.split()[2] for s in sentences} >= set(ANIMALS)  # every noun occurs


def test_grammar_cloze_answer_is_the_only_word_that_fits():
    nouns = [w for k, v in ANIMALS.items() for w in (k, v[0])]
    verbs = [w for v in ANIMALS.values() for w in v[1:]]
    for masked, answer in grammar_cloze(200, seed=0):
        assert masked.count("<mask>") == 1
        fits = []
        for word in nouns + verbs:
            try:
                _check_agreement(masked.replace("<mask>", word).split())
                fits.append(word)
            except (AssertionError, StopIteration):
                pass
        assert fits == [answer], masked


def test_write_demo_files_writes_readable_corpora(tmp_path):
    paths = write_demo_files(tmp_path / "demo")
    assert set(paths) >= {"translation_train", "translation_valid", "monolingual"}
    train = read_parallel(paths["translation_train"])
    valid = read_parallel(paths["translation_valid"])
    assert len(train) == 900 and len(valid) == 100
    assert {s for s, _ in train}.isdisjoint(s for s, _ in valid)
    assert ("three hundred and twelve", "dreihundertzwölf") in train + valid
    reverse_train, reverse_valid = read_parallel(paths["reverse_train"]), read_parallel(paths["reverse_valid"])
    assert all(t.split() == s.split()[::-1] for s, t in reverse_train + reverse_valid)
    assert {s for s, _ in reverse_train}.isdisjoint(s for s, _ in reverse_valid)
    assert len(read_monolingual(paths["monolingual"])) == 2000
    thousands, test = read_parallel(paths["thousands_train"]), read_parallel(paths["thousands_test"])
    assert (len(thousands), len(test)) == (900, 100) and {s for s, _ in thousands}.isdisjoint(s for s, _ in test)
    assert all(t.startswith("eintausend") for _, t in thousands + test)
    again = write_demo_files(tmp_path / "again")
    assert paths["translation_train"].read_bytes() == again["translation_train"].read_bytes()


def test_demo_cli_writes_the_files(tmp_path):
    result = subprocess.run([sys.executable, "-m", "model.data.demo", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "translation_train" in result.stdout
    assert (tmp_path / "numbers_en_de_train.jsonl").exists()


@pytest.mark.parametrize("kwargs", [dict(min_len=0), dict(min_len=5, max_len=4), dict(vocab=0)])
def test_reverse_task_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        reverse_task(10, **kwargs)
