"""GET /v1/models/{id}/export over HTTP: real workers build each format once into the artifact store, and the
archives load in transformers and CTranslate2 as they would on a user's machine."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import torch
from sqlalchemy import create_engine, text

from bench.harness.rows import insert_model
from bench.harness.stack import create_key, run_cli
from model.data.batching import pad_sequences
from model.data.tokenizer import Tokenizer
from model.io.checkpoint import load_model, save_checkpoint
from model.io.checkpoint_files import checkpoint_sha256
from model.nn.config import ModelConfig
from model.nn.transformer import Transformer
from tests.support.client import Api
from tests.support.collect import collect_now

EOS = 2


def _download(api: Api, model_id: str, into: Path, **params: str) -> Path:
    response = api.http.get(f"/v1/models/{model_id}/export", params=params, timeout=180)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/gzip"
    name = f"{model_id}-{params.get('format', 'native')}" + (
        f"-{params['quantization']}" if "quantization" in params else ""
    )
    assert f'filename="{name}.tar.gz"' in response.headers["content-disposition"]
    with tarfile.open(fileobj=io.BytesIO(response.content)) as tar:
        assert {m.name.split("/")[0] for m in tar.getmembers()} == {name}
        tar.extractall(into, filter="data")
    return into / name


def _stored_exports(served, model_id: str) -> list[Path]:
    return sorted((served["artifacts"] / "exports" / model_id).rglob("*.tar.gz"), key=lambda p: (p.name, str(p)))


@pytest.fixture(scope="module")
def exported(served, tmp_path_factory):
    """The translation model downloaded in its native and huggingface formats."""
    api, model_id = served["api"], served["models"]["translation"]
    tmp = tmp_path_factory.mktemp("exports")
    return {
        "native": _download(api, model_id, tmp, format="native"),
        "huggingface": _download(api, model_id, tmp, format="huggingface"),
    }


def _numbers(served) -> list[str]:
    from num2words import num2words

    return [num2words(n, lang="en") for n in served["held_out"][:16]]


def test_the_huggingface_export_gives_the_native_models_logits(served, exported):
    transformers = pytest.importorskip("transformers")
    ours, tokenizer, _ = load_model(exported["native"])
    hf = transformers.MarianMTModel.from_pretrained(str(exported["huggingface"])).eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(exported["huggingface"]))
    texts = _numbers(served)
    src = pad_sequences([tokenizer.encode(t) + [EOS] for t in texts])
    assert hf_tokenizer(texts, padding=True, return_tensors="pt").input_ids.tolist() == src.tolist()
    tgt_in = pad_sequences([[1] + tokenizer.encode(t)[:6] for t in texts])
    with torch.no_grad():
        theirs = hf(input_ids=src, attention_mask=(src != 0).long(), decoder_input_ids=tgt_in).logits
        mine = ours(src, tgt_in)
    keep = tgt_in != 0
    assert (mine[keep] - theirs[keep]).abs().max().item() <= 1e-4


def test_an_export_is_built_once_then_streamed_from_the_store(served, exported):
    api, model_id = served["api"], served["models"]["translation"]
    stored = _stored_exports(served, model_id)
    assert [p.name for p in stored] == [f"{model_id}-huggingface.tar.gz", f"{model_id}-native.tar.gz"]
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in stored}
    again = api.http.get(f"/v1/models/{model_id}/export", params={"format": "huggingface"}, timeout=60)
    assert again.status_code == 200 and again.content == before[stored[0]][1]
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in _stored_exports(served, model_id)} == before


def test_the_ctranslate2_export_decodes_like_the_pytorch_backend(served, exported, tmp_path):
    ct2 = pytest.importorskip("ctranslate2")
    api, model_id = served["api"], served["models"]["translation"]
    folder = _download(api, model_id, tmp_path, format="ctranslate2")
    tokenizer = load_model(exported["native"])[1]
    translator = ct2.Translator(str(folder), device="cpu", intra_threads=1)
    texts = _numbers(served)
    sources = [[tokenizer.id_to_token(i) for i in tokenizer.encode(t)] + ["</s>"] for t in texts]
    for beam_size in (1, 4):
        results = translator.translate_batch(sources, beam_size=beam_size, max_decoding_length=40)
        theirs = [tokenizer.decode([tokenizer.token_to_id(t) for t in r.hypotheses[0]]) for r in results]
        ours, our_n_best = [], []
        for i in range(0, len(texts), 8):  # MAX_TEXTS_PER_REQUEST
            body = {"texts": texts[i : i + 8], "beam_size": beam_size, "n_best": beam_size, "backend": "pytorch"}
            response = api.http.post(f"/v1/models/{model_id}/translate", json=body)
            assert response.status_code == 200, response.text
            ours += [t["text"] for t in response.json()["translations"]]
            our_n_best += [
                {t["text"], *(a["text"] for a in t["alternatives"] or [])} for t in response.json()["translations"]
            ]
        if beam_size == 1:
            assert theirs == ours
            continue
        # The searches stop by different rules (ours once beam_size hypotheses finished, HF's early_stopping=True;
        # CTranslate2 its own), so a short hypothesis finished early can outrank a longer one in one and not the
        # other. Each best of CTranslate2's must still be among ours, and they must agree on nearly every sentence.
        differ = [(t, o) for t, o in zip(theirs, ours) if t != o]
        assert len(differ) <= 2, differ
        assert all(t in n_best for t, n_best in zip(theirs, our_n_best)), (theirs, our_n_best)
    quantized = _download(api, model_id, tmp_path / "q", format="ctranslate2", quantization="int8")
    assert ct2.Translator(str(quantized), device="cpu").translate_batch(sources[:2])[0].hypotheses[0]


def test_bad_requests_are_4xx_naming_the_problem_and_build_nothing(served, tmp_path):
    api, model_id = served["api"], served["models"]["translation"]
    before = _stored_exports(served, model_id)
    onnx = api.http.get(f"/v1/models/{model_id}/export", params={"format": "onnx"})
    assert onnx.status_code == 422 and onnx.json()["detail"][0]["loc"] == ["query", "format"]
    misplaced = api.http.get(f"/v1/models/{model_id}/export", params={"format": "huggingface", "quantization": "int8"})
    assert misplaced.status_code == 422 and "applies to format=ctranslate2 only" in misplaced.text
    bob = Api(served["url"], create_key(served["env"], "bob"))
    assert bob.http.get(f"/v1/models/{model_id}/export").status_code == 404
    assert api.http.get("/v1/models/no-such-model/export").status_code == 404
    assert _stored_exports(served, model_id) == before
    # a pre-norm model has no MarianMTModel equivalent: 422 saying why, and its native export still works
    tokenizer = Tokenizer.train(["a b c", "d e f"] * 20, 280)
    model = Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, norm_first=True))
    storage_key = "models/pre-norm-test"
    checkpoint = save_checkpoint(served["artifacts"] / storage_key, model, tokenizer, "translation")
    pre_norm = insert_model(served["env"]["DATABASE_URL"], "alice", storage_key, checkpoint_sha256(checkpoint))
    refused = api.http.get(f"/v1/models/{pre_norm}/export", params={"format": "huggingface"}, timeout=60)
    assert refused.status_code == 422 and "norm_first=True (pre-norm) cannot be exported" in refused.text
    assert _download(api, pre_norm, tmp_path, format="native").is_dir()
    assert api.http.delete(f"/v1/models/{pre_norm}").status_code == 200
    assert f"exports/{pre_norm}" in collect_now(served["env"])
    assert _stored_exports(served, pre_norm) == []  # the model's exports go with it, collected
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        assert c.execute(text("SELECT count(*) FROM models WHERE id = :m"), {"m": pre_norm}).scalar() == 0


def test_the_command_line_downloads_an_export(served, tmp_path):
    api, model_id = served["api"], served["models"]["translation"]
    key = api.http.headers["authorization"].removeprefix("Bearer ")
    out = tmp_path / "model.tar.gz"
    printed = run_cli(
        served["env"],
        "export",
        model_id,
        "--format",
        "huggingface",
        "-o",
        str(out),
        "--url",
        served["url"],
        "--key",
        key,
    )
    assert printed.strip() == str(out) and not (tmp_path / "model.tar.gz.partial").exists()
    stored = next(p for p in _stored_exports(served, model_id) if p.name.endswith("-huggingface.tar.gz"))
    assert out.read_bytes() == stored.read_bytes()
    with pytest.raises(RuntimeError, match="error 404: model no-such-model not found"):
        run_cli(served["env"], "export", "no-such-model", "--url", served["url"], "--key", key)


def test_every_export_carries_its_model_card_and_a_new_card_makes_a_new_export(served, exported, tmp_path):
    hub = pytest.importorskip("huggingface_hub")
    for fmt, library in (("native", None), ("huggingface", "transformers")):
        card = hub.ModelCard.load(exported[fmt] / "README.md")
        assert card.data.pipeline_tag == "translation" and card.data.library_name == library
        assert "## Training data" in card.text and "| training | n.jsonl |" in card.text
        assert "- device: cpu" in card.text and "Not set by its owner" in card.text
    api, model_id = served["api"], served["models"]["denoising"]
    first = hub.ModelCard.load(_download(api, model_id, tmp_path / "a", format="native") / "README.md")
    assert first.data.pipeline_tag == "fill-mask" and first.data.license is None
    assert api.http.get(f"/v1/models/{model_id}/card").text == first.content
    response = api.http.patch(f"/v1/models/{model_id}", json={"license": "cc-by-4.0"})
    assert response.status_code == 200 and response.json()["license"] == "cc-by-4.0"
    second = hub.ModelCard.load(_download(api, model_id, tmp_path / "b", format="native") / "README.md")
    assert second.data.license == "cc-by-4.0" and "`cc-by-4.0`, as its owner set it." in second.text
    assert len(_stored_exports(served, model_id)) == 2  # the card changed: a new export beside the first
