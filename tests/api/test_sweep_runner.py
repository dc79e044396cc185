"""How a sweep moves on (app/services/sweep_runner.py), against the real database and Optuna study: trials that
end start the next ones within the budget, the pruner stops a trial that reports worse than those before it, and
the best trial's model is registered as name@best. Each trial's run is played here the way the training worker
plays it (claim, report at each evaluation, finish, advance); tests/e2e/test_sweeps.py trains them for real."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.core.settings import get_settings
from app.db import job_rows
from app.db.access_tables import ApiKey
from app.db.base import utcnow
from app.db.session import session_scope
from app.db.tables import Job, Sweep, TrainedModel
from app.services import sweep_runner


def _create(client, headers, dataset_id, **extra):
    body = {
        "name": "numbers",
        "job": {"objective": "translation", "dataset_id": dataset_id, "training": {"max_steps": 90}},
        "space": {"training.lr_scale": {"type": "choice", "values": [0.5, 1.0, 2.0]}},
        "budget": {"trials": 3},
        "sampler": "grid",
        **extra,
    }
    response = client.post("/v1/sweeps", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


def _queued(sweep_id: str) -> list[Job]:
    with session_scope() as session:
        rows = session.scalars(select(Job).where(Job.sweep_id == sweep_id, Job.status == "queued")).all()
        session.expunge_all()
        return list(rows)


def _run_trial(job_id: str, curve: list[tuple[int, float]], final: dict[str, float] | None) -> str | None:
    """Claim the job, report its evaluations (stopping where the pruner says), end it as the worker would: pruned,
    or succeeded with a model whose metrics are `final` (None: failed). Returns why it was pruned, if it was."""
    with session_scope() as session:
        claim = job_rows.claim(session, job_id, "test/1", 60)
    assert claim is not None
    reason = None
    for step, bleu in curve:
        with session_scope() as session:
            reason = sweep_runner.report(session, job_id, step, step / 10, {"bleu": bleu, "valid_loss": 9 - bleu})
        if reason:
            break
    with session_scope() as session:
        if reason:
            assert job_rows.finish(session, claim, job_rows.PRUNED)
        elif final is None:
            assert job_rows.finish(session, claim, job_rows.FAILED, error="diverged")
        else:
            job = session.get(Job, job_id)
            assert job_rows.finish(session, claim, job_rows.SUCCEEDED)
            session.add(
                TrainedModel(
                    owner_id=job.owner_id,
                    job_id=job_id,
                    objective="translation",
                    config={},
                    tokenizer_fingerprint="f",
                    metrics=final,
                    source="last@90",
                    parameters=1,
                    storage_key=f"models/{job_id}",
                    sha256="0" * 64,
                    size_bytes=1,
                )
            )
    with session_scope() as session:
        sweep_runner.advance(session, get_settings(), session.get(Job, job_id).sweep_id)
    return reason


def _lr(job: Job) -> float:
    return job.training_config["lr_scale"]


def test_trials_run_one_after_another_and_the_best_is_registered(client, alice, parallel_id):
    """A grid of three, one at a time, no pruning: the study hears each end, the next trial starts, and when the
    budget is spent the trial with the highest BLEU is name@best, its value the model's."""
    sweep = _create(client, alice, parallel_id, pruner="none")
    bleu_of = {0.5: 10.0, 1.0: 30.0, 2.0: 20.0}
    seen = []
    for _ in range(3):
        (job,) = _queued(sweep["id"])
        seen.append(_lr(job))
        _run_trial(job.id, [(30, bleu_of[_lr(job)] / 2), (60, bleu_of[_lr(job)] * 0.9)], {"bleu": bleu_of[_lr(job)]})
    assert sorted(seen) == [0.5, 1.0, 2.0] and _queued(sweep["id"]) == []
    done = client.get(f"/v1/sweeps/{sweep['id']}", headers=alice).json()
    assert done["status"] == "succeeded" and done["stop_reason"] == "the budget of 3 trials is spent"
    assert done["best"]["value"] == 30.0 and done["best"]["params"] == {"training.lr_scale": 1.0}
    assert done["best"]["model_ref"] == "numbers@best"
    model = client.get("/v1/models/numbers@best", headers=alice).json()
    assert model["id"] == done["best"]["model_id"] and model["job_id"] == done["best"]["job_id"]
    assert done["trial_counts"] == {"succeeded": 3}
    curves = {t["params"]["training.lr_scale"]: t["curve"] for t in done["trials"]}
    assert curves[1.0] == {"at": [30, 60], "values": [15.0, 27.0]}
    assert done["importance"] is not None and set(done["importance"]) == {"training.lr_scale"}
    # nothing moves an ended sweep: another advance starts nothing
    with session_scope() as session:
        assert sweep_runner.advance(session, get_settings(), sweep["id"]) == []


