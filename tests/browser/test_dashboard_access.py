"""The dashboard shows what the signed-in key may do: a viewer's read-only key sees its organisation, member, role and
scopes, a note of what it may not do, and no control it may not use (New job and Webhooks links hidden, the upload,
clean and delete controls of datasets disabled naming the scope, the new-job page replaced by a note); an admin key
of the same organisation sees them all."""

from __future__ import annotations

import json

import httpx
import pytest

from bench.harness.stack import run_cli


@pytest.fixture(scope="module")
def viewer_key(stack) -> str:
    out = run_cli(stack.env, "create-key", "vera-laptop", "--owner", "local", "--member", "vera", "--role", "viewer")
    return out.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def dataset_id(stack) -> str:
    """A dataset the admin uploaded, for the viewer to look at."""
    corpus = "".join(json.dumps({"source": f"{n} pears", "target": f"{n} Birnen"}) + "\n" for n in range(20))
    response = httpx.post(
        f"{stack.url}/v1/datasets",
        headers={"Authorization": f"Bearer {stack.key}"},
        data={"name": "pears", "kind": "parallel"},
        files={"file": ("pears.jsonl", corpus.encode())},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_a_read_only_key_sees_what_it_may_do_and_no_control_it_may_not_use(page, viewer_key, dataset_id):
    p = page.page
    page.sign_in(viewer_key)
    p.locator("#access-note").wait_for()
    assert p.locator("#whoami").inner_text().startswith("vera @ local · viewer")
    assert p.locator("#key-scopes .scope-chip").all_inner_texts() == ["read"]
    note = p.locator("#access-note").inner_text()
    assert note.startswith("Read-only key: it may not run models, train, change models, administer.")
    assert "(your role: viewer)" in note
    nav = p.locator("#nav")
    assert nav.get_by_role("link", name="Jobs").is_visible()
    assert not nav.get_by_role("link", name="New job").is_visible()
    assert not nav.get_by_role("link", name="Webhooks").is_visible()
    p.get_by_role("heading", name="Jobs").wait_for()
    assert not p.locator("#view").get_by_role("link", name="New job").is_visible()

    p.get_by_role("link", name="Datasets").click()
    p.locator(f'tr[data-dataset="{dataset_id}"]').wait_for()
    upload = p.locator("#dataset-upload")
    assert upload.is_disabled() and "needs scope train; this key has read" in (upload.get_attribute("title") or "")
    assert "Not with this key: needs scope train" in p.locator("#dataset-upload-form").inner_text()
    page.screenshot("access-read-only-datasets")

    p.goto(f"{page.stack.url}/dashboard#/datasets/{dataset_id}")
    delete = p.locator("#dataset-delete")
    delete.wait_for()
    assert delete.is_disabled()

    p.goto(f"{page.stack.url}/dashboard#/new")
    needs = p.locator("#page-needs-scope")
    needs.wait_for()
    assert needs.inner_text().startswith("This page needs scope train; this key has read.")
    p.goto(f"{page.stack.url}/dashboard#/jobs")
    p.get_by_role("heading", name="Jobs").wait_for()
    page.screenshot("access-read-only")


def test_an_admin_key_sees_every_control(page):
    p = page.page
    page.sign_in()
    p.get_by_role("heading", name="Jobs").wait_for()
    assert p.locator("#key-scopes .scope-chip").all_inner_texts() == [
        "read",
        "run models",
        "train",
        "change models",
        "administer",
    ]
    assert p.locator("#access").is_hidden()
    assert p.locator("#nav").get_by_role("link", name="New job").is_visible()
    assert p.locator("#nav").get_by_role("link", name="Webhooks").is_visible()
    p.get_by_role("link", name="Datasets").click()
    p.locator("#dataset-upload").wait_for()
    assert p.locator("#dataset-upload").is_enabled()
