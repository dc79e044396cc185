"""Spec of checkpoints: atomic directories, safetensors only, hashes that catch corruption, averaging."""

import hashlib
import json
import os
import pickle
import random
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from model.data.demo import reverse_task
from model.data.tokenizer import Tokenizer
from model.decode.greedy import greedy_decode
from model.io import checkpoint as ckpt_module
from model.io import checkpoint_files
from model.io.averaging import average_checkpoints, write_averaged_checkpoint
from model.io.checkpoint import latest_good_checkpoint, load_checkpoint, load_model, save_checkpoint
from model.io.checkpoint_files import (
    MANIFEST_FILE,
    MODEL_FILE,
    OPTIMIZER_FILE,
    CheckpointError,
    checkpoint_sha256,
    list_checkpoints,
    step_dir,
    verify_checkpoint,
)
from model.io.checkpoint_tensors import load_optimizer_state
from model.nn.config import ModelConfig
from model.train.rng_state import capture_rng_state, restore_rng_state


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.train([s for pair in reverse_task(200, seed=0) for s in pair], vocab_size=300)


def make_model(tokenizer: Tokenizer, seed: int = 0) -> torch.nn.Module:
    from model.nn.transformer import Transformer

    torch.manual_seed(seed)
    return Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, max_positions=64))


def trained_optimizer(model) -> torch.optim.Adam:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    src = torch.tensor([[7, 8, 9, 2]])
    tgt_in = torch.tensor([[1, 9, 8, 7]])
    for _ in range(2):
        optimizer.zero_grad()
        model(src, tgt_in).logsumexp(-1).mean().backward()
        optimizer.step()
    return optimizer


def save(root: Path, step: int, model, tokenizer, optimizer=None) -> Path:
    return save_checkpoint(
        step_dir(root, step),
        model,
        tokenizer,
        "translation",
        step=step,
        metrics={"loss": 1.5},
        optimizer=optimizer or trained_optimizer(model),
        trainer_state={"step": step},
    )


def flip_byte(path: Path, offset: int = -100) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


# -- round trip -----------------------------------------------------------------------------------------------


def test_checkpoint_round_trips_weights_optimizer_and_metadata(tokenizer, tmp_path):
    model = make_model(tokenizer)
    optimizer = trained_optimizer(model)
    path = save(tmp_path, 7, model, tokenizer, optimizer)
    assert sorted(p.name for p in path.iterdir()) == [
        "config.json",
        "manifest.json",
        "model.safetensors",
        "optimizer.safetensors",
        "tokenizer.json",
        "trainer_state.json",
    ]
    ckpt = load_checkpoint(path)
    assert ckpt.step == 7 and ckpt.objective == "translation" and ckpt.meta["metrics"] == {"loss": 1.5}
    assert ckpt.model_config == model.config and ckpt.tokenizer.fingerprint == tokenizer.fingerprint
    assert ckpt.trainer_state == {"step": 7}
    state = model.state_dict()
    assert ckpt.model_state.keys() == state.keys()
    assert all(torch.equal(ckpt.model_state[k], state[k]) for k in state)

    fresh = make_model(tokenizer, seed=1)
    fresh.load_state_dict(ckpt.model_state)
    fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    load_optimizer_state(fresh_optimizer, fresh, ckpt.optimizer_state)
    for (_, a), (_, b) in zip(
        sorted(optimizer.state_dict()["state"].items()), sorted(fresh_optimizer.state_dict()["state"].items())
    ):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert fresh_optimizer.param_groups[0]["betas"] == (0.9, 0.98)


def test_tied_embeddings_are_stored_once_and_tied_again_on_load(tokenizer, tmp_path):
    model = make_model(tokenizer)
    path = save(tmp_path, 1, model, tokenizer)
    stored = load_file(path / MODEL_FILE)
    assert "shared.weight" in stored
    assert not {"lm_head.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"} & set(stored)
    loaded, _, meta = load_model(path)
    assert loaded.lm_head.weight is loaded.shared.weight is loaded.encoder.embed_tokens.weight
    assert not loaded.training and meta["sha256"] == checkpoint_sha256(path) and meta["step"] == 1


def test_untied_model_round_trips(tokenizer, tmp_path):
    from model.nn.transformer import Transformer

    model = Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, share_embeddings=False))
    path = save_checkpoint(tmp_path / "c", model, tokenizer, "denoising")
    loaded, _, meta = load_model(path)
    assert meta["objective"] == "denoising" and meta["kind"] == "step"
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))


