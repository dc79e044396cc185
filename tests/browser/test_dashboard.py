"""The dashboard in a real browser: sign in, upload, submit, watch a job train live, use the trained model,
read API errors, and stay responsive on a job with 100,000 metric points a series."""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from bench.harness.stack import wait_for
from tests.browser.conftest import Page, new_page

TERMINAL = ("succeeded", "failed", "cancelled")
CHARTS_DRAWN = """() => {
  const figures = [...document.querySelectorAll('figure[data-chart]')];
  return figures.length === 4 && figures.every((f) => f.querySelector('canvas'))
    && ['train_loss', 'valid_loss', 'lr', 'bleu', 'tokens_per_second'].every((name) =>
      Number(document.querySelector(`figure[data-series~="${name}"]`)?.getAttribute(`data-points-${name}`)) > 0);
}"""
# Moves the cursor over the loss chart from within the page: how long until its legend shows the values there.
HOVER_MS = """async () => {
  const figure = document.querySelector('figure[data-chart="loss"]');
  const over = figure.querySelector('.u-over'), box = over.getBoundingClientRect();
  const values = () => [...figure.querySelectorAll('.u-legend .u-value')].map((v) => v.textContent).join('|');
  const before = values(), started = performance.now();
  over.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: box.left + box.width * 0.37,
                                                   clientY: box.top + box.height / 2 }));
  while (values() === before && performance.now() - started < 20000) await new Promise(requestAnimationFrame);
  return { ms: performance.now() - started, values: values() };
}"""


def _api(stack) -> httpx.Client:
    return httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {stack.key}"}, timeout=30)


def _fill_training_form(p: Page, **values) -> None:
    for name, value in values.items():
        p.page.locator(f"#{name}").fill(str(value))


