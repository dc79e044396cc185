"""Objects outside the artifact store, read in place by URI (a dataset registered from s3://bucket/key): with the
same endpoint and credentials as an S3 artifact store (AWS_*), which may be another bucket's or none at all.

boto3 is imported by the functions that read a URI, not here: the workers import UriError and split_uri at start,
and a host without boto3 (a GPU host's image, bench/gpu_wheels.sh) must start as long as it reads no s3:// URI."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from app.core.object_uris import S3_BUCKET
from app.core.settings import Settings

TEMP_SUFFIX = ".part"


class UriError(Exception):
    """The URI is malformed, or the object cannot be read with the service's credentials; the message says which."""


def split_uri(uri: str) -> tuple[str, str]:
    """s3://bucket/some/key -> ("bucket", "some/key"); UriError naming the bad part."""
    scheme, _, rest = uri.partition("://")
    bucket, _, key = rest.partition("/")
    if scheme != "s3" or not S3_BUCKET.fullmatch(bucket) or not key or key.endswith("/"):
        raise UriError(f"{uri!r} is not an s3://bucket/key URI of one object")
    return bucket, key


def client(settings: Settings) -> Any:
    import boto3  # here, not at the top: see the module docstring
    from botocore.config import Config

    secret = settings.aws_secret_access_key.get_secret_value()
    return boto3.session.Session().client(
        "s3",
        endpoint_url=settings.aws_endpoint_url or None,
        aws_access_key_id=settings.aws_access_key_id or None,
        aws_secret_access_key=secret or None,
        region_name=settings.aws_default_region or None,
        config=Config(
            connect_timeout=5,
            read_timeout=60,
            retries={"mode": "standard", "max_attempts": 3},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            s3={"addressing_style": "path"} if settings.aws_endpoint_url else None,
        ),
    )


def _errors() -> tuple[type[Exception], ...]:
    """What boto3 raises when an object cannot be read (imported here: see the module docstring)."""
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError

    return ClientError, BotoCoreError, Boto3Error


def _why(uri: str, exc: Exception) -> UriError:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchKey", "NotFound"):
            return UriError(f"{uri} does not exist")
        if code in ("NoSuchBucket",):
            return UriError(f"{uri}: the bucket does not exist")
        if code in ("403", "AccessDenied", "Forbidden"):
            return UriError(f"the service's credentials may not read {uri}")
        return UriError(f"{uri} cannot be read: {code or exc}")
    return UriError(f"{uri} cannot be reached: {exc}")


def head_uri(settings: Settings, uri: str) -> int:
    """The object's size in bytes; UriError when it cannot be read."""
    bucket, key = split_uri(uri)
    errors = _errors()
    try:
        return int(client(settings).head_object(Bucket=bucket, Key=key)["ContentLength"])
    except errors as exc:
        raise _why(uri, exc) from exc


def download_uri(settings: Settings, uri: str, path: Path) -> Path:
    """The object, downloaded to `path` in parts (constant memory) unless a file of its size and ETag is already
    there (recorded beside it); readers see the old file or the new one, never half of one."""
    from boto3.s3.transfer import TransferConfig

    from app.artifacts.s3 import PART_SIZE  # the S3 store's module: boto3 is here already

    bucket, key = split_uri(uri)
    errors = _errors()
    s3 = client(settings)
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
        etag_file = path.with_name(path.name + ".etag")
        if path.is_file() and etag_file.is_file() and etag_file.read_text() == head["ETag"]:
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}-{uuid.uuid4().hex[:8]}{TEMP_SUFFIX}")
        try:
            s3.download_file(bucket, key, str(tmp), Config=TransferConfig(multipart_chunksize=PART_SIZE))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        etag_file.write_text(head["ETag"])
        return path
    except errors as exc:
        raise _why(uri, exc) from exc
