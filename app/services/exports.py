"""Downloadable exports of a trained model: the formats, and where each is kept once built.

An export is built once by an inference worker (worker/tasks/export.py, model/io/export_archive.py), stored in the
artifact store as one .tar.gz, and streamed from there by the API afterwards. Its key holds the model's sha256,
so files that change (a re-import under the same id) never meet a stale export.
"""

from __future__ import annotations

from typing import Literal, get_args

# native: this service's own checkpoint folder (what it imports back); huggingface: a MarianMTModel folder for
# transformers' from_pretrained; ctranslate2: a CTranslate2 model folder plus the tokenizer files.
ExportFormat = Literal["native", "huggingface", "ctranslate2"]
# CTranslate2's quantizations (its converter's --quantization); none keeps float32.
Ct2Quantization = Literal["int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16"]
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
CT2_QUANTIZATIONS: tuple[str, ...] = get_args(Ct2Quantization)


def exports_prefix(model_id: str) -> str:
    """Every export of one model lives under this key (deleted with the model)."""
    return f"exports/{model_id}"


def export_name(model_id: str, fmt: str, quantization: str | None) -> str:
    """The archive's file name, and the name of the one folder inside it."""
    return f"{model_id}-{fmt}" + (f"-{quantization}" if quantization else "")


def export_key(model_id: str, sha256: str, fmt: str, quantization: str | None, card_digest: str = "") -> str:
    """Where the export is kept: under the model's sha256 and its card's digest (app/services/model_card.py), so
    new weights or a card that now says more (a licence, a test-set score) make a new export."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"format={fmt!r} must be one of {list(EXPORT_FORMATS)}")
    if quantization is not None and (fmt != "ctranslate2" or quantization not in CT2_QUANTIZATIONS):
        raise ValueError(
            f"quantization={quantization!r}: only format=ctranslate2 takes one, of {list(CT2_QUANTIZATIONS)}"
        )
    version = (sha256[:16] or "unhashed") + (f"-{card_digest}" if card_digest else "")  # rows made outside a job
    # may lack a sha256
    return f"{exports_prefix(model_id)}/{version}/{export_name(model_id, fmt, quantization)}.tar.gz"