def _new_job_form(p: Page, train_file, dataset_name: str | None = None, **values) -> None:
    """Sign in, open the new-job form, upload `train_file` (the form then picks it) and fill the fields `values`
    names by id."""
    p.sign_in()
    p.page.get_by_role("navigation").get_by_role("link", name="New job").click()
    p.page.locator("#upload-file").set_input_files(str(train_file))
    if dataset_name is not None:
        p.page.locator("#upload-name").fill(dataset_name)
    p.page.get_by_role("button", name="Upload dataset").click()
    p.page.wait_for_selector("#upload-status .ok")
    _fill_training_form(p, **values)


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory):
    from model.data.demo import write_demo_files

    return write_demo_files(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def submitted(browser, stack, demo_files):
    """One page, signed in, that uploaded the demo corpus and submitted a tiny job from the form.

    Shared by the tests below, in order: they watch the job train, then use the model it produced.
    """
    p = new_page(browser, stack)
    _new_job_form(p, demo_files["translation_train"], "numbers en-de")
    assert "Uploaded numbers en-de" in p.page.inner_text("#upload-status")
    p.page.select_option("#objective", "translation")
    p.page.select_option("#preset", "tiny")
    _fill_training_form(
        p, vocab_size=500, max_steps=60, max_tokens_per_batch=2048, warmup_steps=30, eval_every=30, checkpoint_every=30
    )
    p.page.locator("#estimate-params").wait_for()
    assert "parameters" in p.page.inner_text("#estimate") and "training memory" in p.page.inner_text("#estimate")
    p.screenshot("new-job")
    p.page.get_by_role("button", name="Submit job").click()
    p.page.wait_for_url(re.compile(r".*#/jobs/[0-9a-f-]{36}$"))
    job_id = p.page.url.rsplit("/", 1)[-1]
    yield p, job_id
    p.page.context.close()
    assert p.errors == [], f"uncaught script errors: {p.errors}"


def _points(p: Page, series: str) -> int:
    """How many points of `series` the job page's chart holds."""
    return int(p.page.get_attribute(f'figure[data-series~="{series}"]', f"data-points-{series}") or 0)


def _job_requests(p: Page, job_id: str, *routes: str) -> list[str]:
    """The page's requests for these routes of the job (GET /v1/jobs/{id}/<route>), in order."""
    paths = {f"/v1/jobs/{job_id}/{route}" for route in routes}
    return [r for r in p.requests if r.split("?")[0] in paths]


def _tab(p: Page, name: str):
    return p.page.get_by_role("tablist").get_by_role("tab", name=name, exact=True)


def _x_scale(p: Page, chart: str) -> list[float]:
    return p.page.evaluate(f"""() => {{ const x = document.querySelector('figure[data-chart="{chart}"]').plot.scales.x;
                                       return [x.min, x.max]; }}""")


def test_job_page_follows_training_live_until_it_succeeds(submitted):
    p, job_id = submitted
    page = p.page
    # Live: points arrive over Server-Sent Events while the job runs (the page was opened while queued).
    wait_for(lambda: _points(p, "train_loss") >= 5, timeout=240, what="live train_loss points", interval=0.5)
    assert page.locator("#job-status .badge").inner_text() in ("running", "succeeded")
    p.screenshot("job-running")
    page.wait_for_selector("#job-status .status-succeeded", timeout=400_000)
    page.wait_for_selector("#model-link")
    wait_for(
        lambda: _points(p, "valid_loss") >= 2 and _points(p, "bleu") >= 2,
        timeout=30,
        what="validation curves",
        interval=0.5,
    )
    loss = page.locator('figure[data-chart="loss"]')
    assert loss.locator("canvas").count() >= 1  # uPlot draws on a canvas
    assert _points(p, "train_loss") == 60 and _points(p, "lr") == 60
    assert _x_scale(p, "loss") == [1, 60]  # the live appends moved the scale with the data
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
    expect(_tab(p, "Overview")).to_have_attribute("aria-selected", "true")
    assert _job_requests(p, job_id, "dynamics", "embeddings", "memory", "logs") == []
    assert not [r for r in p.requests if "/evaluations" in r]
    _tab(p, "Data and settings").click()
    page.wait_for_url(re.compile(rf".*#/jobs/{job_id}/settings$"))
    expect(page.get_by_role("tabpanel")).to_have_attribute("id", "panel-settings")  # the others are hidden
    assert "max_steps: 60" in page.inner_text("#config") and page.locator("#job-summary").is_hidden()
    _tab(p, "Data and settings").focus()
    page.keyboard.press("ArrowRight")
    expect(_tab(p, "Dynamics")).to_be_focused()
    assert _job_requests(p, job_id, "dynamics") == []  # focused is not opened
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*#/jobs/{job_id}/dynamics$"))
    page.locator("#dynamics table.dyn-heat").wait_for()
    assert _job_requests(p, job_id, "dynamics") and _job_requests(p, job_id, "embeddings", "memory", "logs") == []
    page.go_back()
    expect(_tab(p, "Data and settings")).to_have_attribute("aria-selected", "true")
    assert page.locator("#config").is_visible() and page.locator("#dynamics").is_hidden()
    page.go_forward()
    expect(_tab(p, "Dynamics")).to_have_attribute("aria-selected", "true")
    before = len(p.requests)
    page.reload()
    page.locator("#dynamics table.dyn-heat").wait_for()
    expect(_tab(p, "Dynamics")).to_have_attribute("aria-selected", "true")
    assert page.locator("#job-summary").count() == 0  # the overview was not built
    assert not [r for r in p.requests[before:] if r.split("?")[0].endswith(("/metrics", "/events", "/checkpoints"))]


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
    _tab(p, "Embeddings").click()
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
    _tab(p, "Overview").click()
    page.locator("#model-link").click()
    _tab(p, "Embeddings").click()
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
    expect(_tab(p, "Memory")).to_have_attribute("aria-selected", "true")
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


def test_jobs_list_pages_past_100_jobs(page, stack, monkeypatch):
    """105 jobs with one tag: the list shows the newest 100 and a button for the rest, which then shows all 105."""
    with _service_database(stack, monkeypatch) as session:
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


def test_model_playground_translates_with_alternatives_and_alignment(submitted):
    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    _tab(p, "Translate").click()
    page.wait_for_selector("#translate-form")
    nonsense = ["zq xv wk qq", "qwertyuiop asdfgh", "purple elephants dance quietly"]
    page.get_by_label("Text", exact=True).fill("\n".join(["forty two", *nonsense]))
    page.get_by_role("button", name="Translate", exact=True).click()
    page.wait_for_selector(".translation-text", timeout=60_000)
    assert page.locator(".translation-text").first.inner_text().strip()
    assert page.locator(".alternatives li").count() >= 2
    alignment = page.locator("svg.alignment").first  # one line per target token (none if the output is empty)
    n_target = int(re.search(r"alignment of (\d+) target", alignment.get_attribute("aria-label")).group(1))
    assert alignment.locator("line.align-line").count() == n_target
    # each target token and </s> with its probability, and their geometric mean beside the score
    chips = page.locator(".token-probs").first.locator(".token-prob")
    assert chips.count() == n_target + 1 and chips.last.inner_text() == "</s>"
    assert re.search(r"confidence 0\.\d+|confidence 1", page.locator(".confidence").first.inner_text())
    # the low-confidence badge where the confidence is below the model's calibrated threshold, and only there
    model_id = page.url.split("/models/")[1].split("/")[0]
    calibration = _api(p.stack).get(f"/v1/models/{model_id}").json()["confidence_calibration"]
    threshold = calibration["threshold"]
    texts = page.locator(".confidence").all_inner_texts()
    shown = [float(re.search(r"confidence ([\d.]+)", c).group(1)) for c in texts]
    badges = [t.locator(".low-confidence").count() for t in page.locator(".translation-text").all()]
    assert len(shown) == len(badges) == 4 and badges == [int(c < threshold) for c in shown], (shown, badges, threshold)
    # the badge shows on the nonsense lines: on some, as a briefly trained model is sometimes sure of nonsense
    assert sum(badges[1:]) >= 1, (shown, badges, threshold)
    p.screenshot("model-translate")
    _tab(p, "Overview").click()  # the flag's calibration on the overview, as the API gives it
    card = page.locator("#confidence-calibration")
    assert card.locator("#confidence-threshold").inner_text() == str(float(f"{threshold:.4g}"))  # fmtNumber's
    assert f"of {calibration['sentences']} validation sentences" in card.inner_text()
    p.screenshot("model-confidence")


def test_model_playground_looks_texts_up_in_a_translation_memory(submitted, demo_files):
    """The training data as the memory, exact matches used: a text of it comes back as its stored target, marked
    "from memory", with its match at 100%; a text not in it is translated, its fuzzy matches (if any) listed."""
    p, job_id = submitted
    page = p.page
    source, target = json.loads(Path(demo_files["translation_train"]).read_text().splitlines()[0]).values()
    dataset_id = next(
        d["id"] for d in _api(p.stack).get("/v1/datasets?limit=500").json()["data"] if d["name"] == "numbers en-de"
    )
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    _tab(p, "Translate").click()
    page.locator(f'#memory-dataset option[value="{dataset_id}"]').wait_for(state="attached")
    page.select_option("#memory-dataset", dataset_id)
    page.check("#memory-replace")
    page.get_by_label("Text", exact=True).fill(f"{source}\nzq xv wk qq")
    page.get_by_role("button", name="Translate", exact=True).click()
    page.wait_for_selector(".translation-text", timeout=60_000)
    first, second = page.locator(".translation").all()
    assert first.locator(".translation-text").inner_text().startswith(target)
    assert first.locator(".memory-origin").inner_text() == "from memory"
    assert first.locator(".memory-matches tr").first.inner_text().startswith("100%")
    assert second.locator(".memory-origin").count() == 0 and second.locator(".translation-text .muted").count() >= 1
    p.screenshot("model-memory")


def test_model_playground_translates_with_a_glossary(submitted):
    """A glossary chosen in the playground: its term found in the text is in the translation, and the line under it
    says which term and how it got there."""
    p, job_id = submitted
    page = p.page
    glossary = _api(p.stack).post(
        "/v1/glossaries",
        json={
            "name": "playground terms",
            "source_language": "en",
            "target_language": "de",
            "case_sensitive": True,  # VIERZIG is not the model's vierzig
            "entries": [{"source": "forty", "target": "VIERZIG"}],
        },
    )
    assert glossary.status_code == 201, glossary.text
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    _tab(p, "Translate").click()
    page.locator(f'#glossary-choice option[value="{glossary.json()["id"]}"]').wait_for(state="attached")
    page.select_option("#glossary-choice", glossary.json()["id"])
    page.select_option("#memory-dataset", "")
    page.get_by_label("Text", exact=True).fill("forty two")
    page.get_by_role("button", name="Translate", exact=True).click()
    page.wait_for_selector(".glossary-applied", timeout=60_000)
    assert "VIERZIG" in page.locator(".translation-text").first.inner_text()
    assert page.locator(".glossary-applied").inner_text().startswith("glossary: forty → VIERZIG (")
    p.screenshot("model-glossary")
    _tab(p, "Anatomy").click()
    page.wait_for_selector('#anatomy [data-component="encoder.layers.0.self_attn"]')
    segments = page.locator('#anatomy [data-component="decoder.layers.1.encoder_attn"] .seg').all_inner_texts()
    assert {"W_Q", "W_K", "W_V", "W_O"} <= set(segments)
    _tab(p, "Embeddings").click()
    page.get_by_label("Token", exact=True).fill("hundred")
    page.get_by_role("button", name="Find neighbours").click()
    page.wait_for_selector("#neighbors-result .bar-row")
    p.screenshot("model")


def test_the_model_page_downloads_an_export(submitted, tmp_path):
    """The Hugging Face button: the archive the browser saves holds the MarianMTModel folder."""
    import tarfile

    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    page.wait_for_selector("#downloads")
    model_id = page.url.rsplit("/", 1)[1]
    with page.expect_download(timeout=120_000) as info:
        page.locator('#downloads button[data-format="huggingface"]').click()
    saved = tmp_path / info.value.suggested_filename
    info.value.save_as(saved)
    assert saved.name == f"{model_id}-huggingface.tar.gz"
    with tarfile.open(saved) as tar:
        names = tar.getnames()
    assert {f"{model_id}-huggingface/config.json", f"{model_id}-huggingface/model.safetensors"} <= set(names)
    page.wait_for_function("document.querySelector('#download-status').textContent.startsWith('Downloaded')")
    p.screenshot("model-download")


def test_the_model_page_evaluates_on_a_test_set_and_shows_the_scores(submitted):
    """Evaluate on a parallel dataset: the row shows progress, then BLEU, chrF and chrF++ with the signature on
    hover, and the hypotheses button; the scores are the API's."""
    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    _tab(p, "Evaluations").click()
    page.wait_for_selector("#evaluate-dataset option", state="attached")
    model_id = page.url.rsplit("/", 2)[1]  # #/models/<id>/evaluations
    page.locator("#evaluate-tokenize").select_option("intl")
    assert page.locator("#evaluate-alpha").input_value() == "0.6"
    page.locator("#evaluate-alpha").fill("0.8")
    page.get_by_role("button", name="Evaluate", exact=True).click()
    page.wait_for_selector("#evaluations-table tr[data-evaluation] .status-succeeded", timeout=120_000)
    headers = {"Authorization": f"Bearer {p.stack.key}"}
    evaluation = httpx.get(f"{p.stack.url}/v1/models/{model_id}/evaluations", headers=headers).json()["data"][0]
    assert evaluation["settings"]["alpha"] == 0.8
    assert "alpha 0.8" in page.locator('#evaluations-table td[data-label="Settings"]').first.inner_text()
    chrf = page.locator('#evaluations-table td[data-label="chrF"] span').first
    assert chrf.inner_text() == f"{evaluation['scores']['chrf']['score']:.2f}"
    assert "tok:intl" in page.locator('#evaluations-table td[data-label="BLEU"] span').first.get_attribute("title")
    assert page.locator("#evaluations-table button", has_text="hypotheses").count() == 1
    split = evaluation["scores"]["confidence"]  # the model's low-confidence flag on this test set
    shown = page.locator('#evaluations-table td[data-label="Low confidence"]').first.inner_text()
    assert shown.startswith(f"{100 * split['flagged_share']:.0f}% (chrF "), (shown, split)
    page.locator("#evaluations").scroll_into_view_if_needed()
    p.screenshot("model-evaluations")


def test_fine_tune_starts_a_job_from_the_model_and_its_model_names_the_parent(submitted):
    """The model page's Fine-tune button opens the form starting from that model (its architecture card hidden);
    the job trains, scores its test set, and its model links back to the parent."""
    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    page.wait_for_selector("#fine-tune")
    parent = page.url.rsplit("/", 1)[1]
    page.locator("#fine-tune").click()
    page.wait_for_selector(f"#init-model option[value='{parent}']", state="attached")
    assert page.locator("#init-model").input_value() == parent
    assert page.locator("#model-settings").is_hidden()
    page.locator("#estimate", has_text=f"model {parent[:8]}'s architecture").wait_for()
    page.locator("#test-dataset").select_option(index=1)
    _fill_training_form(p, max_steps=10, warmup_steps=5, eval_every=10, checkpoint_every=10, max_tokens_per_batch=2048)
    p.screenshot("new-job-fine-tune")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(re.compile(r".*#/jobs/[0-9a-f-]{36}$"))
    page.wait_for_selector("#model-link", timeout=180_000)
    page.locator("#model-link").click()
    page.wait_for_selector("#parent-model")
    assert page.locator("#parent-model").get_attribute("href") == f"#/models/{parent}"
    _tab(p, "Evaluations").click()
    page.wait_for_selector("#evaluations-table tr[data-evaluation] .status-succeeded", timeout=120_000)
    assert "(its job's)" in page.inner_text("#evaluations-table")
    p.screenshot("model-fine-tuned")


def test_the_models_page_imports_an_archive_and_says_why_it_refuses_one(submitted, tmp_path):
    p, job_id = submitted
    page = p.page
    headers = {"Authorization": f"Bearer {p.stack.key}"}
    model_id = httpx.get(f"{p.stack.url}/v1/jobs/{job_id}", headers=headers).json()["model_id"]
    archive = httpx.get(f"{p.stack.url}/v1/models/{model_id}/export?format=native", headers=headers, timeout=120)
    assert archive.status_code == 200
    (tmp_path / "native.tar.gz").write_bytes(archive.content)
    (tmp_path / "junk.tar.gz").write_bytes(b"not an archive")
    page.goto(f"{p.stack.url}/dashboard#/models")
    page.locator("#import summary").click()
    page.locator("#import-file").set_input_files(str(tmp_path / "junk.tar.gz"))
    page.locator("#import-button").click()
    page.locator("#import-status .error", has_text="not a readable .tar.gz archive").wait_for()
    page.locator("#import-file").set_input_files(str(tmp_path / "native.tar.gz"))
    page.locator("#import-button").click()
    page.wait_for_url(re.compile(r".*#/models/[0-9a-f-]{36}$"), timeout=60_000)
    imported = page.url.rsplit("/", 1)[1]
    assert imported != model_id
    page.locator(".page-head", has_text="imported").wait_for()
    p.screenshot("model-imported")


def test_the_model_page_translates_a_file(submitted, tmp_path):
    """Upload a text file with its source language and a beam: progress, then a download of the same lines
    translated; the translation used the language and beam asked for."""
    p, job_id = submitted
    page = p.page
    page.goto(f"{p.stack.url}/dashboard#/jobs/{job_id}")
    page.locator("#model-link").click()
    _tab(p, "Translate").click()
    page.wait_for_selector("#file-translation")
    model_id = page.url.rsplit("/", 2)[1]  # #/models/<id>/playground
    source = tmp_path / "numbers.txt"
    source.write_text("forty two\n\nthree hundred and twelve\n", encoding="utf-8")
    page.locator("#translate-file").set_input_files(str(source))
    language, beam = page.locator("#translate-language"), page.locator("#translate-beam")
    assert (language.input_value(), beam.input_value()) == ("en", "4")
    language.fill("de")
    beam.fill("2")
    page.locator("#translate-file-button").click()
    page.wait_for_selector("#file-translation-download", timeout=60_000)
    assert "(de, beam 2)" in page.inner_text("#file-translation-status")
    headers = {"Authorization": f"Bearer {p.stack.key}"}
    row = httpx.get(f"{p.stack.url}/v1/models/{model_id}/translations", headers=headers).json()["data"][0]
    assert (row["settings"]["language"], row["settings"]["beam_size"]) == ("de", 2)
    with page.expect_download() as info:
        page.locator("#file-translation-download").click()
    saved = tmp_path / "out.txt"
    info.value.save_as(saved)
    lines = saved.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[0] and lines[2]
    page.locator("#file-translation").scroll_into_view_if_needed()
    p.screenshot("model-file-translation")


def test_attention_viewer_draws_heatmaps_with_hover(submitted):
    p, _ = submitted
    page = p.page
    _tab(p, "Attention").click()  # the model's page, where the test before left it
    page.get_by_label("Source text").fill("forty two")
    page.get_by_role("button", name="Show attention").click()
    page.wait_for_selector("svg.heatmap rect.cell", timeout=60_000)
    assert page.locator(".heat-card").count() == 3
    cells = page.locator("svg.heatmap").first.locator("rect.cell")
    assert cells.count() >= 4
    cells.nth(1).hover()
    assert "→" in page.locator(".heat-readout").first.inner_text()
    page.get_by_label("Layer", exact=True).select_option("1")
    page.get_by_label("Head", exact=True).select_option("2")
    assert "layer 2, head 3" in page.locator(".heat-card figcaption").first.inner_text()
    page.locator("#attention").scroll_into_view_if_needed()
    p.screenshot("attention")


def test_a_time_budget_leaves_blank_settings_to_the_worker_and_shows_its_choice(page, demo_files):
    """The form offers preset auto by default and its time budget blanks vocabulary, steps, batch and warm-up; the
    job page then shows what the worker chose for them and which preset, with its reasons and the presets' tokens/s
    (in 6 seconds only tiny is worth timing on a CPU)."""
    p = page
    _new_job_form(p, demo_files["translation_train"])
    assert p.page.locator("#preset").input_value() == "auto"
    assert "the smallest it may choose" in p.page.locator("#estimate-auto").inner_text()
    p.page.locator("#max_minutes").fill("0.1")
    for name in ("vocab_size", "max_steps", "max_tokens_per_batch", "warmup_steps"):
        assert p.page.locator(f"#{name}").input_value() == ""
        assert p.page.locator(f"#{name}").get_attribute("placeholder") == "from the budget"
    p.page.get_by_role("button", name="Submit job").click()
    p.page.wait_for_url(re.compile(r".*#/jobs/[0-9a-f-]{36}$"))
    _tab(p, "Data and settings").click()
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
    _new_job_form(p, demo_files["translation_train"])
    p.page.select_option("#preset", "tiny")
    _fill_training_form(p, vocab_size=500, max_steps=20)
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
    http = _api(p.stack)
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
    http = _api(p.stack)
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


def _job_with_many_points(stack, monkeypatch, n_steps: int, spike_at: int | None = None, training=None) -> str:
    """A (cancelled) job with n_steps points of each per-step series inserted straight into the database in bulk
    (in place of any the worker wrote before the cancel); the training loss jumps to 30 for one step at `spike_at`."""
    http = _api(stack)
    dataset = http.post(
        "/v1/datasets", data={"name": "tiny", "kind": "parallel"}, files={"file": ("t.tsv", b"one\teins\ntwo\tzwei\n")}
    ).json()
    job = http.post(
        "/v1/jobs",
        json={
            "objective": "translation",
            "dataset_id": dataset["id"],
            "model": {"preset": "tiny", "vocab_size": 300},
            "training": {"max_steps": n_steps, **(training or {})},
        },
    ).json()
    http.post(f"/v1/jobs/{job['id']}/cancel")
    wait_for(
        lambda: http.get(f"/v1/jobs/{job['id']}").json()["status"] in TERMINAL,
        timeout=60,
        what="the job to be cancelled",
        interval=0.5,
    )
    rows = []
    for step in range(1, n_steps + 1):
        values = {
            "train_loss": 30.0 if step == spike_at else 6 * math.exp(-step / 3000) + 0.3 * math.sin(step / 7),
            "lr": min(step**-0.5, step * 4000**-1.5) / 8,
            "tokens_per_second": 2000 + step % 97,
        }
        if step % 200 == 0:
            values.update(valid_loss=5 * math.exp(-step / 4000), bleu=min(60.0, step / 300))
        rows.extend({"job_id": job["id"], "step": step, "name": k, "value": v} for k, v in values.items())
    with _service_database(stack, monkeypatch) as session:
        from app.db.run_record_tables import Metric

        # the idle worker may have trained a step or two before the cancel reached it: its points give way
        session.execute(Metric.__table__.delete().where(Metric.job_id == job["id"]))
        session.execute(Metric.__table__.insert(), rows)
    return job["id"]


@contextlib.contextmanager
def _service_database(stack, monkeypatch):
    """A session on the embedded service's own database."""
    from tests.support.app_caches import reset_caches

    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "ARTIFACT_ROOT", "ENVIRONMENT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATA_DIR", str(stack.data_dir))
    reset_caches()
    try:
        from app.db.session import session_scope

        with session_scope() as session:
            yield session
    finally:
        reset_caches()


