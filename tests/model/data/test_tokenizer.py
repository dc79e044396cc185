import json

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from model.data.special_tokens import BOS_ID, EOS_ID, MASK_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID
from model.data.tokenizer import BYTE_PIECES, Tokenizer

CORPUS = [
    "the cat sat on the mat",
    "the dog sat on the log",
    "a cat and a dog are friends",
    "Die Größe der Bäume überrascht die Kinder.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "Fünf Brüder aßen süße Äpfel.",
] * 20


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(CORPUS, vocab_size=400)


def test_special_tokens_have_fixed_ids(tok):
    assert SPECIAL_TOKENS == ("<pad>", "<s>", "</s>", "<unk>", "<mask>")
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID) == (0, 1, 2, 3, 4)
    assert [tok.id_to_token(i) for i in range(5)] == list(SPECIAL_TOKENS)
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id, tok.mask_id) == (0, 1, 2, 3, 4)


def test_vocab_size_is_at_most_requested(tok):
    assert 261 <= tok.vocab_size <= 400


@pytest.mark.parametrize(
    "text",
    [
        "the cat sat on the mat",
        "The quick brown fox, jumping over 12 lazy dogs!",
        "Die Größe der Bäume überrascht die Kinder.",
        "Fünf Brüder aßen süße Äpfel — ÄÖÜ äöü ß",
        "never seen: Ωμέγα 東京 🙂  double  spaces\tand tab",
    ],
)
def test_decode_of_encode_gives_back_the_text(tok, text):
    ids = tok.encode(text)
    assert UNK_ID not in ids
    assert tok.decode(ids) == text


def test_encode_adds_no_bos_or_eos(tok):
    ids = tok.encode("the cat sat")
    assert BOS_ID not in ids and EOS_ID not in ids
    assert tok.decode([BOS_ID, *ids, EOS_ID, PAD_ID]) == "the cat sat"
    assert "<s>" in tok.decode([BOS_ID, *ids, EOS_ID], skip_special=False)


def test_frequent_words_become_single_tokens(tok):
    assert len(tok.encode("the cat sat on the mat")) == 6


def test_literal_mask_is_the_single_mask_id(tok):
    ids = tok.encode("the cat <mask> on the mat")
    assert ids.count(MASK_ID) == 1
    # The space before <mask> is absorbed, so the sequence is exactly "the cat sat on the mat" with the token of
    # " sat" replaced: the same shape the denoising objective trains on.
    full = tok.encode("the cat sat on the mat")
    assert len(ids) == len(full)
    assert [t for t in ids if t != MASK_ID] == [t for i, t in enumerate(full) if i != ids.index(MASK_ID)]
    assert tok.encode("<mask> cat sat")[0] == MASK_ID
    assert tok.encode("the <mask> <mask> mat").count(MASK_ID) == 2


