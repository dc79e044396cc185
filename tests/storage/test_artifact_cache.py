"""A remote store's local cache stays within ARTIFACT_CACHE_GB: least recently used files go, in-use files stay."""

from __future__ import annotations

import os
import time
from pathlib import Path

from app.artifacts.cache import trim
from app.artifacts.s3 import S3Store
from app.core.settings import Settings

HOUR = 3600.0


def _file(path: Path, size: int, age_seconds: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    then = time.time() - age_seconds
    os.utime(path, (then, then))
    return path


def test_trim_removes_the_least_recently_used_files_first(tmp_path):
    oldest = _file(tmp_path / "models/m1/model.safetensors", 400, age_seconds=3 * HOUR)
    older = _file(tmp_path / "models/m1/config.json", 300, age_seconds=2 * HOUR)
    newer = _file(tmp_path / "datasets/d1/data.jsonl", 300, age_seconds=1 * HOUR)
    done = trim(tmp_path, max_bytes=500, keep_seconds=60)
    assert (done.removed_files, done.freed_bytes, done.remaining_bytes) == (2, 700, 300)
    assert not oldest.exists() and not older.exists() and newer.exists()
    assert not (tmp_path / "models").exists()  # emptied folders go too


def test_trim_never_removes_files_in_use_or_being_written(tmp_path):
    recent = _file(tmp_path / "models/m1/model.safetensors", 1000, age_seconds=10)
    writing = _file(tmp_path / "jobs/j1/.tmp-step-100/model.safetensors", 1000, age_seconds=3 * HOUR)
    done = trim(tmp_path, max_bytes=100, keep_seconds=60)
    assert done.removed_files == 0 and done.remaining_bytes == 2000  # over the limit, and left so
    assert recent.exists() and writing.exists()


def test_within_the_limit_nothing_is_removed(tmp_path):
    kept = _file(tmp_path / "a/b", 100, age_seconds=10 * HOUR)
    assert trim(tmp_path, max_bytes=100, keep_seconds=0).removed_files == 0
    assert kept.exists()


def _age_cache(root: Path, seconds: float) -> None:
    then = time.time() - seconds
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def test_s3_cache_is_trimmed_and_an_evicted_model_is_fetched_again(s3_server, tmp_path):
    """Fails if the cache grows past its limit, or if a file evicted from a fetched folder is not downloaded
    again on the next fetch (the model would then fail to load on that host)."""
    bucket = s3_server.bucket_name()
    writer = S3Store(bucket, "svc", tmp_path / "writer", **s3_server.store_options)
    blobs = {name: os.urandom(50_000) for name in ("m1", "m2")}
    for name, blob in blobs.items():
        source = tmp_path / "made" / name
        source.mkdir(parents=True)
        (source / "model.safetensors").write_bytes(blob)
        (source / "manifest.json").write_bytes(b"{}")
        writer.push(source, f"models/{name}")

    host = S3Store(
        bucket, "svc", tmp_path / "host", cache_max_bytes=60_000, cache_keep_seconds=60, **s3_server.store_options
    )
    first = host.fetch("models/m1")
    assert (first / "model.safetensors").read_bytes() == blobs["m1"]
    _age_cache(host.cache_root, HOUR)  # m1 was used an hour ago
    second = host.fetch("models/m2")  # m1 + m2 exceed 60 kB: m1's files go
    assert (second / "model.safetensors").read_bytes() == blobs["m2"]
    assert not (first / "model.safetensors").exists()
    assert sum(p.stat().st_size for p in host.cache_root.rglob("*") if p.is_file()) <= 60_000

    _age_cache(host.cache_root, HOUR)
    again = host.fetch("models/m1")
    assert (again / "model.safetensors").read_bytes() == blobs["m1"]
    assert (again / "manifest.json").read_bytes() == b"{}"


def test_a_fetch_that_finds_its_files_cached_marks_them_used(s3_server, tmp_path):
    bucket = s3_server.bucket_name()
    store = S3Store(bucket, "svc", tmp_path / "host", **s3_server.store_options)
    store.write_bytes("datasets/d1/data.jsonl", b"hello")
    path = store.fetch("datasets/d1/data.jsonl")
    _age_cache(store.cache_root, HOUR)
    assert store.fetch("datasets/d1/data.jsonl") == path  # no download: the same bytes are there
    assert time.time() - path.stat().st_mtime < 60


def test_artifact_cache_gb_sets_the_stores_limit(tmp_path):
    settings = Settings(data_dir=tmp_path, artifact_root="s3://bucket/prefix", artifact_cache_gb=1.5)
    assert S3Store.from_settings(settings).cache_max_bytes == int(1.5 * 1024**3)


def test_a_pinned_folder_is_never_trimmed_and_a_dead_processes_pin_is_ignored(tmp_path):
    from app.artifacts.cache import PIN_PREFIX, pinned

    running = _file(tmp_path / "jobs/j1/checkpoints/step-00000100/model.safetensors", 500, age_seconds=5 * HOUR)
    finished = _file(tmp_path / "jobs/j0/checkpoints/step-00000100/model.safetensors", 500, age_seconds=6 * HOUR)
    stale_pin = tmp_path / "jobs/j0/checkpoints" / f"{PIN_PREFIX}999999999-deadbeef"  # no such process
    stale_pin.touch()
    with pinned(tmp_path / "jobs/j1/checkpoints"):
        done = trim(tmp_path, max_bytes=0, keep_seconds=60)
        assert running.exists() and not finished.exists() and not stale_pin.exists()
        assert done.removed_files == 1 and done.remaining_bytes == 500
    assert trim(tmp_path, max_bytes=0, keep_seconds=60).removed_files == 1  # unpinned: it goes too
    assert not running.exists()


def test_s3_in_use_keeps_a_jobs_checkpoints_through_fetches_and_trims(s3_server, tmp_path):
    """A training run pins its checkpoint folder from its first fetch (nothing in the store yet) to the end."""
    bucket = s3_server.bucket_name()
    store = S3Store(
        bucket, "svc", tmp_path / "host", cache_max_bytes=1, cache_keep_seconds=0, **s3_server.store_options
    )
    with store.in_use("jobs/j1/checkpoints"):
        root = store.fetch("jobs/j1/checkpoints", missing_ok=True)  # nothing there: the pin must survive
        step = root / "step-00000100"
        step.mkdir()
        (step / "model.safetensors").write_bytes(b"w" * 1000)
        store.push(step, "jobs/j1/checkpoints/step-00000100")  # pushes trim: the pinned folder stays
        assert (step / "model.safetensors").exists()
        assert s3_server.object_names(bucket) == ["svc/jobs/j1/checkpoints/step-00000100/model.safetensors"]
    assert store.trim_cache().removed_files == 1
