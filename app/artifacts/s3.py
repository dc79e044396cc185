"""The S3-compatible store (AWS S3, MinIO, ...): ARTIFACT_ROOT=s3://bucket/prefix.

Objects are named <prefix>/<key>; a folder is every object under <prefix>/<key>/. Readers fetch into a local
cache (<DATA_DIR>/cache/s3/<bucket>/<prefix>/<key>) that mirrors the store: a file already there is kept when its
size and ETag match the object's, so a model or a dataset is downloaded once per host. The cache is kept within
ARTIFACT_CACHE_GB by deleting the least recently used files (app/artifacts/cache.py).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, cast

import boto3
from boto3.exceptions import Boto3Error
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from app.artifacts.cache import Trimmed, pinned, touch, trim
from app.artifacts.store import COMMIT_FILE, TEMP_PREFIX, ArtifactNotFound, ArtifactStore, ArtifactStoreError, key_parts
from app.core.settings import Settings, parse_s3_root

log = logging.getLogger(__name__)
PART_SIZE = 8 * 1024 * 1024  # multipart threshold and part size; a file above it gets ETag "<md5 of md5s>-<parts>"
NOT_FOUND_CODES = ("404", "NoSuchKey", "NotFound")
NO_BUCKET_CODES = ("NoSuchBucket",)


def s3_etag(path: Path, parts: int = 1, part_size: int = PART_SIZE) -> str:
    """The ETag S3 gives this file uploaded in `parts` parts of part_size bytes (1 part: its plain MD5)."""
    digests: list[bytes] = []
    whole = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(part_size):
            whole.update(chunk)
            digests.append(hashlib.md5(chunk).digest())
    if parts <= 1:
        return whole.hexdigest()
    return hashlib.md5(b"".join(digests)).hexdigest() + f"-{len(digests)}"


def _same_file(path: Path, size: int, etag: str) -> bool:
    """True if the local file holds the object's bytes (by size, then ETag)."""
    if not path.is_file() or path.stat().st_size != size:
        return False
    parts = int(etag.rsplit("-", 1)[1]) if "-" in etag else 1
    return s3_etag(path, parts) == etag


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _is_temp(path: Path, root: Path) -> bool:
    return any(part.startswith(TEMP_PREFIX) for part in path.relative_to(root).parts)


def _prune(folder: Path, wanted: set[Path]) -> None:
    """Remove the files under a fetched folder that the store does not have, and the folders this empties;
    files being written (`.tmp-*`, pins included) stay."""
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*"), reverse=True):  # deepest first, so emptied folders can go too
        if _is_temp(path, folder) or path in wanted:
            continue
        if path.is_file():
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    if not any(folder.iterdir()):
        folder.rmdir()