def test_job_with_100000_points_draws_a_bounded_history_quickly_and_zooms(page, stack, monkeypatch):
    """100,000 points a per-step series: the page asks for a downsampled history (lowest and highest a bucket, so
    the one-step spike is drawn), draws train and validation loss on one uPlot chart within seconds, shows both
    series' values on hover, and zooms on a drag (double-click resets)."""
    job_id = _job_with_many_points(stack, monkeypatch, 100_000, spike_at=61_234)
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
    assert 1_000 <= _points(page, "train_loss") <= 4001 and _points(page, "valid_loss") == 500
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
    before = _x_scale(page, "loss")
    assert before == [1, 100_000]
    y = box["y"] + box["height"] / 2
    page.page.mouse.move(box["x"] + box["width"] * 0.2, y)
    page.page.mouse.down()
    page.page.mouse.move(box["x"] + box["width"] * 0.4, y, steps=5)
    page.page.mouse.up()
    low, high = _x_scale(page, "loss")
    assert 15_000 < low < high < 45_000, (low, high)  # the dragged fifth of the axis
    coarse = sum(low <= x <= high for x in series["train_loss"]["steps"])
    page.page.locator('figure[data-chart="loss"][data-refined]').wait_for(state="attached")
    detailed = page.page.evaluate(f"""() => {{ const [xs, train] = document.querySelector('figure[data-chart="loss"]')
                                              .plot.data; return xs.filter((x, i) => x >= {low} && x <= {high}
                                                                      && train[i] !== null).length; }}""")
    assert detailed > 1.5 * coarse, (detailed, coarse)  # the steps in view, read again in more detail
    assert _x_scale(page, "loss") == [low, high]  # and the view stays where the drag put it
    page.screenshot("job-100000-points-zoomed")
    page.page.mouse.dblclick(box["x"] + box["width"] / 2, y)
    assert _x_scale(page, "loss") == before
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


