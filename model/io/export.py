"""Export to the Hugging Face MarianMTModel format, and from there to CTranslate2.

    python -m model.io.export CHECKPOINT_DIR OUT_DIR [--ct2 CT2_DIR] [--quantization int8]

OUT_DIR then loads with MarianMTModel.from_pretrained / AutoTokenizer.from_pretrained:
    config.json              MarianConfig: sizes, post-norm, scale_embedding=True, our special token ids
    generation_config.json   decoder_start_token_id = <s> (our decoder starts from <s>, not from <pad>);
                             bad_words_ids <pad>, <s>, <mask>: never generated, as by our decoders
    model.safetensors        our weights under Marian's names; final_logits_bias zeros
    tokenizer.json           our byte-level BPE, plus a post-processor that appends </s> (our source convention)
    tokenizer_config.json, special_tokens_map.json   so AutoTokenizer builds a PreTrainedTokenizerFast

Writing the export needs neither transformers nor ctranslate2; converting to CTranslate2 needs both (and
torch). Marian in transformers is post-norm only, so pre-norm models are refused.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import processors
from torch import Tensor

from model.data.special_tokens import SPECIAL_TOKENS
from model.data.tokenizer import Tokenizer
from model.decode.greedy import never_emitted
from model.io.checkpoint import load_model
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer

# transformers' ACT2FN names for our activations ("swish" is SiLU in both).
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish"}
_SPECIAL_NAMES = ("pad_token", "bos_token", "eos_token", "unk_token", "mask_token")  # ids 0..4, in order


def check_exportable(config: ModelConfig) -> None:
    """Raise ValueError if a model with this config has no MarianMTModel equivalent."""
    if config.norm_first:
        raise ValueError(
            "norm_first=True (pre-norm) cannot be exported: MarianMTModel in transformers is post-norm "
            "only (LayerNorm(x + Sublayer(x)), Sec. 3.1)"
        )
    if config.activation not in _ACTIVATIONS:
        raise ValueError(f"activation={config.activation!r} has no transformers equivalent")


def marian_config(config: ModelConfig) -> dict[str, Any]:
    """config.json of the equivalent MarianMTModel (a plain dict, so writing it needs no transformers)."""
    check_exportable(config)
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": config.vocab_size,
        "decoder_vocab_size": config.vocab_size,
        "d_model": config.d_model,
        "encoder_layers": config.n_encoder_layers,
        "decoder_layers": config.n_decoder_layers,
        "encoder_attention_heads": config.n_heads,
        "decoder_attention_heads": config.n_heads,
        "encoder_ffn_dim": config.d_ff,
        "decoder_ffn_dim": config.d_ff,
        "activation_function": _ACTIVATIONS[config.activation],
        "dropout": config.dropout,
        "attention_dropout": config.attention_dropout,
        "activation_dropout": config.dropout,  # our FFN applies the residual dropout rate between fc1 and fc2
        "max_position_embeddings": config.max_positions,
        "scale_embedding": True,  # embeddings * sqrt(d_model), Sec. 3.4
        "share_encoder_decoder_embeddings": config.share_embeddings,
        "tie_word_embeddings": config.share_embeddings,  # lm_head is the embedding matrix when shared
        "pad_token_id": config.pad_id,
        "bos_token_id": config.bos_id,
        "eos_token_id": config.eos_id,
        "decoder_start_token_id": config.bos_id,  # collate: tgt_in = [<s>] + ids
        "forced_eos_token_id": None,  # like our search, a hypothesis cut at max length keeps no </s>
        "is_encoder_decoder": True,
        "use_cache": True,
    }


def generation_config(config: ModelConfig, num_beams: int | None = None) -> dict[str, Any]:
    """generation_config.json: the token ids generate() needs, and `num_beams` where the model has a default beam;
    other search settings are left to the caller."""
    beams = {"num_beams": num_beams} if num_beams is not None else {}
    return beams | {
        "bos_token_id": config.bos_id,
        "decoder_start_token_id": config.bos_id,
        "eos_token_id": config.eos_id,
        "pad_token_id": config.pad_id,
        "forced_eos_token_id": None,
        "max_length": config.max_positions,
        # never generated, as our decoders never emit them (model/decode/greedy.never_emitted)
        "bad_words_ids": [[i] for i in never_emitted(config)],
    }


def marian_state_dict(model: Transformer) -> dict[str, Tensor]:
    """Our weights under MarianMTModel's names: "model." + name with ".ffn." -> ".", lm_head as is, plus
    final_logits_bias (zeros, 1 x V). Tied tensors appear once (model.shared.weight), as transformers saves
    them; from_pretrained ties the rest from the config."""
    check_exportable(model.config)
    out: dict[str, Tensor] = {}
    for name, tensor in model.state_dict().items():
        if model.config.share_embeddings and (name.endswith("embed_tokens.weight") or name == "lm_head.weight"):
            continue  # the same matrix as shared.weight
        key = name if name.startswith("lm_head.") else "model." + name.replace(".ffn.", ".")
        out[key] = tensor.detach().to("cpu", torch.float32).contiguous().clone()
    out["final_logits_bias"] = torch.zeros(1, model.config.vocab_size)
    return out


def hf_tokenizer_json(tokenizer: Tokenizer) -> str:
    """Our tokenizer.json with a post-processor that appends </s>, so the exported tokenizer encodes a source
    as the model was trained on (collate: src = ids + [</s>]); decoding is unchanged."""
    tk = HFTokenizer.from_str(tokenizer.to_json_str())
    eos = SPECIAL_TOKENS[tokenizer.eos_id]
    tk.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A $B {eos}", special_tokens=[(eos, tokenizer.eos_id)]
    )
    return tk.to_str()


def tokenizer_files(tokenizer: Tokenizer, max_positions: int) -> dict[str, str]:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json for AutoTokenizer.from_pretrained."""
    specials = {name: SPECIAL_TOKENS[i] for i, name in enumerate(_SPECIAL_NAMES)}
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_positions,
        "padding_side": "right",
        "clean_up_tokenization_spaces": False,  # byte-level BPE restores spaces exactly
        **specials,
    }
    return {
        "tokenizer.json": hf_tokenizer_json(tokenizer),
        "tokenizer_config.json": json.dumps(tokenizer_config, indent=2),
        "special_tokens_map.json": json.dumps(specials, indent=2),
    }