def test_rng_state_round_trips_through_json():
    state = json.loads(json.dumps(capture_rng_state()))
    expected = (torch.rand(3), random.random())
    torch.manual_seed(123)
    random.seed(123)
    restore_rng_state(state)
    got = (torch.rand(3), random.random())
    assert torch.equal(got[0], expected[0]) and got[1] == expected[1]


@pytest.mark.parametrize("saved_gpus, host_gpus", [(8, 1), (1, 2), (2, 2)])
def test_cuda_rng_states_restore_on_a_host_with_another_gpu_count(monkeypatch, saved_gpus, host_gpus):
    """Fault: a checkpoint written on an 8-GPU host, resumed on a 1-GPU host (and the reverse). Pass: no
    IndexError; each GPU the host has gets the state saved for that index, and no other index is touched."""
    restored: dict[int, list[int]] = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: host_gpus)

    def set_rng_state(state: torch.Tensor, device: int) -> None:
        if device >= host_gpus:
            raise IndexError(f"no GPU {device} on this host")
        restored[device] = state.tolist()

    monkeypatch.setattr(torch.cuda, "set_rng_state", set_rng_state)
    state = json.loads(json.dumps(capture_rng_state()))
    state["cuda"] = [[g, 7, 7] for g in range(saved_gpus)]
    restore_rng_state(state)
    assert restored == {g: [g, 7, 7] for g in range(min(saved_gpus, host_gpus))}


# -- atomic writes and hashes ---------------------------------------------------------------------------------


def test_manifest_lists_every_file_with_its_sha256(tokenizer, tmp_path):
    path = save(tmp_path, 1, make_model(tokenizer), tokenizer)
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    assert set(manifest["files"]) == {p.name for p in path.iterdir()} - {MANIFEST_FILE}
    for name, entry in manifest["files"].items():
        data = (path / name).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert checkpoint_sha256(path) == hashlib.sha256((path / MANIFEST_FILE).read_bytes()).hexdigest()
    assert verify_checkpoint(path) == checkpoint_sha256(path)


def test_a_failed_write_leaves_neither_checkpoint_nor_temporary_directory(tokenizer, tmp_path, monkeypatch):
    calls = []

    def failing_write(path, data):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk full")
        Path(path).write_bytes(data)

    monkeypatch.setattr(checkpoint_files, "_write_synced", failing_write)
    with pytest.raises(OSError, match="disk full"):
        save(tmp_path, 1, make_model(tokenizer), tokenizer)
    assert list(tmp_path.iterdir()) == []


def test_rewriting_a_checkpoint_replaces_it_whole(tokenizer, tmp_path):
    first = save(tmp_path, 3, make_model(tokenizer, seed=0), tokenizer)
    digest = checkpoint_sha256(first)
    second = save(tmp_path, 3, make_model(tokenizer, seed=1), tokenizer)
    assert second == first and checkpoint_sha256(second) != digest
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000003"]


def test_flipped_byte_is_refused_naming_the_file_and_both_hashes(tokenizer, tmp_path):
    path = save(tmp_path, 1, make_model(tokenizer), tokenizer)
    expected = json.loads((path / MANIFEST_FILE).read_text())["files"][MODEL_FILE]["sha256"]
    flip_byte(path / MODEL_FILE)
    actual = hashlib.sha256((path / MODEL_FILE).read_bytes()).hexdigest()
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(path)
    message = str(e.value)
    assert str(path / MODEL_FILE) in message and expected in message and actual in message
    with pytest.raises(CheckpointError, match=re.escape(MODEL_FILE)):
        load_model(path)


def test_latest_good_checkpoint_falls_back_past_corrupted_and_torn_ones(tokenizer, tmp_path):
    model = make_model(tokenizer)
    for step in (10, 20, 30, 40):
        save(tmp_path, step, model, tokenizer)
    assert latest_good_checkpoint(tmp_path) == step_dir(tmp_path, 40)
    flip_byte(step_dir(tmp_path, 40) / OPTIMIZER_FILE)
    (step_dir(tmp_path, 30) / MANIFEST_FILE).unlink()  # torn: the manifest is written last
    (tmp_path / ".tmp-step-00000050-abcd").mkdir()  # a crashed writer's leftovers are never candidates
    (step_dir(tmp_path, 20) / "trainer_state.json").write_text('{"step": 99}')
    assert latest_good_checkpoint(tmp_path) == step_dir(tmp_path, 10)
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "step-00000010",
        "step-00000020",
        "step-00000030",
        "step-00000040",
    ]
    assert latest_good_checkpoint(tmp_path / "missing") is None


