"""The operators' routes: a key with scope `operator` (made by `create-operator-key`, never by an organisation) creates
organisations with their first admin key, lists them, reads one with its usage and sets its quotas; an organisation's
keys, its admin's included, cannot; an operator's key reads nothing an organisation holds."""

from __future__ import annotations

import pytest

from tests.api.test_datasets import _jsonl, _upload

GB = 1024**3
QUOTAS = {"storage_gb": 0.5, "active_jobs": 2, "worker_minutes_per_day": 600}


@pytest.fixture
def operator(client) -> dict[str, str]:
    from app.db.operators import create_operator_key
    from app.db.session import session_scope

    with session_scope() as session:
        _row, clear = create_operator_key(session, "ops")
    return {"Authorization": f"Bearer {clear}"}


def _prefix(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")[:10]


def _create(client, operator, name: str, **more: object):
    return client.post("/v1/operator/organisations", headers=operator, json={"name": name, **more})


def test_an_operator_creates_an_organisation_whose_first_admin_key_works(client, operator):
    created = _create(client, operator, "acme", admin="ada")
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["name"] == "acme"
    assert body["quotas"] == {"storage_gb": None, "active_jobs": None, "worker_minutes_per_day": None}
    assert body["limits"] == {"storage_bytes": 0, "active_jobs": 0, "worker_minutes_per_day": 0}  # the settings
    key = body["admin_key"]
    assert (key["member"], key["name"]) == ("ada", "ada")
    assert key["scopes"] == ["read", "inference", "train", "models:write", "admin"]
    admin = {"Authorization": f"Bearer {key['key']}"}
    me = client.get("/v1/me", headers=admin).json()
    assert (me["organisation"], me["member"], me["role"]) == ("acme", "ada", "admin")
    assert client.get("/v1/datasets", headers=admin).json()["total"] == 0
    # The first member is named as the organisation when the request names none.
    assert _create(client, operator, "globex").json()["admin_key"]["member"] == "globex"


def test_a_name_taken_is_409_naming_it_and_a_bad_one_422(client, operator, make_key):
    make_key("initech")  # made by the command line's shortcut, create-key
    taken = _create(client, operator, "initech")
    assert taken.status_code == 409
    assert taken.json() == {"detail": "an organisation named 'initech' exists"}
    assert _create(client, operator, "operators").status_code == 409  # the operators' own
    for name, message in [
        (" acme", "name ' acme' begins or ends with whitespace"),
        ("ac\tme", "name 'ac\\tme' holds a control character"),
    ]:
        refused = _create(client, operator, name)
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"] == ["body", "name"]
        assert refused.json()["detail"][0]["msg"] == message
    for bad in ("", "x" * 101, 7):
        refused = _create(client, operator, bad)
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "name"], refused.text
    assert _create(client, operator, "acme", admin=" ada").json()["detail"][0]["loc"] == ["body", "admin"]
    assert _create(client, operator, "acme", owner="x").status_code == 422  # unknown fields


def test_the_list_is_every_organisation_but_the_operators_own_by_name(client, operator, make_key):
    make_key("zeta")
    _create(client, operator, "acme")
    page = client.get("/v1/operator/organisations", headers=operator).json()
    assert [o["name"] for o in page["data"]] == ["acme", "zeta"] and page["total"] == 2
    second = client.get("/v1/operator/organisations?limit=1&offset=1", headers=operator).json()
    assert [o["name"] for o in second["data"]] == ["zeta"]


