"""The dashboard's pipelines in a real browser: the list (each pipeline's kind, status, the step it is at, its
model), a pipeline's page with its steps drawn as a chain of boxes joined by arrows (each step's object and what it
made, the model or dataset passed along), followed live as a step ends; Cancel, Retry and Delete, and the service's
refusal shown.

The pipelines are made as a user makes them: datasets uploaded, POST /v1/pipelines. Their jobs ask for a GPU
worker, so the stack's CPU worker leaves them queued. What a worker would do with each step is done here, in the
stack's own database, as tests/api/test_pipelines.py does: a job's end written with its model row, a dataset
translation's end with the dataset it made, a filtered dataset made by the worker's own call; and
pipeline_runner.advance moves the pipeline on, with the pipeline's row locked from before the step's end is written,
so the stack's reaper (which moves pipelines on too, and would send the next step's message) waits for that turn
and finds the next step started and nothing to do.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from bench.harness.stack import wait_for
from tests.browser.conftest import Page, new_page
from tests.browser.support import api, service_database, shot
from tests.support.job_ends import end_job

GPU_JOB = {"training": {"max_steps": 5, "accelerator": "gpu"}}  # left queued by the stack's CPU worker


def _upload(http, name: str, lines: list[str], kind: str = "parallel", **languages: str) -> str:
    data = "".join(line + "\n" for line in lines).encode()
    suffix = "tsv" if kind == "parallel" else "txt"
    response = http.post(
        "/v1/datasets", data={"name": name, "kind": kind, **languages}, files={"file": (f"d.{suffix}", data)}
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _backtranslation(corpora: dict[str, str], name: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "backtranslation", "name": name, "dataset_id": corpora["real"],
        "monolingual_dataset_id": corpora["monolingual"], "valid_dataset_id": corpora["valid"],
        "reverse_job": GPU_JOB, "job": GPU_JOB, **extra,
    }  # fmt: skip


@contextlib.contextmanager
def _turn(stack, pipeline_id: str) -> Iterator[Any]:
    """A session on the stack's database holding the pipeline's row: write a step's end in it, and on leaving,
    advance the pipeline in the same transaction (the reaper waits for it, then finds nothing new)."""
    from app.core.settings import get_settings
    from app.services import pipeline_runner

    with service_database(stack) as session:
        pipeline_runner.lock(session, pipeline_id)
        yield session
        pipeline_runner.advance(session, get_settings(), pipeline_id)


def _end_translation(session, translation_id: str, dataset_id: str) -> None:
    """The dataset translation's end as its worker writes it: succeeded, with the (parsed) dataset it made."""
    from app.db.dataset_translation_tables import DatasetTranslation

    row = session.get(DatasetTranslation, translation_id)
    row.status, row.output_dataset_id = "succeeded", dataset_id


def _steps(http, pipeline_id: str) -> list[dict[str, Any]]:
    return http.get(f"/v1/pipelines/{pipeline_id}").json()["steps"]


@pytest.fixture(scope="module")
def seeded(stack) -> dict[str, Any]:
    """Three back-translations of the same data: "bt-live" at its clean step (its reverse job and back-translation
    done), "bt-oom" failed at its reverse job, "bt-done" (no clean step) succeeded with its model. Their ids and
    their steps' objects."""
    http = api(stack)
    numbers = ["one", "two", "three", "four", "five", "six", "seven", "eight"]
    corpora = {
        "real": _upload(
            http, "numbers en-de", [f"{n}\t{n} eins" for n in numbers], source_language="en", target_language="de"
        ),
        "monolingual": _upload(http, "numbers de", [f"{n} zwei" for n in numbers], "monolingual", source_language="de"),
        "valid": _upload(http, "numbers valid", ["nine\tneun", "ten\tzehn"]),
        # what a back-translation makes: tagged synthetic sources, real targets (its worker's output, uploaded)
        "synthetic": _upload(http, "bt synthetic", [f"<BT> {n}\t{n} zwei" for n in numbers] * 2),
    }
    wait_for(lambda: all(http.get(f"/v1/datasets/{d}").json()["status"] == "ready" for d in corpora.values()),
             timeout=60, what="the uploaded datasets to be ready")  # fmt: skip
    made: dict[str, Any] = {"corpora": corpora}
    for name, extra in (("bt-live", {}), ("bt-oom", {}), ("bt-done", {"cleaning": None})):
        response = http.post("/v1/pipelines", json=_backtranslation(corpora, name, **extra))
        assert response.status_code == 201, response.text
        made[name] = response.json()["id"]

    live = made["bt-live"]  # reverse job done, its back-translation done, its clean step running
    made["live-reverse-job"] = _steps(http, live)[0]["id"]
    with _turn(stack, live) as session:
        made["reverse-model"] = end_job(session, made["live-reverse-job"])
    made["live-translation"] = _steps(http, live)[1]["id"]
    with _turn(stack, live) as session:
        _end_translation(session, made["live-translation"], corpora["synthetic"])
    made["live-clean"] = _steps(http, live)[2]["id"]

    oom = made["bt-oom"]
    made["oom-job"] = _steps(http, oom)[0]["id"]
    with _turn(stack, oom) as session:
        end_job(session, made["oom-job"], "failed", "CUDA out of memory")

    done = made["bt-done"]
    with _turn(stack, done) as session:
        end_job(session, _steps(http, done)[0]["id"])
    with _turn(stack, done) as session:
        _end_translation(session, _steps(http, done)[1]["id"], corpora["synthetic"])
    with _turn(stack, done) as session:
        made["done-model"] = end_job(session, _steps(http, done)[2]["id"])

    statuses = {n: [s["status"] for s in _steps(http, made[n])] for n in ("bt-live", "bt-oom", "bt-done")}
    assert statuses == {
        "bt-live": ["succeeded", "succeeded", "running", "waiting"],
        "bt-oom": ["failed", "waiting", "waiting", "waiting"],
        "bt-done": ["succeeded", "succeeded", "succeeded"],
    }, statuses
    return made


