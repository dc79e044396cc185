"""The reaper removes uploads staged for an import that no worker will read (the message expired unread, or its
worker died), in a real local store and a real S3 server, and nothing else in the store."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import pytest

from app.artifacts import LocalStore
from app.artifacts.s3 import S3Store
from app.core.settings import get_settings
from worker import reaper
from worker.reaper import remove_stale_staging, staging_max_age, sweep_staging

HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def _fresh_sweep_clock(monkeypatch):
    """Each test starts as a worker that has not swept yet."""
    monkeypatch.setattr(reaper, "_next_staging_sweep", 0.0)


def _age(store: LocalStore, key: str, seconds: float) -> None:
    path = store.local_path(key)
    os.utime(path, (time.time() - seconds, time.time() - seconds))


def test_only_stale_uploads_under_imports_are_removed_from_a_local_store(tmp_path):
    store = LocalStore(tmp_path / "artifacts")
    for key in ("imports/old.tar.gz", "imports/new.tar.gz", "models/m1/manifest.json", "datasets/d1/data.jsonl"):
        store.write_bytes(key, b"x")
    for key in ("imports/old.tar.gz", "models/m1/manifest.json", "datasets/d1/data.jsonl"):
        _age(store, key, 2 * 3600)
    half_written = store.local_path("imports") / ".tmp-upload"  # an upload being written: not an upload yet
    half_written.write_bytes(b"x")
    os.utime(half_written, (time.time() - 7200, time.time() - 7200))

    assert remove_stale_staging(store, HOUR) == ["imports/old.tar.gz"]
    assert not store.exists("imports/old.tar.gz") and store.exists("imports/new.tar.gz") and half_written.exists()
    assert store.exists("models/m1/manifest.json") and store.exists("datasets/d1/data.jsonl")
    assert remove_stale_staging(store, HOUR) == []  # nothing more; and a store without imports/ is fine
    assert remove_stale_staging(LocalStore(tmp_path / "empty"), HOUR) == []


def test_only_stale_uploads_under_imports_are_removed_from_an_s3_store(s3_server, tmp_path):
    bucket = s3_server.bucket_name()
    store = S3Store(bucket, "svc/artifacts", tmp_path / "cache", **s3_server.store_options)
    assert remove_stale_staging(store, HOUR) == []  # no bucket yet: nothing to list, no error
    for key in ("imports/a.tar.gz", "imports/b.tar.gz", "models/m1/manifest.json"):
        store.write_bytes(key, b"x")
    store.fetch("imports/a.tar.gz")  # the copy a worker's cache holds goes too

    assert remove_stale_staging(store, HOUR) == []  # just written
    later = datetime.now(UTC) + 2 * HOUR  # S3 sets LastModified itself: the clock moves instead
    assert remove_stale_staging(store, HOUR, now=later) == ["imports/a.tar.gz", "imports/b.tar.gz"]
    assert s3_server.object_names(bucket) == ["svc/artifacts/models/m1/manifest.json"]
    assert not store.local_path("imports/a.tar.gz").exists()


def test_the_bound_outlasts_the_messages_expiry_and_a_worker_sweeps_at_most_every_few_minutes(settings_env, tmp_path):
    settings_env(ARTIFACT_ROOT=str(tmp_path / "artifacts"), EXPORT_TIMEOUT_SECONDS="120")
    settings = get_settings()
    assert staging_max_age(settings) == timedelta(seconds=120 + reaper.IMPORT_RUN_SECONDS)
    store = LocalStore(tmp_path / "artifacts")
    store.write_bytes("imports/orphan.tar.gz", b"x")
    _age(store, "imports/orphan.tar.gz", staging_max_age(settings).total_seconds() + 60)

    assert sweep_staging(settings) == ["imports/orphan.tar.gz"] and not store.exists("imports/orphan.tar.gz")
    store.write_bytes("imports/another.tar.gz", b"x")
    _age(store, "imports/another.tar.gz", staging_max_age(settings).total_seconds() + 60)
    assert sweep_staging(settings) == []  # the next heartbeat: too soon to list again
    assert store.exists("imports/another.tar.gz")
