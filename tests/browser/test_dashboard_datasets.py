"""The dashboard's dataset pages in a real browser: the Datasets list's upload form (the bytes sent, the row followed
from processing to ready), a dataset's page with its data report (histograms, languages, problems and their example
lines, as GET /v1/datasets/{id}/report says), a failed upload's error and line, the Clean form making a filtered
dataset that names its parent and what each rule removed, and the jobs list's link to a job's dataset.

The corpus (tests/browser/dirty_corpus.py) is 303 en-fr pairs with an empty target, two German targets, two copies,
a placeholder dropped, a ratio outlier and three duplicates, uploaded gzip-compressed; the stack's inference worker
parses it and writes its report.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Page, new_page
from tests.browser.dirty_corpus import (
    COPY_LINES,
    DUPLICATE_LINES,
    EMPTY_LINE,
    GERMAN_LINES,
    PLACEHOLDER_LINE,
    dirty_pairs,
    write_jsonl,
)
from tests.browser.support import api

NAME = "dirty en-fr"
# Every status each dataset row of the list has shown, from the moment the observer is installed.
WATCH_ROWS = """() => {
  window.rowStatuses = {};
  const note = (tr) => { const seen = (window.rowStatuses[tr.dataset.dataset] ||= []);
                         if (seen[seen.length - 1] !== tr.dataset.status) seen.push(tr.dataset.status); };
  const body = document.querySelector('table.datasets-table tbody');
  body.querySelectorAll('tr[data-dataset]').forEach(note);
  new MutationObserver(() => body.querySelectorAll('tr[data-dataset]').forEach(note))
    .observe(body, { childList: true, subtree: true, attributes: true });
}"""


def _open_datasets(p: Page) -> None:
    p.page.get_by_role("navigation").get_by_role("link", name="Datasets").click()
    p.page.locator("table.datasets-table").wait_for()


def _upload(p: Page, path, name: str | None = None, languages: tuple[str, str] | None = None) -> str:
    """Upload `path` through the Datasets form; the new dataset's id."""
    p.page.locator("#dataset-file").set_input_files(str(path))
    if name:
        p.page.get_by_label("Name", exact=True).fill(name)
    if languages:
        p.page.get_by_label("Source language").fill(languages[0])
        p.page.get_by_label("Target language").fill(languages[1])
    p.page.get_by_role("button", name="Upload", exact=True).click()
    link = p.page.locator("#dataset-upload-status .ok a")
    link.wait_for()
    return link.get_attribute("href").rsplit("/", 1)[-1]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_jsonl(tmp_path_factory.mktemp("corpus") / "dirty.jsonl.gz", dirty_pairs(), compress=True)


@pytest.fixture(scope="module")
def uploaded(browser, stack, corpus) -> Iterator[tuple[Page, str]]:
    """One page, signed in, that uploaded the corpus through the Datasets form and saw its row turn ready.

    Shared by the tests below, in order."""
    p = new_page(browser, stack)
    p.sign_in()
    _open_datasets(p)
    p.page.locator("table.datasets-table tbody tr").first.wait_for()  # the first read of the list is in
    p.page.evaluate(WATCH_ROWS)
    dataset_id = _upload(p, corpus, NAME, ("en", "fr"))
    p.page.locator(f'tr[data-dataset="{dataset_id}"][data-status="ready"]').wait_for(timeout=120_000)
    yield p, dataset_id
    p.page.context.close()
    assert p.errors == [], f"uncaught script errors: {p.errors}"


def test_the_upload_form_shows_the_bytes_sent_and_the_row_follows_it_to_ready(uploaded, stack, corpus):
    p, dataset_id = uploaded
    bar = p.page.locator("#dataset-upload-progress")
    sent, total = int(bar.get_attribute("data-sent")), int(bar.get_attribute("data-total"))
    assert sent == total > corpus.stat().st_size  # the whole multipart body: the file and the form's fields
    assert bar.get_attribute("aria-valuenow") == "100"
    assert re.fullmatch(r"[\d.]+ KiB of [\d.]+ KiB sent \(100%\)", bar.inner_text())
    # the row came from the service's answer (processing) and turned ready by itself
    assert p.page.evaluate("window.rowStatuses")[dataset_id] == ["processing", "ready"]
    dataset = api(stack).get(f"/v1/datasets/{dataset_id}").json()
    assert (dataset["name"], dataset["compression"], dataset["rows"]) == (NAME, "gzip", 303)
    assert (dataset["source_language"], dataset["target_language"]) == ("en", "fr")
    row = p.page.locator(f'tr[data-dataset="{dataset_id}"]')
    assert row.locator('td[data-label="Rows"]').inner_text() == "303"
    assert row.locator('td[data-label="Languages"]').inner_text() == "en → fr"
    assert "gzip" in row.locator('td[data-label="Dataset"]').inner_text()
    p.screenshot("datasets-list")