def _box(p: Page, step: str):
    return p.page.locator(f'#pipeline-chain .pipe-step[data-step="{step}"]')


def _href(locator) -> str:
    return locator.get_attribute("href")


def test_the_pipelines_list_shows_each_pipelines_step_and_model_and_a_row_opens_it(page, seeded):
    page.sign_in()
    page.page.get_by_role("navigation").get_by_role("link", name="Pipelines").click()
    rows = page.page.locator("#pipelines-table tr[data-pipeline]")
    expect(rows).to_have_count(3)
    cells = {
        row.locator("td a").first.inner_text(): [
            row.locator(f'td[data-label="{c}"]').inner_text().strip() for c in ("Kind", "Status", "Step")
        ]
        for row in rows.all()
    }
    assert cells == {
        "bt-live": ["back-translation", "running", "3/4 clean"],
        "bt-oom": ["back-translation", "failed", "1/4 reverse"],
        "bt-done": ["back-translation", "succeeded", "3/3 train"],
    }, cells
    done = page.page.locator(f'tr[data-pipeline="{seeded["bt-done"]}"]')
    assert _href(done.locator('a[data-link="model"]')) == f"#/models/{seeded['done-model']}"
    assert page.page.locator(f'tr[data-pipeline="{seeded["bt-live"]}"] [data-link="model"]').count() == 0
    assert "python -m app.cli pipeline FILE" in page.page.locator("#pipelines-help").inner_text()
    page.page.locator('#pipelines-table button.sort[data-column="Pipeline"]').click()  # sorted by name
    expect(rows.locator("td:first-child a")).to_have_text(["bt-done", "bt-live", "bt-oom"])
    page.screenshot("pipelines-list")
    done.locator('td[data-label="Kind"]').click()  # the row, not only its name, opens the pipeline
    page.page.wait_for_url(re.compile(rf".*#/pipelines/{seeded['bt-done']}$"))
    assert _href(page.page.locator("#pipeline-model")) == f"#/models/{seeded['done-model']}"
    expect(page.page.locator("#pipeline-chain .pipe-link.passed")).to_have_count(2)
    assert page.page.locator("#cancel-pipeline, #retry-pipeline").count() == 0
    expect(page.page.locator("#delete-pipeline")).to_be_visible()


