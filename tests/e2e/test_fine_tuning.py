"""A job that starts from a trained model (init_model_id), over HTTP with real workers: it learns a second domain
(the thousands, after a model trained on 0-999) far better than its parent does, and the parent is untouched."""

from __future__ import annotations

from sqlalchemy import create_engine, text

from bench.harness.stack import wait_for
from model.data.demo import numbers_to_words_task, split_numbers
from model.io.checkpoint_files import checkpoint_sha256
from tests.support.client import write_jsonl


def _exact(api, model_id: str, numbers: list[int]) -> int:
    """How many of `numbers` the model spells exactly (beam 4); the misses go to the log."""
    from num2words import num2words

    correct, misses = 0, []
    for i in range(0, len(numbers), 8):  # MAX_TEXTS_PER_REQUEST
        chunk = numbers[i : i + 8]
        body = {"texts": [num2words(n, lang="en") for n in chunk], "beam_size": 4}
        response = api.http.post(f"/v1/models/{model_id}/translate", json=body)
        assert response.status_code == 200, response.text
        for t, n in zip(response.json()["translations"], chunk):
            if t["text"] == num2words(n, lang="de"):
                correct += 1
            else:
                misses.append((n, t["text"]))
    print(f"model {model_id}: {correct} of {len(numbers)} exact; misses {misses[:6]}")
    return correct


def _evaluated(api, model_id: str, evaluation_id: str) -> dict:
    def over():
        got = api.http.get(f"/v1/models/{model_id}/evaluations/{evaluation_id}").json()
        return got if got["status"] in ("succeeded", "failed") else None

    done = wait_for(over, timeout=180, what=f"evaluation {evaluation_id}", interval=0.5)
    assert done["status"] == "succeeded", done["error"]
    return done


def test_fine_tuning_on_a_second_domain_learns_it_and_leaves_the_parent_untouched(served, tmp_path):
    api, parent = served["api"], served["models"]["translation"]
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        key, sha = c.execute(text("SELECT storage_key, sha256 FROM models WHERE id = :m"), {"m": parent}).one()
    train_numbers, held_out = split_numbers(1000, 1999, held_out=0.1, seed=1)
    probe = held_out[:24]
    parent_before = _exact(api, parent, probe)
    dataset = api.upload(
        write_jsonl(tmp_path / "k.jsonl", numbers_to_words_task(len(train_numbers), numbers=train_numbers)), "parallel"
    )
    from num2words import num2words

    test_set = api.upload(
        write_jsonl(tmp_path / "t.jsonl", [(num2words(n, lang="en"), num2words(n, lang="de")) for n in held_out]),
        "parallel",
    )
    training = {"max_steps": 400, "warmup_steps": 30, "eval_every": 100, "checkpoint_every": 100, "max_length": 40}
    languages = {"source_language": "en", "target_language": "de"}
    assert api.http.patch(f"/v1/models/{parent}", json=languages).status_code == 200
    job = api.submit(
        {
            "objective": "translation",
            "dataset_id": dataset["id"],
            "init_model_id": parent,
            "test_dataset_id": test_set["id"],
            "training": training,
        }
    )
    assert job["init_model_id"] == parent and job["model"]["preset"] == "tiny" and job["training"]["lr_scale"] == 0.25
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=600)
    assert done["status"] == "succeeded", done["error"]
    child = api.http.get(f"/v1/models/{done['model_id']}").json()
    assert child["parent_model_id"] == parent
    assert (job["source_language"], job["target_language"]) == ("en", "de")  # the parent's, none given
    assert (child["source_language"], child["target_language"]) == ("en", "de")  # and the model it made keeps them
    parent_row = api.http.get(f"/v1/models/{parent}").json()
    assert child["config"] == parent_row["config"]  # same architecture
    assert child["tokenizer_fingerprint"] == parent_row["tokenizer_fingerprint"]  # reused, not trained again
    child_exact = _exact(api, child["id"], probe)
    assert child_exact >= parent_before + 8, (child_exact, parent_before)  # of 24 held-out thousands
    # the parent: same files, same row, same answers
    assert checkpoint_sha256(served["artifacts"] / key) == sha
    assert api.http.get(f"/v1/models/{parent}").json()["sha256"] == sha
    assert _exact(api, parent, probe) == parent_before
    # the job's test set was scored when it succeeded; the parent, asked for the same, scores far lower
    child_evals = api.http.get(f"/v1/models/{child['id']}/evaluations").json()["data"]
    assert len(child_evals) == 1 and child_evals[0]["job_id"] == job["id"]
    parent_eval = api.http.post(f"/v1/models/{parent}/evaluations", json={"dataset_id": test_set["id"]}).json()
    child_eval, parent_eval = (
        _evaluated(api, m, e["id"]) for m, e in ((child["id"], child_evals[0]), (parent, parent_eval))
    )
    assert child_eval["scores"]["chrf"]["score"] >= parent_eval["scores"]["chrf"]["score"] + 15, (
        child_eval,
        parent_eval,
    )


def test_a_fine_tuning_job_whose_init_model_was_deleted_fails_saying_so(served, tmp_path):
    """Deleted while the job waits in the queue: the job fails with the reason, never stays running."""
    import shutil

    from bench.harness.rows import insert_model

    api, trained = served["api"], served["models"]["translation"]
    with create_engine(served["env"]["DATABASE_URL"]).connect() as c:
        key, sha = c.execute(text("SELECT storage_key, sha256 FROM models WHERE id = :m"), {"m": trained}).one()
    shutil.copytree(served["artifacts"] / key, served["artifacts"] / "models" / "short-lived")
    doomed = insert_model(served["env"]["DATABASE_URL"], "alice", "models/short-lived", sha)
    with create_engine(served["env"]["DATABASE_URL"]).begin() as c:  # the row insert_model made has no config
        c.execute(
            text("UPDATE models SET config = (SELECT config FROM models WHERE id = :t) WHERE id = :d"),
            {"t": trained, "d": doomed},
        )
    dataset = api.upload(
        write_jsonl(tmp_path / "d.jsonl", numbers_to_words_task(40, numbers=list(range(2000, 2040)))), "parallel"
    )
    # The one training worker is kept busy, so the fine-tuning job waits in the queue while its model is deleted.
    blocker = api.submit({"objective": "translation", "dataset_id": dataset["id"], "training": {"max_steps": 100000}})
    api.wait(blocker["id"], ("running",), timeout=120)
    job = api.submit(
        {
            "objective": "translation",
            "dataset_id": dataset["id"],
            "init_model_id": doomed,
            "training": {"max_steps": 5, "max_length": 40},
        }
    )
    assert api.http.delete(f"/v1/models/{doomed}").status_code == 200
    assert api.http.post(f"/v1/jobs/{blocker['id']}/cancel").status_code == 202
    done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert done["status"] == "failed" and f"init model {doomed} no longer exists" in done["error"], done