def test_encode_batch_matches_encode(tok):
    texts = ["the cat", "Größe", "<mask> dog"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    assert tok.decode_batch(tok.encode_batch(texts)) == ["the cat", "Größe", " dog"]


def test_unknown_ids_and_tokens_raise(tok):
    with pytest.raises(ValueError, match="99999"):
        tok.id_to_token(99999)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.token_to_id("no-such-token-here")


def test_save_and_load_keep_the_tokenizer_and_fingerprint(tok, tmp_path):
    path = tok.save(tmp_path / "tok")
    assert path == tmp_path / "tok" / "tokenizer.json"
    json.loads(path.read_text(encoding="utf-8"))
    loaded = Tokenizer.load(tmp_path / "tok")
    assert loaded.fingerprint == tok.fingerprint
    assert len(tok.fingerprint) == 64 and int(tok.fingerprint, 16) >= 0
    assert loaded.encode("Die Größe <mask> Bäume") == tok.encode("Die Größe <mask> Bäume")
    assert Tokenizer.load(path).fingerprint == tok.fingerprint
    assert Tokenizer.from_json_str(tok.to_json_str()).fingerprint == tok.fingerprint


def test_fingerprint_ignores_json_formatting(tok):
    pretty = json.dumps(json.loads(tok.to_json_str()), indent=4)
    assert Tokenizer.from_json_str(pretty).fingerprint == tok.fingerprint


def test_training_is_deterministic(tok):
    assert Tokenizer.train(CORPUS, vocab_size=400).fingerprint == tok.fingerprint


def test_fingerprint_differs_for_a_different_tokenizer(tok):
    assert Tokenizer.train(CORPUS, vocab_size=300).fingerprint != tok.fingerprint
    assert Tokenizer.train(CORPUS[:3] * 20, vocab_size=400).fingerprint != tok.fingerprint


def test_too_small_vocab_is_refused():
    with pytest.raises(ValueError, match="vocab_size=100"):
        Tokenizer.train(CORPUS, vocab_size=100)


def test_tokenizer_with_other_special_ids_is_refused():
    hf = HFTokenizer(models.BPE(unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(
        CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<pad>"], show_progress=False)
    )
    with pytest.raises(ValueError, match="<pad>"):
        Tokenizer(hf)
    with pytest.raises(ValueError):
        Tokenizer.from_json_str(hf.to_str())
    with pytest.raises(ValueError, match="tokenizer.json"):
        Tokenizer.from_json_str("{not json")


def test_readable_token_shows_utf8_and_the_space_mark():
    from model.data.tokenizer import readable_token

    tokenizer = Tokenizer.train(["fünf und fünfzig", "fünf"] * 50, 300)
    pieces = [readable_token(tokenizer.id_to_token(i)) for i in tokenizer.encode(" fünf")]
    assert "".join(pieces) == "\u2581fünf"
    assert readable_token("</s>") == "</s>"
    # half a character: the byte as a byte piece, never U+FFFD (two such neighbours would read the same)
    assert readable_token("ĠfÃ") == "\u2581f<0xC3>" and readable_token("¼nf") == "<0xBC>nf"
    assert readable_token("Ã") in BYTE_PIECES


# -- SentencePiece-style kinds ----------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def sp_tok(request) -> Tokenizer:
    return Tokenizer.train(CORPUS, vocab_size=400, kind=request.param)


def test_sentencepiece_kinds_keep_special_ids_and_put_byte_pieces_after_them(sp_tok):
    assert [sp_tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert [sp_tok.id_to_token(i) for i in (5, 6, 260)] == ["<0x00>", "<0x01>", "<0xFF>"]
    assert sp_tok.vocab_size <= 400


@pytest.mark.parametrize(
    "text",
    [
        "the cat sat on the mat",
        "Die Größe der Bäume überrascht die Kinder.",
        "never seen: Ωμέγα 東京 🙂 here",
    ],
)
def test_sentencepiece_kinds_never_give_unk_and_decode_back(sp_tok, text):
    ids = sp_tok.encode(text)
    assert UNK_ID not in ids
    assert sp_tok.decode(ids) == text


def test_unseen_characters_fall_back_to_their_utf8_bytes(sp_tok):
    ids = sp_tok.encode("🙂")
    assert [sp_tok.id_to_token(i) for i in ids][-4:] == ["<0xF0>", "<0x9F>", "<0x99>", "<0x82>"]


def test_prefix_space_makes_a_first_word_the_same_token_as_elsewhere():
    with_mark = Tokenizer.train(CORPUS, vocab_size=400, kind="bpe")
    assert with_mark.encode("cat")[-1] == with_mark.encode("the cat")[-1]
    without = Tokenizer.train(CORPUS, vocab_size=400, kind="bpe", prefix_space=False)
    assert without.encode("cat") != without.encode("the cat")[-len(without.encode("cat")) :]


def test_nfkc_folds_compatibility_characters_and_none_keeps_them():
    nfkc = Tokenizer.train(CORPUS, vocab_size=400, kind="bpe")
    assert nfkc.decode(nfkc.encode("ﬁve cats")) == "five cats"  # the "ﬁ" ligature is two letters after NFKC
    raw = Tokenizer.train(CORPUS, vocab_size=400, kind="bpe", normalization="none")
    assert raw.decode(raw.encode("ﬁve cats")) == "ﬁve cats"


def test_kind_is_read_back_from_a_saved_tokenizer(tmp_path):
    for kind in ("bpe", "unigram", "byte_bpe"):
        tok = Tokenizer.train(CORPUS, vocab_size=400, kind=kind)
        assert Tokenizer.load(tok.save(tmp_path / kind)).kind == kind


def test_bad_kind_or_normalization_is_refused_naming_it():
    with pytest.raises(ValueError, match="kind='wordpiece'"):
        Tokenizer.train(CORPUS, vocab_size=400, kind="wordpiece")
    with pytest.raises(ValueError, match="normalization='nfd'"):
        Tokenizer.train(CORPUS, vocab_size=400, normalization="nfd")