class _Counted:
    """A readable that counts what was read through it (upload_fileobj reports nothing) and returns short only at
    the end: s3transfer takes a short first read for the whole file and would store a truncated object."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream, self.size = stream, 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            data = self.stream.read()
        else:
            parts, wanted = [], size
            while wanted > 0 and (chunk := self.stream.read(wanted)):
                parts.append(chunk)
                wanted -= len(chunk)
            data = b"".join(parts)
        self.size += len(data)
        return data


class BucketNotFound(ArtifactNotFound):
    pass


class S3Store(ArtifactStore):
    def __init__(
        self,
        bucket: str,
        prefix: str,
        cache_dir: str | Path,
        *,
        endpoint_url: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        region: str | None = None,
        cache_max_bytes: int = 0,
        cache_keep_seconds: float = 600,
    ) -> None:
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.cache_max_bytes = cache_max_bytes  # 0: the cache may grow without bound
        self.cache_keep_seconds = cache_keep_seconds  # files used this recently are never trimmed
        self.cache_root = (
            Path(cache_dir).resolve().joinpath("s3", bucket, *(key_parts(self.prefix) if self.prefix else ()))
        )
        self.region = region
        self._client_options: dict[str, Any] = {
            "endpoint_url": endpoint_url,
            "aws_access_key_id": access_key_id,
            "aws_secret_access_key": secret_access_key,
            "region_name": region,
            "config": Config(
                connect_timeout=5,
                read_timeout=60,
                retries={"mode": "standard", "max_attempts": 3},
                # Checksums only where S3 requires them: some S3-compatible stores refuse the newer defaults.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                s3={"addressing_style": "path"} if endpoint_url else None,
            ),
        }
        self._transfer = TransferConfig(multipart_threshold=PART_SIZE, multipart_chunksize=PART_SIZE)
        # A stream's parts are buffered in memory: four at a time bounds an upload's memory at 4 x PART_SIZE.
        self._stream_transfer = TransferConfig(
            multipart_threshold=PART_SIZE, multipart_chunksize=PART_SIZE, max_concurrency=4
        )
        self._lock = threading.Lock()
        self._client: Any = None
        self._client_pid = 0
        self._bucket_ready = False

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Store:
        bucket, prefix = parse_s3_root(settings.artifact_root)
        secret = settings.aws_secret_access_key.get_secret_value()
        return cls(
            bucket,
            prefix,
            settings.data_dir / "cache",
            endpoint_url=settings.aws_endpoint_url or None,
            access_key_id=settings.aws_access_key_id or None,
            secret_access_key=secret or None,
            region=settings.aws_default_region or None,
            cache_max_bytes=int(settings.artifact_cache_gb * 1024**3),
        )

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def __repr__(self) -> str:
        return f"S3Store({self.url!r})"

    @property
    def client(self) -> Any:
        """A boto3 S3 client for this process (a forked worker process opens its own connections)."""
        with self._lock:
            if self._client is None or self._client_pid != os.getpid():
                self._client = boto3.session.Session().client("s3", **self._client_options)
                self._client_pid = os.getpid()
            return self._client

    # -- names --------------------------------------------------------------------------------------------------

    def _object(self, key: str) -> str:
        return "/".join((self.prefix, *key_parts(key)) if self.prefix else key_parts(key))

    def local_path(self, key: str) -> Path:
        return self.cache_root.joinpath(*key_parts(key))

    @contextmanager
    def _errors(self, action: str, key: str) -> Iterator[None]:
        """S3 errors as ArtifactNotFound / ArtifactStoreError naming the key and the store."""
        try:
            yield
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in NO_BUCKET_CODES:
                raise BucketNotFound(f"artifact {key!r} not found: bucket {self.bucket!r} does not exist") from exc
            if code in NOT_FOUND_CODES:
                raise ArtifactNotFound(f"artifact {key!r} not found in {self.url}") from exc
            raise ArtifactStoreError(f"{action} {key!r} in {self.url} failed: {exc}") from exc
        except (BotoCoreError, Boto3Error) as exc:
            raise ArtifactStoreError(f"{action} {key!r}: the artifact store {self.url} failed: {exc}") from exc

    def _ensure_bucket(self) -> None:
        """Create the bucket on the first write if it is missing (a fresh MinIO starts empty)."""
        if self._bucket_ready:
            return
        try:
            with self._errors("check bucket for", ""):
                self.client.head_bucket(Bucket=self.bucket)
        except ArtifactNotFound:
            options = (
                {"CreateBucketConfiguration": {"LocationConstraint": self.region}}
                if self.region and self.region != "us-east-1"
                else {}
            )
            try:
                with self._errors("create bucket for", ""):
                    self.client.create_bucket(Bucket=self.bucket, **options)
            except ArtifactStoreError as exc:  # created meanwhile by another process is fine
                if "BucketAlreadyOwnedByYou" not in str(exc):
                    raise
        self._bucket_ready = True

    def _listing(self, key: str) -> list[dict[str, Any]]:
        """Every object under the folder <key>/: [{"Key", "Size", "ETag"}, ...]; [] when there is no bucket."""
        folder = self._object(key) + "/"
        out: list[dict[str, Any]] = []
        try:
            with self._errors("list", key):
                for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=folder):
                    out.extend(page.get("Contents", []))
        except BucketNotFound:
            return []
        return out

    def list_files(self, folder: str) -> list[tuple[str, datetime]]:
        prefix = self._object(folder) + "/"
        out = []
        for item in self._listing(folder):
            name = item["Key"][len(prefix) :]
            if name and not name.endswith("/"):  # no folder markers
                out.append(("/".join((*key_parts(folder), name)), item["LastModified"]))
        return out

    def _head(self, key: str) -> dict[str, Any] | None:
        try:
            with self._errors("read", key):
                return cast(dict[str, Any], self.client.head_object(Bucket=self.bucket, Key=self._object(key)))
        except ArtifactNotFound:
            return None

    # -- files and folders ---------------------------------------------------------------------------------------

    def write_bytes(self, key: str, data: bytes) -> int:
        """One PUT: S3 shows the whole object or nothing."""
        self._ensure_bucket()
        with self._errors("write", key):
            self.client.put_object(Bucket=self.bucket, Key=self._object(key), Body=data)
        return len(data)

    def write_stream(self, key: str, stream: BinaryIO) -> int:
        """A multipart upload of PART_SIZE parts read from the stream (boto3 holds a few parts at a time); S3 shows
        the object only once it completes. Returns the bytes read."""
        self._ensure_bucket()
        counted = _Counted(stream)
        with self._errors("write", key):
            self.client.upload_fileobj(counted, self.bucket, self._object(key), Config=self._stream_transfer)
        return counted.size

    def read_bytes(self, key: str) -> bytes:
        with self._errors("read", key):
            return cast(bytes, self.client.get_object(Bucket=self.bucket, Key=self._object(key))["Body"].read())

    def exists(self, key: str) -> bool:
        return self._head(key) is not None or bool(self._listing(key))

    def delete(self, key: str) -> None:
        """Delete the object or folder in the store and its copy in the local cache."""
        self._delete_remote(key)
        _remove(self.local_path(key))

    def _delete_remote(self, key: str) -> None:
        names = [self._object(key)] + [o["Key"] for o in self._listing(key)]
        for start in range(0, len(names), 1000):  # DeleteObjects takes at most 1000 keys
            try:
                with self._errors("delete", key):
                    self.client.delete_objects(
                        Bucket=self.bucket,
                        Delete={"Objects": [{"Key": n} for n in names[start : start + 1000]], "Quiet": True},
                    )
            except BucketNotFound:
                return

    def fetch(self, key: str, missing_ok: bool = False) -> Path:
        """Download a file, or mirror a folder (local files the store no longer has are removed)."""
        target = self.local_path(key)
        head = self._head(key)
        if head is not None:
            if target.is_dir():
                shutil.rmtree(target)
            self._download(key, self._object(key), target, head["ContentLength"], head["ETag"])
            self.trim_cache()
            return target
        listing = self._listing(key)
        if not listing:
            if not missing_ok:
                raise ArtifactNotFound(f"artifact {key!r} not found in {self.url}")
            if target.is_file():
                target.unlink()
            _prune(target, set())  # nothing in the store: nothing stale stays here either
            return target
        if target.is_file():
            target.unlink()
        folder = self._object(key) + "/"
        wanted: set[Path] = set()
        for item in listing:
            name = item["Key"][len(folder) :]
            if not name or name.endswith("/"):  # a folder marker some tools create
                continue
            try:
                path = target.joinpath(*key_parts(name))
            except ValueError as exc:
                raise ArtifactStoreError(f"{self.url}/{item['Key']} has a name that cannot be fetched: {exc}") from exc
            wanted.add(path)
            self._download(key, item["Key"], path, item["Size"], item["ETag"])
        _prune(target, wanted)
        self.trim_cache()
        return target

    def _download(self, key: str, name: str, path: Path, size: int, etag: str) -> None:
        if _same_file(path, size, etag.strip('"')):
            touch(path)  # used now: the last file a trim would remove
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f"{TEMP_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}"
        try:
            with self._errors("fetch", key):
                self.client.download_file(self.bucket, name, str(tmp), Config=self._transfer)
            os.replace(tmp, path)  # readers see the old file or the new one, never half of one
        finally:
            tmp.unlink(missing_ok=True)

    def push(self, source: str | Path, key: str) -> None:
        """Upload a file, or a folder: what was under the key goes first, the folder's COMMIT_FILE last."""
        source = Path(source)
        if not source.exists():
            raise FileNotFoundError(f"cannot push {source}: it does not exist")
        self._ensure_bucket()
        if source.is_file():
            self._upload(key, source, self._object(key))
        else:
            files = [p for p in source.rglob("*") if p.is_file() and not _is_temp(p, source)]
            files.sort(key=lambda p: (p.name == COMMIT_FILE, p.relative_to(source).as_posix()))
            self._delete_remote(key)  # a reader never sees old and new files mixed under one manifest
            for path in files:
                self._upload(key, path, f"{self._object(key)}/{path.relative_to(source).as_posix()}")
        self.trim_cache()

    def in_use(self, key: str) -> AbstractContextManager[None]:
        return pinned(self.local_path(key))

    def trim_cache(self) -> Trimmed | None:
        """Keep this host's cache within ARTIFACT_CACHE_GB (see app/artifacts/cache.py)."""
        if not self.cache_max_bytes or not self.cache_root.is_dir():
            return None
        done = trim(self.cache_root, self.cache_max_bytes, self.cache_keep_seconds)
        if done.removed_files:
            log.info(
                "artifact cache %s: removed %d least recently used files (%.1f MB); %.1f MB remain",
                self.cache_root,
                done.removed_files,
                done.freed_bytes / 1e6,
                done.remaining_bytes / 1e6,
            )
        return done

    def _upload(self, key: str, path: Path, name: str) -> None:
        with self._errors("push", key):
            self.client.upload_file(str(path), self.bucket, name, Config=self._transfer)