def test_a_trial_worse_than_those_before_it_at_a_rung_is_pruned(client, alice, parallel_id):
    """ASHA with rungs at 10 and 30 steps (a ninth and a third of 90): the first trial sets the bar; a later one
    below it at the first rung is stopped there, marked pruned with why, and frees its slot for the next."""
    sweep = _create(client, alice, parallel_id, pruner="asha")
    (first,) = _queued(sweep["id"])
    assert _run_trial(first.id, [(10, 5.0), (30, 12.0), (90, 20.0)], {"bleu": 20.0}) is None
    (second,) = _queued(sweep["id"])
    reason = _run_trial(second.id, [(10, 1.0), (30, 3.0), (90, 4.0)], {"bleu": 4.0})
    assert reason is not None and reason.startswith("pruned by asha after 10 steps: bleu 1 ")
    (third,) = _queued(sweep["id"])
    assert _run_trial(third.id, [(10, 6.0), (30, 14.0), (90, 25.0)], {"bleu": 25.0}) is None
    done = client.get(f"/v1/sweeps/{sweep['id']}", headers=alice).json()
    by_job = {t["job_id"]: t for t in done["trials"]}
    assert by_job[second.id]["status"] == "pruned" and by_job[second.id]["stop_reason"] == reason
    assert by_job[second.id]["value"] is None and by_job[second.id]["curve"]["at"] == [10]
    assert client.get(f"/v1/jobs/{second.id}", headers=alice).json()["status"] == "pruned"
    assert done["status"] == "succeeded" and done["best"]["job_id"] == third.id
    assert done["trial_counts"] == {"succeeded": 2, "pruned": 1}


def test_failed_trials_count_and_a_sweep_with_none_complete_fails(client, alice, parallel_id):
    sweep = _create(client, alice, parallel_id, budget={"trials": 2}, sampler="random")
    for _ in range(2):
        (job,) = _queued(sweep["id"])
        _run_trial(job.id, [(10, 1.0)], None)
    done = client.get(f"/v1/sweeps/{sweep['id']}", headers=alice).json()
    assert done["status"] == "failed" and done["error"].startswith("no trial completed")
    assert [t["stop_reason"] for t in done["trials"]] == ["diverged", "diverged"]
    assert client.get("/v1/models/numbers@best", headers=alice).status_code == 404


def test_a_minutes_budget_counts_what_running_trials_may_still_take(client, alice, parallel_id):
    """Budget 5 worker minutes, trials of 2: two may run at once (4 committed), a third would pass 5 only once
    they have run; with both queued, a third starts only after they end under budget."""
    body = {"training": {"max_minutes": 2}}
    sweep = _create(
        client,
        alice,
        parallel_id,
        budget={"minutes": 5},
        max_concurrent_trials=3,
        sampler="random",
        job={"objective": "translation", "dataset_id": parallel_id, **body},
    )
    assert len(_queued(sweep["id"])) == 3  # 0 + 2 + 2 committed < 5 when the third was asked for
    with session_scope() as session:
        s = session.get(Sweep, sweep["id"])
        assert s.stop_reason.startswith("the budget of 5 worker minutes is spent or committed (6.0)")


@pytest.mark.parametrize("owner_limit", [1])
def test_trials_wait_for_the_owners_active_job_quota(client, alice, parallel_id, settings_env, owner_limit):
    settings_env(MAX_ACTIVE_JOBS_PER_KEY=str(owner_limit))
    sweep = _create(client, alice, parallel_id, max_concurrent_trials=3, sampler="random")
    assert len(_queued(sweep["id"])) == 1  # the quota, not max_concurrent_trials, bounds it
    (job,) = _queued(sweep["id"])
    _run_trial(job.id, [(10, 1.0)], {"bleu": 1.0})
    assert len(_queued(sweep["id"])) == 1


