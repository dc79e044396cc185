"""Corrections in Chromium: a translation corrected in the playground, listed on the model's Corrections panel (and
deleted there), and the Adapt form starting the job that fine-tunes the model on them, linked from the panel."""

from __future__ import annotations

import time

from model.data.demo import write_demo_files
from tests.browser.support import api


def _trained_model(stack, tmp_path) -> str:
    """A tiny numbers model (en -> de), trained over the API for a few steps."""
    files = write_demo_files(tmp_path)
    client = api(stack)
    with open(files["translation_train"], "rb") as f:
        dataset = client.post("/v1/datasets", data={"name": "numbers", "kind": "parallel"}, files={"file": f}).json()
    body = {
        "objective": "translation",
        "dataset_id": dataset["id"],
        "model": {"preset": "tiny", "vocab_size": 500},
        "training": {"max_steps": 30, "warmup_steps": 10, "eval_every": 30, "checkpoint_every": 30},
    }
    job = client.post("/v1/jobs", json=body).json()
    deadline = time.monotonic() + 180
    while (done := client.get(f"/v1/jobs/{job['id']}").json())["status"] not in ("succeeded", "failed", "cancelled"):
        assert time.monotonic() < deadline, done
        time.sleep(1)
    assert done["status"] == "succeeded", done
    return done["model_id"]


def test_a_correction_sent_from_the_playground_is_listed_and_adapts_the_model(page, tmp_path):
    p, stack = page.page, page.stack
    model_id = _trained_model(stack, tmp_path)
    page.sign_in()
    page.open(f"#/models/{model_id}/playground")
    p.get_by_label("Text", exact=True).fill("forty two")
    p.get_by_role("button", name="Translate", exact=True).click()
    p.locator(".correct-open").first.click()
    p.get_by_label("corrected translation").fill("zweiundvierzig")
    p.get_by_role("button", name="Send correction").click()
    p.locator(".correct-saved").wait_for()
    page.screenshot("model-correction")

    p.get_by_role("tab", name="Corrections").click()
    p.locator("#corrections-table").wait_for()
    assert p.locator("#corrections-total").inner_text() == "1"
    row = p.locator("#corrections-table tbody tr")
    assert row.count() == 1 and "forty two" in row.inner_text() and "zweiundvierzig" in row.inner_text()
    p.get_by_label("Publish as").fill("numbers-corrected")  # the model has no name of its own
    p.get_by_role("button", name="Adapt").click()
    result = p.locator("#adapt-result")
    result.wait_for()
    assert "Adapting to 1 correction" in result.inner_text() and "numbers-corrected" in result.inner_text()
    job_link = result.get_by_role("link", name="job")
    job_id = job_link.get_attribute("href").rsplit("/", 1)[-1]
    page.screenshot("model-corrections")
    client = api(stack)
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["init_model_id"] == model_id and job["register_as"] == "numbers-corrected" and job["mix_dataset_id"]
    client.post(f"/v1/jobs/{job_id}/cancel")  # the adaptation's training: tests/e2e/test_corrections.py

    row.get_by_role("button", name="Delete").click()
    p.locator("#corrections-total", has_text="0").wait_for()
    assert p.locator("#adapt-start").is_disabled()