def test_a_job_with_a_time_budget_shows_its_progress_by_time(page, stack, monkeypatch):
    """Step 86 of 10,000,000 with 8 of its 20 minutes left: the list and the job page show 60% done by time and
    "12 of 20 min", not 0% by steps, and the ETA is the time left."""
    http = _api(stack)
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
    with _service_database(stack, monkeypatch) as session:
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


def test_workers_page_shows_each_workers_device_and_memory(page, submitted):
    """Each worker's device and memory; the inference worker's serving: what `auto` means on it and the models it
    holds warm (the job's model, loaded by a translation: not pinned)."""
    http = _api(page.stack)
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


def test_jobs_show_their_labels_filter_by_tag_and_the_job_page_edits_them(page, demo_files):
    """Names and tags given at submission show in the list, a tag filters it (and is kept in the address); the job
    page saves new labels with PATCH, and refuses a bad tag saying why."""
    http = _api(page.stack)
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
    _new_job_form(p, demo_files["translation_train"], vocab_size=500, max_steps=20)
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
    _tab(p, "Data and settings").click()
    assert "probe_tokens" in p.page.inner_text("#config")
    http = _api(p.stack)
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


def _four_digits(x: float) -> str:
    """A number as the dashboard shows it (ui.js fmtNumber): four significant digits, no trailing zeros."""
    rounded = float(f"{x:.4g}")
    return str(int(rounded)) if rounded.is_integer() else repr(rounded)