def _bar_counts(figure) -> list[int]:
    return [int(c) for c in figure.locator("rect.bar").evaluate_all("rs => rs.map((r) => r.dataset.count)")]


def test_the_dataset_page_draws_the_report_as_the_api_gives_it(uploaded, stack):
    p, dataset_id = uploaded
    page = p.page
    page.locator(f'tr[data-dataset="{dataset_id}"]').get_by_role("link", name=NAME).click()
    page.wait_for_url(re.compile(rf".*#/datasets/{dataset_id}$"))
    page.locator("#report-problems").wait_for()
    report = api(stack).get(f"/v1/datasets/{dataset_id}/report").json()
    assert page.locator("h1").inner_text().startswith(NAME)
    # a histogram of each side's lengths, every row in a bar, its percentiles beside it; then in words
    for unit in ("characters", "words"):
        page.get_by_label(unit, exact=True).check()
        for side in ("source", "target"):
            lengths = report["sides"][side][unit]
            figure = page.locator(f'figure[data-side="{side}"][data-unit="{unit}"]')
            counts, histogram = _bar_counts(figure), lengths["histogram"]
            assert counts == histogram["counts"] + ([histogram["above"]] if histogram["above"] else [])  # past p99
            assert sum(counts) == 303
            assert figure.locator('td[data-key="p50"]').inner_text() == str(lengths["percentiles"]["p50"])
            assert figure.locator('line[data-percentile="p95"]').count() == 1
    ratio = page.locator('figure[data-side="ratio"]')
    assert sum(_bar_counts(ratio)) == report["length_ratio"]["pairs"] == 302  # the empty target has no ratio
    # the languages: the German (and English) targets stand out against the declared French
    target = page.locator('.lang-side[data-side="target"]')
    assert target.locator('.lang-row.off[data-language="de"]').count() == 1
    assert target.locator('.lang-row[data-language="fr"]:not(.off)').count() == 1
    assert target.locator(".lang-share-other").inner_text() != "0%"
    assert page.locator('.lang-side[data-side="source"] .lang-share-other').inner_text() == "0%"
    # each problem's count as the API says, and its first rows with their line numbers
    for name, problem in report["problems"].items():
        assert page.locator(f'[data-problem="{name}"] .problem-count').inner_text() == str(problem["count"]), name
    assert report["problems"]["duplicates"]["count"] == 3 and report["problems"]["copies"]["count"] == 2
    expected_lines = {
        "empty": [EMPTY_LINE],
        "duplicates": list(DUPLICATE_LINES),
        "copies": list(COPY_LINES),
        "wrong_language_target": list(GERMAN_LINES),
        "placeholder_mismatches": [PLACEHOLDER_LINE],
    }
    for name, lines in expected_lines.items():
        problem = page.locator(f'details[data-problem="{name}"]')
        examples = problem.locator("table.examples tbody tr")
        assert not examples.first.is_visible()
        problem.locator("summary").click()
        assert examples.locator(".example-line").all_inner_texts() == [str(n) for n in lines], name
    german = page.locator(f'details[data-problem="wrong_language_target"] tr[data-line="{GERMAN_LINES[0]}"]')
    assert "Der Zug nach Berlin" in german.inner_text() and "detected de" in german.inner_text()
    assert "source only: %s" in page.locator('details[data-problem="placeholder_mismatches"] tbody').inner_text()
    assert page.locator('[data-problem="invalid_characters"]').evaluate("e => e.tagName") == "DIV"  # none: no examples
    p.screenshot("dataset-report")


def test_a_failed_upload_shows_its_error_and_line_number(uploaded, stack, tmp_path):
    p, _ = uploaded
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "one", "target": "un"}\n{"source": "two", "target": "deux"}\n{"source": "three"}\n')
    _open_datasets(p)
    dataset_id = _upload(p, bad)
    row = p.page.locator(f'tr[data-dataset="{dataset_id}"][data-status="failed"]')
    row.wait_for(timeout=60_000)
    dataset = api(stack).get(f"/v1/datasets/{dataset_id}").json()
    assert dataset["error_line"] == 3 and "target" in dataset["error"]
    assert row.locator(".dataset-error").inner_text() == dataset["error"]
    row.get_by_role("link", name="bad.jsonl").click()
    failed = p.page.locator("#dataset-failed")
    failed.wait_for()
    assert p.page.locator("#dataset-error-line").inner_text() == "line 3"
    assert p.page.locator("#dataset-error").inner_text() == dataset["error"]
    assert p.page.locator("#report-problems").count() == 0 and p.page.locator("#dataset-clean").count() == 0
    p.screenshot("dataset-failed")


