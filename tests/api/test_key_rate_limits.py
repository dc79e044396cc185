"""A key's own requests per minute (PATCH /v1/keys/{id}, or on creation): set by the organisation's admins only,
shown with the key, bounded (422 naming the value), audited. That the limiter honours it:
tests/security/test_rate_limits.py."""

from __future__ import annotations

import pytest

from tests.api.test_audit import _events
from tests.api.test_keys import _prefix


@pytest.fixture
def org_key(client):
    """`org_key(member, role, owner="acme")`: the headers of a new key of that member (created with that role if new)
    of organisation `owner`, made in the database as the CLI does."""
    from app.db.keys import create_key
    from app.db.session import session_scope

    def make(member: str, role: str, owner: str = "acme") -> dict[str, str]:
        with session_scope() as session:
            _row, clear = create_key(session, f"{member}-key", owner, member_name=member, role=role)
        return {"Authorization": f"Bearer {clear}"}

    return make


def _key_of(client, admin: dict[str, str], member: str) -> dict:
    return next(k for k in client.get("/v1/keys", headers=admin).json()["data"] if k["member"] == member)


def test_an_admin_sets_a_keys_limit_and_it_is_shown_with_the_key(client, org_key):
    admin, member = org_key("ada", "admin"), org_key("max", "member")
    max_key = _key_of(client, admin, "max")
    assert max_key["rate_limit_per_minute"] is None  # the service's RATE_LIMIT_PER_MINUTE
    response = client.patch(f"/v1/keys/{max_key['id']}", headers=admin, json={"rate_limit_per_minute": 5000})
    assert response.status_code == 200, response.text
    assert (response.json()["id"], response.json()["rate_limit_per_minute"]) == (max_key["id"], 5000)
    (own,) = client.get("/v1/keys", headers=member).json()["data"]  # the member sees it on its own key
    assert own["rate_limit_per_minute"] == 5000
    assert _key_of(client, admin, "ada")["rate_limit_per_minute"] is None  # the other key keeps the default
    back = client.patch(f"/v1/keys/{max_key['id']}", headers=admin, json={"rate_limit_per_minute": None})
    assert back.status_code == 200 and back.json()["rate_limit_per_minute"] is None


def test_a_revoked_keys_limit_cannot_change(client, org_key):
    """Revoked keys stay listed, but nothing about them changes: 409 naming the key, the limit as it was."""
    admin, _ = org_key("ada", "admin"), org_key("max", "member")
    max_key = _key_of(client, admin, "max")
    assert client.delete(f"/v1/keys/{max_key['id']}", headers=admin).status_code == 200
    response = client.patch(f"/v1/keys/{max_key['id']}", headers=admin, json={"rate_limit_per_minute": 5000})
    assert response.status_code == 409 and f"{max_key['prefix']}... ({max_key['id']}) is revoked" in response.text
    assert _key_of(client, admin, "max")["rate_limit_per_minute"] is None


def test_a_member_cannot_set_a_limit_even_on_its_own_key(client, org_key):
    admin, member = org_key("ada", "admin"), org_key("max", "member")
    max_id = _key_of(client, admin, "max")["id"]
    refused = client.patch(f"/v1/keys/{max_id}", headers=member, json={"rate_limit_per_minute": 100_000})
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        f"API key {_prefix(member)}... lacks scope 'admin', which PATCH /v1/keys/{max_id} needs; its scopes: read, "
        "inference, train, models:write"
    )
    assert _key_of(client, admin, "max")["rate_limit_per_minute"] is None


