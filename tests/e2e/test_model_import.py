"""POST /v1/models/import with a real inference worker: a native export comes back as a new model that answers
as the original does; a bad archive is a 422 naming why and leaves no row and no file."""

from __future__ import annotations

import io
import tarfile

import pytest
from sqlalchemy import create_engine, text

from bench.harness.marian import build_marian_folder
from tests.support.client import write_jsonl


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory):
    return build_marian_folder(tmp_path_factory.mktemp("opus"))


def _models(served) -> int:
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        return c.execute(text("SELECT count(*) FROM models")).scalar_one()


def _leftovers(served) -> list[str]:
    root = served["artifacts"]
    return (
        sorted(str(p.relative_to(root)) for p in (root / "imports").rglob("*")) if (root / "imports").exists() else []
    )


def test_a_native_export_imports_as_a_model_that_translates_the_same(served, tmp_path):
    api, original = served["api"], served["models"]["translation"]
    archive = api.http.get(f"/v1/models/{original}/export", params={"format": "native"}, timeout=180)
    assert archive.status_code == 200, archive.text
    response = api.http.post(
        "/v1/models/import", files={"file": ("numbers-native.tar.gz", archive.content)}, timeout=180
    )
    assert response.status_code == 201, response.text
    imported = response.json()
    source = api.http.get(f"/v1/models/{original}").json()
    assert imported["id"] != original and imported["job_id"] is None and imported["source"] == "import"
    assert (imported["config"], imported["tokenizer_fingerprint"], imported["parameters"]) == (
        source["config"],
        source["tokenizer_fingerprint"],
        source["parameters"],
    )
    texts = ["forty two", "three hundred and twelve", "nine hundred and ninety"]
    answers = [
        api.http.post(f"/v1/models/{m}/translate", json={"texts": texts, "beam_size": 4}).json()["translations"]
        for m in (original, imported["id"])
    ]
    assert [t["text"] for t in answers[0]] == [t["text"] for t in answers[1]]
    assert [round(t["score"], 4) for t in answers[0]] == [round(t["score"], 4) for t in answers[1]]
    assert _leftovers(served) == []  # the staging upload is gone
    # a job starts from it (it has no job of its own to take settings from), and it is deleted like any model
    dataset = api.upload(write_jsonl(tmp_path / "more.jsonl", [("forty two", "zweiundvierzig")] * 20), "parallel")
    job = api.submit(
        {
            "objective": "translation",
            "dataset_id": dataset["id"],
            "init_model_id": imported["id"],
            "training": {"max_steps": 3, "warmup_steps": 1, "max_tokens_per_batch": 2048, "max_length": 40},
        }
    )
    assert job["model"]["d_model"] == source["config"]["d_model"] and job["training"]["lr_scale"] == 0.25
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert done["status"] == "succeeded", done["error"]
    child = api.http.get(f"/v1/models/{done['model_id']}").json()
    assert child["parent_model_id"] == imported["id"] and child["config"] == imported["config"]
    assert api.http.delete(f"/v1/models/{imported['id']}").status_code == 200


def test_a_bad_archive_is_422_naming_why_and_leaves_nothing(served):
    api = served["api"]
    before = _models(served)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("m/../../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    for name, data, message in (
        ("evil.tar.gz", buffer.getvalue(), "points outside the archive"),
        ("junk.tar.gz", b"not a tarball", "not a readable .tar.gz archive"),
    ):
        response = api.http.post("/v1/models/import", files={"file": (name, data)}, timeout=60)
        assert response.status_code == 422, response.text
        detail = response.json()["detail"][0]
        assert detail["loc"][-1] == "file" and message in detail["msg"] and name in detail["msg"], detail
    assert api.http.post("/v1/models/import", files={"file": ("empty.tar.gz", b"")}).status_code == 422
    assert _models(served) == before and _leftovers(served) == []


def test_the_command_line_exports_and_imports_a_model(served, tmp_path):
    from bench.harness.stack import run_cli

    api, original = served["api"], served["models"]["translation"]
    key = api.http.headers["authorization"].removeprefix("Bearer ")
    auth = ["--url", served["url"], "--key", key]
    archive = tmp_path / "native.tar.gz"
    run_cli(served["env"], "export", original, "--format", "native", "-o", str(archive), *auth)
    model_id = run_cli(served["env"], "import", str(archive), *auth).strip().splitlines()[-1]
    imported = api.http.get(f"/v1/models/{model_id}").json()
    assert (
        imported["source"] == "import" and imported["config"] == api.http.get(f"/v1/models/{original}").json()["config"]
    )
    assert api.http.delete(f"/v1/models/{model_id}").status_code == 200


