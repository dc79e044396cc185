"""Deleting a model while the artifact store is down: the rows go and the files wait for the collector, which keeps
their tombstones until the store answers."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient

from bench.harness.rows import insert_model
from bench.harness.stack import ROOT, free_port
from tests.support.s3 import CREDENTIALS


@pytest.fixture
def s3_down_client(settings_env, fresh_postgres_url):
    settings_env(
        DATABASE_URL=fresh_postgres_url,
        ARTIFACT_ROOT="s3://models-bucket/prefix",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}",
        **CREDENTIALS,
    )  # nothing listens there
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")
    from app.main import create_app

    with TestClient(create_app()) as client:
        yield client, fresh_postgres_url


def test_deleting_a_model_while_the_store_is_down_leaves_its_files_to_the_collector(s3_down_client):
    from datetime import timedelta

    from app.artifacts import get_store
    from app.db import tombstone_rows
    from app.db.base import utcnow
    from app.db.keys import create_key
    from app.db.session import session_scope
    from worker import collector

    client, database_url = s3_down_client
    with session_scope() as session:
        _row, clear = create_key(session, "alice")
    headers = {"Authorization": f"Bearer {clear}"}
    model_id = insert_model(database_url, "alice", storage_key="models/m1")

    response = client.delete(f"/v1/models/{model_id}", headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"id": model_id, "aliases": []}
    assert client.get(f"/v1/models/{model_id}", headers=headers).status_code == 404

    ids = collector.due_ids(timedelta(0))
    assert len(ids) == 4  # weights, exports, hypotheses, translated files
    assert collector.collect(get_store(), ids, timedelta(0)) == []  # the store is away: nothing deleted, nothing lost
    with session_scope() as session:
        assert tombstone_rows.due(session, utcnow()) == ids
