"""Quotas per organisation: bytes stored, jobs queued or running, worker minutes per UTC day. Each is the service's
QUOTA_* setting unless the organisation has its own; 0 is unlimited. Over one: an upload or import is 413, a job 429,
each naming the quota, the usage and the limit; GET /v1/usage shows usage and limits."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from tests.api.test_datasets import _jsonl, _ready, _upload

GB = 1024**3


def _set_owner(owner: str, **quotas: object) -> None:
    from app.db.access_tables import Owner
    from app.db.session import session_scope

    with session_scope() as session:
        session.execute(update(Owner).where(Owner.name == owner).values(**quotas))


def _job(client, headers, dataset_id):
    return client.post("/v1/jobs", json={"objective": "translation", "dataset_id": dataset_id}, headers=headers)


def test_usage_is_unlimited_by_default_and_counts_what_is_stored(client, alice):
    assert client.get("/v1/usage", headers=alice).json() == {
        "storage_bytes": 0,
        "storage_limit_bytes": 0,
        "active_jobs": 0,
        "active_jobs_limit": 0,
        "worker_minutes_today": 0.0,
        "worker_minutes_per_day_limit": 0,
    }
    data = _jsonl([("one", "eins"), ("two", "zwei")])
    assert _upload(client, alice, data).status_code == 201
    assert client.get("/v1/usage", headers=alice).json()["storage_bytes"] == len(data)


def test_an_upload_past_the_storage_quota_is_413_naming_usage_and_limit(client, alice):
    data = _jsonl([("one", "eins"), ("two", "zwei")])
    _set_owner("alice", quota_storage_gb=(2 * len(data)) / GB)  # room for exactly two such files
    assert _upload(client, alice, data).status_code == 201
    assert _upload(client, alice, data).status_code == 201  # at the limit: allowed
    refused = _upload(client, alice, data)
    assert refused.status_code == 413
    limit = round(2 * len(data) / GB * GB)
    assert refused.json()["detail"].startswith(
        f"storage quota exceeded: {2 * len(data)} bytes stored + {len(data)} bytes would pass the limit of {limit} "
    )
    assert client.get("/v1/datasets", headers=alice).json()["total"] == 2
    assert [e["action"] for e in client.get("/v1/audit", headers=alice).json()["data"]].count("dataset.uploaded") == 2


def test_a_stream_of_unknown_size_is_refused_after_it_is_stored_and_deleted(client, alice, settings_env, tmp_path):
    """Fault: the size is known only once stored. Pass: 413, and neither the file nor a row is left."""
    from app.core.settings import get_settings
    from app.db.access_tables import Owner
    from app.db.session import session_scope
    from app.services import datasets, quotas
    from app.services.errors import PayloadTooLarge

    settings_env(QUOTA_STORAGE_GB=str(10 / GB))
    with session_scope() as session:
        owner_id = session.scalar(select(Owner.id).where(Owner.name == "alice"))
        assert owner_id is not None

        def check(size: int) -> None:
            quotas.check_storage(session, get_settings(), owner_id, size)

        stream = io.BytesIO(_jsonl([("one", "eins")]))
        with pytest.raises(PayloadTooLarge, match="would pass the limit of 10 bytes"):
            datasets.create_upload(session, owner_id, "big", "parallel", "a.jsonl", stream, check_size=check)
    files = [p for p in (tmp_path / "var").rglob("*") if p.is_file() and "datasets" in p.parts]
    assert files == []
    assert client.get("/v1/datasets", headers=alice).json()["total"] == 0


def test_the_active_jobs_quota_is_429_at_the_limit_and_an_organisations_own_replaces_the_setting(
    client, alice, parallel_id, settings_env
):
    settings_env(QUOTA_ACTIVE_JOBS="1")
    assert _job(client, alice, parallel_id).status_code == 201
    refused = _job(client, alice, parallel_id)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "60"
    assert refused.json()["detail"].startswith("active jobs quota: 1 jobs queued or running, the limit is 1;")
    _set_owner("alice", quota_active_jobs=2)
    assert _job(client, alice, parallel_id).status_code == 201
    assert _job(client, alice, parallel_id).status_code == 429
    _set_owner("alice", quota_active_jobs=0)  # the organisation's own 0: unlimited, whatever the setting
    assert _job(client, alice, parallel_id).status_code == 201
    usage = client.get("/v1/usage", headers=alice).json()
    assert (usage["active_jobs"], usage["active_jobs_limit"]) == (3, 0)


def test_the_worker_minutes_quota_counts_finished_and_running_jobs_since_midnight(client, alice, parallel_id):
    from app.db.base import utcnow
    from app.db.session import session_scope
    from app.db.tables import Job

    now = utcnow()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    first = _job(client, alice, parallel_id).json()["id"]
    second = _job(client, alice, parallel_id).json()["id"]
    with session_scope() as session:  # one ran 10 minutes across midnight (counts from midnight), one runs now
        span = {"started_at": midnight - timedelta(minutes=5), "finished_at": midnight + timedelta(minutes=5)}
        session.execute(update(Job).where(Job.id == first).values(status="succeeded", **span))
        started = now - timedelta(minutes=3) if now - midnight > timedelta(minutes=3) else midnight
        session.execute(update(Job).where(Job.id == second).values(status="running", started_at=started))
    minutes = client.get("/v1/usage", headers=alice).json()["worker_minutes_today"]
    expected = 5 + (now - started).total_seconds() / 60
    assert abs(minutes - expected) < 0.2, (minutes, expected)
    _set_owner("alice", quota_worker_minutes_per_day=int(expected) + 2)
    assert _job(client, alice, parallel_id).status_code == 201
    _set_owner("alice", quota_worker_minutes_per_day=int(expected))
    refused = _job(client, alice, parallel_id)
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith("worker minutes quota: ")
    assert f"the limit is {int(expected)} per day" in refused.json()["detail"]


def test_usage_needs_a_key_and_shows_only_its_organisation(client, alice, make_key):
    assert client.get("/v1/usage").status_code == 401
    _upload(client, alice, _jsonl([("one", "eins")]))
    assert client.get("/v1/usage", headers=make_key("bob")).json()["storage_bytes"] == 0


def test_an_operator_sets_an_organisations_own_quotas_from_the_command_line(client, alice, parallel_id, capsys):
    from app.cli import main

    main(["set-quota", "alice", "--active-jobs", "1", "--storage-gb", "0.5"])
    said = capsys.readouterr().out.strip()
    assert said == "alice: storage 0.5 GiB, 1 jobs queued or running, unlimited worker minutes a day"
    assert _job(client, alice, parallel_id).status_code == 201
    assert _job(client, alice, parallel_id).status_code == 429
    main(["set-quota", "alice", "--active-jobs", "default"])  # the setting again (unlimited); storage unchanged
    assert (
        capsys.readouterr().out.strip()
        == "alice: storage 0.5 GiB, unlimited jobs queued or running, unlimited worker minutes a day"
    )
    assert _job(client, alice, parallel_id).status_code == 201
    with pytest.raises(SystemExit, match="no organisation is named 'nobody'"):
        main(["set-quota", "nobody", "--active-jobs", "1"])
    with pytest.raises(SystemExit) as refused:
        main(["set-quota", "alice", "--active-jobs", "-1"])
    assert refused.value.code == 2 and "-1 is negative: 0 is unlimited" in capsys.readouterr().err


def _ran(job_id: str, minutes: float, status: str = "succeeded") -> float:
    """Record that the job ran `minutes` up to now (from midnight UTC at the earliest); the minutes counted today."""
    from app.db.base import utcnow
    from app.db.session import session_scope
    from app.db.tables import Job

    now = utcnow()
    started = max(now - timedelta(minutes=minutes), now.replace(hour=0, minute=0, second=0, microsecond=0))
    with session_scope() as session:
        session.execute(update(Job).where(Job.id == job_id).values(status=status, started_at=started, finished_at=now))
    return (now - started).total_seconds() / 60


def test_a_job_pays_worker_minutes_for_every_device_of_every_node(client, alice, parallel_id, settings_env):
    """Fault: a job with training.devices 4 on training.nodes 8 was charged as one device. Pass: 32 devices for a
    minute are 32 worker minutes, and a limit below them refuses the next job."""
    settings_env(MAX_DEVICES_PER_JOB="4", MAX_NODES_PER_JOB="8")
    body = {"objective": "translation", "dataset_id": parallel_id, "training": {"devices": 4, "nodes": 8}}
    submitted = client.post("/v1/jobs", json=body, headers=alice)
    assert submitted.status_code == 201, submitted.text
    ran = _ran(submitted.json()["id"], 1.0)
    minutes = client.get("/v1/usage", headers=alice).json()["worker_minutes_today"]
    assert abs(minutes - 32 * ran) < 0.1, (minutes, ran)
    _set_owner("alice", quota_worker_minutes_per_day=31)
    refused = _job(client, alice, parallel_id)
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith(f"worker minutes quota: {32 * ran:.1f} minutes used today (UTC)")


def test_deleting_a_finished_job_does_not_give_its_worker_minutes_back(client, alice, parallel_id):
    """Fault: with a limit of 1 minute, a job that ran 1.06 minutes was deleted, the minutes used today went back
    to 0 and the next job was accepted. Pass: the deleted job's minutes stay counted; the next job is still 429."""
    _set_owner("alice", quota_worker_minutes_per_day=1)
    first = _job(client, alice, parallel_id).json()["id"]
    ran = _ran(first, 1.06)
    assert _job(client, alice, parallel_id).status_code == 429
    assert client.delete(f"/v1/jobs/{first}", headers=alice).status_code == 204
    minutes = client.get("/v1/usage", headers=alice).json()["worker_minutes_today"]
    assert abs(minutes - ran) < 0.02, (minutes, ran)
    refused = _job(client, alice, parallel_id)
    assert refused.status_code == 429, refused.text
    assert refused.json()["detail"].startswith("worker minutes quota: ")


