"""Shared source/target subword vocabulary (Vaswani et al., 2017, Sec. 5.1: a shared BPE vocabulary).

Three kinds, all without <unk> (every string, emoji included, maps to tokens):
- "bpe" and "unigram": SentencePiece-style. Text is normalised (NFKC by default), a space
  becomes the piece mark "▁" and, with prefix_space, every sentence starts with one, so a word is the same
  token first in a sentence and elsewhere; characters never seen in training fall back to byte pieces
  <0x00>..<0xFF> (ids 5..260), as SentencePiece's byte_fallback.
- "byte_bpe" (the default): GPT-2/RoBERTa byte-level BPE; decode(encode(text)) == text for every text. It
  cuts a sentence into more pieces than "bpe" and splits printf placeholders, yet trained the better model in
  the one comparison so far (docs/learning-efficiency.md, "Tokenizer").

Special tokens have fixed ids 0..4 across the project.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

from model.data.language_pairs import tagged_language, target_token
from model.data.special_tokens import BOS_ID, EOS_ID, MASK_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID

FILENAME = "tokenizer.json"
# The 256 byte symbols (or byte pieces) are always in the vocabulary, so the smallest useful vocabulary is 261.
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + 256
TokenizerKind = Literal["bpe", "unigram", "byte_bpe"]
TOKENIZER_KINDS: tuple[str, ...] = get_args(TokenizerKind)
NORMALIZATIONS: tuple[str, ...] = ("nfkc", "nfc", "none")
BYTE_PIECES = [f"<0x{b:02X}>" for b in range(256)]
# Texts encode_arrays hands to the Rust encoder at once. Its Encoding objects (ids, tokens, offsets, masks) live
# for one chunk, not the whole corpus; a small chunk also leaves fewer holes between the arrays kept: 200,000
# pairs (bench/prepare_memory.py's) took 633 bytes a pair as examples with chunks of 256 texts, 709 with 1024,
# about 1,300 with 8192.
ENCODE_CHUNK = 256
SPACE_MARK = "\u2581"


def _byte_symbols() -> dict[str, int]:
    """Byte-level BPE's printable stand-in for each byte (GPT-2's table), mapped back to the byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    symbols, extra = {}, 0
    for b in range(256):
        if b in printable:
            symbols[chr(b)] = b
        else:
            symbols[chr(256 + extra)] = b
            extra += 1
    return symbols


_BYTE_OF_SYMBOL = _byte_symbols()


def readable_token(token: str) -> str:
    """A vocabulary entry as people read it: its bytes as UTF-8 and a leading space as "▁" (SentencePiece's mark);
    special tokens unchanged. "ĠfÃ¼nf" -> "▁fünf". A byte that is part of a character the entry does not hold
    whole is spelled as SentencePiece spells a byte piece: "Ã" (0xC3, the first byte of "ü") -> "<0xC3>"."""
    if token in SPECIAL_TOKENS or token in BYTE_PIECES or any(c not in _BYTE_OF_SYMBOL for c in token):
        return token  # a special, a byte piece, or a SentencePiece-style piece (already readable)
    # surrogateescape keeps each undecodable byte b as the lone surrogate U+DC00 + b
    text = bytes(_BYTE_OF_SYMBOL[c] for c in token).decode("utf-8", errors="surrogateescape")
    text = "".join(f"<0x{ord(c) - 0xDC00:02X}>" if "\udc80" <= c <= "\udcff" else c for c in text)
    return "\u2581" + text[1:] if text.startswith(" ") else text


def byte_level_entry(readable: str) -> str:
    """The byte-level vocabulary entry that readable_token shows as `readable`: "▁f<0xC3>" -> "ĠfÃ"."""
    symbol_of_byte = {b: c for c, b in _BYTE_OF_SYMBOL.items()}
    head, rest = (b" ", readable[1:]) if readable.startswith(SPACE_MARK) else (b"", readable)
    parts = re.split(r"<0x([0-9A-F]{2})>", rest)  # text, byte, text, byte, ..., text
    data = head + b"".join(bytes([int(p, 16)]) if i % 2 else p.encode() for i, p in enumerate(parts))
    return "".join(symbol_of_byte[b] for b in data)


def special_added_tokens() -> list[AddedToken]:
    """The five special tokens as `tokenizers` adds them, at ids 0..4 (every tokenizer here, Marian imports too)."""
    # lstrip on <mask>: "the cat <mask> on" absorbs the space before <mask>, so the input looks exactly like
    # training data where a space-prefixed token ("Ġsat") was replaced by <mask> (RoBERTa does the same).
    return [AddedToken(t, special=True, normalized=False, lstrip=(t == "<mask>")) for t in SPECIAL_TOKENS]