def test_a_trial_is_never_pruned_at_its_end(client, alice, parallel_id):
    """Successive halving's third rung (90 steps) is the trial's whole budget: a trial worse than the first there
    has finished training anyway, and completes with its value rather than being marked pruned."""
    sweep = _create(client, alice, parallel_id, pruner="asha", budget={"trials": 2})
    (first,) = _queued(sweep["id"])
    assert _run_trial(first.id, [(10, 5.0), (30, 12.0), (90, 20.0)], {"bleu": 20.0}) is None
    (second,) = _queued(sweep["id"])
    assert _run_trial(second.id, [(85, 4.0), (90, 4.5)], {"bleu": 4.5}) is None
    done = client.get(f"/v1/sweeps/{sweep['id']}", headers=alice).json()
    assert [t["status"] for t in done["trials"]] == ["succeeded", "succeeded"]
    assert [t["value"] for t in done["trials"]] == [20.0, 4.5]


def test_the_first_trials_given_run_first_then_the_samplers_own(client, alice, parallel_id):
    """A point given as JSON's 2 is the choice 2.0; it runs first and says so; the trials after it are sampled."""
    sweep = _create(
        client, alice, parallel_id, sampler="random", pruner="none", first_trials=[{"training.lr_scale": 2}]
    )
    (first,) = _queued(sweep["id"])
    assert _lr(first) == 2.0 and first.trial_number == 0
    _run_trial(first.id, [(30, 10.0)], {"bleu": 20.0})
    (second,) = _queued(sweep["id"])
    assert second.trial_number == 1
    _run_trial(second.id, [(30, 10.0)], {"bleu": 10.0})
    done = client.get(f"/v1/sweeps/{sweep['id']}", headers=alice).json()
    assert [t["given"] for t in done["trials"]] == [True, False, False]
    assert done["trials"][0]["params"] == {"training.lr_scale": 2.0} and done["best"]["number"] == 0


@pytest.mark.parametrize("change", ["none", "revoked", "expired", "demoted"])
def test_the_best_is_registered_as_the_sweeps_key_only_while_that_key_may(client, alice, parallel_id, change):
    """Fault: the key that created the sweep (a member's, with models:write) is revoked, expires, or its member is
    made a viewer while the trials run; the sweep still registers name@best and moves its alias, acting as an admin
    with every scope. Pass: the key is read again before registering: unchanged, it registers; otherwise the sweep
    still succeeds and shows its best trial, the model stays unregistered and the sweep's error says why."""
    member = client.post("/v1/members", headers=alice, json={"name": "max", "role": "member"}).json()
    scopes = ["read", "train", "models:write"]
    key = client.post("/v1/keys", headers=alice, json={"name": "sweeper", "member": "max", "scopes": scopes}).json()
    sweep = _create(client, {"Authorization": f"Bearer {key['key']}"}, parallel_id, budget={"trials": 1})
    why = {
        "revoked": "was revoked at ",
        "expired": "expired at ",
        "demoted": "belongs to member 'max', now a viewer, whose keys may use only: read",
    }.get(change)
    if change == "revoked":
        assert client.delete(f"/v1/keys/{key['id']}", headers=alice).status_code == 200
    elif change == "expired":
        with session_scope() as session:
            session.get(ApiKey, key["id"]).expires_at = utcnow() - timedelta(seconds=1)
    elif change == "demoted":
        assert client.patch(f"/v1/members/{member['id']}", headers=alice, json={"role": "viewer"}).status_code == 200
    (job,) = _queued(sweep["id"])
    _run_trial(job.id, [(30, 10.0)], {"bleu": 20.0})
    done = client.get(f"/v1/sweeps/{sweep['id']}", headers=alice).json()
    assert done["status"] == "succeeded" and done["best"]["job_id"] == job.id and done["best"]["model_id"]
    model = client.get(f"/v1/models/{done['best']['model_id']}", headers=alice).json()
    best = client.get("/v1/models/numbers@best", headers=alice)
    if why is None:
        assert done["error"] is None and done["best"]["model_ref"] == "numbers@best"
        assert model["name"] == "numbers" and best.json()["id"] == model["id"]
        return
    assert done["error"].startswith(
        f"the best model {model['id']} was not registered as numbers@best: API key {key['prefix']}..., which created "
        "the sweep, "
    )
    assert why in done["error"] and done["best"]["model_ref"] is None
    assert model["name"] is None and best.status_code == 404