def test_an_operator_sets_quotas_and_the_organisation_is_held_to_them(client, operator, make_key):
    alice = make_key("alice")
    org = client.get("/v1/operator/organisations/alice", headers=operator).json()  # by name, or by id
    assert org["usage"] == {"storage_bytes": 0, "active_jobs": 0, "worker_minutes_today": 0.0}
    data = _jsonl([("one", "eins"), ("two", "zwei")])
    quotas = {"storage_gb": len(data) / GB, "active_jobs": 2, "worker_minutes_per_day": 600}
    answer = client.put(f"/v1/operator/organisations/{org['id']}/quotas", headers=operator, json=quotas)
    assert answer.status_code == 200, answer.text
    assert answer.json()["quotas"] == quotas
    assert answer.json()["limits"] == {"storage_bytes": len(data), "active_jobs": 2, "worker_minutes_per_day": 600}
    usage = client.get("/v1/usage", headers=alice).json()
    assert (usage["storage_limit_bytes"], usage["active_jobs_limit"]) == (len(data), 2)
    assert _upload(client, alice, data).status_code == 201
    assert _upload(client, alice, data).status_code == 413
    read = client.get(f"/v1/operator/organisations/{org['id']}", headers=operator).json()
    assert read["usage"]["storage_bytes"] == len(data)
    # null puts the service's setting back (here unlimited)
    back = {"storage_gb": None, "active_jobs": None, "worker_minutes_per_day": None}
    assert client.put("/v1/operator/organisations/alice/quotas", headers=operator, json=back).json()["limits"] == {
        "storage_bytes": 0,
        "active_jobs": 0,
        "worker_minutes_per_day": 0,
    }


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("active_jobs", -1, "Input should be greater than or equal to 0"),
        ("active_jobs", 2**31, "Input should be less than or equal to 2147483647"),
        ("active_jobs", "5", "Input should be a valid integer"),
        ("active_jobs", 1.5, "Input should be a valid integer"),
        ("storage_gb", -0.5, "Input should be greater than or equal to 0"),
        ("storage_gb", 1e30, "Input should be less than or equal to 1073741824"),
        ("worker_minutes_per_day", True, "Input should be a valid integer"),
    ],
)
def test_a_bad_quota_is_422_naming_the_field_and_the_value(client, operator, make_key, field, value, message):
    make_key("alice")
    refused = client.put("/v1/operator/organisations/alice/quotas", headers=operator, json={**QUOTAS, field: value})
    assert refused.status_code == 422
    [error] = refused.json()["detail"]
    assert (error["loc"], error["msg"], error["input"]) == (["body", field], message, value)
    owner = client.get("/v1/operator/organisations/alice", headers=operator).json()
    assert owner["quotas"] == {"storage_gb": None, "active_jobs": None, "worker_minutes_per_day": None}  # unchanged


def test_every_quota_is_given_a_number_or_null(client, operator, make_key):
    make_key("alice")
    missing = client.put("/v1/operator/organisations/alice/quotas", headers=operator, json={"active_jobs": 1})
    assert missing.status_code == 422
    assert {tuple(e["loc"]) for e in missing.json()["detail"]} == {
        ("body", "storage_gb"),
        ("body", "worker_minutes_per_day"),
    }


def test_an_unknown_organisation_and_the_operators_own_are_404(client, operator):
    from app.db.access_tables import Owner
    from app.db.session import session_scope

    with session_scope() as session:
        home = session.query(Owner).filter_by(name="operators").one().id
    for organisation in ("nobody", home):
        answer = client.get(f"/v1/operator/organisations/{organisation}", headers=operator)
        assert answer.status_code == 404 and answer.json() == {"detail": f"organisation {organisation} not found"}
        put = client.put(f"/v1/operator/organisations/{organisation}/quotas", headers=operator, json=QUOTAS)
        assert put.status_code == 404


def test_an_organisations_admin_cannot_use_the_operators_routes(client, make_key):
    admin = make_key("acme")
    prefix = _prefix(admin)
    for method, path in [
        ("POST", "/v1/operator/organisations"),
        ("GET", "/v1/operator/organisations"),
        ("GET", "/v1/operator/organisations/acme"),
        ("PUT", "/v1/operator/organisations/acme/quotas"),
    ]:
        refused = client.request(method, path, headers=admin, json={"name": "x", **QUOTAS})
        assert refused.status_code == 403
        assert refused.json()["detail"].startswith(f"API key {prefix}... lacks scope 'operator', which {method} ")


