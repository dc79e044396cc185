"""The new-job form in a real browser: the time budget's blank settings and the worker's choice, a job that waits
for a GPU or a second host, names and tags, and API errors shown as readable messages."""

from __future__ import annotations

import re
import time

from bench.harness.stack import wait_for
from tests.browser.support import api, fill_training_form, new_job_form, tab


def test_a_time_budget_leaves_blank_settings_to_the_worker_and_shows_its_choice(page, demo_files):
    """The form offers preset auto by default and its time budget blanks vocabulary, steps, batch and warm-up; the
    job page then shows what the worker chose for them and which preset, with its reasons and the presets' tokens/s
    (in 6 seconds only tiny is worth timing on a CPU)."""
    p = page
    new_job_form(p, demo_files["translation_train"])
    assert p.page.locator("#preset").input_value() == "auto"
    assert "the smallest it may choose" in p.page.locator("#estimate-auto").inner_text()
    p.page.locator("#max_minutes").fill("0.1")
    for name in ("vocab_size", "max_steps", "max_tokens_per_batch", "warmup_steps"):
        assert p.page.locator(f"#{name}").input_value() == ""
        assert p.page.locator(f"#{name}").get_attribute("placeholder") == "from the budget"
    p.page.get_by_role("button", name="Submit job").click()
    p.page.wait_for_url(re.compile(r".*#/jobs/[0-9a-f-]{36}$"))
    tab(p, "Data and settings").click()
    p.page.wait_for_selector("#auto-settings table", timeout=240_000)
    table = p.page.inner_text("#auto-settings")
    for name in ("vocab_size", "max_tokens_per_batch", "warmup_steps", "max_steps"):
        assert name in table
    assert "batch tokens/s (measured" in table and "expected updates" in table
    assert "compile\toff\toff on a CPU worker" in table  # training.compile left out: the worker chose it too
    assert "preset\ttiny\ttiny: predicted loss" in table  # model.preset left to the worker
    candidates = p.page.inner_text("#preset-candidates")
    assert re.search(r"tiny: [\d,]+ tokens/s \(measured\)", candidates) and "small: not timed" in candidates
    assert "preset: tiny" in p.page.inner_text("#config")  # the job's model section holds the choice
    assert "max_minutes: 0.1" in p.page.inner_text("#config")  # the form's time budget reached the job
    p.screenshot("job-auto-settings")


def test_a_job_asking_for_a_gpu_says_it_waits_for_a_gpu_worker(page, demo_files):
    """The form's accelerator and precision reach the job; with only the embedded CPU worker running, the job page
    and the jobs list say that the job waits for a GPU worker."""
    p = page
    new_job_form(p, demo_files["translation_train"])
    p.page.select_option("#preset", "tiny")
    fill_training_form(p, vocab_size=500, max_steps=20)
    assert p.page.locator("#accelerator").input_value() == "any" and p.page.locator("#precision").input_value() == ""
    p.page.get_by_label("Accelerator").select_option("gpu")
    p.page.get_by_label("Precision").select_option("bf16")
    p.page.locator("#precision").scroll_into_view_if_needed()
    p.screenshot("new-job-gpu")
    p.page.get_by_role("button", name="Submit job").click()
    p.page.wait_for_url(re.compile(r".*#/jobs/[0-9a-f-]{36}$"))
    job_id = p.page.url.rsplit("/", 1)[-1]
    note = p.page.locator("#waiting-for")
    note.wait_for()
    assert note.inner_text().startswith("Waiting for a GPU worker: the job asked for GPU workers only")
    assert p.page.locator("#job-status .badge").inner_text() == "queued"
    http = api(p.stack)
    job = http.get(f"/v1/jobs/{job_id}").json()
    assert (job["training"]["accelerator"], job["training"]["precision"]) == ("gpu", "bf16")
    assert job["waiting_for"] == "a GPU worker"
    p.screenshot("job-waiting-for-gpu")
    p.page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
    row = p.page.locator(f'tr[data-job="{job_id}"]')
    row.locator(".waiting-note", has_text="waiting for a GPU worker").wait_for()
    p.screenshot("jobs-waiting-for-gpu")
    p.page.set_viewport_size({"width": 390, "height": 844})
    p.screenshot("jobs-waiting-for-gpu-phone")
    assert http.post(f"/v1/jobs/{job_id}/cancel").status_code == 202  # it would wait forever here
    row.locator(".waiting-note").wait_for(state="detached")  # a cancelled job waits for nothing


