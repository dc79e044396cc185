"""Reading an uploaded model archive (model/io/import_archive.py): the native export comes back whole; anything
unsafe or unloadable is refused with a reason, before a byte of it is kept."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import torch

from model.data.demo import reverse_task
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import save_checkpoint
from model.io.export_archive import build_export
from model.io.import_archive import ArchiveError, load_archive_folder, safe_extract
from tests.model.io.test_export import TEXTS, random_model

MB = 1024 * 1024


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A native export of a small random model, and that model."""
    tmp = tmp_path_factory.mktemp("native")
    tokenizer = Tokenizer.train([t for p in reverse_task(300, seed=0) for t in p] + TEXTS, 300)
    model = random_model(tokenizer.vocab_size)
    checkpoint = save_checkpoint(tmp / "ckpt", model, tokenizer, "translation", metrics={"bleu": 12.5})
    return build_export(checkpoint, "native", tmp / "m-native.tar.gz", "m-native"), model


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def test_the_native_export_unpacks_and_loads_with_the_same_weights(exported, tmp_path):
    archive, model = exported
    folder = safe_extract(archive, tmp_path / "x", 50 * MB)
    assert folder.name == "m-native"
    loaded, tokenizer, meta = load_archive_folder(folder)
    assert meta["objective"] == "translation" and meta["metrics"] == {"bleu": 12.5}
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
    assert tokenizer.vocab_size == model.config.vocab_size


def _symlink() -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo("m/link")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return info, None


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([_file("m/../../escape")], "points outside the archive"),
        ([_file("/abs/model.safetensors")], "points outside the archive"),
        ([_symlink()], "is a link or a device"),
        ([_file("m/pytorch_model.bin")], "pickle file, refused"),
        ([_file("a/config.json"), _file("b/config.json")], "must hold one folder, not ['a', 'b']"),
        ([_file("m/big", b"x" * 2000)], "unpacks to more than 1000 bytes"),
    ],
)
def test_an_unsafe_archive_is_refused_and_nothing_is_unpacked(tmp_path, members, message):
    archive = _tar(tmp_path / "bad.tar.gz", members)
    with pytest.raises(ArchiveError, match=message.replace("[", r"\[").replace("]", r"\]")):
        safe_extract(archive, tmp_path / "out", 1000)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))


def test_not_an_archive_or_not_a_native_model_is_refused(exported, tmp_path):
    (tmp_path / "junk.tar.gz").write_bytes(b"this is not gzip")
    with pytest.raises(ArchiveError, match="not a readable .tar.gz archive"):
        safe_extract(tmp_path / "junk.tar.gz", tmp_path / "j", MB)
    bert = _tar(tmp_path / "hf.tar.gz", [_file("bert/config.json", json.dumps({"model_type": "bert"}).encode())])
    with pytest.raises(ArchiveError, match="not a MarianMTModel's"):
        load_archive_folder(safe_extract(bert, tmp_path / "h", MB))
    marian = _tar(tmp_path / "m.tar.gz", [_file("opus/config.json", json.dumps({"model_type": "marian"}).encode())])
    with pytest.raises(ArchiveError, match=r"cannot be imported: a Marian folder needs .* lacks \['model.safetensors'"):
        load_archive_folder(safe_extract(marian, tmp_path / "m", MB))
    empty = _tar(tmp_path / "e.tar.gz", [_file("m/readme.txt")])
    with pytest.raises(ArchiveError, match="holds no manifest.json"):
        load_archive_folder(safe_extract(empty, tmp_path / "e", MB))


def test_a_tampered_checkpoint_is_refused(exported, tmp_path):
    folder = safe_extract(exported[0], tmp_path / "t", 50 * MB)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one weight's last byte
    weights.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="does not load"):
        load_archive_folder(folder)


def test_a_tokenizer_that_does_not_match_the_weights_is_refused(tmp_path):
    """A forged checkpoint: another tokenizer, with config.json and the manifest rewritten to agree with it."""
    from model.io.checkpoint_files import read_checkpoint_files, write_checkpoint_files

    tokenizer = Tokenizer.train([t for p in reverse_task(300, seed=0) for t in p] + TEXTS, 300)
    honest = save_checkpoint(tmp_path / "m", random_model(tokenizer.vocab_size), tokenizer, "translation")
    files, _ = read_checkpoint_files(honest, verify=True)
    other = Tokenizer.train([t for p in reverse_task(300, seed=1) for t in p], 270)
    config = json.loads(files["config.json"])
    files["tokenizer.json"] = other.to_json_str().encode()
    files["config.json"] = json.dumps({**config, "tokenizer_fingerprint": other.fingerprint}).encode()
    forged = write_checkpoint_files(tmp_path / "forged", files)
    with pytest.raises(ArchiveError, match=f"the tokenizer has {other.vocab_size} tokens but the weights"):
        load_archive_folder(forged)


