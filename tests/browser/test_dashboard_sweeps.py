"""The dashboard's sweeps in a real browser: the list, a sweep's page (its trials sortable, every trial's curve, the
settings against the objective as parallel coordinates, the importance of each setting, the best trial and its
model), followed live to the sweep's end; and the new-job form's Sweep… editor, which starts a sweep or shows the
service's 422.

The trials' jobs ask for GPU workers, so the embedded stack's CPU worker leaves them queued. What a training worker
would do with each is done here, in the stack's own database, through the worker's own calls: the job runs, each
evaluation's metrics are written and reported with sweep_runner.report (the pruner answers), the job ends (a
succeeded one publishes a model row) and sweep_runner.advance moves the sweep on, starting the next trial.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import new_page
from tests.browser.support import api, service_database, shot, trial_rows

SPACE = {
    "training.lr_scale": {"type": "float", "low": 0.1, "high": 3.0, "log": True},
    "model.dropout": {"type": "float", "low": 0.0, "high": 0.3},
    "model.activation": {"type": "choice", "values": ["relu", "gelu"]},
}
# Trial by trial, as a worker would see them: the bleu of each evaluation (at steps 10, 30, 60, 90: ASHA's rungs
# of a 90-step trial are 10, 30 and 90, and with this few trials only the best at a rung goes on) and how the trial
# ends. Trial 1 trails at step 10 and is pruned there.
TRIALS: list[dict[str, Any]] = [
    {"evals": [(10, 4.0), (30, 9.0), (60, 12.0), (90, 15.0)], "end": ("succeeded", 15.0)},
    {"evals": [(10, 1.0)], "end": ("pruned", None)},
    {"evals": [(10, 6.0), (30, 10.0), (60, 18.0), (90, 21.0)], "end": ("succeeded", 21.0)},
    {"evals": [(10, 7.0), (30, 11.0), (60, 16.0), (90, 22.0)], "end": ("succeeded", 22.0)},
    {"evals": [(10, 8.0)], "end": None},  # still running: test_the_sweep_page_follows_the_sweep_to_its_end ends it
]


def _dataset(stack, name: str = "tiny en-de") -> str:
    lines = b"".join(f"{n}\t{n} de\n".encode() for n in ("one", "two", "three", "four", "five", "six"))
    response = api(stack).post(
        "/v1/datasets", data={"name": name, "kind": "parallel"}, files={"file": ("t.tsv", lines)}
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


class Worker:
    """What a training worker writes of a trial, in the stack's database, through the worker's own calls."""

    def __init__(self, stack, sweep_id: str) -> None:
        self.stack = stack
        self.sweep_id = sweep_id

    def run(self, number: int, evals: list[tuple[int, float]], end: tuple[str, float | None] | None) -> str | None:
        """Trial `number`: it starts (two minutes ago) unless it runs, reports each evaluation and, given `end`,
        ends so (two minutes after it started) and moves the sweep on. Returns why the pruner stopped it (None: it
        was not)."""
        from app.core.settings import get_settings
        from app.db.base import utcnow
        from app.db.run_record_tables import Metric
        from app.db.tables import Job, TrainedModel
        from app.services import sweep_runner
        from model.nn.config import ModelConfig

        with service_database(self.stack) as session:
            job = sweep_runner.trial_jobs(session, self.sweep_id)[number]
            if job.status == "queued":
                job.status, job.attempt, job.worker = "running", 1, "test-worker"
                job.started_at = utcnow() - timedelta(minutes=2)
                session.commit()
            assert job.status == "running", (number, job.status)
            job_id, started = job.id, job.started_at
            pruned = None
            for step, bleu in evals:
                session.add(Metric(job_id=job_id, step=step, name="bleu", value=bleu))
                session.get(Job, job_id).step = step
                session.commit()
                pruned = sweep_runner.report(session, job_id, step, float(step), {"bleu": bleu})
            if end is None:
                return pruned
            status, bleu = end
            assert (pruned is not None) == (status == "pruned"), (number, pruned)
            job = session.get(Job, job_id)
            if status == "succeeded":
                session.add(
                    TrainedModel(
                        owner_id=job.owner_id,
                        job_id=job_id,
                        objective="translation",
                        config=ModelConfig.from_preset("tiny", 300).to_dict(),
                        tokenizer_fingerprint="f",
                        metrics={"bleu": bleu},
                        source=f"best@{evals[-1][0]}",
                        parameters=1,
                        storage_key="models/none",
                        sha256="0" * 64,
                        size_bytes=1,
                    )
                )
            job.status, job.finished_at, job.eta_seconds = status, started + timedelta(minutes=2), None
            session.commit()
            sweep_runner.advance(session, get_settings(), self.sweep_id)
            return pruned


@pytest.fixture(scope="module")
def seeded(stack) -> dict[str, Any]:
    """Sweep "enfr" of 5 trials, one at a time, by bleu, trial 0's dropout given: trials 0, 2 and 3 succeeded
    (bleu 15, 21, 22), trial 1 pruned at step 10, trial 4 running after one evaluation. Returns the sweep as the
    API shows it."""
    http = api(stack)
    body = {
        "name": "enfr",
        "job": {
            "objective": "translation",
            "dataset_id": _dataset(stack),
            "model": {"preset": "tiny", "vocab_size": 300},
            "training": {"max_steps": 90, "accelerator": "gpu"},
        },
        "space": SPACE,
        "budget": {"trials": 5},
        "max_concurrent_trials": 1,
        "first_trials": [{"model.dropout": 0.1}],  # trial 0's dropout given, the rest sampled
    }
    response = http.post("/v1/sweeps", json=body)
    assert response.status_code == 201, response.text
    sweep_id = response.json()["id"]
    worker = Worker(stack, sweep_id)
    for number, trial in enumerate(TRIALS):
        worker.run(number, trial["evals"], trial["end"])
    sweep = http.get(f"/v1/sweeps/{sweep_id}").json()
    assert sweep["trial_counts"] == {"succeeded": 3, "pruned": 1, "running": 1}, sweep["trial_counts"]
    assert sweep["best"]["number"] == 3 and sweep["status"] == "running"
    return sweep


def test_the_sweeps_list_shows_each_sweep_and_a_row_opens_it(page, seeded):
    page.sign_in()
    page.page.get_by_role("navigation").get_by_role("link", name="Sweeps").click()
    row = page.page.locator(f'tr[data-sweep="{seeded["id"]}"]')
    row.wait_for()
    assert row.locator("td a").first.inner_text() == "enfr"
    assert row.locator('td[data-label="Status"] .badge').inner_text() == "running"
    assert row.locator('td[data-label="Metric"]').inner_text() == "bleu ↑"
    counts = row.locator(".trial-counts .badge").all_inner_texts()
    assert sorted(counts) == ["1 pruned", "1 running", "3 succeeded"], counts
    assert row.locator('td[data-label="Trials"] div').first.inner_text() == "5 of 5"
    assert row.locator('td[data-label="Best"]').inner_text() == "22"
    minutes = float(row.locator('td[data-label="Worker min"]').inner_text())
    assert 10 <= minutes < 10.5  # four ended trials of two minutes and the running one's two so far
    page.screenshot("sweeps-list")
    row.locator('td[data-label="Metric"]').click()  # the row, not only its name, opens the sweep
    page.page.wait_for_url(re.compile(rf".*#/sweeps/{seeded['id']}$"))
    page.page.locator("#trials-table").wait_for()


def test_the_sweep_page_shows_its_trials_curves_settings_and_best(page, stack, seeded):
    http = api(stack)
    sweep = http.get(f"/v1/sweeps/{seeded['id']}").json()
    trials = {t["number"]: t for t in sweep["trials"]}
    page.sign_in()
    page.open(f"#/sweeps/{seeded['id']}")
    page.page.locator("#trials-table").wait_for()
    summary = page.page.locator("#sweep-summary")
    assert page.page.locator("h1").inner_text().startswith("Sweep enfr")
    assert summary.locator(".badge").first.inner_text() == "running"
    assert "bleu" in summary.inner_text() and "maximize" in summary.inner_text()
    assert page.page.locator("#sweep-sampler").inner_text() == "tpe (seed 0)"
    assert page.page.locator("#sweep-pruner").inner_text() == "asha"
    assert page.page.locator("#sweep-budget").inner_text() == "5 trials"
    assert "the budget of 5 trials is spent" in page.page.locator("#sweep-stop-reason").inner_text()
    assert page.page.locator("#cancel-sweep").is_visible()

    # the trials table: by number, then sorted by value both ways (trials without a value last)
    assert trial_rows(page) == [0, 1, 2, 3, 4]
    table = page.page.locator("#trials-table")
    headers = table.locator("thead button").all_inner_texts()
    assert headers == ["Trial", "Status", "Value", "Best value", *SPACE, "Worker min", "Stopped because"]
    table.locator('button[data-column="Value"]').click()
    assert trial_rows(page) == [0, 2, 3, 1, 4]  # bleu 15, 21, 22
    assert table.locator('th[aria-sort="ascending"]').inner_text() == "Value"
    table.locator('button[data-column="Value"]').click()
    assert trial_rows(page) == [3, 2, 0, 1, 4]
    page.page.locator("#sweep-space summary").click()
    with page.page.expect_response(lambda r: r.url.endswith(f"/v1/sweeps/{seeded['id']}")):
        pass  # the page reads the running sweep again (every 3 s): the reader's order and unfolded space stay
    page.page.wait_for_timeout(200)
    assert trial_rows(page) == [3, 2, 0, 1, 4]
    assert page.page.locator("#sweep-space").get_attribute("open") == ""
    assert "float 0.1 – 3, log" in page.page.locator("#sweep-space").inner_text()
    table.locator('button[data-column="model.dropout"]').click()
    dropouts = [trials[n]["params"]["model.dropout"] for n in trial_rows(page)]
    assert dropouts == sorted(dropouts)
    pruned = table.locator('tr[data-trial="1"]')
    badge = pruned.locator(".badge.status-pruned")
    assert badge.inner_text() == "pruned"
    assert badge.get_attribute("title") == trials[1]["stop_reason"]
    assert trials[1]["stop_reason"].startswith("pruned by asha after 10 steps: bleu 1")
    assert pruned.locator('td[data-label="Stopped because"]').inner_text() == trials[1]["stop_reason"]
    assert table.locator(".best-mark").evaluate_all("ms => ms.map((m) => m.closest('tr').dataset.trial)") == ["3"]
    given = table.locator(".given-mark")
    assert given.evaluate_all("ms => ms.map((m) => m.closest('tr').dataset.trial)") == ["0"]
    assert "given (first_trials)" in given.get_attribute("title")
    assert table.locator('tr[data-trial="0"] td[data-label="Value"]').inner_text() == "15"
    assert table.locator('tr[data-trial="4"] td[data-label="Best value"]').inner_text() == "8"

    # one curve a trial, by step; the pruned one dashed
    curves = page.page.locator("#sweep-curves")
    assert curves.locator("canvas").count() >= 1
    assert curves.get_attribute("data-series") == "5"
    drawn = curves.evaluate("f => f.plot.series.slice(1).map((s) => [s.label, Boolean(s.dash), s.alpha])")
    assert [label for label, _, _ in drawn] == ["#0", "#1 pruned", "#2", "#3", "#4"]
    assert [dashed for _, dashed, _ in drawn] == [False, True, False, False, False]
    assert curves.evaluate("f => f.plot.data[0]") == [10, 30, 60, 90]
    assert "step" in curves.locator(".u-legend").inner_text().lower()

    # parallel coordinates: an axis a setting and one for bleu, a line a trial with a value
    svg = page.page.locator("#sweep-parallel svg.parallel")
    axes = svg.locator(".pc-axis")
    assert axes.evaluate_all("gs => gs.map((g) => g.dataset.axis)") == [*SPACE, "bleu"]
    assert svg.locator('.pc-axis[data-axis="training.lr_scale"]').get_attribute("class") == "pc-axis log"
    assert svg.locator('.pc-axis[data-axis="model.activation"] .pc-tick').all_text_contents() == ["relu", "gelu"]
    with_value = [t for t in sweep["trials"] if t["value"] is not None or t["best_value"] is not None]
    lines = svg.locator("path.pc-line")
    assert lines.count() == len(with_value) == 5
    assert svg.locator("path.pc-line.pruned").evaluate_all("ps => ps.map((p) => p.dataset.trial)") == ["1"]
    assert svg.locator("path.pc-line.best").get_attribute("data-trial") == "3"
    colours = {p: svg.locator(f'path[data-trial="{p}"]').get_attribute("stroke") for p in (0, 3)}
    assert colours[0] != colours[3]  # coloured by bleu: 15 against 22
    svg.locator('path[data-trial="3"]').dispatch_event("mouseover")
    assert page.page.locator("#sweep-parallel .heat-readout").inner_text().startswith("trial 3 (succeeded): bleu 22")

    # importance: bars once the service could weigh the settings, else what it needs
    importance = page.page.locator("#sweep-importance")
    if sweep["importance"]:
        assert importance.locator(".bar-row").count() == len(sweep["importance"])
        assert set(importance.locator(".bar-label").all_inner_texts()) == set(sweep["importance"])
    else:
        assert "needs 3 complete trials" in importance.inner_text()

    # the best trial: its value, settings and model (not registered as enfr@best while the sweep runs)
    best = page.page.locator("#sweep-best")
    assert best.locator("#best-value").inner_text() == "bleu 22"
    assert best.locator("#best-params").inner_text().count("model.") == 2
    assert best.locator("#best-model-link").get_attribute("href") == f"#/models/{sweep['best']['model_id']}"
    assert best.locator("#best-model-ref").count() == 0
    page.screenshot("sweep-running")
    shot(page.page.locator("#sweep-parallel"), "sweep-parallel")

    # a row opens the trial's job, which links back to its sweep
    table.locator('tr[data-trial="2"] td[data-label="Status"]').click()
    page.page.wait_for_url(re.compile(rf".*#/jobs/{trials[2]['job_id']}$"))
    page.page.locator("#sweep-link").click()
    page.page.wait_for_url(re.compile(rf".*#/sweeps/{seeded['id']}$"))


def test_the_sweep_page_follows_the_sweep_to_its_end(page, stack, seeded):
    """The page is open while the last trial is pruned at step 30: it reads the sweep again, shows it succeeded,
    drops the cancel button and names the best model enfr@best, which opens the model's page."""
    page.sign_in()
    page.open(f"#/sweeps/{seeded['id']}")
    page.page.locator("#cancel-sweep").wait_for()
    Worker(stack, seeded["id"]).run(4, [(30, 8.5)], ("pruned", None))
    page.page.locator('#view[data-status="succeeded"]').wait_for(timeout=15_000)
    assert page.page.locator("#cancel-sweep").count() == 0
    last = page.page.locator("#trials-table tr[data-trial='4']")
    assert last.locator(".badge").inner_text() == "pruned"
    assert last.locator("td[data-label='Best value']").inner_text() == "8.5"
    assert page.page.locator("#sweep-parallel path.pc-line.pruned").count() == 2
    expect(page.page.locator("#sweep-curves")).to_have_attribute("data-series", "5")
    ref = page.page.locator("#best-model-ref")
    assert ref.inner_text() == "enfr@best"
    page.screenshot("sweep-succeeded")
    model_id = api(stack).get(f"/v1/sweeps/{seeded['id']}").json()["best"]["model_id"]
    page.page.locator("#best-model-link").click()
    page.page.wait_for_url(re.compile(rf".*#/models/{model_id}$"))
    expect(page.page.locator("#model-ref")).to_have_text("enfr@1")


def test_the_sweep_page_on_a_phone_screen(browser, stack, seeded):
    p = new_page(browser, stack)
    p.page.set_viewport_size({"width": 390, "height": 844})
    p.sign_in()
    p.open(f"#/sweeps/{seeded['id']}")
    p.page.locator("#sweep-parallel svg").wait_for()
    width = p.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390 + 1, f"the sweep page scrolls sideways on a phone ({width}px)"
    p.screenshot("sweep-phone")
    p.page.context.close()
    assert p.errors == []
