"""Model hyper-parameters: one typed dataclass, saved in every checkpoint.

Torch-free on purpose: the API server imports this module to validate requests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from model.data.special_tokens import BOS_ID, EOS_ID, MASK_ID, PAD_ID, UNK_ID

ACTIVATIONS = ("relu", "gelu", "swish")
# "normal": every linear and embedding weight from N(0, 0.02), biases zero (Marian, BART, T5 in transformers).
# "xavier": Xavier-uniform linears, embeddings N(0, d_model^-0.5) (fairseq); it suits lower peak rates.
INITS = ("normal", "xavier")

# Sizes of the paper's Table 3 ("base", "big") plus two sizes that fit on a CPU. vocab_size comes from the
# tokenizer, so a preset is a partial config.
PRESETS: dict[str, dict[str, Any]] = {
    # Learns copy/reverse toy tasks in seconds on a laptop CPU; no dropout because toy data does not overfit.
    # init xavier: at d_model 64, N(0, 0.02) is too small a start for Adam at the paper's rate, which a short
    # warm-up makes high at that width: the toy tasks stalled with it (docs/learning-efficiency.md).
    "tiny": dict(d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=256, dropout=0.0, init="xavier"),
    "small": dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, dropout=0.1),
    "base": dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1),
    "big": dict(d_model=1024, n_heads=16, n_encoder_layers=6, n_decoder_layers=6, d_ff=4096, dropout=0.3),
}


@dataclass
class ModelConfig:
    """Hyper-parameters of the encoder-decoder Transformer (Vaswani et al., 2017, Sec. 3 and Table 3)."""

    vocab_size: int
    d_model: int = 512
    n_heads: int = 8  # h in the paper; d_k = d_v = d_model / h
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1  # P_drop: residual dropout and dropout on embeddings + positions (Sec. 5.4)
    attention_dropout: float = 0.0  # on the softmax weights; the paper does not use it
    activation: str = "relu"  # "relu" as in Eq. 2; "gelu" and "swish" (SiLU, Marian's default) also work
    # "normal" trains the paper's post-norm model at the paper's rate with a short warm-up; "xavier" at that rate
    # stalls (docs/learning-efficiency.md, "Initialisation").
    init: str = "normal"
    norm_first: bool = False  # False: post-norm LayerNorm(x + Sublayer(x)) as in Sec. 3.1; True: pre-norm
    share_embeddings: bool = True  # one matrix for source/target embeddings and pre-softmax projection (Sec. 3.4)
    max_positions: int = 1024  # rows of the sinusoidal table; longest sequence the model accepts
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    unk_id: int = UNK_ID
    mask_id: int = MASK_ID

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "d_model",
            "n_heads",
            "n_encoder_layers",
            "n_decoder_layers",
            "d_ff",
            "max_positions",
            "pad_id",
            "bos_id",
            "eos_id",
            "unk_id",
            "mask_id",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name}={value!r} must be an int")
        for name in (
            "vocab_size",
            "d_model",
            "n_heads",
            "n_encoder_layers",
            "n_decoder_layers",
            "d_ff",
            "max_positions",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)} must be positive")
        if self.d_model % self.n_heads != 0:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"{name}={value!r} must be a float in [0, 1)")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation={self.activation!r} is not one of {ACTIVATIONS}")
        if self.init not in INITS:
            raise ValueError(f"init={self.init!r} is not one of {INITS}")
        for name in ("norm_first", "share_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r} must be a bool")
        for name in ("pad_id", "bos_id", "eos_id", "unk_id", "mask_id"):
            value = getattr(self, name)
            if not 0 <= value < self.vocab_size:
                raise ValueError(f"{name}={value} is outside [0, vocab_size={self.vocab_size})")
        if len({self.pad_id, self.bos_id, self.eos_id}) != 3:
            raise ValueError(f"pad_id={self.pad_id}, bos_id={self.bos_id}, eos_id={self.eos_id} must be distinct")

    @property
    def d_k(self) -> int:
        """Per-head size of queries, keys and values (d_k = d_v = d_model / h, Sec. 3.2.2)."""
        return self.d_model // self.n_heads

    @classmethod
    def from_preset(cls, name: str, vocab_size: int, **overrides: Any) -> ModelConfig:
        """A PRESETS entry plus vocab_size and overrides, e.g. from_preset("base", 37000, dropout=0.2)."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
        _check_keys(overrides, "override")
        return cls(**{**PRESETS[name], "vocab_size": vocab_size, **overrides})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Inverse of to_dict; unknown keys are refused so a typo never silently falls back to a default."""
        _check_keys(d, "key")
        if "vocab_size" not in d:
            raise ValueError("missing required key 'vocab_size'")
        return cls(**d)


def _check_keys(d: dict[str, Any], what: str) -> None:
    known = {f.name for f in fields(ModelConfig)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"unknown ModelConfig {what}(s) {unknown}; known fields are {sorted(known)}")
