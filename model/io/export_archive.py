"""One downloadable .tar.gz of a trained model, in one of three formats, holding one folder named `name`:

    native       the checkpoint folder as this service stores it (manifest.json with every file's sha256,
                 config.json, model.safetensors, the tokenizer): what the service imports back
    huggingface  a MarianMTModel folder (model/io/export.py): MarianMTModel.from_pretrained(folder) and
                 AutoTokenizer.from_pretrained(folder) load it
    ctranslate2  a CTranslate2 model folder (ctranslate2.Translator(folder)), converted from the huggingface
                 export with an optional quantization, plus that export's tokenizer files to tokenize with

The checkpoint is verified against its manifest before anything is written; the archive is written to a
temporary name and renamed, so a failure leaves no partial file.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from model.io.checkpoint import load_model
from model.io.export import convert_to_ctranslate2, export_marian

FORMATS = ("native", "huggingface", "ctranslate2")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
CARD_FILE = "README.md"  # the model card, where the Hugging Face Hub looks for it


def _reset_owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """No user or group names of the worker host in the archive."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write_tar_gz(folder: Path, name: str, out: Path) -> Path:
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(folder, arcname=name, filter=_reset_owner)
    partial.rename(out)
    return out


def build_export(
    checkpoint: str | Path,
    fmt: str,
    out: str | Path,
    name: str,
    quantization: str | None = None,
    card: str | None = None,
    num_beams: int | None = None,
) -> Path:
    """Write `out` (a .tar.gz) holding the model at `checkpoint` in format `fmt` as folder `name`, with `card` as its
    README.md (the model card; the native format's manifest does not list it, so an import ignores it) and
    `num_beams`, the model's default beam, in a huggingface export's generation_config.json; returns out.

    ValueError names what cannot be exported (a pre-norm model has no MarianMTModel equivalent, an unknown
    format, a quantization on a format other than ctranslate2); CheckpointError a checkpoint that fails its
    manifest."""
    if fmt not in FORMATS:
        raise ValueError(f"format={fmt!r} must be one of {list(FORMATS)}")
    if quantization is not None and fmt != "ctranslate2":
        raise ValueError(f"quantization={quantization!r} applies to format='ctranslate2' only")
    checkpoint, out = Path(checkpoint), Path(out)
    model, tokenizer, _ = load_model(checkpoint, "cpu")  # verifies every file against the manifest
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        folder = Path(tmp) / name
        if fmt == "native":
            folder.mkdir()
            for path in sorted(checkpoint.iterdir()):
                if path.is_file() and not path.is_symlink():
                    shutil.copyfile(path, folder / path.name)
        elif fmt == "huggingface":
            export_marian(model, tokenizer, folder, num_beams)
        else:
            marian = export_marian(model, tokenizer, Path(tmp) / "marian")
            convert_to_ctranslate2(marian, folder, quantization=quantization)
            for file in TOKENIZER_FILES:
                shutil.copyfile(marian / file, folder / file)
        if card is not None:
            (folder / CARD_FILE).write_text(card, encoding="utf-8")
        return _write_tar_gz(folder, name, out)
