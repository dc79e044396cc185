"""Members' roles under concurrent requests, on PostgreSQL: the organisation keeps an admin whatever order two admins'
requests interleave in (app/services/members.py counts its admins under a lock on the organisation's row)."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import event

from tests.security.conftest import bearer

ROLE_WRITE = re.compile(r"\s*UPDATE members SET role\b", re.IGNORECASE)
WINDOW_SECONDS = 3  # how long a request about to write a role waits for the other to get as far


def test_two_admins_demoting_each_other_at_once_leave_an_admin(pg_client):
    """Fault: Ada and Bob, the organisation's two admins, demote each other at the same moment; each request counts
    two admins before either writes, both demotions commit, and no admin is left. Pass: the second request counts
    under the organisation's lock, once the first has committed: 409 naming the last admin, and one admin remains.

    Each request, about to write the role, waits for the other to get as far (WINDOW_SECONDS at most): the window
    between counting and writing, a few milliseconds in production, is held open so the interleaving is certain."""
    from app.db.session import get_engine

    ada = bearer("acme")  # the organisation's first member, an admin, named as it is: acme
    (ada_id,) = [member["id"] for member in pg_client.get("/v1/members", headers=ada).json()["data"]]
    bob_id = pg_client.post("/v1/members", headers=ada, json={"name": "bob", "role": "admin"}).json()["id"]
    bob_key = pg_client.post("/v1/keys", headers=ada, json={"name": "bob-key", "member": "bob"}).json()
    bob = {"Authorization": f"Bearer {bob_key['key']}"}
    assert pg_client.get("/v1/members", headers=bob).status_code == 200  # an admin now, and remembered as one

    both_there = threading.Barrier(2)

    def hold_before_the_write(_conn, _cursor, statement, *_args) -> None:
        if ROLE_WRITE.match(statement):
            try:
                both_there.wait(timeout=WINDOW_SECONDS)
            except threading.BrokenBarrierError:  # the other waits on the lock (or was refused): go on alone
                pass

    event.listen(get_engine(), "before_cursor_execute", hold_before_the_write)
    try:
        with ThreadPoolExecutor(2) as pool:
            demotions = [
                pool.submit(pg_client.patch, f"/v1/members/{target}", headers=caller, json={"role": "member"})
                for caller, target in ((ada, bob_id), (bob, ada_id))
            ]
            answers = [demotion.result() for demotion in demotions]
    finally:
        event.remove(get_engine(), "before_cursor_execute", hold_before_the_write)
    assert sorted(answer.status_code for answer in answers) == [200, 409], [answer.text for answer in answers]
    (refused,) = [answer for answer in answers if answer.status_code == 409]
    assert refused.json()["detail"].endswith("is the organisation's last admin: make another admin first")
    admin = ada if answers[0].status_code == 200 else bob
    members = pg_client.get("/v1/members", headers=admin).json()["data"]
    assert sorted(member["role"] for member in members) == ["admin", "member"]
