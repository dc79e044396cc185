"""POST/GET /v1/sweeps: validation against the job schema, ownership, idempotency, cancel, and the trials it
queues as jobs (no worker involved: tests/e2e/test_sweeps.py runs them)."""

from __future__ import annotations

import pytest


def _sweep(dataset_id, **extra):
    body = {
        "name": "enfr",
        "job": {"objective": "translation", "dataset_id": dataset_id, "training": {"max_minutes": 2}},
        "space": {
            "training.lr_scale": {"type": "float", "low": 0.1, "high": 3.0, "log": True},
            "model.dropout": {"type": "float", "low": 0.0, "high": 0.3},
            "training.warmup_steps": {"type": "int", "low": 10, "high": 400, "log": True},
            "model.preset": {"type": "choice", "values": ["tiny", "small"]},
        },
        "budget": {"minutes": 30},
        "max_concurrent_trials": 2,
    }
    return {**body, **extra}


def test_a_sweep_queues_its_first_trials_as_jobs(client, alice, parallel_id):
    response = client.post("/v1/sweeps", json=_sweep(parallel_id), headers=alice)
    assert response.status_code == 201, response.text
    sweep = response.json()
    assert (sweep["status"], sweep["metric"], sweep["direction"], sweep["resource"]) == (
        "running",
        "bleu",
        "maximize",
        "seconds",
    )
    assert [t["number"] for t in sweep["trials"]] == [0, 1]
    assert sweep["trial_counts"] == {"queued": 2}
    jobs = client.get("/v1/jobs", params={"sweep_id": sweep["id"]}, headers=alice).json()["data"]
    assert sorted(j["trial_number"] for j in jobs) == [0, 1]
    for trial in sweep["trials"]:
        job = client.get(f"/v1/jobs/{trial['job_id']}", headers=alice).json()
        assert job["sweep_id"] == sweep["id"] and job["name"] == f"enfr #{trial['number']}"
        assert "sweep:enfr" in job["tags"]
        params = trial["params"]
        assert 0.1 <= params["training.lr_scale"] <= 3.0 and 10 <= params["training.warmup_steps"] <= 400
        assert job["training"]["lr_scale"] == params["training.lr_scale"]
        assert job["training"]["warmup_steps"] == params["training.warmup_steps"]
        assert job["model"]["dropout"] == params["model.dropout"] and job["model"]["preset"] == params["model.preset"]
        # evaluated every ninth of its two minutes, so the pruner compares trials early
        assert job["training"]["eval_every_minutes"] == pytest.approx(0.25)
        assert job["training"]["max_minutes"] == 2
        # the settings the space leaves out are still the time budget's to choose
        assert job["auto_settings"]["fields"] == ["vocab_size", "max_tokens_per_batch", "max_steps"]
    listed = client.get("/v1/sweeps", headers=alice).json()
    assert listed["total"] == 1 and listed["data"][0]["trials"] is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"space": {"training.lr_rate": {"type": "float", "low": 0.1, "high": 1}}}, "'training.lr_rate' is not a job"),
        ({"space": {"dataset_id": {"type": "choice", "values": ["x"]}}}, "'dataset_id' is not a job setting"),
        ({"space": {"model.dropout": {"type": "float", "low": 0.1, "high": 1.5}}}, "model.dropout=1.5 makes no valid"),
        ({"space": {"training.warmup_steps": {"type": "float", "low": 10, "high": 40}}}, "warmup_steps=10.0"),
        ({"space": {"model.d_model": {"type": "choice", "values": [64, 65]}}}, "model.d_model=65 makes no valid"),
        ({"sampler": "grid"}, "a grid takes choice dimensions only"),
    ],
)
def test_a_bad_space_is_a_422_naming_it(client, alice, parallel_id, change, message):
    response = client.post("/v1/sweeps", json=_sweep(parallel_id, **change), headers=alice)
    assert response.status_code == 422, response.text
    assert message in response.text
    assert client.get("/v1/sweeps", headers=alice).json()["total"] == 0
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 0


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"budget": {}}, "give minutes, trials or both"),
        ({"space": {"model.dropout": {"type": "float", "low": 0.3, "high": 0.1}}}, "is above high"),
        ({"space": {"training.lr_scale": {"type": "float", "low": 0, "high": 1, "log": True}}}, "needs low > 0"),
        ({"space": {"model.dropout": {"type": "normal", "mean": 0.1}}}, "choice, float or int"),
        ({"space": {}}, "space"),
        ({"objective": {"metric": "accuracy"}}, "metric"),
        ({"name": "Not A Name"}, "name"),
    ],
)
def test_a_malformed_sweep_is_a_422(client, alice, parallel_id, change, where):
    response = client.post("/v1/sweeps", json=_sweep(parallel_id, **change), headers=alice)
    assert response.status_code == 422 and where in response.text, response.text