def test_an_opus_mt_style_marian_folder_imports_and_translates_as_transformers_does(served, marian_folder, tmp_path):
    """A MarianMTModel folder (built locally, tests/model/io/test_marian_import.py) as a .tar.gz: the imported model's
    greedy translations over HTTP are what transformers' generate() gives; pickle weights are refused."""
    import shutil

    import torch
    import transformers

    from tests.model.io.test_marian_import import SOURCES

    api = served["api"]
    archive = tmp_path / "opus-mt-en-de.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(marian_folder, arcname="opus-mt-en-de")
    response = api.http.post("/v1/models/import", files={"file": (archive.name, archive.read_bytes())}, timeout=180)
    assert response.status_code == 201, response.text
    model_id = response.json()["id"]
    body = {"texts": SOURCES, "beam_size": 1, "backend": "pytorch"}  # our decoder on the imported weights
    answer = api.http.post(f"/v1/models/{model_id}/translate", json=body).json()
    theirs = transformers.MarianMTModel.from_pretrained(marian_folder).eval()
    tokenizer = transformers.MarianTokenizer.from_pretrained(marian_folder)
    with torch.no_grad():
        generated = theirs.generate(
            **tokenizer(SOURCES, return_tensors="pt", padding=True),
            num_beams=1,
            do_sample=False,
            max_new_tokens=64,
            bad_words_ids=[[tokenizer.pad_token_id]],
        )
    expected = tokenizer.batch_decode(generated, skip_special_tokens=True)
    assert [t["text"] for t in answer["translations"]] == expected
    # fine-tuned through the API from the imported model, and the child exported again for CTranslate2
    pairs = list(zip(SOURCES, reversed(SOURCES), strict=True)) * 5
    dataset = api.upload(write_jsonl(tmp_path / "tune.jsonl", pairs), "parallel")
    job = api.submit(
        {
            "objective": "translation",
            "dataset_id": dataset["id"],
            "init_model_id": model_id,
            "training": {"max_steps": 3, "warmup_steps": 1, "max_tokens_per_batch": 2048, "max_length": 60},
        }
    )
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert done["status"] == "succeeded", done["error"]
    child = api.http.get(f"/v1/models/{done['model_id']}").json()
    assert child["parent_model_id"] == model_id
    assert child["tokenizer_fingerprint"] == response.json()["tokenizer_fingerprint"]
    exported = api.http.get(f"/v1/models/{child['id']}/export", params={"format": "ctranslate2"}, timeout=300)
    assert exported.status_code == 200, exported.text
    import ctranslate2

    with tarfile.open(fileobj=io.BytesIO(exported.content), mode="r:gz") as tar:
        tar.extractall(tmp_path / "ct2", filter="data")
    (folder,) = (tmp_path / "ct2").iterdir()
    translated = ctranslate2.Translator(str(folder), device="cpu").translate_batch([["▁a"]], max_decoding_length=8)
    assert len(translated) == 1 and translated[0].hypotheses
    # the same folder with its weights as a pickle: refused, nothing kept
    pickled = tmp_path / "pickled"
    shutil.copytree(marian_folder, pickled / "opus")
    (pickled / "opus" / "pytorch_model.bin").write_bytes(b"\x80\x04not really")
    bad = tmp_path / "pickled.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        tar.add(pickled / "opus", arcname="opus")
    before = _models(served)
    refused = api.http.post("/v1/models/import", files={"file": (bad.name, bad.read_bytes())}, timeout=60)
    assert refused.status_code == 422 and "pickle file, refused" in refused.text, refused.text
    assert _models(served) == before and _leftovers(served) == []
    assert api.http.delete(f"/v1/models/{model_id}").status_code == 200


def _model_folders(served) -> list[str]:
    root = served["artifacts"] / "models"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def _tar_folder(folder, path):
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return path


def test_a_corrupt_or_malformed_upload_is_422_naming_the_file_and_leaves_nothing(served, marian_folder, tmp_path):
    """A Marian folder with one file broken, and a native export with a forged config.json: each a 422 whose
    detail names the file and the value (not a 502 from whichever library read it), with no staging upload, no
    model files and no row left."""
    import hashlib
    import json
    import shutil

    api = served["api"]
    vocab = json.loads((marian_folder / "vocab.json").read_text())
    config = json.loads((marian_folder / "config.json").read_text())
    broken = {
        "model.safetensors": (b"\x80\x04 not safetensors", "model.safetensors: not a safetensors file"),
        "source.spm": (b"\xff" * 64, "source.spm: not a SentencePiece model"),
        "config.json": (
            json.dumps({k: v for k, v in config.items() if k != "d_model"}).encode(),
            "config.json: missing 'd_model'",
        ),
        "vocab.json": (json.dumps({**vocab, "<unk>": "1"}).encode(), "vocab.json: '<unk>' -> '1': ids must be"),
    }
    uploads = []
    for name, (data, message) in broken.items():
        folder = shutil.copytree(marian_folder, tmp_path / name / "opus-mt-en-de")
        (folder / name).write_bytes(data)
        uploads.append((_tar_folder(folder, tmp_path / f"bad-{name}.tar.gz"), message))
    archive = api.http.get(
        f"/v1/models/{served['models']['translation']}/export", params={"format": "native"}, timeout=180
    )
    assert archive.status_code == 200, archive.text
    with tarfile.open(fileobj=io.BytesIO(archive.content)) as tar:
        tar.extractall(tmp_path / "native", filter="data")
    (native,) = (tmp_path / "native").iterdir()
    incomplete = shutil.copytree(native, tmp_path / "incomplete" / native.name)
    (incomplete / "tokenizer.json").unlink()  # listed in the manifest
    uploads.append((_tar_folder(incomplete, tmp_path / "incomplete.tar.gz"), "tokenizer.json"))
    forged = json.dumps({**json.loads((native / "config.json").read_text()), "step": [300]}).encode()
    (native / "config.json").write_bytes(forged)
    manifest = json.loads((native / "manifest.json").read_text())
    manifest["files"]["config.json"] = {"sha256": hashlib.sha256(forged).hexdigest(), "size": len(forged)}
    (native / "manifest.json").write_text(json.dumps(manifest))
    uploads.append((_tar_folder(native, tmp_path / "forged-native.tar.gz"), "config.json: step=[300] must be"))

    before = (_models(served), _model_folders(served))
    for path, message in uploads:
        response = api.http.post("/v1/models/import", files={"file": (path.name, path.read_bytes())}, timeout=120)
        assert response.status_code == 422, response.text
        detail = response.json()["detail"][0]
        assert detail["loc"][-1] == "file" and message in detail["msg"] and path.name in detail["msg"], detail
        assert served["env"]["DATA_DIR"] not in detail["msg"] and "/tmp" not in detail["msg"], detail  # no paths
    assert (_models(served), _model_folders(served)) == before and _leftovers(served) == []
