"""A Hugging Face MarianMTModel folder, as Helsinki-NLP/OPUS-MT publishes them, as one of our models.

The folder holds config.json (MarianConfig), model.safetensors (pickle files are never read), source.spm and
target.spm (SentencePiece unigram models) and vocab.json (the one vocabulary both sides share: piece -> id).

Our model is Marian's architecture (post-norm, sinusoidal positions laid out as Marian's, embeddings scaled by
sqrt(d_model), shared embeddings and output projection), so the weights carry over by name. Only the special
ids differ: ours are fixed (<pad> 0, <s> 1, </s> 2, <unk> 3, <mask> 4), Marian's are </s> 0, <unk> 1 and <pad>
last, and its decoder starts from <pad>. So the vocabulary is reordered: our <pad> and <s> rows are Marian's
<pad> row (so the decoder starts from the same vector), </s> and <unk> are Marian's, <mask> is a new zero row
(never produced: decoding never emits <pad>, <s> or <mask>, as generate() never emits Marian's <pad>), then
Marian's other pieces in their order. The tokenizer is the source SentencePiece model as a `tokenizers`
Unigram model over that vocabulary (target-only pieces are never chosen when encoding a source), with the
normalisation SentencePiece applies (its precompiled character map); decoding joins pieces as SentencePiece.

Every file is an upload, so each is checked where it is read, and what does not fit is a MarianImportError naming
the file and the value (a corrupt model.safetensors or source.spm, a config.json without d_model, a vocab.json
with ids that are not integers), never whichever error the library underneath happens to raise.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer

from model.data.special_tokens import BOS_ID, EOS_ID, MASK_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID
from model.data.tokenizer import Tokenizer, special_added_tokens
from model.io.import_limits import ModelLimits, check_dimensions, compare_shapes, expected_shapes, header
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

MARIAN_FILES = ("config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json")
_ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu", "gelu": "gelu"}
_LANGUAGE_CODE = re.compile(r"^>>[\w-]+<<$")
UNIGRAM = 1  # sentencepiece ModelProto.TrainerSpec.model_type
NORMAL_PIECE = 1  # sentencepiece ModelProto.SentencePiece.type
# What the import reads from config.json; every MarianConfig that save_pretrained writes has them all. Without
# one, transformers would fall back to MarianConfig's defaults (opus-mt-en-de's sizes), a guess we do not make.
_SIZES = (
    "vocab_size",
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "max_position_embeddings",
)
_TOKEN_IDS = ("pad_token_id", "eos_token_id")
# ModelConfig's dimensions under their names in a MarianConfig (the decoder's must equal the encoder's: _config)
_DIMENSIONS = {
    "vocab_size": "vocab_size",
    "d_model": "d_model",
    "n_encoder_layers": "encoder_layers",
    "n_decoder_layers": "decoder_layers",
    "n_heads": "encoder_attention_heads",
    "d_ff": "encoder_ffn_dim",
    "max_positions": "max_position_embeddings",
}
_EMBEDDINGS = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")


class MarianImportError(ValueError):
    """The folder is not an importable MarianMTModel; the message names the problem."""


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages about a file someone wrote."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    names = {dict: "an object", list: "an array", str: "a string", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is not the id 1


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file that must hold an object; MarianImportError names the file when it does not."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
        raise MarianImportError(f"{path.name}: not valid JSON ({exc})") from exc
    except RecursionError as exc:  # [[[[...: the parser gives up before the file ends
        raise MarianImportError(f"{path.name}: not valid JSON (nested too deeply)") from exc
    if not isinstance(value, dict):
        raise MarianImportError(f"{path.name}: a JSON object expected, not {json_type(value)}")
    return value


def is_marian_folder(folder: Path) -> bool:
    """True when config.json is an object saying model_type "marian"; a missing or malformed one is not (the
    caller names what it is instead)."""
    try:
        return bool(read_json_object(folder / "config.json").get("model_type") == "marian")
    except (OSError, MarianImportError):
        return False


def _check_numbers(config: dict[str, Any]) -> None:
    """The sizes and ids the import reads: present, integers, in range; dropouts numbers if given."""
    for key in (*_SIZES, *_TOKEN_IDS):
        if key not in config:
            raise MarianImportError(f"config.json: missing {key!r}")
        if not _is_int(config[key]):
            raise MarianImportError(f"config.json: {key}={config[key]!r} must be an integer")
    for key in _SIZES:
        if config[key] <= 0:
            raise MarianImportError(f"config.json: {key}={config[key]} must be positive")
    for key in _TOKEN_IDS:
        if not 0 <= config[key] < config["vocab_size"]:
            raise MarianImportError(
                f"config.json: {key}={config[key]} is outside [0, vocab_size={config['vocab_size']})"
            )
    for key in ("dropout", "attention_dropout"):
        value = config.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MarianImportError(f"config.json: {key}={value!r} must be a number")
    activation = config.get("activation_function", "swish")
    if not isinstance(activation, str) or activation not in _ACTIVATIONS:
        raise MarianImportError(f"config.json: activation_function={activation!r} has no equivalent here")


def _config(folder: Path, limits: ModelLimits) -> dict[str, Any]:
    missing = [name for name in MARIAN_FILES if not (folder / name).is_file()]
    if missing:
        raise MarianImportError(f"a Marian folder needs {list(MARIAN_FILES)}; {folder.name!r} lacks {missing}")
    config = read_json_object(folder / "config.json")
    _check_numbers(config)
    try:  # before vocab.json is read or anything is built from these numbers
        check_dimensions({ours: config[theirs] for ours, theirs in _DIMENSIONS.items()}, limits, _DIMENSIONS)
    except ValueError as exc:
        raise MarianImportError(f"config.json: {exc}") from exc
    checks = {
        "normalize_before": (False, "pre-norm"),
        "normalize_embedding": (False, "a LayerNorm on the embeddings"),
        "add_final_layer_norm": (False, "a final LayerNorm"),
        "scale_embedding": (True, "unscaled embeddings"),
        "static_position_embeddings": (True, "learned positions"),
        "share_encoder_decoder_embeddings": (True, "separate source and target vocabularies"),
    }
    for key, (want, what) in checks.items():
        if key in config and bool(config[key]) != want:
            raise MarianImportError(f"{key}={config[key]!r}: {what} has no equivalent here")
    if config.get("decoder_vocab_size", config["vocab_size"]) != config["vocab_size"]:
        raise MarianImportError("decoder_vocab_size differs from vocab_size: separate vocabularies are not supported")
    if (
        config["encoder_attention_heads"] != config["decoder_attention_heads"]
        or config["encoder_ffn_dim"] != config["decoder_ffn_dim"]
    ):
        raise MarianImportError("encoder and decoder with different head counts or FFN sizes are not supported")
    if config.get("decoder_start_token_id", config.get("pad_token_id")) != config.get("pad_token_id"):
        raise MarianImportError("decoder_start_token_id must be pad_token_id, as in every Marian model")
    return config


def _vocab(folder: Path) -> dict[str, int]:
    """vocab.json: an object of piece -> integer id (the ids' range is _order's check)."""
    vocab = read_json_object(folder / "vocab.json")
    for piece, i in vocab.items():
        if not _is_int(i):
            raise MarianImportError(f"vocab.json: {piece!r} -> {i!r}: ids must be integers")
    return vocab


def _order(vocab: dict[str, int], config: dict[str, Any]) -> list[int]:
    """For each of our ids, the Marian id whose embedding row it takes (-1: a new zero row)."""
    size = config["vocab_size"]
    if sorted(vocab.values()) != list(range(size)):
        raise MarianImportError(f"vocab.json must give ids 0..{size - 1} once each (vocab_size={size})")
    pad, eos = config["pad_token_id"], config["eos_token_id"]
    if "<unk>" not in vocab:
        raise MarianImportError("vocab.json has no <unk>")
    unk = vocab["<unk>"]
    if len({pad, eos, unk}) != 3:
        raise MarianImportError(
            f"pad_token_id={pad}, eos_token_id={eos} and vocab.json's <unk> ({unk}) must be distinct ids"
        )
    specials = {PAD_ID: pad, BOS_ID: pad, EOS_ID: eos, UNK_ID: unk, MASK_ID: -1}
    order = [specials[i] for i in range(len(SPECIAL_TOKENS))]
    return order + [i for i in range(size) if i not in (pad, eos, unk)]


def _source_spm(folder: Path) -> Any:
    """source.spm parsed as SentencePiece's ModelProto; a file that is not one is refused naming it."""
    from google.protobuf.message import DecodeError  # protobuf and sentencepiece: the worker's; only an import
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]  # generated protobuf code
    try:
        proto.ParseFromString((folder / "source.spm").read_bytes())
    except DecodeError as exc:
        raise MarianImportError(f"source.spm: not a SentencePiece model ({exc})") from exc
    if not any(p.type == NORMAL_PIECE for p in proto.pieces):  # bytes that parse as an empty ModelProto
        raise MarianImportError("source.spm: not a SentencePiece model (it holds no pieces)")
    if proto.trainer_spec.model_type != UNIGRAM:
        raise MarianImportError("source.spm is not a unigram SentencePiece model (OPUS-MT's are)")
    return proto


