"""The dashboard in a real browser on jobs with a history: a list past 100 jobs, 100,000 metric points a series,
progress by time, a phone's screen, comparing runs, and a running job's log."""

from __future__ import annotations

import math
import re
import time

import pytest
from playwright.sync_api import expect

from bench.harness.stack import wait_for
from tests.browser.conftest import new_page
from tests.browser.support import (
    CHARTS_DRAWN,
    HOVER_MS,
    api,
    four_digits,
    job_requests,
    job_with_many_points,
    points,
    service_database,
    tab,
    x_scale,
)


def test_jobs_list_pages_past_100_jobs(page, stack):
    """105 jobs with one tag: the list shows the newest 100 and a button for the rest, which then shows all 105."""
    with service_database(stack) as session:
        from app.db.base import utcnow
        from app.db.keys import identify
        from app.db.tables import Job, JobTag

        caller = identify(session, stack.key)
        assert caller is not None
        now = utcnow()
        session.add_all(
            Job(owner_id=caller.owner_id, objective="translation", status="cancelled", max_attempts=1, total_steps=10,
                model_config={"preset": "tiny", "vocab_size": 500}, training_config={"max_steps": 10},
                request_sha256="", name=f"paged-{i:03d}", created_at=now, tag_rows=[JobTag(tag="paged", position=0)])
            for i in range(105)
        )  # fmt: skip
    page.sign_in()
    page.page.goto(f"{page.stack.url}/dashboard#/jobs?tag=paged")
    rows = page.page.locator("tr[data-job]")
    more = page.page.locator("#jobs-more")
    wait_for(lambda: rows.count() == 100 and more.is_visible(), timeout=20, what="100 rows and more", interval=0.2)
    assert more.inner_text() == "Show 5 more (100 of 105 shown)"
    assert all(
        name.startswith("paged-") for name in rows.locator("td[data-label=Job] a[href^='#/jobs/']").all_inner_texts()
    )
    more.click()
    wait_for(lambda: rows.count() == 105, timeout=10, what="105 rows", interval=0.1)
    assert more.is_hidden()
    page.page.get_by_label("Tag").fill("no-such-tag")
    page.page.get_by_label("Tag").press("Enter")
    page.page.get_by_text("No jobs match these filters.").wait_for()
    assert more.is_hidden()


