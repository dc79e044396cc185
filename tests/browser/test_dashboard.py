"""The dashboard in a real browser, following one job: sign in, upload, submit from the form, watch it train live,
open its panels (dynamics, memory), find it in the jobs list and its workers on the workers page. The job
(`submitted`, tests/browser/conftest.py) is the one tests/browser/test_dashboard_models.py then uses the model of."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from bench.harness.stack import wait_for
from tests.browser.support import TERMINAL, api, job_requests, points, tab, x_scale


def test_job_page_follows_training_live_until_it_succeeds(submitted):
    p, job_id = submitted
    page = p.page
    # Live: points arrive over Server-Sent Events while the job runs (the page was opened while queued).
    wait_for(lambda: points(p, "train_loss") >= 5, timeout=240, what="live train_loss points", interval=0.5)
    assert page.locator("#job-status .badge").inner_text() in ("running", "succeeded")
    p.screenshot("job-running")
    page.wait_for_selector("#job-status .status-succeeded", timeout=400_000)
    page.wait_for_selector("#model-link")
    wait_for(
        lambda: points(p, "valid_loss") >= 2 and points(p, "bleu") >= 2,
        timeout=30,
        what="validation curves",
        interval=0.5,
    )
    loss = page.locator('figure[data-chart="loss"]')
    assert loss.locator("canvas").count() >= 1  # uPlot draws on a canvas
    assert points(p, "train_loss") == 60 and points(p, "lr") == 60
    assert x_scale(p, "loss") == [1, 60]  # the live appends moved the scale with the data
    assert page.locator("#checkpoints tbody tr").count() >= 1
    assert page.locator("#cancel-job").count() == 0  # a finished job cannot be cancelled
    p.screenshot("job-succeeded")


def test_job_page_panels_read_their_data_only_once_opened_each_at_its_own_address(submitted):
    """The page that followed the job live showed its overview only, and read nothing of the other panels. A tab,
    by mouse or keyboard, opens a panel at its own address, and only then does the panel read its data; back and
    forward move between panels; the address opens its panel in a new page load, without the overview."""
    p, job_id = submitted
    page = p.page
    assert page.get_by_role("tablist", name="Job").get_by_role("tab").all_inner_texts() == [
        "Overview", "Data and settings", "Dynamics", "Embeddings", "Memory", "Evaluations", "Log",
    ]  # fmt: skip
    expect(tab(p, "Overview")).to_have_attribute("aria-selected", "true")
    assert job_requests(p, job_id, "dynamics", "embeddings", "memory", "logs") == []
    assert not [r for r in p.requests if "/evaluations" in r]
    tab(p, "Data and settings").click()
    page.wait_for_url(re.compile(rf".*#/jobs/{job_id}/settings$"))
    expect(page.get_by_role("tabpanel")).to_have_attribute("id", "panel-settings")  # the others are hidden
    assert "max_steps: 60" in page.inner_text("#config") and page.locator("#job-summary").is_hidden()
    tab(p, "Data and settings").focus()
    page.keyboard.press("ArrowRight")
    expect(tab(p, "Dynamics")).to_be_focused()
    assert job_requests(p, job_id, "dynamics") == []  # focused is not opened
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*#/jobs/{job_id}/dynamics$"))
    page.locator("#dynamics table.dyn-heat").wait_for()
    assert job_requests(p, job_id, "dynamics") and job_requests(p, job_id, "embeddings", "memory", "logs") == []
    page.go_back()
    expect(tab(p, "Data and settings")).to_have_attribute("aria-selected", "true")
    assert page.locator("#config").is_visible() and page.locator("#dynamics").is_hidden()
    page.go_forward()
    expect(tab(p, "Dynamics")).to_have_attribute("aria-selected", "true")
    # the old document may still read (the overview re-reads once the job ends); count from the new one's commit
    committed: list[int] = []
    page.once("framenavigated", lambda frame: committed.append(len(p.requests)))
    page.reload()
    page.locator("#dynamics table.dyn-heat").wait_for()
    expect(tab(p, "Dynamics")).to_have_attribute("aria-selected", "true")
    assert page.locator("#job-summary").count() == 0  # the overview was not built
    assert not [
        r for r in p.requests[committed[0] :] if r.split("?")[0].endswith(("/metrics", "/events", "/checkpoints"))
    ]


def test_job_page_shows_each_components_training_dynamics(submitted):
    """Recorded by the worker at steps 1, 25 and 50 of the 60 (training.dynamics_every = 25). The panel was opened
    after the job ended (the test before), so it read all three at once."""
    p, job_id = submitted
    page = p.page
    p.open(f"#/jobs/{job_id}/dynamics")  # where the test before left it
    heat = page.locator("#dynamics table.dyn-heat")
    page.locator('#dynamics table.dyn-heat[data-step="50"]').wait_for(timeout=20_000)
    assert heat.get_attribute("data-stat") == "update_ratio"
    rows = page.locator("#dynamics table.dyn-heat tbody th").all_text_contents()
    assert {"embeddings", "encoder.self_attn.W_Q", "decoder.encoder_attn.W_K", "decoder.ffn.W_2"} <= set(rows)
    assert page.locator("#dynamics table.dyn-heat thead th").all_text_contents()[1:] == ["layer 0", "layer 1", "–"]
    first_cell = page.locator('#dynamics tr[data-row="encoder.self_attn.W_Q"] td').first
    first_cell.hover()
    readout = page.locator("#dynamics .heat-readout").inner_text()
    assert readout.startswith("encoder.self_attn.W_Q, layer 0 at step 50: update ratio"), readout
    assert float(first_cell.get_attribute("data-value")) > 0
    # the slider walks back to step 1, where the colours differ
    colours = "cells => cells.map(c => c.style.background)"
    colours_at_50 = page.locator("#dynamics table.dyn-heat td").evaluate_all(colours)
    page.locator("#dynamics-step").fill("0")
    assert page.locator("#dynamics-step-label").inner_text() == "step 1"
    assert heat.get_attribute("data-step") == "1"  # the locator finds the redrawn table
    colours_at_1 = page.locator("#dynamics table.dyn-heat td").evaluate_all(colours)
    assert colours_at_1 != colours_at_50
    # a row's curves: one line a layer over the three records
    page.get_by_role("button", name="decoder.ffn.W_1").click()
    curves = page.locator('#dynamics figure.dyn-curves[data-component="decoder.ffn.W_1"]')
    curves.wait_for()
    assert curves.locator("canvas").count() == 1
    assert curves.locator(".u-legend .u-series").all_text_contents()[1].startswith("layer 0")
    page.select_option("#dynamics-stat", "grad_norm")
    assert page.locator("#dynamics table.dyn-heat").get_attribute("data-stat") == "grad_norm"
    p.screenshot("job-dynamics")
    # each attention head at the two evaluations (steps 30 and 60), on the same validation sentences
    page.get_by_role("button", name="attention heads").click()
    assert heat.get_attribute("data-stat") == "entropy" and heat.get_attribute("data-step") == "60"
    rows = page.locator("#dynamics table.dyn-heat tbody th").all_text_contents()
    assert rows == [f"{kind} layer {i}" for kind in ("encoder_self", "decoder_self", "cross") for i in (0, 1)]
    heads = page.locator("#dynamics table.dyn-heat thead th").all_text_contents()[1:]
    assert heads == ["head 0", "head 1", "head 2", "head 3"]
    assert page.locator("#dynamics-step").get_attribute("max") == "1"
    page.select_option("#dynamics-stat", "eos")
    decoder_cells = page.locator('#dynamics tr[data-row="decoder_self layer 0"] td')
    assert decoder_cells.first.get_attribute("data-value") == ""  # no </s> among a decoder's keys
    cross = page.locator('#dynamics tr[data-row="cross layer 0"] td').first.get_attribute("data-value")
    assert 0 <= float(cross) <= 1
    page.locator('#dynamics figure.dyn-curves[data-component="cross layer 0"]').wait_for()
    p.screenshot("job-attention-dynamics")
    # the embedding map at both checkpoints (30 and 60), and each watched token's neighbours
    tab(p, "Embeddings").click()
    page.locator("#embeddings svg.emb-map").wait_for()
    expect(page.locator("#embeddings-step-label")).to_have_text("step 60")
    assert page.locator("#embeddings .emb-point").count() >= 50
    watched = page.locator("#embeddings table.emb-neighbours tbody tr")
    assert watched.count() >= 2 and page.locator("#embeddings .emb-point.neighbour").count() >= 1
    second = watched.nth(1).get_attribute("data-token")
    watched.nth(1).get_by_role("button").click()
    assert page.locator("#embeddings .emb-point.marked").get_attribute("data-token") == second
    position = "g => g.querySelector('circle').getAttribute('cx')"
    at_60 = page.locator("#embeddings .emb-point").first.evaluate(position)
    page.locator("#embeddings-step").fill("0")
    assert page.locator("#embeddings-step-label").inner_text() == "step 30"
    assert page.locator("#embeddings .emb-point").first.evaluate(position) != at_60  # training moved it
    p.screenshot("job-embeddings")
    # the model keeps the last ones
    tab(p, "Overview").click()
    page.locator("#model-link").click()
    tab(p, "Embeddings").click()
    page.locator("#embeddings svg.emb-map").wait_for()
    # the job page's map is replaced once the model's record arrives: wait for it rather than read at once
    expect(page.locator("#embeddings-step-label")).to_have_text("step 60")
    # the model explained with its own numbers (tiny: 2 encoder layers, 2 decoder layers of 64, d_ff 256)
    page.locator("#explain-link").click()
    page.locator("#q-projections").wait_for()
    answer = page.locator("#answer-projections").inner_text()
    assert answer.startswith("No. In each of this model's 6 attention sublayers") and "64 × 64 (4,096 weights" in answer
    assert page.locator("#projection-overlaps tbody tr").count() == 6
    assert "4·(64² + 64) = 16,640, the count of this model" in page.locator("#formula-attention").inner_text()
    assert "2·64·256 + 256 + 64 = 33,088, the count of this model" in page.locator("#formula-ffn").inner_text()
    assert page.locator("#formula-attention .ok").count() == 1 and page.locator("#formula-ffn .ok").count() == 1
    assert page.locator("#memory-estimate tr").count() == 5
    assert page.locator("#final-neighbours tr").count() >= 1
    assert page.locator("#last-dynamics tbody tr").count() == 8  # W_Q and W_K of 2 encoder and 2 decoder layers
    # the trainable count is counted on the loaded weights (geometry), and agrees with the config's arithmetic
    model_id = page.url.rsplit("/", 2)[-2]
    anatomy = page.evaluate(
        "async (id) => (await fetch(`/v1/models/${id}/anatomy`, "
        "{headers: {Authorization: `Bearer ${sessionStorage.getItem('transformer.apiKey')}`}})).json()",
        model_id,
    )
    n = anatomy["total_parameters"]
    assert anatomy["precision"] == "fp32"  # the job trained on the CPU without asking for a precision
    trainable = page.locator("#trainable-parameters").inner_text()
    assert trainable.startswith(f"{n:,} of this model's {n:,} parameters have requires_grad set"), trainable
    assert "All " not in page.locator("#q-memory").inner_text()
    # each link opens the job page at its panel
    for panel in ("dynamics", "embeddings", "memory"):
        assert page.locator(f"#{panel}-link").get_attribute("href") == f"#/jobs/{job_id}/{panel}"
    p.screenshot("model-explained")
    page.locator("#memory-link").click()
    page.wait_for_url(re.compile(rf".*#/jobs/{job_id}/memory$"))
    expect(tab(p, "Memory")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#memory")).to_be_visible()
    assert page.locator("#job-summary").count() == 0  # the overview was not built


def test_job_page_shows_the_memory_of_one_training_step_beside_the_estimate(submitted):
    """Measured by the worker before step 1 (on the CPU, fp32): bars per kind, measured beside estimated, the saved
    activations by component and the differences the server computed."""
    p, job_id = submitted
    page = p.page
    p.open(f"#/jobs/{job_id}/memory")  # where the test before left it
    card = page.locator("#memory")
    card.locator("#memory-differences li").first.wait_for(timeout=30_000)
    report = p.page.evaluate(
        "async (id) => (await fetch(`/v1/jobs/${id}/memory`, "
        "{headers: {Authorization: `Bearer ${sessionStorage.getItem('transformer.apiKey')}`}})).json()",
        job_id,
    )
    kinds = ["weights", "gradients", "Adam moments", "autocast weights", "activations", "temporary", "peak"]
    assert card.locator('.bar-row[data-side="measured"]').evaluate_all("rs => rs.map(r => r.dataset.kind)") == kinds
    for side in ("estimated-batch", "estimated-settings"):
        assert card.locator(f'.bar-row[data-side="{side}"]').count() == len(kinds)
    weights = [card.locator(f'.bar-row[data-kind="weights"][data-side="{side}"] .bar-value').inner_text()
               for side in ("measured", "estimated-batch", "estimated-settings")]  # fmt: skip
    assert weights[0] == weights[1] == weights[2] and weights[0].endswith("MiB")  # the exact parameter bytes
    assert report["measured"]["by_kind"]["weights"] == report["estimated"]["weights_bytes"] > 0
    # the legend names what each estimate is for: the batch's padded tokens, the job's max_tokens_per_batch
    measured = report["measured"]
    legend = card.locator("#memory-legend").inner_text()
    assert f"this batch's {measured['batch']['padded_tokens']:,} padded tokens in fp32" in legend
    tokens = measured["tokens_per_batch"]
    assert f"POST /v1/estimate gives for the job's settings, {tokens:,} tokens per batch" in legend
    assert "before the job ran" not in card.inner_text()
    assert "cpu, fp32" in card.inner_text() and "Saved activations by component" in card.inner_text()
    differences = card.locator("#memory-differences li").all_text_contents()
    assert differences == report["differences"] and any("activations measured" in d for d in differences)
    p.screenshot("job-memory")


def test_jobs_list_shows_the_job_and_filters_by_status(submitted):
    p, job_id = submitted
    page = p.page
    page.get_by_role("navigation").get_by_role("link", name="Jobs", exact=True).click()
    row = page.locator(f'tr[data-job="{job_id}"]')
    row.wait_for()
    assert "succeeded" in row.inner_text() and "60/60" in row.inner_text()
    assert row.get_by_role("progressbar").get_attribute("aria-valuenow") == "100"
    p.screenshot("jobs")
    page.get_by_label("Status").select_option("failed")
    row.wait_for(state="detached")
    page.get_by_label("Status").select_option("")
    row.wait_for()


def test_workers_page_shows_each_workers_device_and_memory(page, submitted):
    """Each worker's device and memory; the inference worker's serving: what `auto` means on it and the models it
    holds warm (the job's model, loaded by a translation: not pinned)."""
    http = api(page.stack)
    job = wait_for(lambda: (j := http.get(f"/v1/jobs/{submitted[1]}").json())["status"] in TERMINAL and j, 300, "job")
    assert job["status"] == "succeeded", job
    translated = http.post(f"/v1/models/{job['model_id']}/translate", json={"texts": ["seven"]})
    assert translated.status_code == 200, translated.text
    page.sign_in()
    page.page.get_by_role("navigation").get_by_role("link", name="Workers").click()
    rows = page.page.locator("#workers-table tr[data-worker]")
    rows.first.wait_for()
    assert rows.count() == 2  # the embedded service's training and inference workers
    for i in range(2):
        row = rows.nth(i)
        assert row.get_attribute("data-device") == "cpu"  # no GPU here: both report the CPU
        assert row.locator(".worker-device").inner_text().startswith("CPU ")
        assert re.fullmatch(r"[\d.]+ GiB free of [\d.]+ GiB", row.locator(".worker-memory").inner_text())
    training = page.page.locator('#workers-table tr[data-worker^="training"]')
    assert "training, training.cpu" in training.inner_text()  # it also takes jobs asking for a CPU
    assert training.locator(".worker-serving").inner_text() == "–"
    serving = page.page.locator('#workers-table tr[data-worker^="inference"] .worker-serving')
    expect(serving.locator(".worker-auto")).to_have_text("auto: CTranslate2")  # a CPU worker: no note
    model = serving.locator(f'li[data-model="{job["model_id"]}"]')
    expect(model).to_contain_text(" CTranslate2", timeout=30_000)  # within a heartbeat and a refresh
    assert "pinned" not in model.inner_text() and re.search(r"[\d.]+ s to load", model.inner_text())
    page.screenshot("workers")