def test_a_job_across_two_hosts_says_it_waits_for_the_second_one(page, demo_files):
    """training.nodes = 2 with the embedded service's one training worker: the job runs as node 0 and its page and
    the jobs list say it waits for hosts, 1 of 2 joined; cancelled meanwhile, it ends cancelled at once."""
    p = page
    http = api(p.stack)
    with open(demo_files["translation_train"], "rb") as f:
        dataset = http.post("/v1/datasets", data={"name": "hosts", "kind": "parallel"}, files={"file": f}).json()
    body = {"objective": "translation", "dataset_id": dataset["id"], "model": {"preset": "tiny", "vocab_size": 500},
            "training": {"max_steps": 20, "nodes": 2}}  # fmt: skip
    job_id = http.post("/v1/jobs", json=body).json()["id"]
    wait = time.monotonic() + 120
    while (job := http.get(f"/v1/jobs/{job_id}").json())["waiting_for"] != "nodes: 1 of 2 joined":
        assert time.monotonic() < wait and job["status"] in ("queued", "running"), job
        time.sleep(0.5)
    p.sign_in()
    p.page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    note = p.page.locator("#waiting-for")
    note.wait_for()
    assert note.inner_text().startswith("Waiting for hosts, nodes: 1 of 2 joined: the job spans 2 training workers")
    assert p.page.locator("#job-status .badge").inner_text() == "running"
    p.screenshot("job-waiting-for-hosts")
    p.page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
    p.page.locator(f'tr[data-job="{job_id}"] .waiting-note', has_text="waiting for nodes: 1 of 2 joined").wait_for()
    assert http.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
    wait = time.monotonic() + 60
    while http.get(f"/v1/jobs/{job_id}").json()["status"] != "cancelled":
        assert time.monotonic() < wait, "the job waiting for hosts was not cancelled"
        time.sleep(0.5)


def test_wrong_key_shows_a_sign_in_error(page):
    page.sign_in("not-a-real-key")
    error = page.page.locator("#signin-error .error")
    error.wait_for()
    assert "invalid API key" in error.inner_text()
    assert page.page.get_by_label("API key").is_visible()
    page.screenshot("signin-error")


def test_api_errors_are_shown_as_readable_messages(page, tmp_path):
    from tests.support.client import write_jsonl

    page.sign_in()
    page.page.get_by_role("navigation").get_by_role("link", name="New job").click()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "one", "target": "eins"}\n{"source": "two"}\n')
    page.page.locator("#upload-file").set_input_files(str(bad))
    page.page.get_by_role("button", name="Upload dataset").click()
    page.page.locator("#upload-status .error").wait_for()
    assert re.search(r"Upload failed: file: line 2.*target", page.page.inner_text("#upload-status"))

    good = write_jsonl(tmp_path / "good.jsonl", [("one", "eins"), ("two", "zwei"), ("three", "drei")])
    page.page.locator("#upload-file").set_input_files(str(good))
    page.page.get_by_role("button", name="Upload dataset").click()
    page.page.wait_for_selector("#upload-status .ok")
    page.page.get_by_text("Override the preset").click()
    page.page.get_by_label("n_heads").fill("3")
    message = "model: d_model=64 is not divisible by n_heads=3"
    page.page.locator("#estimate .error", has_text=message).wait_for()
    page.page.get_by_role("button", name="Submit job").click()
    page.page.locator("#submit-status .error").wait_for()
    assert f"The job was not submitted: {message}" in page.page.inner_text("#submit-status")
    page.screenshot("api-error")


