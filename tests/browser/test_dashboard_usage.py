"""The jobs page's usage panel: the organisation's bytes stored, active jobs and worker minutes today, each against
its quota (QUOTA_* settings here), or "no limit"."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.browser.conftest import serve


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("usage"), QUOTA_STORAGE_GB="1", QUOTA_ACTIVE_JOBS="4") as started:
        yield started


def test_the_jobs_page_shows_usage_against_the_quotas(page, stack):
    corpus = "".join(json.dumps({"source": f"{n} pears", "target": f"{n} Birnen"}) + "\n" for n in range(20))
    uploaded = httpx.post(
        f"{stack.url}/v1/datasets",
        headers={"Authorization": f"Bearer {stack.key}"},
        data={"name": "pears", "kind": "parallel"},
        files={"file": ("pears.jsonl", corpus.encode())},
        timeout=30,
    )
    assert uploaded.status_code == 201, uploaded.text
    p = page.page
    page.sign_in()
    p.locator("#usage-storage").wait_for()
    assert p.locator("#usage-storage .usage-value").inner_text() == f"{len(corpus)} B of 1.0 GiB"
    assert p.locator("#usage-jobs .usage-value").inner_text() == "0 of 4"
    assert p.locator("#usage-minutes .usage-value").inner_text() == "0 · no limit"
    page.screenshot("usage")