def test_concurrent_uploads_on_postgresql_cannot_both_pass_the_storage_quota(pg, monkeypatch):
    """Fault: two uploads at once each passed the storage check (neither saw the other's bytes) and together went
    past the quota. Pass: the check and the insert take turns per organisation: one 201, one 413, one row."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from app.services import quotas

    client, alice = pg
    data = _jsonl([("one", "eins"), ("two", "zwei")])
    _set_owner("alice", quota_storage_gb=(1.5 * len(data)) / GB)  # room for one such file, not two
    both_counted = threading.Barrier(2)
    count = quotas.storage_bytes

    def slow_count(session, owner_id):
        used = count(session, owner_id)
        try:  # each upload waits (2 s at most) for the other to have counted too: the overlap made certain
            both_counted.wait(timeout=2)
        except threading.BrokenBarrierError:
            pass
        return used

    monkeypatch.setattr(quotas, "storage_bytes", slow_count)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: _upload(client, alice, data), range(2)))
    assert sorted(a.status_code for a in answers) == [201, 413], [a.text for a in answers]
    refused = next(a for a in answers if a.status_code == 413)
    assert refused.json()["detail"].startswith(f"storage quota exceeded: {len(data)} bytes stored + {len(data)} bytes")
    monkeypatch.undo()
    usage = client.get("/v1/usage", headers=alice).json()
    assert usage["storage_bytes"] == len(data)
    assert client.get("/v1/datasets", headers=alice).json()["total"] == 1


def test_a_filtered_dataset_is_charged_its_stored_size(client, alice, tmp_path):
    """Fault: POST /v1/datasets/{id}/filter never looked at the storage quota. Pass: with no room left it is 413 at
    once; with a little room, the filtered file that would pass the limit fails the dataset naming the limit, and
    is deleted."""
    from worker.data.filtering import make

    pairs = [(f"the cat number {i} sat on the mat", f"le chat numéro {i} était assis") for i in range(60)]
    data = _jsonl(pairs)
    parent = _ready(client, alice, data)
    _set_owner("alice", quota_storage_gb=(len(data) + 10) / GB)  # 10 bytes left
    limit = round((len(data) + 10) / GB * GB)
    child = client.post(f"/v1/datasets/{parent['id']}/filter", headers=alice, json={"rules": {"deduplicate": True}})
    assert child.status_code == 201, child.text
    assert make(child.json()["id"]) == "failed"
    failed = client.get(f"/v1/datasets/{child.json()['id']}", headers=alice).json()
    assert failed["status"] == "failed"
    assert failed["error"].startswith(f"storage quota exceeded: {len(data)} bytes stored + "), failed["error"]
    assert f"would pass the limit of {limit} bytes" in failed["error"]
    stored = [p for p in (tmp_path / "var").rglob("*") if p.is_file() and child.json()["id"] in p.parts]
    assert stored == []
    assert client.get("/v1/usage", headers=alice).json()["storage_bytes"] == len(data)

    _set_owner("alice", quota_storage_gb=len(data) / GB)  # nothing left
    refused = client.post(f"/v1/datasets/{parent['id']}/filter", headers=alice, json={"rules": {"deduplicate": True}})
    assert refused.status_code == 413, refused.text
    assert refused.json()["detail"] == (
        f"storage quota exceeded: {len(data)} bytes stored, the limit is {len(data)} bytes "
        f"({len(data) / GB:g} GiB), so a dataset filtered from {parent['id']} cannot be stored; delete datasets or "
        "models first"
    )