def _precompiled(charsmap: bytes) -> normalizers.Normalizer:
    """SentencePiece's character map as a normalizer; one that does not parse is source.spm's fault."""
    try:
        return normalizers.Precompiled(charsmap)
    except Exception as exc:  # the Rust side raises a bare Exception on a map it cannot parse
        raise MarianImportError(f"source.spm: its precompiled_charsmap does not parse ({exc})") from exc


def marian_tokenizer(folder: Path, order: list[int]) -> Tokenizer:
    """The source side's SentencePiece unigram model over our reordered vocabulary."""
    proto = _source_spm(folder)
    scores = {p.piece: p.score for p in proto.pieces if p.type == NORMAL_PIECE}
    # target-only pieces: never chosen for a source. A whole number, so tokenizer.json reads back bit for bit.
    floor = float(math.floor(min(scores.values(), default=0.0)) - 10)
    piece_of = {i: p for p, i in _vocab(folder).items()}
    pieces = [(token, 0.0) for token in SPECIAL_TOKENS]
    pieces += [(piece_of[m], scores.get(piece_of[m], floor)) for m in order[len(SPECIAL_TOKENS) :]]
    tk = HFTokenizer(models.Unigram(pieces, unk_id=UNK_ID, byte_fallback=False))
    charsmap = proto.normalizer_spec.precompiled_charsmap
    steps = [normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), "\u2581")]
    tk.normalizer = normalizers.Sequence(([_precompiled(charsmap)] if charsmap else []) + steps)
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tk.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tk.add_special_tokens(special_added_tokens())
    codes = [p for p, _ in pieces if _LANGUAGE_CODE.match(p)]  # >>fra<< of multilingual models: whole tokens
    tk.add_tokens([AddedToken(code, normalized=False, special=False) for code in codes])
    return Tokenizer(tk)


