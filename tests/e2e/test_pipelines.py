"""A back-translation pipeline on real workers, moved on by their reapers: the served numbers model (English ->
German) back-translates English text into tagged German sources, the synthetic pairs are cleaned, and a German ->
English model trains on the real pairs mixed among them and is published under the pipeline's name."""

from __future__ import annotations

from num2words import num2words

from bench.harness.stack import wait_for
from tests.support.client import write_jsonl


def test_a_backtranslation_pipeline_runs_to_its_model_on_real_workers(served, tmp_path):
    api, reverse = served["api"], served["models"]["translation"]
    numbers = list(range(1000, 1400))  # not the served model's: its numbers stop at 999
    real = [(num2words(n, lang="de"), num2words(n, lang="en")) for n in numbers[:300]]
    parallel = api.upload(write_jsonl(tmp_path / "real.jsonl", real), "parallel")
    (tmp_path / "en.txt").write_text("\n".join(num2words(n, lang="en") for n in numbers[300:]) + "\n")
    english = api.upload(tmp_path / "en.txt", "monolingual")
    body = {
        "kind": "backtranslation", "name": "numbers-de-en", "dataset_id": parallel["id"],
        "monolingual_dataset_id": english["id"], "reverse_model_id": reverse, "cleaning": {"drop_empty": True},
        "job": {"model": {"preset": "tiny", "vocab_size": 500}, "training": {"max_steps": 30, "eval_every": 30}},
        "register_as": "numbers-de-en",
    }  # fmt: skip
    created = api.http.post("/v1/pipelines", json=body)
    assert created.status_code == 201, created.text
    assert [s["name"] for s in created.json()["steps"]] == ["back-translate", "clean", "train"]

    def over():
        got = api.http.get(f"/v1/pipelines/{created.json()['id']}").json()
        return got if got["status"] != "running" else None

    done = wait_for(over, timeout=240, what="the pipeline", interval=1)
    assert done["status"] == "succeeded", done["error"]
    translated, cleaned, trained = done["steps"]
    synthetic = api.http.get(f"/v1/datasets/{translated['output']['dataset_id']}").json()
    assert synthetic["rows"] == 100 and synthetic["lineage"]["tag"] == "<BT>"
    assert synthetic["lineage"]["decoding"] == {"method": "sampling", "temperature": 1.0, "top_k": 10, "seed": 0}
    assert api.http.get(f"/v1/datasets/{cleaned['output']['dataset_id']}").json()["parent_id"] == synthetic["id"]
    job = api.http.get(trained["url"]).json()
    assert (job["dataset_id"], job["mix_dataset_id"]) == (parallel["id"], cleaned["output"]["dataset_id"])
    model = api.http.get(f"/v1/models/{done['model_id']}").json()
    assert (model["name"], model["version"], model["job_id"]) == ("numbers-de-en", 1, job["id"])
