"""A NUL character (U+0000) anywhere a request carries text is a 422 naming where it is. PostgreSQL's text cannot
hold one, so before this a NUL that reached the database was a 500 in production (SQLite stores it, so these
requests would succeed here without the guard)."""

from __future__ import annotations

import pytest

from tests.api.test_job_labels import job_rows, refused_by_patch_and_post

NUL = "may not hold a NUL character (\\u0000)"


@pytest.mark.parametrize(
    ("query", "loc"),
    [
        ("tag=ok&tag=a%00b", ["query", "tag"]),  # the request schemathesis found
        ("status=queued&objective=translation%00", ["query", "objective"]),
        ("tag%00=x", ["query", "tag"]),
    ],
)
def test_a_nul_in_a_query_parameter_is_422_naming_it(client, alice, query, loc):
    response = client.get(f"/v1/jobs?{query}", headers=alice)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == [{"type": "value_error", "loc": loc, "msg": f"{loc[-1]} {NUL}"}]


def test_a_nul_in_a_path_or_a_series_name_is_422(client, alice):
    job_id = job_rows("alice", 1)[0]
    assert client.get(f"/v1/jobs/{job_id}/metrics?names=train_loss,a%00", headers=alice).status_code == 422
    response = client.get(f"/v1/jobs/{job_id}%00", headers=alice)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["path"]


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"name": "run\x001"}, ["body", "name"]),
        ({"note": "a\x00"}, ["body", "note"]),
        ({"tags": ["ok", "b\x00"]}, ["body", "tags"]),
    ],
)
def test_a_nul_in_a_json_body_field_is_422_naming_the_field_and_nothing_is_written(
    client, alice, parallel_id, body, loc
):
    refused_by_patch_and_post(client, alice, parallel_id, body, loc, NUL)
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 1


def test_a_nul_in_a_dataset_name_is_422(client, alice):
    files = {"file": ("c.jsonl", b'{"source": "a", "target": "b"}\n')}
    response = client.post("/v1/datasets", data={"name": "x\x00", "kind": "parallel"}, files=files, headers=alice)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "name"]


def test_tag_filters_are_checked_as_tags_are_and_documented_with_their_pattern(client, alice):
    response = client.get("/v1/jobs?tag=has space", headers=alice)
    assert response.status_code == 422 and "tag 'has space' must be 1 to 64 characters" in response.text
    assert client.get("/v1/models?tag=é", headers=alice).status_code == 422
    schema = client.get("/openapi.json").json()
    tag = next(p for p in schema["paths"]["/v1/jobs"]["get"]["parameters"] if p["name"] == "tag")
    assert tag["schema"]["anyOf"][0]["items"]["pattern"] == "^[A-Za-z0-9\\-_.:/]{1,64}$"