def test_ticked_jobs_open_a_comparison_of_their_curves_and_the_settings_that_differ(page, stack, monkeypatch):
    """Two jobs ticked in the list open #/compare: one uPlot chart a metric with a series a job, the x-axis by step
    or time, log scale and smoothing; the table holds only the settings that differ and sorts by a column, with each
    job's best and final value of each metric. The charts' state is read from their uPlot instances (the figure's
    `plot`): the log scale switches the y scale's distribution, smoothing changes the values drawn."""
    short, long = (_job_with_many_points(stack, monkeypatch, n) for n in (2_000, 3_000))
    with _service_database(stack, monkeypatch) as session:  # the worker may take a job before its cancel lands:
        from app.db.tables import Job  # "never started" is made certain for the short run the check below names

        session.query(Job).filter(Job.id == short).update({"started_at": None})
    http = _api(stack)
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
    for job_id, n in ((short, 2_000), (long, 3_000)):  # the seeded series (_job_with_many_points) over all steps
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
        assert shown == {column: _four_digits(value) for column, value in expected.items()}, shown
    page.screenshot("compare-runs")
    assert page.errors == [], page.errors


def _model_rows(stack, monkeypatch, count: int) -> list[str]:
    """`count` translation models of the stack's key written straight into its database (no files: the registry
    card never loads them), oldest first."""
    from tests.support.app_caches import reset_caches

    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "ARTIFACT_ROOT", "ENVIRONMENT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATA_DIR", str(stack.data_dir))
    reset_caches()
    try:
        from app.db.keys import identify
        from app.db.session import session_scope
        from app.db.tables import TrainedModel
        from model.nn.config import ModelConfig

        with session_scope() as session:
            caller = identify(session, stack.key)
            assert caller is not None
            models = [
                TrainedModel(
                    owner_id=caller.owner_id,
                    objective="translation",
                    config=ModelConfig.from_preset("tiny", 489).to_dict(),
                    tokenizer_fingerprint="f",
                    metrics={"bleu": 10.0 + i},
                    source="import",
                    parameters=1,
                    storage_key="models/none",
                    sha256="0" * 64,
                    size_bytes=1,
                )
                for i in range(count)
            ]
            session.add_all(models)
            session.flush()
            return [m.id for m in models]
    finally:
        reset_caches()


