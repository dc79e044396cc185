"""Glossary terms written into translations (model/decode/glossary.py): matched whole and longest first, left alone
where already there, put in place of the words the model aligned with the source term, inserted after the word
aligned before it otherwise; on the reversal model, whose alignments are known (the mirrored symbol)."""

from __future__ import annotations

import pytest

from model.data.demo import reverse_task
from model.decode.glossary import Glossary, _edited, apply_glossary
from model.decode.queries import translate
from tests.model.decode.test_beam import one_thread, reverse_model  # noqa: F401 (one_thread: autouse)


def test_terms_match_whole_longest_first_and_by_the_case_rule():
    glossary = Glossary([("file", "fichier"), ("save as", "enregistrer sous"), ("save", "enregistrer")])
    found = glossary.find("Save as the file, not the files; save it")
    assert [(o.source, o.target) for o in found] == [
        ("Save as", "enregistrer sous"),
        ("file", "fichier"),
        ("save", "enregistrer"),
    ]
    sensitive = Glossary([("File", "Fichier")], case_sensitive=True)
    assert sensitive.find("file File") == [type(found[0])(5, 9, "File", "Fichier")]
    assert glossary.holds("Fichier ouvert", "fichier") and not sensitive.holds("le fichier", "Fichier")
    assert glossary.holds("Dateiname", "datei")  # a compound's part counts
    with pytest.raises(ValueError, match="at least one entry"):
        Glossary([])


def test_edits_replace_insert_and_merge_overlapping_spans():
    assert _edited("le grand chien", [(3, 8, "petit")]) == "le petit chien"
    assert _edited("le chien", [(2, 2, "gros")]) == "le gros chien"
    assert _edited("abc", [(0, 0, "x")]) == "x abc"
    assert _edited("le grand chien noir", [(3, 14, "X"), (9, 19, "Y")]) == "le X Y"


def test_a_term_replaces_the_words_the_model_aligned_with_it():
    """The reversal model translates 'h l e c b o' as 'o b c e l h': the glossary's 'e' -> 'EE' lands where the
    model wrote 'e' (the mirrored place), a term already in the translation is left alone, and every target term
    is in every output."""
    model, tokenizer = reverse_model()
    sources = [s for s, _ in reverse_task(40, max_len=8, seed=99)]
    outputs = [r["text"] for r in translate(model, tokenizer, sources)]
    glossary = Glossary([("e", "EE"), ("q", "q")])
    replaced = exact = 0
    for source, output in zip(sources, outputs):
        text, applied = apply_glossary(model, tokenizer, source, output, glossary)
        expected = [w for w in source.split() if w in ("e", "q")]
        assert [a.source for a in applied] == expected  # in source order
        assert all(glossary.holds(text, a.target) for a in applied)
        for a in applied:
            if a.source == "q":
                assert a.how == "present"  # the model wrote q itself
            else:
                replaced += a.how == "replaced"
        if "e" in source.split() and output.split()[::-1] == source.split():
            exact += 1
            assert text.split() == ["EE" if w == "e" else w for w in output.split()], (source, output, text)
    assert replaced >= 5 and exact >= 5, (replaced, exact)


def test_a_term_no_word_attends_to_is_inserted_after_the_word_aligned_before_it(monkeypatch):
    """Alignments given: 'le' <- 'the', 'chien' <- 'dog', nothing <- 'big'. 'big' -> 'grand' goes after 'le'; with
    nothing aligned before the term, at the start."""
    from model.data.tokenizer import Tokenizer
    from model.decode import glossary as module
    from model.nn.config import ModelConfig
    from model.nn.transformer import Transformer

    tokenizer = Tokenizer.train(["the big dog", "le chien", "big dog"] * 50, 300)
    model = Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, max_positions=16))
    pointing = {"le": "the", "chien": "dog"}

    def aligned(model, src_ids, tgt_ids):
        src_words = [tokenizer.decode([i]).strip() for i in src_ids]
        return [src_words.index(pointing[tokenizer.decode([j]).strip()]) for j in tgt_ids]

    assert [tokenizer.decode([i]).strip() for i in tokenizer.encode("le chien")] == ["le", "chien"]
    monkeypatch.setattr(module, "align", aligned)
    text, applied = apply_glossary(model, tokenizer, "the big dog", "le chien", Glossary([("big", "grand")]))
    assert (text, [a.how for a in applied]) == ("le grand chien", ["inserted"])
    pointing["le"] = "dog"  # nothing aligned with a word before the term: it goes first
    text, _ = apply_glossary(model, tokenizer, "big dog", "le chien", Glossary([("big", "grand")]))
    assert text == "grand le chien"
