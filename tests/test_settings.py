"""Settings: embedded defaults under one data folder; unsafe values refused with their names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_put_everything_under_the_data_folder(tmp_path, monkeypatch):
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "ARTIFACT_ROOT", "ENVIRONMENT", "HOST"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(data_dir=tmp_path / "var")
    data = str((tmp_path / "var").resolve())
    assert settings.database_url == f"sqlite:///{data}/service.db"
    assert settings.celery_broker_url == f"sqla+sqlite:///{data}/broker.db"
    assert settings.artifact_root == f"{data}/artifacts"
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)


def test_production_urls_are_accepted():  # explicit arguments win over the environment
    settings = Settings(
        environment="production",
        host="0.0.0.0",
        database_url="postgresql+psycopg://u:p@db/app",
        celery_broker_url="redis://redis:6379/0",
    )
    assert not settings.is_sqlite and not settings.embedded_broker


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"database_url": "postgresql://u@db/app"}, "use postgresql+psycopg://"),
        ({"database_url": "mysql://u@db/app"}, "DATABASE_URL scheme 'mysql'"),
        ({"celery_broker_url": "amqp://guest@rabbit//"}, "CELERY_BROKER_URL scheme 'amqp'"),
        ({"environment": "production", "host": "0.0.0.0"}, "DATABASE_URL is SQLite"),
        ({"host": "0.0.0.0"}, "HOST='0.0.0.0'"),
        ({"job_lease_seconds": 600, "broker_visibility_timeout": 900}, "BROKER_VISIBILITY_TIMEOUT=900"),
        ({"job_lease_seconds": 20, "worker_heartbeat_seconds": 15}, "WORKER_HEARTBEAT_SECONDS=15"),
        ({"port": 70000}, "port"),
        ({"webhook_allowed_ports": "8443,70000"}, "WEBHOOK_ALLOWED_PORTS: 70000 is not a port (1-65535)"),
        ({"dataset_uri_prefixes": "s3://corpora/,file:///data"}, "DATASET_URI_PREFIXES: prefix 'file:///data' is not"),
        ({"dataset_uri_prefixes": "s3://corpora/../private"}, "DATASET_URI_PREFIXES: prefix 's3://corpora/../private'"),
        ({"dataset_uri_prefixes": "s3://Corpora/"}, "names no valid S3 bucket: 'Corpora'"),
    ],
)
def test_unsafe_values_are_refused_by_name(kwargs, named, monkeypatch):
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "ENVIRONMENT", "HOST"):
        monkeypatch.delenv(name, raising=False)  # CI sets them; these cases are about the values given here
    with pytest.raises(ValidationError) as info:
        Settings(**kwargs)
    assert named in str(info.value)


def test_webhook_allowed_ports_read_as_a_list(monkeypatch):
    monkeypatch.setenv("WEBHOOK_ALLOWED_PORTS", " 9000, 8443,9000 ")
    assert Settings().webhook_allowed_ports == (8443, 9000)
    monkeypatch.setenv("WEBHOOK_ALLOWED_PORTS", "[8080]")
    assert Settings().webhook_allowed_ports == (8080,)
    monkeypatch.delenv("WEBHOOK_ALLOWED_PORTS")
    assert Settings().webhook_allowed_ports == ()


def test_dataset_uri_prefixes_read_as_canonical_prefixes(monkeypatch):
    """Each prefix is whole segments: `s3://corpora/wmt` and `s3://corpora/wmt/` are the same prefix."""
    monkeypatch.setenv("DATASET_URI_PREFIXES", " s3://corpora/wmt, s3://corpora/wmt/,s3://shared ")
    assert Settings().dataset_uri_prefixes == ("s3://corpora/wmt/", "s3://shared/")
    monkeypatch.setenv("DATASET_URI_PREFIXES", "")
    assert Settings().dataset_uri_prefixes == ()


def test_cli_refuses_to_start_with_unsafe_settings_and_names_them(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "DATA_DIR": str(tmp_path), "DATABASE_URL": "postgresql://x@y/z"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "migrate"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "DATABASE_URL scheme 'postgresql' is not supported" in done.stderr
    assert "Traceback" not in done.stderr
