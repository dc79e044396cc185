"""The access commands of the client CLI (whoami, keys, create-api-key, revoke-api-key, key-rate-limit, members,
member-add, member-role) against the API in process, and the administration command create-key with a role and
scopes."""

from __future__ import annotations

import json

import pytest


def _key(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def test_whoami_names_organisation_member_role_and_scopes(cli, alice):
    code, out, _ = cli("whoami", "--key", _key(alice))
    assert code == 0
    assert out.splitlines()[0] == "organisation alice, member alice (admin)"
    assert out.splitlines()[1].endswith(": read, inference, train, models:write, admin")
    code, out, _ = cli("whoami", "--key", _key(alice), "--json")
    assert json.loads(out)["role"] == "admin"


def test_create_list_and_revoke_a_key(cli, alice):
    admin = _key(alice)
    code, out, err = cli(
        "create-api-key", "ci", "--scope", "read", "--scope", "inference", "--expires-in-days", "7", "--key", admin
    )
    assert code == 0, err
    ci = out.strip().splitlines()[-1]
    assert ci.startswith("tsk_") and "with read, inference, expires" in err
    code, out, _ = cli("whoami", "--key", ci)
    assert out.splitlines()[1].endswith(": read, inference") and out.splitlines()[-1].startswith("expires ")
    code, out, _ = cli("keys", "--key", admin, "--json")
    keys = {k["name"]: k for k in map(json.loads, out.splitlines())}
    assert set(keys) == {"alice", "ci"} and keys["ci"]["scopes"] == ["read", "inference"]
    code, out, _ = cli("keys", "--key", admin)
    assert out.splitlines()[0].split()[:5] == ["ID", "PREFIX", "NAME", "MEMBER", "SCOPES"]
    code, out, err = cli("revoke-api-key", keys["ci"]["id"], "--key", admin)
    assert code == 0, err
    assert out.startswith(f"revoked key {keys['ci']['prefix']}...")
    code, _, err = cli("whoami", "--key", ci)
    assert code == 1 and "error 401: API key" in err and "was revoked" in err


def test_an_admin_sets_a_keys_rate_limit(cli, alice):
    admin = _key(alice)
    code, out, err = cli("create-api-key", "batch", "--scopes", "read,inference", "--key", admin)
    assert code == 0, err
    batch = out.strip().splitlines()[-1]
    code, out, _ = cli("keys", "--key", admin, "--json")
    batch_id = next(k["id"] for k in map(json.loads, out.splitlines()) if k["name"] == "batch")
    code, out, err = cli("key-rate-limit", batch_id, "5000", "--key", admin)
    assert code == 0, err
    assert out.strip().endswith("(batch) may make 5000 requests per minute")
    code, out, _ = cli("keys", "--key", admin)
    header, *rows = out.splitlines()
    assert header.split()[-1] == "LIMIT/MIN"
    assert sorted(row.split()[-1] for row in rows) == ["-", "5000"]
    code, out, err = cli("key-rate-limit", batch_id, "default", "--key", admin)
    assert code == 0 and out.strip().endswith("may make the service's RATE_LIMIT_PER_MINUTE requests per minute")
    for value, words in (("0", "rate_limit_per_minute 0 is outside 1-1000000"), ("lots", "'lots' is neither")):
        code, _, err = cli("key-rate-limit", batch_id, value, "--key", admin)
        assert code == 2 and words in err, err
    code, _, err = cli("key-rate-limit", batch_id, "10", "--key", batch)  # a key without admin: the API refuses
    assert code == 1 and "error 403: API key" in err and "lacks scope 'admin'" in err, err


def test_a_refused_key_request_names_why(cli, alice):
    code, out, err = cli("create-api-key", "x", "--scope", "root", "--key", _key(alice))
    assert code == 2 and "unknown scope 'root': expected some of read, inference, train, models:write, admin" in err
    code, out, err = cli("member-add", "vera", "--role", "viewer", "--key", _key(alice))
    assert code == 0
    code, out, err = cli("create-api-key", "x", "--member", "vera", "--scope", "train", "--key", _key(alice))
    assert code == 1 and "error 403: member 'vera' is a viewer, whose keys may hold only read: not train" in err


def test_members_and_roles(cli, alice):
    admin = _key(alice)
    code, member_id, _ = cli("member-add", "max", "--key", admin)
    assert code == 0
    code, out, _ = cli("members", "--key", admin)
    assert [line.split()[1:] for line in out.splitlines()[1:]] == [["alice", "admin"], ["max", "member"]]
    code, out, _ = cli("member-role", member_id.strip(), "viewer", "--key", admin)
    assert code == 0 and out.strip() == "member max is now a viewer"


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--role", "viewer", "--scope", "train"], "whose keys may hold only read: not train"),
        (["--role", "viewer"], "with read;"),
        (["--scope", "read", "--scope", "train"], "with read, train;"),
        (["--scopes", "train,read"], "with read, train;"),
    ],
)
def test_create_key_takes_a_role_and_scopes(client, argv, words, capsys):
    from app.cli import main

    try:
        main(["create-key", "bot", "--owner", "acme", "--member", "bot", *argv])
        code = 0
    except SystemExit as exc:
        code = 1 if exc.code else 0
        print(exc.code)
    out = capsys.readouterr().out
    assert words in out, out
    assert code == (1 if "not" in words else 0)


@pytest.mark.parametrize("days", ["0", "3651", "99999999999", "abc"])
def test_an_expiry_out_of_bounds_is_a_usage_error_naming_it(cli, alice, days):
    code, _, err = cli("create-api-key", "x", "--expires-in-days", days, "--key", _key(alice))
    assert code == 2 and f"expiry {days if days == 'abc' else int(days)}" in err.replace("'abc'", "abc")
