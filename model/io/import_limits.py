"""What an imported model may be, checked before any model is built: its dimensions within the service's limits,
and its weights' shapes, as model.safetensors' header states them (no tensor read), those its config implies.

Building a Transformer allocates what its config says (a forged config.json with d_model 65536 and a million
tokens asks for terabytes), and the sinusoid table takes max_positions x d_model whatever the weights hold. With
every dimension bounded and every weight's shape matched against a model built on the meta device (shapes, no
memory), the model an import builds is no larger than the weights file it unpacked, which is bounded itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")  # the dtypes safetensors names; weights are floating point


@dataclass(frozen=True)
class ModelLimits:
    """The largest dimensions an imported model may have (the service's IMPORT_MAX_* settings)."""

    vocab_size: int = 256_000
    d_model: int = 4096
    layers: int = 64  # encoder and decoder, each
    heads: int = 256
    d_ff: int = 65536
    max_positions: int = 16384


# ModelConfig's field -> (ModelLimits' field, the setting that sets it)
_BOUNDS = {
    "vocab_size": ("vocab_size", "IMPORT_MAX_VOCAB_SIZE"),
    "d_model": ("d_model", "IMPORT_MAX_D_MODEL"),
    "n_encoder_layers": ("layers", "IMPORT_MAX_LAYERS"),
    "n_decoder_layers": ("layers", "IMPORT_MAX_LAYERS"),
    "n_heads": ("heads", "IMPORT_MAX_HEADS"),
    "d_ff": ("d_ff", "IMPORT_MAX_D_FF"),
    "max_positions": ("max_positions", "IMPORT_MAX_POSITIONS"),
}


def check_dimensions(values: Mapping[str, int], limits: ModelLimits, names: Mapping[str, str] | None = None) -> None:
    """ValueError naming the first of ModelConfig's dimensions (under its name in the file: `names`) over its limit;
    `values` holds integers already checked as such."""
    for field, (bound, setting) in _BOUNDS.items():
        value, limit = values[field], getattr(limits, bound)
        if value > limit:
            name = (names or {}).get(field, field)
            raise ValueError(f"{name}={value} is over the import limit of {limit} ({setting}={limit})")


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of the model's state dict (tied names included) and its shape, from a model on the meta device."""
    with torch.device("meta"):
        model = Transformer(config)
    return {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}


def header(path: Path) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """(shape of each stored tensor, the file's metadata) from a safetensors file's header alone; ValueError when a
    tensor is not floating point, SafetensorError or OSError when the file is not one."""
    shapes: dict[str, tuple[int, ...]] = {}
    with safe_open(str(path), framework="pt") as weights:
        for name in weights.keys():
            piece = weights.get_slice(name)
            if piece.get_dtype() not in FLOAT_DTYPES:
                raise ValueError(f"weight {name!r} has dtype {piece.get_dtype()}, not floating point")
            shapes[name] = tuple(piece.get_shape())
        return shapes, weights.metadata() or {}


def compare_shapes(stored: Mapping[str, tuple[int, ...]], expected: Mapping[str, tuple[int, ...]]) -> None:
    """ValueError naming the first tensor the config implies that is missing or shaped otherwise, or the first
    stored one it has no place for."""
    for name, shape in expected.items():
        if name not in stored:
            raise ValueError(f"lacks {name!r}, which the config implies")
        if tuple(stored[name]) != shape:
            raise ValueError(f"{name!r} has shape {tuple(stored[name])}, but the config implies {shape}")
    extra = sorted(set(stored) - set(expected))
    if extra:
        raise ValueError(f"holds {extra[0]!r}, which has no place in the model the config describes")