def test_job_with_100000_points_draws_a_bounded_history_quickly_and_zooms(page, stack):
    """100,000 points a per-step series: the page asks for a downsampled history (lowest and highest a bucket, so
    the one-step spike is drawn), draws train and validation loss on one uPlot chart within seconds, shows both
    series' values on hover, and zooms on a drag (double-click resets)."""
    job_id = job_with_many_points(stack, 100_000, spike_at=61_234)
    page.sign_in()
    page.page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
    page.page.locator(f'tr[data-job="{job_id}"]').wait_for()
    started = time.monotonic()
    with page.page.expect_response(lambda r: f"/v1/jobs/{job_id}/metrics?" in r.url, timeout=30_000) as history:
        page.page.locator(f'tr[data-job="{job_id}"] a').first.click()
    wait_for(lambda: page.page.evaluate(CHARTS_DRAWN), timeout=30, what="4 charts drawn", interval=0.1)
    elapsed = time.monotonic() - started
    assert elapsed < 15, f"the job page took {elapsed:.1f}s to draw its curves"  # generous: a slow shared machine
    assert "downsample=extremes" in history.value.url
    series = history.value.json()["series"]
    assert series["train_loss"]["total_points"] == 100_000
    fetched = sum(len(s["steps"]) for s in series.values())
    assert fetched <= 6 * 4001, f"{fetched} points fetched for 6 series"  # not 100,000 a series
    assert 1_000 <= points(page, "train_loss") <= 4001 and points(page, "valid_loss") == 500
    page.page.locator("#view[data-history-ms]").wait_for(state="attached")
    drawn_ms = int(page.page.get_attribute("#view", "data-history-ms"))
    assert drawn_ms < 10_000, f"reading and drawing the history took {drawn_ms} ms"
    top = page.page.evaluate("""() => Math.max(...document.querySelector('figure[data-chart="loss"]').plot.data[1]
                                                .filter((v) => v !== null))""")
    assert top == 30.0  # the one-step spike survives the downsampling
    loss = page.page.locator('figure[data-chart="loss"]')
    legend = loss.locator(".u-legend").inner_text().lower()
    assert "training" in legend and "validation" in legend
    hover = page.page.evaluate(HOVER_MS)
    assert hover["ms"] < 3_000, f"the legend took {hover['ms']:.0f} ms to follow the cursor"
    step, train, valid = hover["values"].split("|")
    assert 30_000 < float(step.replace(",", "")) < 45_000, hover
    assert train and float(valid) > 0, hover  # validation's nearest point, though it runs every 200 steps
    box = loss.locator(".u-over").bounding_box()
    before = x_scale(page, "loss")
    assert before == [1, 100_000]
    y = box["y"] + box["height"] / 2
    page.page.mouse.move(box["x"] + box["width"] * 0.2, y)
    page.page.mouse.down()
    page.page.mouse.move(box["x"] + box["width"] * 0.4, y, steps=5)
    page.page.mouse.up()
    low, high = x_scale(page, "loss")
    assert 15_000 < low < high < 45_000, (low, high)  # the dragged fifth of the axis
    coarse = sum(low <= x <= high for x in series["train_loss"]["steps"])
    page.page.locator('figure[data-chart="loss"][data-refined]').wait_for(state="attached")
    detailed = page.page.evaluate(f"""() => {{ const [xs, train] = document.querySelector('figure[data-chart="loss"]')
                                              .plot.data; return xs.filter((x, i) => x >= {low} && x <= {high}
                                                                      && train[i] !== null).length; }}""")
    assert detailed > 1.5 * coarse, (detailed, coarse)  # the steps in view, read again in more detail
    assert x_scale(page, "loss") == [low, high]  # and the view stays where the drag put it
    page.screenshot("job-100000-points-zoomed")
    page.page.mouse.dblclick(box["x"] + box["width"] / 2, y)
    assert x_scale(page, "loss") == before
    page.screenshot("job-100000-points")
    plot_width = """() => document.querySelector('figure[data-chart="loss"]').plot.width"""
    wide = page.page.evaluate(plot_width)
    page.page.set_viewport_size({"width": 700, "height": 900})  # the chart follows the window
    wait_for(lambda: page.page.evaluate(plot_width) < wide - 300, timeout=5, what="a narrower chart", interval=0.1)
    assert page.page.evaluate("document.documentElement.scrollWidth") <= 700
    started = time.monotonic()
    page.page.get_by_role("navigation").get_by_role("link", name="New job").click()
    page.page.get_by_role("button", name="Submit job").wait_for()
    assert time.monotonic() - started < 3, "navigation after the big job page was slow"


def test_a_job_with_a_time_budget_shows_its_progress_by_time(page, stack):
    """Step 86 of 10,000,000 with 8 of its 20 minutes left: the list and the job page show 60% done by time and
    "12 of 20 min", not 0% by steps, and the ETA is the time left."""
    http = api(stack)
    dataset = http.post(
        "/v1/datasets", data={"name": "tiny", "kind": "parallel"}, files={"file": ("t.tsv", b"one\teins\ntwo\tzwei\n")}
    ).json()
    training = {"max_steps": 10_000_000, "max_minutes": 20, "max_tokens_per_batch": 4096, "warmup_steps": 400}
    job = http.post(  # asking for a GPU, it stays queued here until the row below says it runs
        "/v1/jobs",
        json={
            "objective": "translation",
            "dataset_id": dataset["id"],
            "model": {"preset": "tiny", "vocab_size": 300},
            "training": {**training, "accelerator": "gpu"},
        },
    ).json()
    with service_database(stack) as session:
        from app.db.tables import Job

        row = session.get(Job, job["id"])
        row.status, row.attempt, row.step, row.tokens_seen = "running", 1, 86, 86 * 4000
        row.tokens_per_second, row.eta_seconds = 2000.0, 8 * 60.0
    page.sign_in()
    page.page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
    listed = page.page.locator(f'tr[data-job="{job["id"]}"]')
    listed.wait_for()
    assert listed.locator(".progress-text").inner_text() == "60%"
    assert listed.locator(".time-budget").inner_text() == "12 of 20 min · step 86"
    listed.locator("a").first.click()
    budget = page.page.locator("#time-budget")
    budget.wait_for()
    assert budget.inner_text().startswith("12 of 20 min")
    assert page.page.locator("#job-summary .progress-text").inner_text() == "60%"
    summary = page.page.inner_text("#job-summary")
    assert "86 / 10000000" in summary and "8m 00s" in summary  # the ETA: the time left
    page.screenshot("job-time-budget")
    assert http.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202