def test_the_model_page_registers_a_model_and_points_an_alias_at_it(page, stack, monkeypatch):
    """The registry card names a model (it becomes that name's next version, shown as name@version on its page and
    in the list), saves tags, description and languages, refuses a bad name saying why, and points an alias of the
    name at the version shown; name@alias opens the version it points at. The card lists the alias's moves, newest
    first: from which version to which, by which key."""
    first, second = _model_rows(stack, monkeypatch, 2)
    http = _api(stack)
    p = page
    p.sign_in()
    for model_id, version in ((first, 1), (second, 2)):
        p.open(f"#/models/{model_id}")
        p.page.locator("#registry").wait_for()
        assert p.page.locator("#model-ref").inner_text() == "not registered"
        p.page.locator("#model-name").fill("Numbers EN")
        p.page.get_by_role("button", name="Save", exact=True).click()
        refusal = p.page.locator("#registry-status .error")
        refusal.wait_for()
        assert "Not saved" in refusal.inner_text() and "'Numbers EN'" in refusal.inner_text()
        p.page.locator("#model-name").fill("numbers-en-de")
        p.page.locator("#model-tags").fill("numbers, small, numbers")
        p.page.locator("#model-source-language").fill("en")
        p.page.locator("#model-target-language").fill("de")
        p.page.locator("#model-description").fill("spells numbers in German")
        p.page.locator("#model-license").fill("apache-2.0")
        p.page.get_by_role("button", name="Save", exact=True).click()
        p.page.locator("#model-ref", has_text=f"numbers-en-de@{version}").wait_for()
        assert p.page.locator("h1").inner_text() == f"Model numbers-en-de@{version}"
        assert p.page.locator("#model-tags").input_value() == "numbers, small"
        p.page.locator("#alias-name").fill("production")
        p.page.get_by_role("button", name="Point alias here").click()
        p.page.locator("#registry .tag.alias", has_text="@production").wait_for()
        assert http.get("/v1/models/numbers-en-de@production").json()["id"] == model_id
        moves = p.page.locator("#alias-moves-table tbody tr")
        moves.nth(version - 1).wait_for()  # the move just made, listed with the earlier ones
        listed = [
            [moves.nth(i).locator(f"td.{cell}").inner_text() for cell in ("from", "to", "by")]
            for i in range(moves.count())
        ]
        by = f"{stack.key[:10]}…"
        made = [["numbers-en-de@1", "numbers-en-de@2", by]] if version == 2 else []
        assert listed == [*made, ["new", "numbers-en-de@1", by]], listed
        assert moves.first.locator("td").nth(1).inner_text() == "@production"
    p.screenshot("model-registry")
    p.page.locator("#model-card-box summary").click()  # the card its downloads carry says what was just saved
    p.page.locator("#model-card", has_text="license: apache-2.0").wait_for()
    card = p.page.locator("#model-card").inner_text()
    assert card.startswith("---\nlanguage:\n- en\n- de\n") and "# numbers-en-de v2" in card
    p.screenshot("model-card")
    saved = http.get(f"/v1/models/{first}").json()
    assert (saved["name"], saved["version"], saved["tags"], saved["aliases"]) == (
        "numbers-en-de",
        1,
        ["numbers", "small"],
        [],  # production moved on to version 2
    )
    assert (saved["source_language"], saved["target_language"], saved["license"]) == ("en", "de", "apache-2.0")
    history = http.get("/v1/models/numbers-en-de/aliases/production/history").json()["data"]
    assert [(e["from_version"], e["to_version"]) for e in history] == [(1, 2), (None, 1)]

    p.page.get_by_role("navigation").get_by_role("link", name="Models").click()
    # the list's own links (a.model-ref): the model page's alias moves link both versions too, and may still be
    # shown for a moment before the list replaces it
    listed = p.page.locator("a.model-ref")
    listed.filter(has_text="numbers-en-de@2").wait_for()
    assert listed.filter(has_text="numbers-en-de@1").count() == 1
    p.screenshot("models-registered")
    p.open("#/models/numbers-en-de@production")
    p.page.locator("#model-ref", has_text="numbers-en-de@2").wait_for()
    assert p.page.locator("#model-languages").inner_text() == "en → de"


def test_the_job_page_shows_the_jobs_log_and_appends_new_lines_while_it_runs(page, stack, demo_files):
    """The worker's lines about a running job appear in the log panel, new ones appended as they are written,
    levels coloured; its last lines (the cancellation) still arrive after the job ends."""
    http = _api(stack)
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
    expect(_tab(page, "Log")).to_have_attribute("aria-selected", "true")
    assert _job_requests(page, job["id"], "metrics", "events") == []  # the overview's curves: not opened
    page.screenshot("job-log")
    assert http.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
    log.locator(".log-line", has_text="cancelled at step").wait_for(timeout=60_000)
    page.screenshot("job-log-cancelled")
