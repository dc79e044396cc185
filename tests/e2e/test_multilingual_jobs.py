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
    # 5% of each pair held out first (10 of 200, 2 of 40), then the rest sampled at temperature 5
    lines = [
        line["message"] for line in api.http.get(f"/v1/jobs/{job['id']}/logs", params={"limit": 500}).json()["lines"]
    ]
    counts = rows_per_pair([190, 38], 5.0)
    assert any(f"{{'en->de': {counts[0]}, 'en->fr': {counts[1]}}}; 12 validation rows" in m for m in lines), lines
    assert counts[1] > 38 * (190 + 38) / 228  # the small pair gets more than its share of the data
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        key = c.execute(text("SELECT storage_key FROM models WHERE id = :m"), {"m": done["model_id"]}).scalar_one()
    _, tokenizer, _ = load_model(served["artifacts"] / key)
    assert sorted(tokenizer.language_tokens) == ["de", "fr"]
    model = api.http.get(f"/v1/models/{done['model_id']}").json()
    assert (model["source_language"], model["target_language"]) == ("en", None)
    # the tag goes through the served model's tokenizer as one token: a translation comes back
    answer = api.http.post(f"/v1/models/{done['model_id']}/translate", json={"texts": [">>fr<< forty two"]})
    assert answer.status_code == 200, answer.text