def test_job_page_on_a_phone_screen(browser, stack):
    p = new_page(browser, stack)
    p.page.set_viewport_size({"width": 390, "height": 844})
    p.sign_in()
    p.page.get_by_role("heading", name="Jobs").wait_for()
    width = p.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390 + 1, f"the jobs page scrolls sideways on a phone ({width}px)"
    p.screenshot("jobs-phone")
    p.page.context.close()
    assert p.errors == []


def test_ticked_jobs_open_a_comparison_of_their_curves_and_the_settings_that_differ(page, stack):
    """Two jobs ticked in the list open #/compare: one uPlot chart a metric with a series a job, the x-axis by step
    or time, log scale and smoothing; the table holds only the settings that differ and sorts by a column, with each
    job's best and final value of each metric. The charts' state is read from their uPlot instances (the figure's
    `plot`): the log scale switches the y scale's distribution, smoothing changes the values drawn."""
    short, long = (job_with_many_points(stack, n) for n in (2_000, 3_000))
    with service_database(stack) as session:  # the worker may take a job before its cancel lands:
        from app.db.tables import Job  # "never started" is made certain for the short run the check below names

        session.query(Job).filter(Job.id == short).update({"started_at": None})
    http = api(stack)
    http.patch(f"/v1/jobs/{short}", json={"name": "short run"})
    page.sign_in()
    page.page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
    compare = page.page.locator("#compare-selected")
    for job_id in (short, long):
        page.page.locator(f'input[data-select="{job_id}"]').check()
    time.sleep(2.5)  # the list refreshes every 2 s: the ticks must survive it
    assert page.page.locator(f'input[data-select="{short}"]').is_checked() and compare.inner_text() == "Compare 2"
    compare.click()
    page.page.wait_for_url(re.compile(r".*#/compare\?ids="))
    charts = page.page.locator("figure.compare-chart")
    charts.first.wait_for()
    names = charts.evaluate_all("(fs) => fs.map((f) => f.dataset.metric)")
    assert names[:3] == ["train_loss", "valid_loss", "bleu"] and set(names) >= {"lr", "tokens_per_second"}
    train = page.page.locator('figure[data-metric="train_loss"]')
    assert int(train.get_attribute("data-points")) == 5_000  # every point of both jobs, drawn on a canvas
    assert train.locator(".u-legend .u-series").count() == 3  # x, then one a job
    assert "short run" in train.locator(".u-legend").inner_text().lower()  # uPlot's legend is upper case
    box = train.locator(".u-over").bounding_box()
    for dx in (0.3, 0.5):  # hover: the legend shows the step and both jobs' values there
        page.page.mouse.move(box["x"] + box["width"] * dx, box["y"] + box["height"] / 2)
    legend = train.locator(".u-legend .u-value")
    wait_for(lambda: "--" not in legend.all_inner_texts(), timeout=5, what="hover values", interval=0.1)
    y_distr = "(f) => f.plot.scales.y.distr"  # uPlot: 1 linear, 3 logarithmic
    drawn = "(f) => f.plot.data[1].filter((v) => v !== null)"  # the short run's train_loss as drawn
    raw = train.evaluate(drawn)
    assert train.evaluate(y_distr) == 1 and len(raw) == 2_000
    page.page.get_by_label("Log scale").check()
    assert train.evaluate(y_distr) == 3  # train_loss is positive everywhere: drawn on a log scale
    assert all(f == 3 for f in charts.evaluate_all("(fs) => fs.map((f) => f.plot.scales.y.distr)"))
    page.page.get_by_label("x-axis").select_option("seconds")
    untimed = page.page.locator('figure[data-metric="train_loss"] .untimed')
    untimed.wait_for()  # these jobs were cancelled before they started: no times to draw them by
    assert "short run" in untimed.inner_text()
    page.page.get_by_label("x-axis").select_option("steps")
    page.page.locator("#compare-smoothing").fill("0.9")
    page.page.locator("#compare-smoothing").dispatch_event("change")
    smoothed = train.evaluate(drawn)
    assert len(smoothed) == len(raw) and smoothed != raw
    average, expected = 0.0, []  # TensorBoard's debiased moving average of what was drawn before, weight 0.9
    for n, value in enumerate(raw, start=1):
        average = 0.9 * average + 0.1 * value
        expected.append(average / (1 - 0.9**n))
    assert smoothed == pytest.approx(expected, rel=1e-9)
    wiggle = lambda ys: sum(abs(b - a) for a, b in zip(ys, ys[1:]))  # noqa: E731
    assert wiggle(smoothed) < 0.7 * wiggle(raw), (wiggle(smoothed), wiggle(raw))  # the 44-step ripple damped
    assert train.evaluate(y_distr) == 3  # still on a log scale
    table = page.page.locator("#compare-table")
    headers = table.locator("thead button").all_inner_texts()
    assert "training.max_steps" in headers and "model.d_model" not in headers  # only what differs
    table.get_by_role("button", name="training.max_steps").click()
    table.get_by_role("button", name="training.max_steps").click()  # descending
    first = table.locator("tbody tr").first.get_attribute("data-job")
    assert first == long, (first, long)
    for job_id, n in ((short, 2_000), (long, 3_000)):  # the seeded series (job_with_many_points) over all steps
        train_loss = [6 * math.exp(-step / 3000) + 0.3 * math.sin(step / 7) for step in range(1, n + 1)]
        expected = {
            "train_loss best": min(train_loss),
            "train_loss final": train_loss[-1],
            "valid_loss best": 5 * math.exp(-n / 4000),  # falling: its last evaluation
            "valid_loss final": 5 * math.exp(-n / 4000),
            "bleu best": n / 300,  # rising: its last evaluation
            "bleu final": n / 300,
        }
        row = table.locator(f'tbody tr[data-job="{job_id}"]')
        shown = {column: row.locator(f'td[data-label="{column}"]').inner_text() for column in expected}
        assert shown == {column: four_digits(value) for column, value in expected.items()}, shown
    page.screenshot("compare-runs")
    assert page.errors == [], page.errors


