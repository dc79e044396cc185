"""A forked process (a Celery prefork pool process, started again whenever one dies) opens database connections of
its own instead of using those its parent had pooled: two processes on one PostgreSQL connection share its socket
and its prepared statements (seen as DuplicatePreparedStatement in a join task whose pool process had been
replaced)."""

from __future__ import annotations

import os

from sqlalchemy import text

from app.db.session import session_scope

PREPARE_THRESHOLD = 5  # psycopg prepares a statement on its 5th run on a connection


def _backend_pid() -> int:
    with session_scope() as session:
        return int(session.scalar(text("SELECT pg_backend_pid()")))


def test_a_forked_process_does_not_use_its_parents_pooled_connection(postgres_url, settings_env):
    settings_env(DATABASE_URL=postgres_url)
    parent = _backend_pid()  # the connection is back in the pool, where a child would find it
    read, write = os.pipe()
    child_pid = os.fork()
    if child_pid == 0:  # the child: report its connection's server process, run enough to prepare, and leave
        try:
            mine = [_backend_pid() for _ in range(PREPARE_THRESHOLD + 1)]
            os.write(write, f"{mine[0]} {len(set(mine))}".encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(child_pid, 0)
    reported = os.read(read, 100).decode().split()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0 and reported, "the child failed before reporting"
    assert int(reported[0]) != parent, "the child used its parent's pooled connection"
    assert [_backend_pid() for _ in range(PREPARE_THRESHOLD + 1)] == [parent] * (PREPARE_THRESHOLD + 1)
