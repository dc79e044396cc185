"""The artifact store: datasets, tokenizers, checkpoints and models, addressed by keys the server makes.

Keys are relative ("datasets/<id>/data.jsonl", "jobs/<id>/checkpoints/step-00000100", "models/<id>"); the
database stores keys, never paths or URLs, and clients never see either. ARTIFACT_ROOT picks the store: a local
folder (the default; a volume every host mounts) or an S3-compatible bucket (`s3://bucket/prefix`) that workers
on any host read through a local cache under DATA_DIR/cache.
"""

from __future__ import annotations

from functools import lru_cache

from app.artifacts.local import LocalStore
from app.artifacts.store import COMMIT_FILE, ArtifactNotFound, ArtifactStore, ArtifactStoreError, key_parts
from app.core.settings import Settings, get_settings

__all__ = [
    "COMMIT_FILE",
    "ArtifactNotFound",
    "ArtifactStore",
    "ArtifactStoreError",
    "LocalStore",
    "get_store",
    "key_parts",
    "open_store",
]


def open_store(settings: Settings) -> ArtifactStore:
    if "://" in settings.artifact_root:
        from app.artifacts.s3 import S3Store  # boto3 loads only where the store is remote

        return S3Store.from_settings(settings)
    return LocalStore(settings.artifact_root)


@lru_cache
def get_store() -> ArtifactStore:
    return open_store(get_settings())