def test_the_fixed_job_is_checked_like_a_job(client, alice, parallel_id, mono_id):
    body = _sweep(parallel_id)
    body["job"]["dataset_id"] = mono_id
    response = client.post("/v1/sweeps", json=body, headers=alice)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "job", "dataset_id"]
    denoising = _sweep(mono_id, objective={"metric": "bleu"})
    denoising["job"]["objective"] = "denoising"
    response = client.post("/v1/sweeps", json=denoising, headers=alice)
    assert response.status_code == 422 and "bleu is scored on translations" in response.text


def test_a_sweep_is_its_owners_alone(client, alice, make_key, parallel_id):
    sweep = client.post("/v1/sweeps", json=_sweep(parallel_id), headers=alice).json()
    bob = make_key("bob")
    assert client.get(f"/v1/sweeps/{sweep['id']}", headers=bob).status_code == 404
    assert client.post(f"/v1/sweeps/{sweep['id']}/cancel", headers=bob).status_code == 404
    assert client.get("/v1/sweeps", headers=bob).json()["total"] == 0
    assert client.get("/v1/jobs", params={"sweep_id": sweep["id"]}, headers=bob).json()["total"] == 0
    # bob's own sweep cannot train on alice's dataset
    assert client.post("/v1/sweeps", json=_sweep(parallel_id), headers=bob).status_code == 422


def test_a_sweep_registers_its_best_model_so_its_key_needs_models_write(client, alice, parallel_id):
    """Fault: a key with `train` alone starts a sweep, which in the end registers its best model under the sweep's
    name and moves the alias best (as `models:write` does). Pass: 403 naming models:write, nothing queued; a key
    holding both starts it."""
    trainer = client.post("/v1/keys", headers=alice, json={"name": "trainer", "scopes": ["read", "train"]}).json()
    refused = client.post("/v1/sweeps", json=_sweep(parallel_id), headers={"Authorization": f"Bearer {trainer['key']}"})
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        f"API key {trainer['prefix']}... lacks scope 'models:write', which POST /v1/sweeps needs; its scopes: read, "
        "train"
    )
    assert client.get("/v1/sweeps", headers=alice).json()["total"] == 0
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 0
    both = client.post("/v1/keys", headers=alice, json={"name": "both", "scopes": ["train", "models:write"]}).json()
    started = client.post("/v1/sweeps", json=_sweep(parallel_id), headers={"Authorization": f"Bearer {both['key']}"})
    assert started.status_code == 201, started.text


def test_idempotency_key_replays_the_first_sweep(client, alice, parallel_id):
    headers = {**alice, "Idempotency-Key": "sweep-1"}
    first = client.post("/v1/sweeps", json=_sweep(parallel_id), headers=headers)
    again = client.post("/v1/sweeps", json=_sweep(parallel_id), headers=headers)
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"] and len(again.json()["trials"]) == 2
    other = client.post("/v1/sweeps", json=_sweep(parallel_id, seed=5), headers=headers)
    assert other.status_code == 409 and "different request" in other.text
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 2


def test_cancel_cancels_its_queued_trials_and_ends_it(client, alice, parallel_id):
    sweep = client.post("/v1/sweeps", json=_sweep(parallel_id), headers=alice).json()
    response = client.post(f"/v1/sweeps/{sweep['id']}/cancel", headers=alice)
    assert response.status_code == 202, response.text
    cancelled = response.json()
    assert (cancelled["status"], cancelled["cancel_requested"]) == ("cancelled", True)
    assert cancelled["trial_counts"] == {"cancelled": 2} and cancelled["best"] is None
    assert all(t["stop_reason"] == "cancelled" for t in cancelled["trials"])
    again = client.post(f"/v1/sweeps/{sweep['id']}/cancel", headers=alice)
    assert again.status_code == 409 and "already cancelled" in again.text


def test_a_sweep_of_fixed_steps_prunes_by_steps(client, alice, parallel_id):
    body = _sweep(parallel_id, budget={"trials": 3}, max_concurrent_trials=1)
    body["job"]["training"] = {"max_steps": 90}
    sweep = client.post("/v1/sweeps", json=body, headers=alice).json()
    assert sweep["resource"] == "steps"
    job = client.get(f"/v1/jobs/{sweep['trials'][0]['job_id']}", headers=alice).json()
    assert job["training"]["eval_every"] == 10 and job["training"]["eval_every_minutes"] is None


