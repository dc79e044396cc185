"""Shared source/target subword vocabulary (Vaswani et al., 2017, Sec. 5.1: a shared BPE vocabulary).

Byte-level BPE: every string, German umlauts and emoji included, maps to tokens without <unk>, and
decode(encode(text)) == text. Special tokens have fixed ids 0..4 across the project.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import AddedToken, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>", "<mask>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID, MASK_ID = range(5)
FILENAME = "tokenizer.json"
# The 256 byte symbols are always in the vocabulary, so the smallest useful vocabulary is 261.
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + 256


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
    """A vocabulary entry as people read it: its bytes as UTF-8 (a partial character shows as U+FFFD) and
    a leading space as "▁" (SentencePiece's mark); special tokens unchanged. "ĠfÃ¼nf" -> "▁fünf"."""
    if token in SPECIAL_TOKENS or any(c not in _BYTE_OF_SYMBOL for c in token):
        return token
    text = bytes(_BYTE_OF_SYMBOL[c] for c in token).decode("utf-8", errors="replace")
    return "\u2581" + text[1:] if text.startswith(" ") else text


def _special_tokens() -> list[AddedToken]:
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
    def train(cls, texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
        """Learn BPE merges from texts (pass both sides of a parallel corpus); deterministic for equal input."""
        if vocab_size < MIN_VOCAB_SIZE:
            raise ValueError(f"vocab_size={vocab_size} is below the minimum {MIN_VOCAB_SIZE} (5 specials + 256 bytes)")
        if min_frequency < 1:
            raise ValueError(f"min_frequency={min_frequency} must be >= 1")
        tk = HFTokenizer(models.BPE(unk_token="<unk>"))
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=_special_tokens(),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tk.train_from_iterator(texts, trainer)
        return cls(tk)

    # -- encoding ---------------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Token ids of text, without <s> or </s>; a literal "<mask>" becomes MASK_ID."""
        return self._tk.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tk.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        return self._tk.decode(list(ids), skip_special_tokens=skip_special)

    def decode_batch(self, batch: Sequence[Sequence[int]], skip_special: bool = True) -> list[str]:
        return self._tk.decode_batch([list(ids) for ids in batch], skip_special_tokens=skip_special)

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
            canonical = json.dumps(json.loads(self.to_json_str()), sort_keys=True, separators=(",", ":"),
                                   ensure_ascii=False)
            self._fingerprint = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        return self._fingerprint

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, fingerprint={self.fingerprint[:12]})"
