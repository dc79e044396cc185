"""A pickle planted where a checkpoint's or a model's weights are is refused with a clear error and never
unpickled: neither by model.io.checkpoint nor by an inference worker serving a model row that points at it.

The payload creates a marker file when unpickled; a control run shows that it really does.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import re
import time
import uuid
from pathlib import Path

import httpx
import pytest

from bench.harness.stack import ROOT
from tests.security.rows import insert_tiny_model

PLANTED = ("model.safetensors", "optimizer.safetensors", "model.pt", "pytorch_model.bin")


class _CreatesFile:
    """Unpickling this calls open(marker, "w"): the file appearing means the pickle was executed."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def payload(marker: Path) -> bytes:
    return pickle.dumps({"encoder.embed_tokens.weight": _CreatesFile(marker)})


def plant(directory: Path, marker: Path) -> str:
    """Write a real tiny checkpoint to `directory`, then put the pickle in place of its weights and beside them
    (.pt, .bin), with a manifest that lists them all with their true sha256 (whoever can write the files can write
    the manifest). Returns the checkpoint's sha256, as a model row would record it."""
    from model.data.tokenizer import Tokenizer
    from model.io.checkpoint import save_checkpoint
    from model.io.checkpoint_files import MANIFEST_FILE, checkpoint_sha256
    from model.nn.config import ModelConfig
    from model.nn.transformer import Transformer

    texts = [f"{n} apples and {n + 1} pears" for n in range(60)]
    tokenizer = Tokenizer.train(texts, vocab_size=300)
    model = Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, max_positions=64))
    save_checkpoint(directory, model, tokenizer, "translation", step=1)
    data = payload(marker)
    manifest = json.loads((directory / MANIFEST_FILE).read_text())
    for name in PLANTED:
        (directory / name).write_bytes(data)
        manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest))
    return checkpoint_sha256(directory)


def test_the_payload_really_executes_when_unpickled(tmp_path):
    """Control: without this, a marker that never appears would prove nothing."""
    marker = tmp_path / "control-marker"
    pickle.loads(payload(marker))
    assert marker.exists()


def test_model_checkpoint_refuses_a_planted_pickle_and_never_unpickles_it(tmp_path):
    from model.io.checkpoint import load_checkpoint, load_model
    from model.io.checkpoint_files import CheckpointError

    marker = tmp_path / "marker"
    directory = tmp_path / "step-00000001"
    plant(directory, marker)
    with pytest.raises(CheckpointError, match=r"(model|optimizer)\.safetensors is not a valid safetensors file"):
        load_checkpoint(directory)
    with pytest.raises(CheckpointError, match=r"model\.safetensors is not a valid safetensors file"):
        load_model(directory, verify=False)
    (directory / "model.safetensors").unlink()  # only the .pt/.bin left: they are not weights to this loader
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_checkpoint(directory)
    assert not marker.exists()


def test_no_code_unpickles_or_loads_torch_files_unsafely():
    """No pickle.load(s), no torch.load without weights_only=True, no numpy allow_pickle in the service's code."""
    problems = []
    for package in ("app", "worker", "model"):
        for path in (ROOT / package).rglob("*.py"):
            source = path.read_text()
            where = path.relative_to(ROOT)
            if re.search(r"\bpickle\.loads?\(|\bcloudpickle\b|\bdill\b|allow_pickle\s*=\s*True", source):
                problems.append(f"{where}: unpickles")
            problems += [
                f"{where}: {call}"
                for call in re.findall(r"torch\.load\([^)]*\)", source)
                if "weights_only=True" not in call
            ]
    assert not problems, problems


def test_a_served_model_pointing_at_a_pickle_fails_cleanly_and_never_executes_it(debug_stack):
    """A model row whose files are a planted pickle: every inference route answers a clear, documented error
    (not a 500, no server path in it), nothing is unpickled, and the worker keeps serving."""
    key = debug_stack.key("mallory")
    storage_key = f"models/planted-{uuid.uuid4().hex[:8]}"
    marker = debug_stack.artifacts.parent / f"marker-{uuid.uuid4().hex[:8]}"
    sha256 = plant(debug_stack.artifacts / storage_key, marker)
    model_id = insert_tiny_model(debug_stack.env["DATABASE_URL"], "mallory", storage_key, sha256=sha256)
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=debug_stack.url, headers=headers, timeout=90) as http:
        for method, path, body in (
            ("POST", "translate", {"texts": ["one apple"]}),
            ("POST", "attention", {"text": "one apple"}),
            ("GET", "neighbors?token=apple", None),
        ):
            response = http.request(method, f"/v1/models/{model_id}/{path}", json=body)
            assert response.status_code in (409, 422, 503), (path, response.status_code, response.text)
            detail = response.json()["detail"]
            assert model_id in detail and ("restore" in detail or "not a valid" in detail), detail
            assert str(debug_stack.artifacts) not in detail and storage_key not in detail, detail
        ping = http.post("/v1/pings", json={"queue": "inference"}).json()
        deadline = time.monotonic() + 60
        while not http.get(f"/v1/pings/{ping['id']}").json()["answered_at"]:
            assert time.monotonic() < deadline, "the inference worker stopped answering after the planted model"
            time.sleep(0.3)
    assert not marker.exists(), "the planted pickle was executed"
    assert "model.safetensors is not a valid safetensors file" in debug_stack.processes.log("inference")