class Tokenizer:
    """A byte-level BPE tokenizer shared by source and target; encode() adds no <s>/</s>."""

    def __init__(self, hf_tokenizer: HFTokenizer) -> None:
        for i, token in enumerate(SPECIAL_TOKENS):
            if hf_tokenizer.token_to_id(token) != i:
                raise ValueError(f"special token {token!r} has id {hf_tokenizer.token_to_id(token)}, expected {i}")
        self._tk = hf_tokenizer
        self._fingerprint: str | None = None

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        min_frequency: int = 2,
        kind: TokenizerKind = "byte_bpe",
        normalization: str = "nfkc",
        prefix_space: bool = True,
    ) -> Tokenizer:
        """Learn a vocabulary from texts (pass both sides of a parallel corpus); deterministic for equal input.

        normalization and prefix_space apply to "bpe" and "unigram"; "byte_bpe" keeps text as it is."""
        if vocab_size < MIN_VOCAB_SIZE:
            raise ValueError(f"vocab_size={vocab_size} is below the minimum {MIN_VOCAB_SIZE} (5 specials + 256 bytes)")
        if min_frequency < 1:
            raise ValueError(f"min_frequency={min_frequency} must be >= 1")
        if kind not in TOKENIZER_KINDS:
            raise ValueError(f"kind={kind!r} is not one of {TOKENIZER_KINDS}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization={normalization!r} is not one of {NORMALIZATIONS}")
        if kind == "byte_bpe":
            return cls(_train_byte_bpe(texts, vocab_size, min_frequency))
        return cls(_train_sentencepiece_style(texts, vocab_size, min_frequency, kind, normalization, prefix_space))

    @property
    def kind(self) -> str:
        """ "bpe", "unigram" or "byte_bpe", read from the tokenizer itself."""
        if isinstance(self._tk.model, models.Unigram):
            return "unigram"
        return "byte_bpe" if isinstance(self._tk.pre_tokenizer, pre_tokenizers.ByteLevel) else "bpe"

    # -- encoding ---------------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Token ids of text, without <s> or </s>; a literal "<mask>" becomes MASK_ID."""
        return self._tk.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """encode's ids and, for each, the (start, end) characters of `text` it stands for (a byte-level token's
        span includes the space it starts with)."""
        encoding = self._tk.encode(text, add_special_tokens=False)
        return encoding.ids, [tuple(o) for o in encoding.offsets]  # type: ignore[misc]  # (int, int) pairs

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tk.encode_batch(list(texts), add_special_tokens=False)]

    def encode_arrays(self, texts: Sequence[str], chunk: int = ENCODE_CHUNK) -> list[np.ndarray]:
        """encode_batch's ids as one (n,) array of id_dtype per text, encoded chunk texts at a time.

        One array per text, each owning its ids: 400,000 random sentences of 10-80 ids (mean 45, vocabulary 8000)
        took 241 bytes a sentence as uint16 arrays, 228 as views into one array per chunk (too little to be worth
        keeping dropped sentences' ids alive), 2,070 as lists of ints."""
        dtype = self.id_dtype
        out: list[np.ndarray] = []
        for start in range(0, len(texts), chunk):
            encodings = self._tk.encode_batch(list(texts[start : start + chunk]), add_special_tokens=False)
            out.extend(np.array(e.ids, dtype=dtype) for e in encodings)
        return out

    @property
    def id_dtype(self) -> type[np.unsignedinteger[Any]] | type[np.signedinteger[Any]]:
        """The narrowest array type that holds every id: uint16 up to 65,536 tokens, else int32."""
        return np.uint16 if self.vocab_size <= 2**16 else np.int32

    def decode(self, ids: Sequence[int] | np.ndarray, skip_special: bool = True) -> str:
        return self._tk.decode(_int_list(ids), skip_special_tokens=skip_special)

    def decode_batch(self, batch: Sequence[Sequence[int] | np.ndarray], skip_special: bool = True) -> list[str]:
        return self._tk.decode_batch([_int_list(ids) for ids in batch], skip_special_tokens=skip_special)

    def id_to_token(self, token_id: int) -> str:
        token = self._tk.id_to_token(token_id)
        if token is None:
            raise ValueError(f"token id {token_id} is outside [0, vocab_size={self.vocab_size})")
        return token

    def token_to_id(self, token: str) -> int:
        token_id = self._tk.token_to_id(token)
        if token_id is None:
            raise ValueError(f"token {token!r} is not in the vocabulary")
        return token_id

    @property
    def vocab_size(self) -> int:
        return self._tk.get_vocab_size(with_added_tokens=True)

    # -- several target languages (model/data/language_pairs.py) ---------------------------------------------
    def with_language_tokens(self, languages: Iterable[str]) -> Tokenizer:
        """A copy with a special token per target language (">>fr<<") after the learned vocabulary, never split
        and dropped by decode; rstrip: the space after it goes with it, so the text behind encodes as untagged."""
        tk = HFTokenizer.from_str(self.to_json_str())
        new = [t for t in map(target_token, sorted(set(languages))) if tk.token_to_id(t) is None]
        tk.add_special_tokens([AddedToken(t, special=True, normalized=False, rstrip=True) for t in new])
        return Tokenizer(tk)

    @property
    def language_tokens(self) -> dict[str, int]:
        """Each target language's token id ({"fr": 8003}); empty for a tokenizer of one pair."""
        found = ((tagged_language(t.content), i) for i, t in self._tk.get_added_tokens_decoder().items())
        return {language: i for language, i in found if language is not None}

    # The fixed special ids, as attributes for callers that only hold a tokenizer.
    pad_id = PAD_ID
    bos_id = BOS_ID
    eos_id = EOS_ID
    unk_id = UNK_ID
    mask_id = MASK_ID

    # -- serialization ----------------------------------------------------------------------------------
    def to_json_str(self) -> str:
        return self._tk.to_str()

    @classmethod
    def from_json_str(cls, data: str) -> Tokenizer:
        try:
            return cls(HFTokenizer.from_str(data))
        except Exception as e:  # the Rust side raises a bare Exception on malformed JSON
            if isinstance(e, ValueError):
                raise
            raise ValueError(f"not a valid tokenizer.json: {e}") from e

    def save(self, directory: str | Path) -> Path:
        """Write DIRECTORY/tokenizer.json and return its path."""
        path = Path(directory) / FILENAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json_str(), encoding="utf-8")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> Tokenizer:
        """Read DIRECTORY/tokenizer.json (or the file itself if a file path is given)."""
        path = Path(directory)
        if path.is_dir():
            path = path / FILENAME
        return cls.from_json_str(path.read_text(encoding="utf-8"))

    @property
    def fingerprint(self) -> str:
        """sha256 hex of the canonical (sorted-key, compact) tokenizer.json: equal tokenizers, equal prints."""
        if self._fingerprint is None:
            canonical = json.dumps(
                json.loads(self.to_json_str()), sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
            self._fingerprint = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        return self._fingerprint

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, fingerprint={self.fingerprint[:12]})"


