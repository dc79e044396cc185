"""A MarianMTModel folder as OPUS-MT publishes them (bench/harness/marian.py builds one: nothing is downloaded),
imported as our model: the same token ids as MarianTokenizer, the same greedy translations as generate()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

from bench.harness.marian import build_marian_folder
from model.data.demo import numbers_to_words_task
from model.decode.greedy import greedy_decode
from model.io.marian_import import MarianImportError, is_marian_folder, load_marian

SOURCES = ["three hundred and twelve", "the dogs bark in the garden", "forty two", "Ünïcödé  spaces  here"]


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory) -> Path:
    return build_marian_folder(tmp_path_factory.mktemp("opus"))


def _ours_of(folder: Path) -> dict[int, int]:
    """Marian id -> our id (model/io/marian_import.py reorders the vocabulary)."""
    vocab = json.loads((folder / "vocab.json").read_text())
    pad, eos, unk = vocab["<pad>"], vocab["</s>"], vocab["<unk>"]
    rest = [i for i in range(len(vocab)) if i not in (pad, eos, unk)]
    return {pad: 0, eos: 2, unk: 3, **{m: 5 + k for k, m in enumerate(rest)}}


def test_the_tokenizer_gives_marians_ids_and_decodes_as_it_does(marian_folder):
    assert is_marian_folder(marian_folder)
    _, ours = load_marian(marian_folder)
    theirs = transformers.MarianTokenizer.from_pretrained(marian_folder)
    to_ours = _ours_of(marian_folder)
    for text in SOURCES:
        expected = [to_ours[i] for i in theirs(text)["input_ids"]]
        assert ours.encode(text) + [ours.eos_id] == expected, text
    target = theirs(text_target=["dreihundertzwölf", "die hunde bellen"])
    target_ids = target["labels"] if "labels" in target else target["input_ids"]
    assert all(len(ids) > 2 for ids in target_ids)
    for ids in target_ids:
        assert ours.decode([to_ours[i] for i in ids]) == theirs.decode(ids, skip_special_tokens=True)


def test_greedy_translations_are_those_of_transformers(marian_folder):
    model, tokenizer = load_marian(marian_folder)
    theirs_model = transformers.MarianMTModel.from_pretrained(marian_folder).eval()
    theirs = transformers.MarianTokenizer.from_pretrained(marian_folder)
    pad = theirs.pad_token_id
    batch = theirs(SOURCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = theirs_model.generate(
            **batch, num_beams=1, do_sample=False, max_new_tokens=20, bad_words_ids=[[pad]], min_length=0
        )
    to_ours = _ours_of(marian_folder)
    src = [tokenizer.encode(s) + [tokenizer.eos_id] for s in SOURCES]
    width = max(map(len, src))
    src_ids = torch.tensor([ids + [0] * (width - len(ids)) for ids in src])
    ours = greedy_decode(model, src_ids, max_len=20)
    for row, mine in zip(generated.tolist(), ours):
        expected = [to_ours[i] for i in row[1:]]  # after the decoder start
        expected = expected[: expected.index(2)] if 2 in expected else expected
        assert mine == expected, (mine, expected)
    assert tokenizer.decode_batch(ours) == theirs.batch_decode(generated, skip_special_tokens=True)
    assert sum(len(set(x)) for x in ours) > 2 * len(ours), ours  # not one token repeated: the comparison says something


def test_what_does_not_fit_is_refused_naming_it(marian_folder, tmp_path):
    import shutil

    bad = tmp_path / "prenorm"
    shutil.copytree(marian_folder, bad)
    config = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**config, "normalize_before": True}))
    with pytest.raises(MarianImportError, match="normalize_before=True: pre-norm"):
        load_marian(bad)
    (bad / "config.json").write_text(json.dumps(config))
    (bad / "source.spm").unlink()
    with pytest.raises(MarianImportError, match=r"lacks \['source.spm'\]"):
        load_marian(bad)


def test_an_imported_marian_archive_is_fine_tuned_and_exported_again(marian_folder, tmp_path):
    """Through the upload path (a .tar.gz of the folder), then as any model of ours: trained from, and exported
    to a MarianMTModel again that generates what ours does."""
    import tarfile

    from model.io.checkpoint import save_checkpoint
    from model.io.export_archive import build_export
    from model.io.import_archive import load_archive_folder, safe_extract
    from model.train.config import TrainConfig
    from model.train.loop import train
    from model.train.prepare import prepare, start_from
    from model.train.settings import DataSettings

    archive = tmp_path / "opus.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(marian_folder, arcname="opus-mt-en-de")
    model, tokenizer, meta = load_archive_folder(safe_extract(archive, tmp_path / "x", 50 * 1024 * 1024))
    assert meta["objective"] == "translation"
    checkpoint = save_checkpoint(tmp_path / "imported", model, tokenizer, "translation")
    data = prepare(
        "translation", numbers_to_words_task(60, seed=3), tokenizer=tokenizer, settings=DataSettings(max_length=32)
    )
    tuned = train(start_from(data, model), TrainConfig(max_steps=2, warmup_steps=1, max_tokens_per_batch=256, seed=0))
    assert tuned.step == 2
    out = build_export(checkpoint, "huggingface", tmp_path / "hf.tar.gz", "hf")
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "hf", filter="data")
    again = transformers.MarianMTModel.from_pretrained(tmp_path / "hf" / "hf").eval()
    again_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf" / "hf")
    batch = again_tokenizer(SOURCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = again.generate(
            **batch, num_beams=1, do_sample=False, max_new_tokens=20, bad_words_ids=[[0], [1], [4]]
        )
    src = [tokenizer.encode(s) + [tokenizer.eos_id] for s in SOURCES]
    width = max(map(len, src))
    ours = greedy_decode(model, torch.tensor([ids + [0] * (width - len(ids)) for ids in src]), max_len=20)
    assert again_tokenizer.batch_decode(generated, skip_special_tokens=True) == tokenizer.decode_batch(ours)


def _config_without(key: str):
    def edit(config: dict) -> dict:
        return {k: v for k, v in config.items() if k != key}

    return edit


def _vocab_with_a_string_id(vocab: dict) -> dict:
    piece = next(p for p in vocab if p not in ("</s>", "<unk>", "<pad>"))
    return {**vocab, piece: str(vocab[piece])}


# (file, its new content: bytes, or a function of its parsed JSON), and what the message says
BROKEN = {
    "corrupt model.safetensors": (
        "model.safetensors",
        b"\x80\x04 a pickle, say",
        "model.safetensors: not a safetensors",
    ),
    "truncated model.safetensors": ("model.safetensors", b"\x08\x00\x00", "model.safetensors: not a safetensors"),
    "corrupt source.spm": ("source.spm", b"\xff" * 64, "source.spm: not a SentencePiece model"),
    "empty source.spm": ("source.spm", b"", r"source.spm: not a SentencePiece model \(it holds no pieces\)"),
    "config without vocab_size": ("config.json", _config_without("vocab_size"), "config.json: missing 'vocab_size'"),
    "config without d_model": ("config.json", _config_without("d_model"), "config.json: missing 'd_model'"),
    "config without pad_token_id": (
        "config.json",
        _config_without("pad_token_id"),
        "config.json: missing 'pad_token_id'",
    ),
    "config with a string d_model": (
        "config.json",
        lambda c: {**c, "d_model": "32"},
        "config.json: d_model='32' must be an integer",
    ),
    "config with a list activation": (
        "config.json",
        lambda c: {**c, "activation_function": ["swish"]},
        r"config.json: activation_function=\['swish'\] has no equivalent",
    ),
    "config with heads that do not divide d_model": (
        "config.json",
        lambda c: {**c, "encoder_attention_heads": 5, "decoder_attention_heads": 5},
        "config.json: d_model=32 is not divisible by n_heads=5",
    ),
    "vocab with a string id": ("vocab.json", _vocab_with_a_string_id, "vocab.json: .* ids must be integers"),
    "vocab that is a list": ("vocab.json", lambda v: list(v), "vocab.json: a JSON object expected, not an array"),
    "vocab that is not JSON": ("vocab.json", b"\xff\xfe", "vocab.json: not valid JSON"),
}


def _break(folder: Path, tmp_path: Path, name: str, content) -> Path:
    import shutil

    bad = shutil.copytree(folder, tmp_path / "opus-mt-broken")
    if callable(content):
        content = json.dumps(content(json.loads((bad / name).read_text()))).encode()
    (bad / name).write_bytes(content)
    return bad


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_file_is_refused_naming_the_file_and_the_value(marian_folder, tmp_path, case):
    """A corrupt or malformed file is a MarianImportError naming it (the API's 422), not the error of whichever
    library read it; as an archive, an ArchiveError saying the same."""
    from model.io.import_archive import ArchiveError, load_archive_folder

    name, content, message = BROKEN[case]
    bad = _break(marian_folder, tmp_path, name, content)
    with pytest.raises(MarianImportError, match=message):
        load_marian(bad)
    with pytest.raises(ArchiveError, match=f"the Marian model in 'opus-mt-broken' cannot be imported: {message}"):
        load_archive_folder(bad)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (lambda c: [c], "config.json: a JSON object expected, not an array"),
        (b'{"model_type": "marian",', "config.json: not valid JSON"),
    ],
)
def test_a_config_that_is_not_a_json_object_is_not_a_marian_folder_and_is_refused_naming_it(
    marian_folder, tmp_path, content, message
):
    from model.io.import_archive import ArchiveError, load_archive_folder

    bad = _break(marian_folder, tmp_path, "config.json", content)
    assert not is_marian_folder(bad)
    with pytest.raises(MarianImportError, match=message):
        load_marian(bad)
    with pytest.raises(ArchiveError, match=f"'opus-mt-broken' holds no manifest.json, and {message}"):
        load_archive_folder(bad)


def test_a_source_spm_whose_character_map_does_not_parse_is_refused_naming_it(marian_folder, tmp_path):
    """Bytes that parse as a SentencePiece model but carry a normalizer tokenizers cannot build."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString((marian_folder / "source.spm").read_bytes())
    proto.normalizer_spec.precompiled_charsmap = b"\xff\xff\xff\xff not a map"
    bad = _break(marian_folder, tmp_path, "source.spm", proto.SerializeToString())
    with pytest.raises(MarianImportError, match="source.spm: its precompiled_charsmap does not parse"):
        load_marian(bad)


def test_dimensions_over_the_limits_or_weights_the_config_does_not_imply_are_refused_before_building(
    marian_folder, tmp_path
):
    """config.json's dimensions are checked against the service's limits (named as the file names them) before
    vocab.json is read, and model.safetensors' header against config.json before our model is built."""
    from model.io.import_limits import ModelLimits

    config = json.loads((marian_folder / "config.json").read_text())
    with pytest.raises(MarianImportError, match=r"config.json: encoder_ffn_dim=\d+ is over the import limit of 8 "):
        load_marian(marian_folder, ModelLimits(d_ff=8))
    wider = {"d_model": 4096, "encoder_ffn_dim": 16384, "decoder_ffn_dim": 16384}  # some 4 GB once built
    wide = _break(marian_folder, tmp_path, "config.json", lambda c: {**c, **wider})
    with pytest.raises(
        MarianImportError,
        match=rf"model.safetensors: '[\w.]+' has shape \(\d+, {config['d_model']}\), but config.json implies "
        r"\(\d+, 4096\)",
    ):
        load_marian(wide)