def _model_config(config: dict[str, Any], vocab_size: int) -> ModelConfig:
    """Our ModelConfig for a checked MarianConfig; what ours refuses (d_model not divisible by the heads, a
    dropout of 1) is config.json's fault, and named so."""
    try:
        return ModelConfig(
            vocab_size=vocab_size,
            d_model=config["d_model"],
            n_heads=config["encoder_attention_heads"],
            n_encoder_layers=config["encoder_layers"],
            n_decoder_layers=config["decoder_layers"],
            d_ff=config["encoder_ffn_dim"],
            dropout=float(config.get("dropout", 0.1)),
            attention_dropout=float(config.get("attention_dropout", 0.0)),
            activation=_ACTIVATIONS[config.get("activation_function", "swish")],
            max_positions=config["max_position_embeddings"],
        )
    except ValueError as exc:
        raise MarianImportError(f"config.json: {exc}") from exc


def _our_name(key: str) -> str:
    """A MarianMTModel weight's name in our Transformer."""
    return re.sub(r"(layers\.\d+)\.(fc[12])\.", r"\1.ffn.\2.", key.removeprefix("model."))


def _check_header(folder: Path, ours: ModelConfig, config: dict[str, Any]) -> None:
    """model.safetensors' shapes, from its header alone, those config.json implies: read before any tensor is and
    before our model is built, so that forged numbers cost nothing."""
    try:
        stored, _ = header(folder / "model.safetensors")
    except SafetensorError as exc:
        raise MarianImportError(f"model.safetensors: not a safetensors file ({exc})") from exc
    except ValueError as exc:
        raise MarianImportError(f"model.safetensors: {exc}") from exc
    expected = {name: shape for name, shape in expected_shapes(ours).items() if name not in _EMBEDDINGS}
    vocab, d_model = config["vocab_size"], config["d_model"]
    shapes: dict[str, tuple[int, ...]] = {}
    for key, shape in stored.items():
        name = _our_name(key)
        want = {"final_logits_bias": (1, vocab), **dict.fromkeys(_EMBEDDINGS, (vocab, d_model))}.get(name)
        if "embed_positions" in name:
            want = (config["max_position_embeddings"], d_model)
        if want is None:
            shapes[name] = shape
        elif shape != want:
            raise MarianImportError(f"model.safetensors: {key!r} has shape {shape}, but config.json implies {want}")
    try:
        compare_shapes(shapes, expected)
    except ValueError as exc:
        raise MarianImportError(f"model.safetensors: {exc} (config.json)") from exc


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    """model.safetensors' tensors (never a pickle); a corrupt file or a tensor that is not floating point is
    refused naming it."""
    try:
        weights = load_file(str(folder / "model.safetensors"))
    except SafetensorError as exc:
        raise MarianImportError(f"model.safetensors: not a safetensors file ({exc})") from exc
    for key, tensor in weights.items():
        if not tensor.is_floating_point():
            raise MarianImportError(f"model.safetensors: weight {key!r} has dtype {tensor.dtype}, not floating point")
    return weights