def export_marian(
    model: Transformer, tokenizer: Tokenizer, directory: str | Path, num_beams: int | None = None
) -> Path:
    """Write model and tokenizer as a MarianMTModel directory (see the module docstring), with `num_beams` as
    generate()'s default beam when given; returns it."""
    config = model.config
    check_exportable(config)
    if config.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"model vocab_size={config.vocab_size} != tokenizer vocab_size={tokenizer.vocab_size}")
    for i, token in enumerate(SPECIAL_TOKENS):
        if getattr(config, f"{_SPECIAL_NAMES[i].removesuffix('_token')}_id") != i:
            raise ValueError(f"config {_SPECIAL_NAMES[i]} id differs from the tokenizer's {token!r} id {i}")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    save_file(marian_state_dict(model), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(marian_config(config), indent=2), encoding="utf-8")
    generation = json.dumps(generation_config(config, num_beams), indent=2)
    (out / "generation_config.json").write_text(generation, encoding="utf-8")
    for name, text in tokenizer_files(tokenizer, config.max_positions).items():
        (out / name).write_text(text, encoding="utf-8")
    return out


# -- CTranslate2 ----------------------------------------------------------------------------------------------


def convert_to_ctranslate2(
    marian_dir: str | Path, output_dir: str | Path, quantization: str | None = None, force: bool = False
) -> Path:
    """Convert an export_marian directory to a CTranslate2 model directory; quantization e.g. "int8".

    ctranslate2's stock Marian loader (what ct2-transformers-converter picks for a MarianConfig) is written for
    OPUS-MT checkpoints and does not fit ours: (1) it drops the last row of the embedding and output matrices
    as the <pad> transformers appends to OPUS-MT vocabularies, but keeps the last vocabulary entry because it
    is not "<pad>" (ours is id 0), so the conversion fails with "Source vocabulary 0 has size V but the model
    expected a vocabulary of size V-1"; (2) it starts the decoder from a zero embedding
    (start_from_zero_embedding, Marian's <pad> start), while ours starts from the embedding of <s>. This uses
    ctranslate2's BART loader instead, set to Marian's layout (post-norm, no embedding LayerNorm, no offset in
    the sinusoidal table), with decoder_start_token = <s> and the full vocabulary. Translate with source
    tokens ending in "</s>" (the exported tokenizer adds it); outputs stop before </s>.
    """
    import ctranslate2.converters as ct2c  # optional dependency: only this function needs it
    from ctranslate2.converters import transformers as ct2t

    class _Loader(ct2t.BartLoader):  # type: ignore[misc]  # ctranslate2 ships no type information
        @property
        def architecture_name(self) -> str:
            return "MarianMTModel"

        def get_model_spec(self, model: Any) -> Any:
            model.config.normalize_before = False  # Marian is post-norm
            model.config.normalize_embedding = False  # and has no LayerNorm on the embeddings
            return super().get_model_spec(model)

    class _Converter(ct2c.Converter):  # type: ignore[misc]  # ctranslate2 ships no type information
        def _load(self) -> Any:
            import transformers

            with torch.no_grad():
                model = transformers.MarianMTModel.from_pretrained(str(marian_dir), dtype=torch.float32)
                tokenizer = transformers.AutoTokenizer.from_pretrained(str(marian_dir))
                return _Loader()(model, tokenizer)

    return Path(_Converter().convert(str(output_dir), quantization=quantization, force=force))


# -- command line ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m model.io.export", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path, help="checkpoint directory (model.io.checkpoint format)")
    parser.add_argument("output", type=Path, help="directory for the MarianMTModel export")
    parser.add_argument("--ct2", type=Path, help="also convert to CTranslate2 into this directory")
    parser.add_argument("--quantization", default=None, help="CTranslate2 weight type, e.g. int8, int8_float32")
    parser.add_argument("--force", action="store_true", help="overwrite an existing CTranslate2 directory")
    args = parser.parse_args(argv)
    model, tokenizer, _ = load_model(args.checkpoint)
    print(f"marian\t{export_marian(model, tokenizer, args.output)}")
    if args.ct2 is not None:
        print(f"ctranslate2\t{convert_to_ctranslate2(args.output, args.ct2, args.quantization, args.force)}")


if __name__ == "__main__":
    main()