def _int_list(ids: Sequence[int] | np.ndarray) -> list[int]:
    """Python ints, as the Rust decoder takes them (not NumPy's)."""
    return ids.tolist() if isinstance(ids, np.ndarray) else list(ids)


# -- training ---------------------------------------------------------------------------------------------------


def _train_byte_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int) -> HFTokenizer:
    tk = HFTokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=special_added_tokens(),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(texts, trainer)
    return tk


def _train_sentencepiece_style(
    texts: Iterable[str], vocab_size: int, min_frequency: int, kind: str, normalization: str, prefix_space: bool
) -> HFTokenizer:
    """Metaspace BPE or unigram with byte fallback: trained on vocab_size - 256 pieces, then the 256 byte pieces
    are put at ids 5..260 (after the specials) and the learned pieces shifted behind them."""
    n_learned = vocab_size - len(BYTE_PIECES)
    if kind == "bpe":
        tk = HFTokenizer(models.BPE(unk_token="<unk>"))
        trainer: trainers.Trainer = trainers.BpeTrainer(
            vocab_size=n_learned,
            min_frequency=min_frequency,
            special_tokens=special_added_tokens(),
            show_progress=False,
        )
    else:
        tk = HFTokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=n_learned, special_tokens=special_added_tokens(), unk_token="<unk>", show_progress=False
        )
    if normalization != "none":
        tk.normalizer = normalizers.NFKC() if normalization == "nfkc" else normalizers.NFC()
    scheme = "always" if prefix_space else "never"
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE_MARK, prepend_scheme=scheme)
    tk.decoder = decoders.Sequence(
        [decoders.ByteFallback(), decoders.Metaspace(replacement=SPACE_MARK, prepend_scheme=scheme)]
    )
    tk.train_from_iterator(texts, trainer)
    return HFTokenizer.from_str(json.dumps(_with_byte_pieces(json.loads(tk.to_str()))))


def _with_byte_pieces(spec: dict[str, Any]) -> dict[str, Any]:
    """tokenizer.json with byte pieces at ids 5..260 and byte_fallback on (learned pieces move up by 256)."""
    model, n_special = spec["model"], len(SPECIAL_TOKENS)
    if model["type"] == "BPE":
        learned = sorted((i, t) for t, i in model["vocab"].items() if i >= n_special and t not in BYTE_PIECES)
        vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
        vocab.update({t: n_special + k for k, t in enumerate(BYTE_PIECES)})
        vocab.update({t: len(vocab) + k for k, (_, t) in enumerate(learned)})
        model["vocab"] = vocab
    else:  # Unigram: a list of [piece, log-probability]; byte pieces only ever serve as fallback
        pieces = model["vocab"]
        learned = [p for p in pieces[n_special:] if p[0] not in BYTE_PIECES]
        model["vocab"] = pieces[:n_special] + [[b, 0.0] for b in BYTE_PIECES] + learned
        model["unk_id"] = UNK_ID
    model["byte_fallback"] = True
    return spec