def load_marian(folder: Path, limits: ModelLimits | None = None) -> tuple[Transformer, Tokenizer]:
    """Our model and tokenizer for a MarianMTModel folder; MarianImportError names what does not fit. Its
    dimensions are checked against `limits` (default: ModelLimits()), and its weights' shapes against its config,
    before it is built."""
    config = _config(folder, limits or ModelLimits())
    order = _order(_vocab(folder), config)
    ours = _model_config(config, len(order))
    _check_header(folder, ours, config)
    weights = _weights(folder)
    bias = weights.pop("final_logits_bias", None)
    if bias is not None and bool(bias.abs().max() > 0):
        raise MarianImportError("final_logits_bias is not zero: an output bias has no equivalent here")
    model = Transformer(ours)
    expected = model.state_dict()
    state: dict[str, torch.Tensor] = {}
    for key, tensor in weights.items():
        name = _our_name(key)
        if "embed_positions" in name:
            table = model.encoder.embed_positions.weight
            if tensor.shape != table.shape or float((tensor - table).abs().max()) > 1e-5:
                raise MarianImportError(f"{key}: not the sinusoidal table this model computes")
            continue
        if name in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"):
            if tuple(tensor.shape) != (config["vocab_size"], config["d_model"]):
                raise MarianImportError(f"{key} has shape {tuple(tensor.shape)}, expected (vocab_size, d_model)")
            rows = torch.stack([tensor[m] if m >= 0 else torch.zeros_like(tensor[0]) for m in order])
            state["shared.weight"] = rows
            continue
        if name not in expected:
            raise MarianImportError(f"weight {key!r} has no place in this architecture")
        if tensor.shape != expected[name].shape:
            raise MarianImportError(
                f"weight {key!r} has shape {tuple(tensor.shape)}, expected {tuple(expected[name].shape)}"
            )
        state[name] = tensor.float()
    for tied in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"):
        if "shared.weight" in state:
            state[tied] = state["shared.weight"]
    missing = sorted(set(expected) - set(state))
    if missing:
        raise MarianImportError(f"model.safetensors lacks {missing[:5]}")
    model.load_state_dict(state)
    return model.eval(), marian_tokenizer(folder, order)
