"""The Audit page: an admin key lists its organisation's audit trail, newest first, and filters it; a key without
scope admin has no Audit link and gets a note instead of the page."""

from __future__ import annotations

import httpx
import pytest

from bench.harness.stack import run_cli


@pytest.fixture(scope="module")
def changes(stack) -> list[str]:
    """Members added and a key created by the admin: three audit events."""
    headers = {"Authorization": f"Bearer {stack.key}"}
    names = ["ines", "omar"]
    for name in names:
        response = httpx.post(f"{stack.url}/v1/members", headers=headers, json={"name": name}, timeout=30)
        assert response.status_code == 201, response.text
    created = httpx.post(f"{stack.url}/v1/keys", headers=headers, json={"name": "ci", "scopes": ["read"]}, timeout=30)
    assert created.status_code == 201, created.text
    return names


def test_an_admin_sees_the_trail_and_filters_it(page, changes):
    p = page.page
    page.sign_in()
    p.get_by_role("link", name="Audit").click()
    p.get_by_role("heading", name="Audit").wait_for()
    p.locator('#audit-table tr[data-action="key.created"]').wait_for()
    actions = p.locator("#audit-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.action)")
    assert actions[:3] == ["key.created", "member.added", "member.added"]  # newest first
    first = p.locator('#audit-table tr[data-action="member.added"]').last.inner_text()
    assert "ines" in first and "127.0.0.1" in first
    page.screenshot("audit")
    p.locator("#audit-action").fill("member.added")
    p.get_by_role("button", name="Filter").click()
    p.get_by_text("1–2 of 2").wait_for()
    assert p.locator("#audit-table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.action)") == [
        "member.added",
        "member.added",
    ]
    p.locator("#audit-action").fill("job.exploded")
    p.get_by_role("button", name="Filter").click()
    p.get_by_text("unknown action 'job.exploded'").wait_for()


def test_a_key_without_admin_has_no_audit_page(page, stack):
    out = run_cli(stack.env, "create-key", "mia-laptop", "--owner", "local", "--member", "mia", "--role", "member")
    p = page.page
    page.sign_in(out.strip().splitlines()[-1])
    p.get_by_role("heading", name="Jobs").wait_for()
    assert not p.locator("#nav").get_by_role("link", name="Audit").is_visible()
    p.goto(f"{page.stack.url}/dashboard#/audit")
    needs = p.locator("#page-needs-scope")
    needs.wait_for()
    assert needs.inner_text().startswith("This page needs scope admin")
