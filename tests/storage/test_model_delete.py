"""Deleting a model while the artifact store is down loses nothing: 503, and the model stays whole."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config
from fastapi.testclient import TestClient

from tests.support.rows import insert_model
from tests.support.s3 import CREDENTIALS
from tests.support.stack import ROOT, free_port


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


def test_deleting_a_model_while_the_store_is_down_is_503_and_keeps_it(s3_down_client):
    from app.db.keys import create_key
    from app.db.session import session_scope

    client, database_url = s3_down_client
    with session_scope() as session:
        _row, clear = create_key(session, "alice")
    headers = {"Authorization": f"Bearer {clear}"}
    model_id = insert_model(database_url, "alice", storage_key="models/m1")

    response = client.delete(f"/v1/models/{model_id}", headers=headers)
    assert response.status_code == 503, response.text
    assert response.json()["detail"].startswith(f"model {model_id} was not deleted: the artifact store is unavailable")
    assert response.headers["retry-after"] == "10"
    assert client.get(f"/v1/models/{model_id}", headers=headers).status_code == 200
