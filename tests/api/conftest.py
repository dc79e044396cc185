"""In-process API tests: a migrated SQLite database in a temporary folder, a TestClient, and the CLI run against it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import nullcontext

import pytest
from fastapi.testclient import TestClient

from tests.support.api_app import migrated_client


@pytest.fixture
def client(settings_env) -> TestClient:
    with migrated_client() as test_client:
        yield test_client


@pytest.fixture
def pg(settings_env, fresh_postgres_url):
    """The same API on PostgreSQL: conditional deletes, cascades, row counts and row locks as production has them;
    (client, alice's headers)."""
    from app.db.keys import create_key
    from app.db.session import session_scope

    settings_env(DATABASE_URL=fresh_postgres_url)
    with migrated_client() as pg_client:
        with session_scope() as session:
            _row, clear = create_key(session, "alice")
        yield pg_client, {"Authorization": f"Bearer {clear}"}


@pytest.fixture
def make_key(client) -> Callable[[str], dict[str, str]]:
    """Create an API key for an owner and return the Authorization header that carries it."""
    from app.db.keys import create_key
    from app.db.session import session_scope

    def make(owner: str) -> dict[str, str]:
        with session_scope() as session:
            _row, clear = create_key(session, owner)
        return {"Authorization": f"Bearer {clear}"}

    return make


@pytest.fixture
def alice(make_key):
    """The headers of owner alice (jobs and models tests)."""
    return make_key("alice")


@pytest.fixture
def parallel_id(client, alice):
    from tests.api.test_datasets import _jsonl, _ready

    return _ready(client, alice, _jsonl([("one", "eins"), ("two", "zwei")]))["id"]


@pytest.fixture
def mono_id(client, alice):
    from tests.api.test_datasets import _ready

    return _ready(client, alice, b"the cat sat\n", filename="m.txt", kind="monolingual")["id"]


@pytest.fixture
def cli(client, monkeypatch, capsys):
    """`cli(*argv)`: run the command in process with the key it finds itself (flag, environment, file); returns
    (exit code, stdout, stderr)."""
    import app.client.connection as connection
    from app.cli import main

    def open_client(args):
        client.headers["Authorization"] = f"Bearer {connection.api_key(args)}"
        return nullcontext(client)

    monkeypatch.setattr(connection, "open_client", open_client)
    monkeypatch.delenv("TRANSFORMER_API_KEY", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)  # as the interpreter prints it
        out, err = capsys.readouterr()
        return code, out, err

    return run