def test_another_organisations_key_is_404(client, org_key):
    admin = org_key("ada", "admin")
    ada_id = _key_of(client, admin, "ada")["id"]
    other = org_key("zed", "admin", owner="other")
    response = client.patch(f"/v1/keys/{ada_id}", headers=other, json={"rate_limit_per_minute": 1})
    assert response.status_code == 404 and response.json() == {"detail": f"API key {ada_id} not found"}
    unknown = client.patch(f"/v1/keys/{'0' * 8}", headers=admin, json={"rate_limit_per_minute": 1})
    assert unknown.status_code == 404
    assert _key_of(client, admin, "ada")["rate_limit_per_minute"] is None


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"rate_limit_per_minute": 0}, "rate_limit_per_minute", "rate_limit_per_minute 0 is outside 1-1000000"),
        ({"rate_limit_per_minute": -5}, "rate_limit_per_minute", "rate_limit_per_minute -5 is outside 1-1000000"),
        ({"rate_limit_per_minute": 10**6 + 1}, "rate_limit_per_minute", "rate_limit_per_minute 1000001 is outside"),
        ({"rate_limit_per_minute": "60"}, "rate_limit_per_minute", "valid integer"),  # strict: no string for a number
        ({"rate_limit_per_minute": 1.5}, "rate_limit_per_minute", "valid integer"),
        ({}, "rate_limit_per_minute", "Field required"),
        ({"rate_limit_per_minute": 10, "scopes": ["read"]}, "scopes", "Extra inputs are not permitted"),
    ],
)
def test_bad_limits_are_422_naming_the_value(client, org_key, body, field, words):
    admin = org_key("ada", "admin")
    ada_id = _key_of(client, admin, "ada")["id"]
    response = client.patch(f"/v1/keys/{ada_id}", headers=admin, json=body)
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert any(e["loc"][:2] == ["body", field] and words in e["msg"] for e in errors), errors
    assert _key_of(client, admin, "ada")["rate_limit_per_minute"] is None


def test_a_key_is_created_with_a_limit_by_an_admin_only(client, org_key):
    admin, member = org_key("ada", "admin"), org_key("max", "member")
    created = client.post("/v1/keys", headers=admin, json={"name": "batch", "rate_limit_per_minute": 20_000})
    assert created.status_code == 201, created.text
    assert created.json()["rate_limit_per_minute"] == 20_000
    listed = {k["name"]: k["rate_limit_per_minute"] for k in client.get("/v1/keys", headers=admin).json()["data"]}
    assert listed == {"batch": 20_000, "ada-key": None, "max-key": None}
    refused = client.post("/v1/keys", headers=member, json={"name": "mine", "rate_limit_per_minute": 20_000})
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        f"API key {_prefix(member)}... lacks scope 'admin', which a key's own rate_limit_per_minute (20000) needs; "
        "its scopes: read, inference, train, models:write"
    )
    out_of_bounds = client.post("/v1/keys", headers=admin, json={"name": "x", "rate_limit_per_minute": 0})
    assert out_of_bounds.status_code == 422 and "rate_limit_per_minute 0 is outside" in out_of_bounds.text
    assert len(client.get("/v1/keys", headers=admin).json()["data"]) == 3  # neither refused key was made


def test_a_changed_limit_is_audited_with_before_and_after(client, org_key):
    admin = org_key("ada", "admin")
    batch = client.post("/v1/keys", headers=admin, json={"name": "batch", "rate_limit_per_minute": 50}).json()
    for value in (3, 3, None):  # the second 3 changes nothing and records nothing
        response = client.patch(f"/v1/keys/{batch['id']}", headers=admin, json={"rate_limit_per_minute": value})
        assert response.status_code == 200, response.text
    client.patch(f"/v1/keys/{batch['id']}", headers=admin, json={"rate_limit_per_minute": 0})  # 422: nothing
    events = list(reversed(_events(client, admin, object_id=batch["id"])))
    assert [e["action"] for e in events] == ["key.created", "key.rate_limit_changed", "key.rate_limit_changed"]
    assert events[0]["details"]["rate_limit_per_minute"] == 50
    assert [e["details"] for e in events[1:]] == [
        {"name": "batch", "prefix": batch["prefix"], "from": 50, "to": 3},
        {"name": "batch", "prefix": batch["prefix"], "from": 3, "to": None},
    ]
    assert {e["member_name"] for e in events} == {"ada"}