def test_the_clean_form_makes_a_filtered_dataset_naming_its_parent_and_what_each_rule_removed(uploaded, stack):
    p, parent_id = uploaded
    page = p.page
    p.open(f"#/datasets/{parent_id}")
    page.locator("#dataset-clean").wait_for()
    # prefilled from the report: the problems that occur are ticked, the others not
    ticked = {
        rule: page.locator(f"#rule-{rule}").is_checked()
        for rule in (
            "drop_empty",
            "drop_invalid_characters",
            "length",
            "max_ratio",
            "deduplicate",
            "drop_copies",
            "drop_placeholder_mismatches",
            "drop_wrong_language",
            "drop_misaligned",
        )
    }
    assert [rule for rule, on in ticked.items() if on] == [
        "drop_empty",
        "max_ratio",
        "deduplicate",
        "drop_copies",
        "drop_placeholder_mismatches",
        "drop_wrong_language",
    ]
    assert page.locator("#estimate-deduplicate").inner_text().startswith("≈ 3 rows")
    assert page.locator("#estimate-drop_wrong_language").inner_text().startswith("≈ 2 rows")
    assert page.locator("#estimate-drop_misaligned").inner_text() == ""  # off: no estimate
    assert "at most 10 of 303 rows" in page.locator("#clean-total").inner_text()
    page.get_by_label("Name of the new dataset").fill("clean en-fr")
    p.screenshot("dataset-clean-form")
    page.get_by_role("button", name="Create the cleaned dataset").click()
    page.wait_for_url(re.compile(rf".*#/datasets/(?!{parent_id})[0-9a-f-]{{36}}$"))  # the new dataset's page
    child_id = page.url.rsplit("/", 1)[-1]
    page.locator("#report-problems").wait_for(timeout=120_000)  # made, parsed and reported on
    child = api(stack).get(f"/v1/datasets/{child_id}").json()
    assert child["parent_id"] == parent_id and child["status"] == "ready"
    counts = child["filter_counts"]
    assert counts["total"] == 303 and counts["removed"]["duplicates"] == 3 and counts["kept"] == child["rows"]
    assert page.locator("#dataset-parent").inner_text() == NAME
    assert page.locator("#filter-kept").inner_text() == f"{counts['kept']:,}"
    assert page.locator("#filter-total").inner_text() == "303"
    removed = page.locator("#dataset-filter-counts .bar-row")
    shown = dict(
        zip(
            removed.locator(".bar-label").all_inner_texts(),
            (int(t.split()[0]) for t in removed.locator(".bar-value").all_inner_texts()),
            strict=True,
        )
    )
    assert shown == counts["removed"]
    assert page.locator('[data-problem="duplicates"] .problem-count').inner_text() == "0"
    p.screenshot("dataset-filtered")
    # the parent lists it among the datasets filtered from it
    page.locator("#dataset-parent").click()
    expect(page.locator(f'#dataset-children li[data-dataset="{child_id}"]')).to_contain_text("clean en-fr")


def test_the_jobs_list_links_a_job_to_its_datasets_page(uploaded, stack):
    p, dataset_id = uploaded
    http = api(stack)
    body = {
        "objective": "translation",
        "dataset_id": dataset_id,
        "name": "on the dirty corpus",
        "training": {"accelerator": "gpu"},
    }  # no GPU worker here: it stays queued
    response = http.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    try:
        p.page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
        p.page.locator(f'tr[data-job="{job_id}"] .dataset-of-job').get_by_role("link", name=NAME).click()
        p.page.wait_for_url(re.compile(rf".*#/datasets/{dataset_id}$"))
        expect(p.page.locator("h1")).to_contain_text(NAME)
        job = p.page.locator(f'#dataset-jobs tr[data-job="{job_id}"]')
        expect(job).to_contain_text("trains on it")
        job.get_by_role("link", name="on the dirty corpus").wait_for()
    finally:
        assert http.post(f"/v1/jobs/{job_id}/cancel").status_code == 202


def test_a_monolingual_dataset_shows_its_report_without_the_clean_form(page, tmp_path):
    text = tmp_path / "sentences.txt"
    text.write_text("".join(f"{s}\n" for s, _ in dirty_pairs()[:40]))
    page.sign_in()
    _open_datasets(page)
    page.page.get_by_label("Kind").select_option("monolingual")
    assert page.page.get_by_label("Target language").is_hidden()
    page.page.get_by_label("Language", exact=True).fill("en")
    dataset_id = _upload(page, text)
    page.page.locator(f'tr[data-dataset="{dataset_id}"]').get_by_role("link").first.click()
    page.page.locator("#report-problems").wait_for(timeout=60_000)
    assert sum(_bar_counts(page.page.locator('figure[data-side="text"][data-unit="characters"]'))) == 40
    assert page.page.locator('figure[data-side="ratio"]').count() == 0
    assert page.page.locator("#dataset-clean").count() == 0
    assert page.page.locator('.lang-side[data-side="text"] .lang-row[data-language="en"]').count() == 1
