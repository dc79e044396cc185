"""A body the API cannot decode at all is the 422 every other bad body gets, naming the body and why, never a 400
that the OpenAPI does not declare (found by the OpenAPI fuzzing: JSON bytes that are not UTF-8)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("method", "path", "content_type", "body"),
    [
        ("PATCH", "/v1/keys/{key}", "application/json", b"9^\x0b\xff\xfe{\xc3("),  # not UTF-8
        ("POST", "/v1/jobs", "application/json", b"\x80\x81{}"),
    ],
)
def test_an_undecodable_body_is_422_naming_the_body(client, alice, method, path, content_type, body):
    key_id = client.get("/v1/keys", headers=alice).json()["data"][0]["id"]
    response = client.request(
        method, path.format(key=key_id), content=body, headers={**alice, "Content-Type": content_type}
    )
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body"] and "UTF-8" in error["msg"], error
