"""The dashboard's webhooks page in Chromium, on an embedded service of its own that may send to 127.0.0.1 and
retries after 1 s: registering an endpoint shows its secret once, a refused URL says why, a test event reaches a
real receiver (which verifies it with that secret) after one failed attempt, and the endpoint is disabled and
deleted from its card."""

from __future__ import annotations

import pytest

from tests.browser.conftest import serve
from tests.support.receiver import Reply, receiver


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    settings = {"WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_RETRY_SCHEDULE": "1,1", "WEBHOOK_TIMEOUT_SECONDS": "2"}
    with serve(tmp_path_factory.mktemp("webhooks"), **settings) as started:
        yield started


def test_the_webhooks_page_registers_tests_disables_and_deletes_an_endpoint(page):
    p = page.page
    page.sign_in()
    p.get_by_role("link", name="Webhooks").click()
    p.get_by_text("No endpoints yet").wait_for()

    p.get_by_label("Receiver URL").fill("ftp://example.org/in")
    p.get_by_role("button", name="Add endpoint").click()
    refused = p.locator("#webhook-form-status .error")
    refused.wait_for()
    assert "url 'ftp://example.org/in': the scheme must be http or https, not 'ftp'" in refused.inner_text()

    with receiver(Reply(500, body=b"warming up"), Reply(200)) as r:
        p.get_by_label("Receiver URL").fill(r.url)
        p.get_by_label("Description").fill("build notifier")
        p.locator(".event-choice", has_text="model.registered").locator("input").check()
        p.get_by_role("button", name="Add endpoint").click()
        secret = p.locator("#webhook-secret pre.secret")
        secret.wait_for()
        assert secret.inner_text().startswith("whsec_")
        card = p.locator("section.webhook")
        card.wait_for()
        assert card.locator(".tag").all_inner_texts() == [
            "job.succeeded",
            "job.failed",
            "job.cancelled",
            "model.registered",
        ]
        card.get_by_text("No deliveries yet.").wait_for()  # the card's deliveries load after the card itself
        assert "build notifier" in card.inner_text()

        card.get_by_role("button", name="Send test event").click()
        delivered = card.locator('tr[data-delivery][data-status="succeeded"]')
        delivered.wait_for(timeout=30_000)  # the first attempt gets a 500; the retry 1 s later succeeds
        assert delivered.locator(".delivery-answer").inner_text().startswith("HTTP 200")
        assert "2/3" in delivered.inner_text() and "webhook.test" in delivered.inner_text()
        (payload, again) = r.verified(secret.inner_text().strip())
        assert payload == again and payload["type"] == "webhook.test"
        page.screenshot("webhooks")

        card.get_by_role("button", name="Disable").click()
        p.locator('section.webhook[data-enabled="false"]').wait_for()
        assert p.locator("section.webhook").get_by_role("button", name="Send test event").is_disabled()

        p.locator("section.webhook").get_by_role("button", name="Delete").click()
        p.locator("section.webhook").get_by_role("button", name="Delete it and its deliveries").click()
        p.get_by_text("No endpoints yet").wait_for()
