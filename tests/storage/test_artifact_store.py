"""The artifact store's contract, run against both stores: a local folder and a real S3 server (moto)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.artifacts import ArtifactNotFound, ArtifactStore, ArtifactStoreError, LocalStore
from app.artifacts.s3 import PART_SIZE, S3Store
from bench.harness.stack import free_port

FOLDER = "jobs/j1/checkpoints/step-00000100"
INVALID_KEYS = ["../escape", "a/../../b", "/etc/passwd", "", ".", "a/./b", "a\\b", "a//b", "a/.tmp-half"]


@pytest.fixture(params=["local", "s3"])
def host(request, tmp_path):
    """Returns a function that opens the store as a host sees it; each host has its own local disk."""
    if request.param == "local":
        root = tmp_path / "shared-volume"
        return lambda name="a": LocalStore(root)
    server = request.getfixturevalue("s3_server")
    bucket = server.bucket_name()
    return lambda name="a": S3Store(
        bucket, "svc/artifacts", tmp_path / f"host-{name}" / "cache", **server.store_options
    )


@pytest.fixture
def store(host) -> ArtifactStore:
    return host()


def _checkpoint_folder(path: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    return path


def _tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_bytes_round_trip_and_overwrite(store):
    assert store.write_bytes("datasets/d1/data.jsonl", b'{"source": "a", "target": "b"}\n') == 31
    assert store.read_bytes("datasets/d1/data.jsonl") == b'{"source": "a", "target": "b"}\n'
    assert store.exists("datasets/d1/data.jsonl") and store.exists("datasets/d1")  # a file, and its folder
    store.write_bytes("datasets/d1/data.jsonl", b"new")
    assert store.read_bytes("datasets/d1/data.jsonl") == b"new"
    assert store.fetch("datasets/d1/data.jsonl").read_bytes() == b"new"


def test_a_stream_is_stored_whole_a_part_at_a_time(store):
    """Larger than one S3 part (8 MiB): a multipart upload read from the stream, or a local file written in chunks."""
    import io
    import os

    data = os.urandom(9 * 1024 * 1024 + 17)
    assert store.write_stream("datasets/d2/data.tsv.gz", io.BytesIO(data)) == len(data)
    assert store.read_bytes("datasets/d2/data.tsv.gz") == data
    assert store.fetch("datasets/d2/data.tsv.gz").read_bytes() == data


def test_a_stream_that_breaks_leaves_nothing_behind(store):
    class Broken:
        def __init__(self) -> None:
            self.reads = 0

        def read(self, size: int = -1) -> bytes:
            self.reads += 1
            if self.reads > 2:
                raise ConnectionResetError("the client went away")
            return b"x" * 1024 * 1024

    with pytest.raises(Exception, match="the client went away"):
        store.write_stream("datasets/d3/data.jsonl", Broken())
    assert not store.exists("datasets/d3/data.jsonl") and store.list_files("datasets") == []


def test_list_files_names_every_stored_file_under_a_folder_with_when_it_was_written(store):
    from datetime import UTC, datetime, timedelta

    before = datetime.now(UTC) - timedelta(minutes=5)  # S3 keeps whole seconds; clocks of test and server
    store.write_bytes("imports/a.tar.gz", b"a")
    store.write_bytes("imports/deep/b.tar.gz", b"b")
    store.write_bytes("importsx/c.tar.gz", b"c")  # another folder sharing the prefix
    store.write_bytes("models/m/model.safetensors", b"m")
    listed = store.list_files("imports")
    assert [key for key, _ in listed] == ["imports/a.tar.gz", "imports/deep/b.tar.gz"]
    assert all(before < written < datetime.now(UTC) + timedelta(minutes=5) for _, written in listed)
    assert store.list_files("nothing-here") == []
    store.delete("imports/a.tar.gz")
    assert [key for key, _ in store.list_files("imports")] == ["imports/deep/b.tar.gz"]


def test_missing_key_raises_not_found_naming_the_key(store):
    for call in (lambda: store.read_bytes("datasets/nope/data.jsonl"), lambda: store.fetch("datasets/nope/data.jsonl")):
        with pytest.raises(ArtifactNotFound, match="datasets/nope/data.jsonl"):
            call()
    assert not store.exists("datasets/nope") and not store.exists("datasets/nope/data.jsonl")
    assert not store.fetch("jobs/nope/checkpoints", missing_ok=True).exists()
    store.delete("datasets/nope")  # deleting what is not there is fine


@pytest.mark.parametrize("key", INVALID_KEYS)
def test_keys_that_could_escape_the_store_are_refused(store, tmp_path, key):
    (tmp_path / "f").write_bytes(b"x")
    calls = [
        lambda: store.write_bytes(key, b"x"),
        lambda: store.read_bytes(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
        lambda: store.fetch(key),
        lambda: store.push(tmp_path / "f", key),
        lambda: store.local_path(key),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="invalid artifact key"):
            call()


def test_folder_pushed_on_one_host_is_fetched_whole_on_another(host, tmp_path):
    files = {
        "model.safetensors": os.urandom(3000),
        "config.json": b"{}",
        "sub/extra.bin": b"e",
        "manifest.json": b'{"files": {}}',
    }
    writer, reader = host("a"), host("b")
    written = _checkpoint_folder(writer.local_path(FOLDER), files)  # written in place, as the trainer does
    writer.push(written, FOLDER)
    assert writer.exists(FOLDER) and writer.exists(f"{FOLDER}/sub/extra.bin")
    fetched = reader.fetch(FOLDER)
    assert _tree(fetched) == files
    # A folder pushed again replaces the old one whole: files it no longer has disappear on every host.
    elsewhere = _checkpoint_folder(tmp_path / "elsewhere", {"model.safetensors": b"v2", "manifest.json": b"{}"})
    writer.push(elsewhere, FOLDER)
    assert _tree(reader.fetch(FOLDER)) == {"model.safetensors": b"v2", "manifest.json": b"{}"}
    assert writer.read_bytes(f"{FOLDER}/model.safetensors") == b"v2"


def test_delete_removes_a_folder_and_only_that_folder(host):
    writer, reader = host("a"), host("b")
    writer.push(_checkpoint_folder(writer.local_path(FOLDER), {"a.bin": b"a", "manifest.json": b"{}"}), FOLDER)
    writer.write_bytes("jobs/j1/checkpoints/step-00000200/a.bin", b"keep")
    writer.write_bytes("jobs/j1/checkpoints/step-00000100x", b"a sibling whose name starts alike")
    reader.fetch(FOLDER)
    reader.delete(FOLDER)
    for store in (writer, reader):
        assert not store.exists(FOLDER) and not store.exists(f"{FOLDER}/a.bin")
        assert store.read_bytes("jobs/j1/checkpoints/step-00000200/a.bin") == b"keep"
        assert store.exists("jobs/j1/checkpoints/step-00000100x")
    assert not reader.local_path(FOLDER).exists()
    with pytest.raises(ArtifactNotFound):
        writer.fetch(FOLDER)


def test_fetch_reuses_what_is_already_local(host):
    """A second fetch of unchanged files keeps the same local files (same inode: a download would have replaced
    the file with a new one; the S3 cache does touch it, to mark it used)."""
    writer, reader = host("a"), host("b")
    writer.write_bytes("models/m1/model.safetensors", os.urandom(5000))
    first = reader.fetch("models/m1")
    before = (first / "model.safetensors").stat()
    again = reader.fetch("models/m1") / "model.safetensors"
    assert again.stat().st_ino == before.st_ino
    writer.write_bytes("models/m1/model.safetensors", b"changed")
    assert reader.fetch("models/m1/model.safetensors").read_bytes() == b"changed"


# -- the S3 store alone --------------------------------------------------------------------------------------------


def test_s3_fetch_replaces_a_cached_file_whose_bytes_differ(s3_server, tmp_path):
    """Same size, other bytes (a torn or tampered cache): the ETag differs, so the file is downloaded again."""
    store = S3Store(s3_server.bucket_name(), "", tmp_path / "cache", **s3_server.store_options)
    store.write_bytes("models/m1/model.safetensors", b"0123456789")
    path = store.fetch("models/m1/model.safetensors")
    path.write_bytes(b"9876543210")
    assert store.fetch("models/m1/model.safetensors").read_bytes() == b"0123456789"


def test_s3_multipart_files_round_trip_and_are_reused_by_etag(s3_server, tmp_path):
    """A file above the multipart threshold gets an '<md5>-<parts>' ETag; the cache still recognises it."""
    data = os.urandom(PART_SIZE + 4096)
    bucket = s3_server.bucket_name()
    writer = S3Store(bucket, "p", tmp_path / "a", **s3_server.store_options)
    reader = S3Store(bucket, "p", tmp_path / "b", **s3_server.store_options)
    (tmp_path / "big.bin").write_bytes(data)
    writer.push(tmp_path / "big.bin", "models/m1/optimizer.safetensors")
    etag = s3_server.client().head_object(Bucket=bucket, Key="p/models/m1/optimizer.safetensors")["ETag"]
    assert etag.strip('"').endswith("-2"), etag
    path = reader.fetch("models/m1/optimizer.safetensors")
    assert path.read_bytes() == data
    inode = path.stat().st_ino
    assert reader.fetch("models/m1/optimizer.safetensors").stat().st_ino == inode


def test_s3_folder_push_uploads_the_manifest_and_names_objects_under_the_prefix(s3_server, tmp_path):
    bucket = s3_server.bucket_name()
    store = S3Store(bucket, "svc", tmp_path / "cache", **s3_server.store_options)
    store.push(_checkpoint_folder(tmp_path / "ck", {"manifest.json": b"{}", "model.safetensors": b"m"}), FOLDER)
    assert s3_server.object_names(bucket) == [f"svc/{FOLDER}/manifest.json", f"svc/{FOLDER}/model.safetensors"]


def test_s3_first_write_creates_the_missing_bucket(s3_server, tmp_path):
    bucket = s3_server.bucket_name()
    store = S3Store(bucket, "", tmp_path / "cache", **s3_server.store_options)
    assert not store.exists("datasets/d1")  # no bucket yet: nothing there, no error
    store.write_bytes("datasets/d1/data.txt", b"hello")
    assert s3_server.object_names(bucket) == ["datasets/d1/data.txt"]


def test_s3_unreachable_store_raises_store_error_naming_it(s3_server, tmp_path):
    options = {**s3_server.store_options, "endpoint_url": f"http://127.0.0.1:{free_port()}"}
    store = S3Store("somewhere", "x", tmp_path / "cache", **options)
    with pytest.raises(ArtifactStoreError, match="s3://somewhere/x") as caught:
        store.write_bytes("datasets/d1/data.txt", b"hello")
    assert not isinstance(caught.value, ArtifactNotFound)
