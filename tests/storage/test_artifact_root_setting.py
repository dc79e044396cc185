"""ARTIFACT_ROOT: a folder or s3://bucket/prefix; anything else stops the service with a message naming it."""

from __future__ import annotations

import pytest

from app.artifacts import LocalStore, open_store
from app.artifacts.s3 import S3Store
from app.core.settings import Settings


@pytest.mark.parametrize(
    ("root", "named"),
    [
        ("gs://bucket/x", "scheme 'gs'"),
        ("file:///srv/artifacts", "scheme 'file'"),
        ("s3://", "''"),
        ("s3://Upper_Case/x", "'Upper_Case'"),
        ("s3://bucket/a/../b", "'a/../b'"),
    ],
)
def test_bad_artifact_root_is_refused_naming_it(root, named, tmp_path):
    with pytest.raises(ValueError, match="ARTIFACT_ROOT") as caught:
        Settings(data_dir=tmp_path, artifact_root=root)
    assert named in str(caught.value)


def test_s3_root_opens_the_s3_store_with_the_standard_variables(tmp_path, monkeypatch):
    for name, value in {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "hunter2-key",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings(data_dir=tmp_path, artifact_root="s3://artifacts/prod/")
    store = open_store(settings)
    assert isinstance(store, S3Store) and store.url == "s3://artifacts/prod"
    assert (
        store.local_path("models/m1") == (tmp_path / "cache" / "s3" / "artifacts" / "prod" / "models" / "m1").resolve()
    )
    assert store.client.meta.endpoint_url == "http://127.0.0.1:9000" and store.client.meta.region_name == "eu-west-1"
    assert "hunter2-key" not in repr(settings)  # a SecretStr


def test_folder_root_opens_the_local_store(tmp_path):
    store = open_store(Settings(data_dir=tmp_path, artifact_root=str(tmp_path / "art")))
    assert (
        isinstance(store, LocalStore)
        and store.local_path("models/m1") == (tmp_path / "art" / "models" / "m1").resolve()
    )