def test_the_pipeline_page_draws_its_steps_as_a_chain_and_follows_it(page, stack, seeded):
    http = api(stack)
    page.sign_in()
    page.open(f"#/pipelines/{seeded['bt-live']}")
    chain = page.page.locator("#pipeline-chain")
    chain.wait_for()
    assert page.page.locator("h1").inner_text().startswith("Pipeline bt-live")
    assert page.page.locator("#pipeline-summary .badge").first.inner_text() == "running"
    assert page.page.locator("#pipeline-at").inner_text() == "at step 3 of 4: clean"
    boxes = chain.locator(".pipe-step")
    assert boxes.evaluate_all("bs => bs.map(b => [b.dataset.step, b.dataset.status])") == [
        ["reverse", "succeeded"], ["back-translate", "succeeded"], ["clean", "running"], ["train", "waiting"]
    ]  # fmt: skip
    assert [b.locator('[data-field="status"]').inner_text() for b in boxes.all()] == [
        "succeeded", "succeeded", "running", "waiting"
    ]  # fmt: skip
    # each step's object and what it made, linked to their pages
    reverse, translate, clean, train = (_box(page, s) for s in ("reverse", "back-translate", "clean", "train"))
    assert _href(reverse.locator('a[data-link="object"]')) == f"#/jobs/{seeded['live-reverse-job']}"
    assert _href(reverse.locator('a[data-link="made"]')) == f"#/models/{seeded['reverse-model']}"
    assert _href(translate.locator('a[data-link="object"]')) == f"#/models/{seeded['reverse-model']}"
    translation = translate.locator('[data-field="object"]').inner_text()
    assert translation.startswith(f"translation {seeded['live-translation'][:8]} by model")
    assert _href(translate.locator('a[data-link="made"]')) == f"#/datasets/{seeded['corpora']['synthetic']}"
    assert _href(clean.locator('a[data-link="object"]')) == f"#/datasets/{seeded['live-clean']}"
    assert clean.locator('[data-field="made"]').inner_text() == "makes a dataset"
    assert train.locator('[data-field="object"]').inner_text() == "not started"
    # over each arrow, what the step before passes on: the reverse model, the synthetic pairs, (not yet) the cleaned
    arrows = chain.locator(".pipe-link")
    assert arrows.evaluate_all("ls => ls.map(l => [l.dataset.after, l.classList.contains('passed')])") == [
        ["reverse", True], ["back-translate", True], ["clean", False]
    ]  # fmt: skip
    assert _href(arrows.nth(0).locator("a")) == f"#/models/{seeded['reverse-model']}"
    assert _href(arrows.nth(1).locator("a")) == f"#/datasets/{seeded['corpora']['synthetic']}"
    assert arrows.nth(2).inner_text().strip() == "dataset"
    # drawn in a row, left to right, an arrow between each two boxes
    items = chain.locator(":scope > li").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect(); "
        "return [e.className, r.left, r.right, r.top + r.height / 2]; })"
    )
    assert [c for c, *_ in items] == ["pipe-step", "pipe-link passed", "pipe-step", "pipe-link passed", "pipe-step",
                                      "pipe-link", "pipe-step"]  # fmt: skip
    assert all(a[2] <= b[1] + 0.5 for a, b in zip(items, items[1:], strict=False)), items  # none overlaps the next
    assert max(abs(i[3] - items[0][3]) for i in items) < 2, items  # on one line
    assert items[-1][2] <= 1280
    assert page.page.locator("#cancel-pipeline").is_visible()
    assert page.page.locator("#retry-pipeline, #delete-pipeline").count() == 0
    assert page.page.locator("#pipeline-note").inner_text().startswith("Live")
    page.screenshot("pipeline-running")
    shot(page.page.locator("#pipeline-steps"), "pipeline-running-chain")

    # the cleaning ends (the data worker's own call): the page sees it, and the forward job start, by itself
    from worker.data import filtering

    with service_database(stack):
        assert filtering.make(seeded["live-clean"]) == "ready"
    with _turn(stack, seeded["bt-live"]):
        pass  # (or the reaper did it first)
    expect(train).to_have_attribute("data-status", "running", timeout=10_000)
    expect(clean).to_have_attribute("data-status", "succeeded")
    forward = _steps(http, seeded["bt-live"])[3]["id"]
    assert _href(train.locator('a[data-link="object"]')) == f"#/jobs/{forward}"
    assert _href(chain.locator(".pipe-link").nth(2).locator("a")) == f"#/datasets/{seeded['live-clean']}"

    page.page.once("dialog", lambda dialog: dialog.accept())
    page.page.locator("#cancel-pipeline").click()
    expect(page.page.locator('#view[data-status="cancelled"]')).to_have_count(1)
    expect(train).to_have_attribute("data-status", "cancelled")
    assert http.get(f"/v1/jobs/{forward}").json()["status"] == "cancelled"
    note = page.page.locator('#pipeline-step-notes .pipe-note[data-step="train"]')
    assert note.locator('[data-field="error"]').inner_text() == "the job was cancelled"
    assert page.page.locator("#cancel-pipeline").count() == 0
    page.screenshot("pipeline-cancelled")
    page.page.once("dialog", lambda dialog: dialog.accept())
    page.page.locator("#delete-pipeline").click()
    page.page.wait_for_url(re.compile(r".*#/pipelines$"))
    expect(page.page.locator("#pipelines-table tr[data-pipeline]")).to_have_count(2)
    assert http.get(f"/v1/pipelines/{seeded['bt-live']}").status_code == 404
    assert http.get(f"/v1/jobs/{forward}").status_code == 200  # its steps' objects stay