def _forged(exported, tmp_path: Path, edit) -> Path:
    """The native export unpacked, then config.json rewritten by edit(config) and the manifest made to agree:
    hashes cannot tell a forged file, only its contents can."""
    from model.io.checkpoint_files import read_checkpoint_files, write_checkpoint_files

    folder = safe_extract(exported[0], tmp_path / "x", 50 * MB)
    files, _ = read_checkpoint_files(folder, verify=True)
    files["config.json"] = json.dumps(edit(json.loads(files["config.json"]))).encode()
    return write_checkpoint_files(tmp_path / "forged", files)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: [c], "config.json: a JSON object expected, not an array"),
        (lambda c: {**c, "model": [c["model"]]}, "config.json: 'model' must be an object of ModelConfig fields"),
        (lambda c: {**c, "model": {**c["model"], "d_model": "64"}}, "config.json: model: d_model='64' must be an int"),
        (lambda c: {k: v for k, v in c.items() if k != "model"}, "config.json: 'model' must be an object"),
        (lambda c: {**c, "step": [100]}, r"config.json: step=\[100\] must be a non-negative integer"),
        (lambda c: {**c, "step": True}, "config.json: step=True must be a non-negative integer"),
        (lambda c: {**c, "metrics": "high"}, "config.json: 'metrics' must be an object of name -> number"),
        (lambda c: {**c, "metrics": {"bleu": "12.5"}}, "config.json: metrics\\['bleu'\\]='12.5' must be a finite"),
        (lambda c: {**c, "metrics": {"bleu": float("nan")}}, "config.json: metrics\\['bleu'\\]=nan must be a finite"),
        (lambda c: {**c, "noise": ["span"]}, r"config.json: noise=\['span'\] is not one of \('span', 'token'\)"),
    ],
)
def test_a_config_forged_with_wrong_types_is_refused_naming_the_field(exported, tmp_path, edit, message):
    with pytest.raises(ArchiveError, match=message):
        load_archive_folder(_forged(exported, tmp_path, edit))


def _rewrite(folder: Path, name: str, data: bytes) -> None:
    """Replace one file and record its new sha256 in the manifest, as a forger would."""
    import hashlib

    (folder / name).write_bytes(data)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _weights_with_aliases(folder: Path, aliases: str) -> bytes:
    from safetensors.torch import load_file, save

    return save(load_file(str(folder / "model.safetensors")), metadata={"format": "pt", "aliases": aliases})


@pytest.mark.parametrize(
    ("forge", "message"),
    [
        (lambda f: _rewrite(f, "model.safetensors", b"\x80\x04 a pickle"), "model.safetensors: not a safetensors file"),
        (
            lambda f: _rewrite(f, "model.safetensors", _weights_with_aliases(f, "[1]")),
            "model.safetensors: its metadata's 'aliases' must map names to tensors the file stores",
        ),
        (
            lambda f: _rewrite(f, "model.safetensors", _weights_with_aliases(f, '{"lm_head.weight": "nowhere"}')),
            "model.safetensors: its metadata's 'aliases' must map names to tensors the file stores",
        ),
        (
            lambda f: (f / "manifest.json").write_text(json.dumps({"files": {"config.json": "0" * 64}})),
            "manifest.json: files\\['config.json'\\] must be an object with a 'sha256' string",
        ),
        (
            lambda f: (f / "manifest.json").write_text(json.dumps({"files": ["config.json"]})),
            "manifest.json: 'files' must be an object of file name -> entry, not an array",
        ),
        (lambda f: (f / "manifest.json").write_text("[]"), "manifest.json: a JSON object expected, not an array"),
        (lambda f: (f / "config.json").unlink(), "config.json is missing"),
    ],
)
def test_forged_weights_or_manifest_are_refused_naming_the_file(exported, tmp_path, forge, message):
    folder = safe_extract(exported[0], tmp_path / "x", 50 * MB)
    forge(folder)
    with pytest.raises(ArchiveError, match=message):
        load_archive_folder(folder)


def test_a_json_file_nested_too_deeply_for_the_parser_is_refused_naming_it(exported, tmp_path):
    folder = safe_extract(exported[0], tmp_path / "x", 50 * MB)
    _rewrite(folder, "trainer_state.json", b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ArchiveError, match=r"trainer_state.json: not valid JSON \(nested too deeply\)"):
        load_archive_folder(folder)