def test_first_trials_come_first_in_order_and_the_sampler_draws_what_they_leave_out(client, alice, parallel_id):
    """Ray Tune's points_to_evaluate: the values the user trains with today are trial 0, a partial point is trial
    1 with the rest sampled, and both say they were given; the sweep keeps the points as given."""
    points = [
        {"training.lr_scale": 1, "model.dropout": 0.1, "training.warmup_steps": 100.0, "model.preset": "small"},
        {"model.preset": "tiny"},
    ]
    response = client.post("/v1/sweeps", json=_sweep(parallel_id, first_trials=points), headers=alice)
    assert response.status_code == 201, response.text
    sweep = response.json()
    first, second = sweep["trials"]
    # as the dimensions give them: a float range's 1 is 1.0, an int range's 100.0 is 100
    assert first["params"] == {
        "training.lr_scale": 1.0,
        "model.dropout": 0.1,
        "training.warmup_steps": 100,
        "model.preset": "small",
    }
    assert second["params"]["model.preset"] == "tiny" and set(second["params"]) == set(first["params"])
    assert 0.1 <= second["params"]["training.lr_scale"] <= 3.0
    assert first["given"] and second["given"]
    job = client.get(f"/v1/jobs/{first['job_id']}", headers=alice).json()
    assert (job["training"]["lr_scale"], job["training"]["warmup_steps"], job["model"]["preset"]) == (1.0, 100, "small")
    assert sweep["first_trials"] == [first["params"], {"model.preset": "tiny"}]
    assert client.get("/v1/sweeps", headers=alice).json()["data"][0]["first_trials"] is None


GRID = {"space": {"model.preset": {"type": "choice", "values": ["tiny", "small"]}}, "sampler": "grid"}


@pytest.mark.parametrize(
    ("points", "extra", "where", "message"),
    [
        ([{"training.lr": 1.0}], {}, "first_trials[0]", "'training.lr' is not in the space (model.dropout"),
        ([{"training.lr_scale": 5.0}], {}, "first_trials[0]", "training.lr_scale: 5.0 is outside [0.1, 3.0]"),
        ([{"training.warmup_steps": 10.5}], {}, "first_trials[0]", "10.5 is not an integer of the range"),
        ([{"model.preset": "base"}], {}, "first_trials[0]", "'base' is not one of its values ['tiny', 'small']"),
        ([{"model.dropout": True}], {}, "first_trials[0]", "model.dropout: True is not a number"),
        ([{"model.preset": "tiny"}, {}], {}, "first_trials[1]", "is empty"),
        ([{"model.preset": "tiny"}], GRID, "first_trials", "a grid visits each of its points once by itself"),
    ],
)
def test_a_bad_first_trial_is_a_422_naming_it(client, alice, parallel_id, points, extra, where, message):
    response = client.post("/v1/sweeps", json=_sweep(parallel_id, first_trials=points, **extra), headers=alice)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", where] and message in error["msg"], error
    assert client.get("/v1/sweeps", headers=alice).json()["total"] == 0


def test_a_sweep_over_a_job_of_pairs_may_optimise_one_pairs_metric(client, alice, parallel_id):
    """Every trial is a job of the pairs (each records bleu/en-fr, ...); a pair the job lacks is a 422 naming them."""
    from tests.api.test_job_pairs import _dataset

    de = _dataset(client, alice)
    fr = _dataset(client, alice, [("one", "un"), ("two", "deux")], ("en", "fr"))
    job = {
        "objective": "translation",
        "pairs": [{"dataset_id": de}, {"dataset_id": fr}],
        "training": {"max_minutes": 2},
    }
    response = client.post("/v1/sweeps", json=_sweep(None, job=job, objective={"metric": "bleu/en-fr"}), headers=alice)
    assert response.status_code == 201, response.text
    sweep = response.json()
    assert (sweep["metric"], sweep["direction"]) == ("bleu/en-fr", "maximize")
    trial = client.get(f"/v1/jobs/{sweep['trials'][0]['job_id']}", headers=alice).json()
    assert [p["target_language"] for p in trial["pairs"]] == ["de", "fr"]
    loss = client.post(
        "/v1/sweeps", json=_sweep(None, job=job, objective={"metric": "valid_loss/en-de"}), headers=alice
    )
    assert loss.status_code == 201 and loss.json()["direction"] == "minimize", loss.text
    for metric, message in (
        ("bleu/en-nl", "names the pair 'en-nl', but the job's pairs are en-de, en-fr"),
        ("bleu/", "should match pattern"),
    ):
        refused = client.post("/v1/sweeps", json=_sweep(None, job=job, objective={"metric": metric}), headers=alice)
        assert refused.status_code == 422 and message in refused.text, refused.text
    one = client.post("/v1/sweeps", json=_sweep(parallel_id, objective={"metric": "bleu/en-de"}), headers=alice)
    assert one.status_code == 422 and "the job has one pair (give job.pairs)" in one.text, one.text