def test_no_organisation_key_is_given_the_operator_scope(client, make_key):
    admin = make_key("acme")
    refused = client.post("/v1/keys", headers=admin, json={"name": "up", "scopes": ["read", "operator"]})
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": "scope 'operator' is the service's operators' (app.cli create-operator-key): no key of "
        "organisation 'acme' may hold it"
    }
    # Nor is any member made an operator, whose keys could hold it.
    member = client.post("/v1/members", headers=admin, json={"name": "eve", "role": "operator"})
    assert member.status_code == 422 and member.json()["detail"][0]["loc"] == ["body", "role"]
    assert client.get("/v1/keys", headers=admin).json()["total"] == 1


def test_an_operators_key_reads_nothing_an_organisation_holds(client, operator, make_key):
    alice = make_key("alice")
    dataset = _upload(client, alice, _jsonl([("one", "eins")])).json()["id"]
    for path in (
        "/v1/datasets",
        f"/v1/datasets/{dataset}",
        "/v1/jobs",
        "/v1/models",
        "/v1/usage",
        "/v1/members",
        "/v1/audit",
        "/v1/webhooks",
    ):
        refused = client.get(path, headers=operator)
        assert refused.status_code == 403, path
        assert "lacks scope" in refused.json()["detail"] and "its scopes: operator" in refused.json()["detail"]
    # What it may read of alice is what it manages: the name, quotas, limits and usage.
    assert set(client.get("/v1/operator/organisations/alice", headers=operator).json()) == {
        "id",
        "name",
        "created_at",
        "quotas",
        "limits",
        "usage",
    }
    # Its own keys: it makes more operator keys, never an organisation's.
    me = client.get("/v1/me", headers=operator).json()
    assert (me["organisation"], me["role"], me["scopes"]) == ("operators", "operator", ["operator"])
    more = client.post("/v1/keys", headers=operator, json={"name": "ops-2"})
    assert more.status_code == 201 and more.json()["scopes"] == ["operator"]
    assert client.post("/v1/keys", headers=operator, json={"name": "x", "scopes": ["read"]}).status_code == 403


def test_each_change_is_in_the_operators_trail_and_the_organisations(client, operator):
    created = _create(client, operator, "acme").json()
    admin = {"Authorization": f"Bearer {created['admin_key']['key']}"}
    put = client.put(f"/v1/operator/organisations/{created['id']}/quotas", headers=operator, json=QUOTAS)
    assert put.status_code == 200
    client.put(f"/v1/operator/organisations/{created['id']}/quotas", headers=operator, json=QUOTAS)  # no change
    events = client.get("/v1/audit", headers=admin).json()["data"]
    assert [e["action"] for e in events] == ["organisation.quotas_changed", "organisation.created"]
    assert events[0]["details"]["to"] == QUOTAS and events[0]["key_prefix"] == _prefix(operator)
    assert events[1]["details"] == {
        "name": "acme",
        "admin": "acme",
        "admin_key_prefix": created["admin_key"]["prefix"],
    }
    from app.db.audit_tables import AuditEvent
    from app.db.session import session_scope

    with session_scope() as session:
        trails = session.query(AuditEvent.owner_id, AuditEvent.action).all()
    assert sorted(action for owner, action in trails if owner != created["id"]) == [
        "organisation.created",
        "organisation.quotas_changed",
    ]


def test_the_command_line_makes_operator_keys_and_keeps_them_out_of_organisations(client, make_key, capsys):
    from app.cli import main

    main(["create-operator-key", "ops", "--member", "olga"])
    out = capsys.readouterr().out.strip().splitlines()
    assert "for operator 'olga' of 'operators' with scope operator" in out[0]
    key = {"Authorization": f"Bearer {out[-1]}"}
    assert client.get("/v1/operator/organisations", headers=key).status_code == 200
    make_key("acme")
    with pytest.raises(SystemExit, match="organisation 'acme' has members who are not operators"):
        main(["create-operator-key", "ops", "--home", "acme"])
    with pytest.raises(SystemExit, match="organisation 'operators' holds the service's operators"):
        main(["create-key", "intruder", "--owner", "operators"])
    with pytest.raises(SystemExit) as refused:
        main(["create-key", "x", "--role", "operator"])
    assert refused.value.code == 2  # not one of the organisation's roles
