"""A job that keeps fewer of its init model's layers (shrink and fine-tune), over HTTP with real workers: the model
it makes has the layers asked for, names its parent (and its card the layers it kept), and after a few updates
spells far more held-out numbers than the same small model trained afresh for as many updates."""

from __future__ import annotations

from model.data.demo import numbers_to_words_task, split_numbers
from tests.e2e.test_fine_tuning import _exact
from tests.support.client import write_jsonl

STEPS = 60
TRAINING = {"max_steps": STEPS, "warmup_steps": 20, "eval_every": STEPS, "checkpoint_every": STEPS, "max_length": 40}


def test_a_student_cut_from_a_trained_model_learns_far_faster_than_a_fresh_one(served, tmp_path):
    api, parent = served["api"], served["models"]["translation"]  # tiny: 2 encoder and 2 decoder layers
    train_numbers, _ = split_numbers(0, 999, held_out=0.1, seed=0)  # the parent's own training numbers
    dataset = api.upload(
        write_jsonl(tmp_path / "n.jsonl", numbers_to_words_task(len(train_numbers), numbers=train_numbers)), "parallel"
    )
    probe = served["held_out"][:24]

    def trained(**body) -> dict:
        job = api.submit({"objective": "translation", "dataset_id": dataset["id"], "training": TRAINING, **body})
        done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=600)
        assert done["status"] == "succeeded", done["error"]
        return api.http.get(f"/v1/models/{done['model_id']}").json()

    shrunk = trained(init_model_id=parent, model={"n_decoder_layers": 1})
    fresh = trained(model={"preset": "tiny", "vocab_size": 500, "n_decoder_layers": 1})
    parent_config = api.http.get(f"/v1/models/{parent}").json()["config"]
    assert shrunk["parent_model_id"] == parent
    assert shrunk["config"] == {**parent_config, "n_decoder_layers": 1}
    assert fresh["config"]["n_decoder_layers"] == 1
    card = api.http.get(f"/v1/models/{shrunk['id']}/card").text
    kept = "it kept all 2 encoder layers and decoder layer 0 of 2 (the first"  # after "model `id`" or "name v1 (`id`)"
    assert "Cut from " in card and f"`{parent}`" in card and kept in card, card
    shrunk_exact, fresh_exact = _exact(api, shrunk["id"], probe), _exact(api, fresh["id"], probe)
    assert shrunk_exact >= fresh_exact + 8, (shrunk_exact, fresh_exact)  # of 24 held-out numbers