def test_jobs_show_their_labels_filter_by_tag_and_the_job_page_edits_them(page, demo_files):
    """Names and tags given at submission show in the list, a tag filters it (and is kept in the address); the job
    page saves new labels with PATCH, and refuses a bad tag saying why."""
    http = api(page.stack)
    with open(demo_files["translation_train"], "rb") as f:
        dataset = http.post(
            "/v1/datasets", data={"name": "n", "kind": "parallel"}, files={"file": ("n.jsonl", f)}
        ).json()
    body = {"objective": "translation", "dataset_id": dataset["id"], "training": {"accelerator": "gpu"}}
    jobs = []  # waiting for a GPU worker: they stay queued here
    for name, tags in (("warm-up 400", ["baseline", "en-de"]), ("warm-up 4000", ["en-de"])):
        response = http.post("/v1/jobs", json={**body, "name": name, "tags": tags})
        assert response.status_code == 201, response.text
        jobs.append(response.json())
    p = page
    p.sign_in()
    p.page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
    row = p.page.locator(f'tr[data-job="{jobs[0]["id"]}"]')
    row.get_by_role("link", name="warm-up 400").wait_for()
    # Signing in showed the list already and the click draws it again: wait for the row of the list drawn last.
    wait_for(lambda: row.locator(".tag").all_inner_texts() == ["baseline", "en-de"], timeout=10, what="the tags")
    p.page.get_by_label("Tag").fill("baseline")
    p.page.get_by_label("Tag").press("Enter")
    p.page.locator(f'tr[data-job="{jobs[1]["id"]}"]').wait_for(state="detached")
    assert p.page.locator("tr[data-job]").count() == 1 and "tag=baseline" in p.page.url
    p.screenshot("jobs-filtered-by-tag")
    row.get_by_role("link", name="warm-up 400").click()
    p.page.locator("#labels").wait_for()
    assert p.page.locator("h1").inner_text().startswith("warm-up 400")
    p.page.locator("#job-tags").fill("baseline, lr/0.5, baseline")
    p.page.locator("#job-note").fill("half the paper's rate")
    p.page.get_by_role("button", name="Save labels").click()
    p.page.locator("#labels-status", has_text="Saved.").wait_for()
    assert p.page.locator("#job-tags").input_value() == "baseline, lr/0.5"  # as the API keeps them
    saved = http.get(f"/v1/jobs/{jobs[0]['id']}").json()
    assert (saved["name"], saved["tags"]) == ("warm-up 400", ["baseline", "lr/0.5"])
    assert saved["note"] == "half the paper's rate"
    p.page.locator("#job-tags").fill("no spaces allowed")
    p.page.get_by_role("button", name="Save labels").click()
    refusal = p.page.locator("#labels-status .error")
    refusal.wait_for()
    assert "Not saved" in refusal.inner_text() and "tags" in refusal.inner_text()
    assert http.get(f"/v1/jobs/{jobs[0]['id']}").json()["tags"] == ["baseline", "lr/0.5"]
    p.screenshot("job-labels")
    for job in jobs:
        assert http.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202


def test_the_new_job_form_names_tags_and_annotates_the_job_and_sets_the_watched_tokens(page, demo_files):
    """The form's name, tags, note and tokens to watch reach the job: its page and the jobs list show the labels,
    its configuration the tokens."""
    p = page
    new_job_form(p, demo_files["translation_train"], vocab_size=500, max_steps=20)
    p.page.get_by_label("Job name").fill("labelled from the form")
    p.page.get_by_label("Tags").fill("baseline, en-de")
    p.page.get_by_label("Note").fill("the paper's schedule")
    p.page.get_by_label("Tokens to watch").fill("one, two  three")
    p.page.get_by_label("Source language").fill("en")
    p.page.get_by_label("Target language").fill("de")
    p.page.get_by_label("Accelerator").select_option("gpu")  # stays queued: the embedded worker is a CPU one
    for precision in ("bf16", "fp32"):  # the estimate is for the precision the job will train in
        p.page.get_by_label("Precision").select_option(precision)
        p.page.locator("#estimate", has_text=f"training memory ({precision})").wait_for()
    p.screenshot("new-job-labels")
    p.page.get_by_role("button", name="Submit job").click()
    p.page.wait_for_url(re.compile(r".*#/jobs/[0-9a-f-]{36}$"))
    job_id = p.page.url.rsplit("/", 1)[-1]
    p.page.locator("#labels").wait_for()
    assert p.page.locator("h1").inner_text().startswith("labelled from the form")
    assert p.page.locator("#job-tags").input_value() == "baseline, en-de"
    assert p.page.locator("#job-note").input_value() == "the paper's schedule"
    assert "translation en→de" in p.page.locator(".summary-row").inner_text()
    tab(p, "Data and settings").click()
    assert "probe_tokens" in p.page.inner_text("#config")
    http = api(p.stack)
    job = http.get(f"/v1/jobs/{job_id}").json()
    labels = ("labelled from the form", ["baseline", "en-de"], "the paper's schedule")
    assert (job["name"], job["tags"], job["note"]) == labels
    assert job["training"]["probe_tokens"] == ["one", "two", "three"]
    assert (job["source_language"], job["target_language"]) == ("en", "de")
    p.page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
    row = p.page.locator(f'tr[data-job="{job_id}"]')
    row.get_by_role("link", name="labelled from the form").wait_for()
    assert row.locator(".tag").all_inner_texts() == ["baseline", "en-de"]
    assert http.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