def test_the_job_page_shows_the_jobs_log_and_appends_new_lines_while_it_runs(page, stack, demo_files):
    """The worker's lines about a running job appear in the log panel, new ones appended as they are written,
    levels coloured; its last lines (the cancellation) still arrive after the job ends."""
    http = api(stack)
    with open(demo_files["translation_train"], "rb") as f:
        dataset = http.post("/v1/datasets", data={"name": "log demo", "kind": "parallel"}, files={"file": f}).json()
    wait_for(  # parsed first: the job's first line is then its attempt's
        lambda: http.get(f"/v1/datasets/{dataset['id']}").json()["status"] == "ready", 60, "the dataset"
    )
    job = http.post(
        "/v1/jobs",
        json={
            "objective": "translation",
            "dataset_id": dataset["id"],
            "model": {"preset": "tiny", "vocab_size": 500},
            "training": {"max_steps": 100_000, "eval_every": 20, "checkpoint_every": 10_000, "eval_budget": None},
        },
    ).json()
    page.sign_in()
    page.page.goto(f"{stack.url}/dashboard#/jobs/{job['id']}/log")  # the log panel's own address
    log = page.page.locator("#job-log")
    log.locator(".log-line", has_text="training and").first.wait_for(timeout=120_000)  # data statistics
    seen = log.locator(".log-line").count()
    # appended live: a line after those first shown (the job evaluates every 20 steps until it is cancelled; on a
    # fast machine the first poll can already hold evaluations, so no particular step is waited for)
    log.locator(".log-line").nth(seen).wait_for(timeout=120_000)
    log.locator(".log-line", has_text="evaluation at step").first.wait_for(timeout=120_000)
    first = log.locator(".log-line").first
    assert "attempt 1 on" in first.inner_text() and "INFO" in first.locator(".log-level").inner_text()
    assert first.evaluate("e => getComputedStyle(e).fontFamily").startswith("ui-monospace")
    assert log.evaluate("e => getComputedStyle(e).overflowY") == "auto"
    seqs = [int(s) for s in log.locator(".log-line").evaluate_all("es => es.map((e) => e.dataset.seq)")]
    assert seqs == list(range(1, len(seqs) + 1))  # each line once, in order
    expect(tab(page, "Log")).to_have_attribute("aria-selected", "true")
    assert job_requests(page, job["id"], "metrics", "events") == []  # the overview's curves: not opened
    page.screenshot("job-log")
    assert http.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
    log.locator(".log-line", has_text="cancelled at step").wait_for(timeout=60_000)
    page.screenshot("job-log-cancelled")