def test_a_pickle_in_place_of_a_checkpoint_file_is_never_unpickled(tokenizer, tmp_path):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = save(tmp_path, 1, make_model(tokenizer), tokenizer)
    payload = pickle.dumps({"shared.weight": Exploit()})
    for name in (MODEL_FILE, OPTIMIZER_FILE):
        (path / name).write_bytes(payload)
    # Even with a matching manifest (an attacker who can write files can write the manifest too).
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    for name in (MODEL_FILE, OPTIMIZER_FILE):
        manifest["files"][name] = {"sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}
    (path / MANIFEST_FILE).write_text(json.dumps(manifest))
    (path / "pytorch_model.bin").write_bytes(payload)  # files outside the manifest are never read
    with pytest.raises(CheckpointError, match="not a valid safetensors file"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError):
        load_model(path, verify=False)
    assert not marker.exists()


def test_checkpoint_code_never_unpickles():
    for name in (
        "io/checkpoint.py",
        "io/checkpoint_files.py",
        "io/checkpoint_tensors.py",
        "io/averaging.py",
        "train/rng_state.py",
        "train/loop.py",
        "train/trainer.py",
        "train/config.py",
        "train/prepare.py",
        "train/step.py",
        "train/validation.py",
    ):
        source = (Path(ckpt_module.__file__).parents[1] / name).read_text()
        assert "import pickle" not in source and "torch.save" not in source
        for call in re.findall(r"torch\.load\([^)]*\)", source):
            assert "weights_only=True" in call, call


def test_wrong_tokenizer_is_refused(tokenizer, tmp_path):
    path = save(tmp_path, 1, make_model(tokenizer), tokenizer)
    other = Tokenizer.train(["completely different text"] * 10, vocab_size=280)
    (path / "tokenizer.json").write_text(other.to_json_str())
    with pytest.raises(CheckpointError, match="fingerprint"):
        load_checkpoint(path, verify=False)


# -- averaging (Sec. 6.1) -------------------------------------------------------------------------------------


def test_average_of_two_checkpoints_is_the_mean_of_their_tensors(tokenizer, tmp_path):
    a, b = make_model(tokenizer, seed=0), make_model(tokenizer, seed=1)
    paths = [save(tmp_path, 1, a, tokenizer), save(tmp_path, 2, b, tokenizer)]
    averaged = average_checkpoints(paths)
    sa, sb = a.state_dict(), b.state_dict()
    assert averaged.keys() == sa.keys()
    for name in sa:
        torch.testing.assert_close(averaged[name], (sa[name] + sb[name]) / 2, rtol=0, atol=1e-7, msg=name)
    assert averaged["lm_head.weight"] is averaged["shared.weight"]

    out = write_averaged_checkpoint(paths, tmp_path / "averaged")
    model, tok, meta = load_model(out)
    assert meta["kind"] == "averaged" and meta["averaged_from"] == ["step-00000001", "step-00000002"]
    assert latest_good_checkpoint(tmp_path) == paths[1]  # weights-only checkpoints are not resumable
    src = torch.tensor([tok.encode("a b c") + [tok.eos_id]])
    assert len(greedy_decode(model, src, max_len=5)) == 1


def test_averaging_refuses_checkpoints_of_different_models(tokenizer, tmp_path):
    from model.nn.transformer import Transformer

    a = save(tmp_path, 1, make_model(tokenizer), tokenizer)
    other = Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, d_model=32, max_positions=64))
    b = save_checkpoint(tmp_path / "b", other, tokenizer, "translation")
    with pytest.raises(CheckpointError, match="another model config"):
        average_checkpoints([a, b])


def test_averaging_needs_a_checkpoint():
    with pytest.raises(ValueError, match="at least one"):
        average_checkpoints([])


def test_files_are_fsynced_before_the_rename(tokenizer, tmp_path, monkeypatch):
    events = []
    real_fsync, real_rename = os.fsync, os.rename
    monkeypatch.setattr(checkpoint_files.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(checkpoint_files.os, "rename", lambda a, b: (events.append("rename"), real_rename(a, b))[1])
    save(tmp_path, 1, make_model(tokenizer), tokenizer)
    assert events.index("rename") >= 7  # six files and the temporary directory first
    assert events[-1] == "fsync"  # then the parent directory, so the rename itself is durable
