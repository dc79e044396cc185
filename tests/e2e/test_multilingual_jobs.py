"""A job of several language pairs over HTTP with real workers: each pair's rows sampled by temperature and
tagged with its target language, and a model whose tokenizer holds one token a target language."""

from __future__ import annotations

from sqlalchemy import create_engine, text

from model.data.demo import numbers_to_words_task
from model.data.language_pairs import rows_per_pair
from model.io.checkpoint import load_model
from tests.support.client import write_jsonl


def test_a_job_of_two_pairs_trains_one_model_with_a_token_a_target_language(served, tmp_path):
    api = served["api"]
    de = api.upload(write_jsonl(tmp_path / "de.jsonl", numbers_to_words_task(200, seed=1)), "parallel",
                    languages=("en", "de"))  # fmt: skip
    fr = api.upload(write_jsonl(tmp_path / "fr.jsonl", numbers_to_words_task(40, seed=2, lang_tgt="fr")), "parallel",
                    languages=("en", "fr"))  # fmt: skip
    training = {"max_steps": 20, "eval_every": 20, "checkpoint_every": 20, "max_length": 40, "warmup_steps": 10}
    job = api.submit(
        {
            "objective": "translation",
            "pairs": [{"dataset_id": de["id"]}, {"dataset_id": fr["id"]}],
            "model": {"preset": "tiny"},
            "training": training,
        }  # fmt: skip
    )
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert done["status"] == "succeeded", done["error"]
    assert [(p["source_language"], p["target_language"]) for p in done["pairs"]] == [("en", "de"), ("en", "fr")]
    # 5% of each pair held out first (10 of 200, 2 of 40), then each epoch's rows drawn from the rest at temperature 5
    lines = [
        line["message"] for line in api.http.get(f"/v1/jobs/{job['id']}/logs", params={"limit": 500}).json()["lines"]
    ]
    counts = rows_per_pair([190, 38], 5.0)
    epoch = f"{{'en->de': {counts[0]}, 'en->fr': {counts[1]}}}, drawn anew each epoch from [190, 38]; 12 validation"
    assert any(epoch in m for m in lines), lines
    assert counts[1] > 38 * (190 + 38) / 228  # the small pair gets more than its share of the data
    sampled = api.http.get(f"/v1/jobs/{job['id']}/metrics", params={"names": "pair_rows/en-de,pair_rows/en-fr"})
    assert {k: v["values"] for k, v in sampled.json()["series"].items()} == {
        "pair_rows/en-de": [counts[0]],
        "pair_rows/en-fr": [counts[1]],
    }  # each pair's rows as sampled, in the job's metrics
    # validated pair by pair: each pair's series, and their mean under the plain name
    names = ",".join(f"{m}{p}" for m in ("valid_loss", "bleu", "chrf") for p in ("", "/en-de", "/en-fr"))
    series = api.http.get(f"/v1/jobs/{job['id']}/metrics", params={"names": names}).json()["series"]
    assert sorted(series) == sorted(names.split(","))
    last = {name: s["values"][-1] for name, s in series.items()}
    for metric in ("valid_loss", "bleu", "chrf"):
        assert abs(last[metric] - (last[f"{metric}/en-de"] + last[f"{metric}/en-fr"]) / 2) < 1e-6, last
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        key = c.execute(text("SELECT storage_key FROM models WHERE id = :m"), {"m": done["model_id"]}).scalar_one()
    _, tokenizer, _ = load_model(served["artifacts"] / key)
    assert sorted(tokenizer.language_tokens) == ["de", "fr"]
    model = api.http.get(f"/v1/models/{done['model_id']}").json()
    assert (model["source_language"], model["target_language"]) == ("en", None)
    assert model["pairs"] == [{"source_language": "en", "target_language": t} for t in ("de", "fr")]
    url = f"/v1/models/{done['model_id']}/translate"
    answer = api.http.post(url, json={"texts": ["forty two"], "target_language": "fr", "backend": "pytorch"})
    assert answer.status_code == 200, answer.text
    assert (answer.json()["target_language"], answer.json()["zero_shot"]) == ("fr", None)
    for source, zero_shot in (("en", False), ("de", True)):  # de->fr was never trained: zero-shot, flagged
        body = {"texts": ["forty two"], "target_language": "fr", "source_language": source}
        assert api.http.post(url, json=body).json()["zero_shot"] is zero_shot
    missing = api.http.post(url, json={"texts": ["forty two"]})
    assert missing.status_code == 422 and "trained on en->de, en->fr: give target_language" in missing.text
    unseen = api.http.post(url, json={"texts": ["forty two"], "target_language": "nl"})
    assert unseen.status_code == 422 and "cannot translate into 'nl'" in unseen.text
    # fine-tuned on one of its pairs: a job of that pair, its sources tagged as the model learnt them
    tune = api.submit({"objective": "translation", "dataset_id": fr["id"], "init_model_id": done["model_id"],
                       "training": {"max_steps": 10, "eval_every": 10, "checkpoint_every": 10}})  # fmt: skip
    tuned = api.wait(tune["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert tuned["status"] == "succeeded", tuned["error"]
    assert [(p["source_language"], p["target_language"]) for p in tuned["pairs"]] == [("en", "fr")]
    tuned_url = f"/v1/models/{tuned['model_id']}/translate"
    answer = api.http.post(tuned_url, json={"texts": ["forty two"], "backend": "pytorch"})  # its one target
    assert answer.status_code == 200 and answer.json()["target_language"] == "fr", answer.text
    into_german = api.http.post(tuned_url, json={"texts": ["forty two"], "target_language": "de"})
    assert into_german.status_code == 422 and "cannot translate into 'de'" in into_german.text
    # its native export imports as a model of the same pairs
    archive = api.http.get(f"/v1/models/{done['model_id']}/export", params={"format": "native"}, timeout=180)
    assert archive.status_code == 200, archive.text
    imported = api.http.post("/v1/models/import", files={"file": ("pairs.tar.gz", archive.content)}, timeout=180)
    assert imported.status_code == 201, imported.text
    assert (imported.json()["pairs"], imported.json()["source_language"]) == (model["pairs"], "en")
    again = api.http.post(f"/v1/models/{imported.json()['id']}/translate", json={"texts": ["forty two"]})
    assert again.status_code == 422 and "give target_language" in again.text
    # the model keeps its pairs once the job that trained it is deleted
    assert api.http.delete(f"/v1/jobs/{job['id']}").status_code == 204
    assert api.http.get(f"/v1/models/{done['model_id']}").json()["pairs"] == model["pairs"]
    missing = api.http.post(url, json={"texts": ["forty two"]})
    assert missing.status_code == 422 and "give target_language" in missing.text
