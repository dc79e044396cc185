"""A dataset translated by the served numbers model with a real inference worker: the new dataset holds each row
beside the translation /translate gives it, is parsed and reported on by the data worker, and names its lineage;
the command line makes tagged sampled back-translations the same way."""

from __future__ import annotations

import gzip
import json

from num2words import num2words

from bench.harness.stack import run_cli, wait_for


def test_a_dataset_is_translated_into_a_new_one_over_http_and_from_the_command_line(served, tmp_path):
    api, model_id = served["api"], served["models"]["translation"]
    texts = [num2words(n, lang="en") for n in served["held_out"][:40]]
    (tmp_path / "numbers.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    source = api.upload(tmp_path / "numbers.txt", "monolingual")
    created = api.http.post(
        f"/v1/models/{model_id}/dataset-translations", json={"dataset_id": source["id"], "name": "numbers-de"}
    )
    assert created.status_code == 202, created.text

    def over():
        got = api.http.get(f"/v1/models/{model_id}/dataset-translations/{created.json()['id']}").json()
        return got if got["status"] in ("succeeded", "failed") else None

    done = wait_for(over, timeout=120, what="the dataset translation", interval=0.5)
    assert done["status"] == "succeeded", done["error"]
    assert (done["translated"], done["progress"], done["backend"]) == (40, 1.0, "ctranslate2")
    assert done["counts"] == {"pairs": 40, "empty": 0, "too_long": 0}
    made = api.processed(done["output_dataset_id"])
    assert (made["status"], made["kind"], made["rows"], made["name"]) == ("ready", "parallel", 40, "numbers-de")
    assert made["parent_id"] == source["id"] and made["lineage"]["translation_id"] == done["id"]
    assert made["lineage"]["decoding"] == {"method": "beam", "beam_size": 4}
    stored = served["artifacts"] / "datasets" / made["id"] / "data.jsonl.gz"
    pairs = [json.loads(line) for line in gzip.decompress(stored.read_bytes()).decode().splitlines()]
    answers = []
    for start in range(0, 40, 8):  # at most 8 texts a request in this stack
        body = {"texts": texts[start : start + 8], "beam_size": 4, "backend": "ctranslate2"}
        answer = api.http.post(f"/v1/models/{model_id}/translate", json=body).json()
        answers += [t["text"] for t in answer["translations"]]
    assert pairs == [{"source": t, "target": a} for t, a in zip(texts, answers)]  # in order, each row once

    key = api.http.headers["authorization"].removeprefix("Bearer ")
    printed = run_cli(
        served["env"], "translate-dataset", model_id, source["id"], "--sampling", "--temperature", "0.5",
        "--synthetic-side", "source", "--tag", "<BT>", "--wait", "--interval", "0.5", "--url", served["url"],
        "--key", key,
    )  # fmt: skip
    back = api.processed(printed.strip().splitlines()[-1])
    assert back["status"] == "ready" and back["rows"] == 40
    assert back["lineage"]["synthetic_side"] == "source" and back["lineage"]["tag"] == "<BT>"
    stored = served["artifacts"] / "datasets" / back["id"] / "data.jsonl.gz"
    pairs = [json.loads(line) for line in gzip.decompress(stored.read_bytes()).decode().splitlines()]
    assert [p["target"] for p in pairs] == texts  # the real text as the target
    assert all(p["source"].startswith("<BT> ") for p in pairs)  # beside its tagged synthetic source