def test_an_extended_header_of_gigabytes_is_refused_before_it_is_read(tmp_path):
    """A few kilobytes whose first member is a pax header saying it is 256 MiB long: tarfile would read it whole
    into memory before returning a member; the bounded reader refuses the read."""
    from tests.support.bombs import pax_header_bomb

    archive = tmp_path / "pax.tar.gz"
    archive.write_bytes(pax_header_bomb(256))
    assert archive.stat().st_size < MB
    with pytest.raises(ArchiveError, match=f"a header of {256 * MB} bytes .*more than the {MB} a header may hold"):
        safe_extract(archive, tmp_path / "out", 50 * MB)
    assert not (tmp_path / "out").exists()


def test_an_archive_of_many_members_stops_at_the_limit_with_nothing_left(tmp_path):
    from tests.support.bombs import many_members_tar_gz

    archive = tmp_path / "many.tar.gz"
    archive.write_bytes(many_members_tar_gz(5000))
    with pytest.raises(ArchiveError, match=r"holds more than 100 members \(IMPORT_MAX_MEMBERS=100\)"):
        safe_extract(archive, tmp_path / "out", 50 * MB)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("suffix", ["gz", "bz2", "xz"])
def test_a_json_file_too_large_to_parse_is_refused_before_it_is_unpacked(tmp_path, suffix):
    """40 MiB of JSON whitespace (a few KB compressed, in any compression tarfile reads) as tokenizer.json: over
    the 32 MiB a file parsed whole may hold, refused by its header before a byte of it is written."""
    archive = tmp_path / f"big.tar.{suffix}"
    with tarfile.open(archive, f"w:{suffix}") as tar:
        info = tarfile.TarInfo("m/tokenizer.json")
        info.size = 40 * MB
        tar.addfile(info, io.BytesIO(b" " * info.size))
    with pytest.raises(ArchiveError, match=rf"'m/tokenizer.json' unpacks to {40 * MB} bytes: .*METADATA_MB=32\)"):
        safe_extract(archive, tmp_path / "out", 500 * MB)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (  # the review's archive: a million tokens of 65536 dimensions, terabytes once built
            {"vocab_size": 1_000_000, "d_model": 65536},
            r"vocab_size=1000000 is over the import limit of 256000 \(IMPORT_MAX_VOCAB_SIZE=256000\)",
        ),
        ({"d_model": 65536}, r"d_model=65536 is over the import limit of 4096 \(IMPORT_MAX_D_MODEL=4096\)"),
        ({"n_encoder_layers": 1000}, r"n_encoder_layers=1000 is over the import limit of 64 \(IMPORT_MAX_LAYERS"),
        ({"max_positions": 1 << 20}, r"max_positions=1048576 is over the import limit of 16384"),
    ],
)
def test_a_config_over_the_dimension_limits_is_refused_before_a_model_is_built(exported, tmp_path, model, message):
    from tests.support.bombs import forged_native

    folder = safe_extract(exported[0], tmp_path / "x", 50 * MB)
    archive = forged_native(folder, tmp_path / "huge.tar.gz", **model)
    assert archive.stat().st_size < MB
    with pytest.raises(ArchiveError, match=f"config.json: model: {message}"):
        load_archive_folder(safe_extract(archive, tmp_path / "h", 50 * MB))


def test_weights_shaped_otherwise_than_the_config_says_are_refused_by_their_header(exported, tmp_path):
    """A config within the limits that asks for a model of about 4 GB over a tiny model's weights: the safetensors
    header's shapes are compared with the config's before anything is built."""
    from tests.support.bombs import forged_native

    folder = safe_extract(exported[0], tmp_path / "x", 50 * MB)
    vocab, d_model = exported[1].config.vocab_size, exported[1].config.d_model
    archive = forged_native(folder, tmp_path / "wide.tar.gz", d_model=4096, d_ff=16384)
    with pytest.raises(
        ArchiveError,
        match=rf"model.safetensors: 'shared.weight' has shape \({vocab}, {d_model}\), but the config implies "
        rf"\({vocab}, 4096\) \(config.json's model\)",
    ):
        load_archive_folder(safe_extract(archive, tmp_path / "w", 50 * MB))
    from model.io.import_archive import ModelLimits

    smaller = ModelLimits(d_model=d_model - 1)  # a service with lower limits
    with pytest.raises(ArchiveError, match=f"d_model={d_model} is over the import limit of {d_model - 1}"):
        load_archive_folder(folder, smaller)