def test_a_failed_pipeline_shows_its_error_and_retries_and_a_refusal_is_shown(page, stack, seeded):
    http = api(stack)
    oom, first = seeded["bt-oom"], seeded["oom-job"]
    page.sign_in()
    page.open(f"#/pipelines/{oom}")
    error = page.page.locator("#pipeline-error")
    error.wait_for()
    assert error.locator("pre").inner_text() == f"step 1 (reverse) failed: job {first} failed: CUDA out of memory"
    assert _box(page, "reverse").get_attribute("data-status") == "failed"
    note = page.page.locator('#pipeline-step-notes .pipe-note[data-step="reverse"]')
    assert note.locator('[data-field="error"]').inner_text() == f"job {first} failed: CUDA out of memory"
    assert page.page.locator("#cancel-pipeline").count() == 0
    expect(page.page.locator("#delete-pipeline")).to_be_visible()
    page.screenshot("pipeline-failed")

    page.page.locator("#retry-pipeline").click()
    expect(page.page.locator('#view[data-status="running"]')).to_have_count(1)
    expect(_box(page, "reverse")).to_have_attribute("data-status", "running")
    assert page.page.locator("#pipeline-error").count() == 0
    retried = _steps(http, oom)[0]
    assert retried["earlier"] == [first] and retried["id"] != first
    assert _href(_box(page, "reverse").locator('a[data-link="object"]')) == f"#/jobs/{retried['id']}"
    earlier = note.locator('[data-field="earlier"]')
    assert _href(earlier.locator("a")) == f"#/jobs/{first}"
    assert "1 earlier attempt" in _box(page, "reverse").inner_text()
    page.screenshot("pipeline-retried")

    page.page.once("dialog", lambda dialog: dialog.accept())
    page.page.locator("#cancel-pipeline").click()
    expect(page.page.locator('#view[data-status="cancelled"]')).to_have_count(1)
    assert http.get(f"/v1/jobs/{retried['id']}").json()["status"] == "cancelled"
    # deleted behind the page's back: its Delete shows the service's 404, as the dashboard shows API errors
    assert http.delete(f"/v1/pipelines/{oom}").status_code == 204
    page.page.once("dialog", lambda dialog: dialog.accept())
    page.page.locator("#delete-pipeline").click()
    problem = page.page.locator("#pipeline-problem .error")
    expect(problem).to_have_text(re.compile(rf"^Delete failed: pipeline {oom} not found"))
    page.screenshot("pipeline-refused")


def test_the_pipeline_page_on_a_phone_screen(browser, stack, seeded):
    p = new_page(browser, stack)
    p.page.set_viewport_size({"width": 390, "height": 844})
    p.sign_in()
    p.open(f"#/pipelines/{seeded['bt-done']}")
    p.page.locator("#pipeline-chain").wait_for()
    width = p.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390 + 1, f"the pipeline page scrolls sideways on a phone ({width}px)"
    tops = p.page.locator("#pipeline-chain .pipe-step").evaluate_all("bs => bs.map(b => b.getBoundingClientRect().top)")
    assert tops == sorted(tops) and len(set(tops)) == 3  # one under the other
    p.screenshot("pipeline-phone")
    p.page.context.close()
    assert p.errors == []


def test_a_distillation_page_says_where_its_student_starts(page, stack, seeded):
    """Made last: the other tests count the three back-translations."""
    http = api(stack)
    body = {
        "kind": "distillation", "name": "distil-shrunk", "teacher_model_id": seeded["done-model"],
        "dataset_id": seeded["corpora"]["real"], "student_init": "teacher", "job": {"model": {"n_decoder_layers": 1}},
    }  # fmt: skip
    response = http.post("/v1/pipelines", json=body)
    assert response.status_code == 201, response.text
    page.sign_in()
    page.open(f"#/pipelines/{response.json()['id']}")
    fields = page.page.locator("#pipeline-fields")
    fields.wait_for()
    assert (
        fields.locator('[data-field="student\'s start"]').inner_text() == "the teacher's layers (shrink and fine-tune)"
    )
    assert _href(fields.locator('[data-field="teacher"] a')) == f"#/models/{seeded['done-model']}"
    shot(page.page.locator("#pipeline-summary"), "pipeline-distillation-summary")
