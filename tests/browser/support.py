"""What the dashboard's browser tests share: an API client of the stack's key, filling the new-job form, reading the
job page's charts and a sweep's trials, screenshots of a part of a page, and rows written straight into the service's
database."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from bench.harness.stack import wait_for

if TYPE_CHECKING:
    from tests.browser.conftest import Page

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


def api(stack) -> httpx.Client:
    return httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {stack.key}"}, timeout=30)


def fill_training_form(p: Page, **values) -> None:
    for name, value in values.items():
        p.page.locator(f"#{name}").fill(str(value))


def new_job_form(p: Page, train_file, dataset_name: str | None = None, **values) -> None:
    """Sign in, open the new-job form, upload `train_file` (the form then picks it) and fill the fields `values`
    names by id."""
    p.sign_in()
    p.page.get_by_role("navigation").get_by_role("link", name="New job").click()
    p.page.locator("#upload-file").set_input_files(str(train_file))
    if dataset_name is not None:
        p.page.locator("#upload-name").fill(dataset_name)
    p.page.get_by_role("button", name="Upload dataset").click()
    p.page.wait_for_selector("#upload-status .ok")
    fill_training_form(p, **values)


def points(p: Page, series: str) -> int:
    """How many points of `series` the job page's chart holds."""
    return int(p.page.get_attribute(f'figure[data-series~="{series}"]', f"data-points-{series}") or 0)


def job_requests(p: Page, job_id: str, *routes: str) -> list[str]:
    """The page's requests for these routes of the job (GET /v1/jobs/{id}/<route>), in order."""
    paths = {f"/v1/jobs/{job_id}/{route}" for route in routes}
    return [r for r in p.requests if r.split("?")[0] in paths]


def tab(p: Page, name: str):
    return p.page.get_by_role("tablist").get_by_role("tab", name=name, exact=True)


def x_scale(p: Page, chart: str) -> list[float]:
    return p.page.evaluate(f"""() => {{ const x = document.querySelector('figure[data-chart="{chart}"]').plot.scales.x;
                                       return [x.min, x.max]; }}""")


def job_with_many_points(stack, n_steps: int, spike_at: int | None = None, training=None) -> str:
    """A (cancelled) job with n_steps points of each per-step series inserted straight into the database in bulk
    (in place of any the worker wrote before the cancel); the training loss jumps to 30 for one step at `spike_at`."""
    http = api(stack)
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
    with service_database(stack) as session:
        from app.db.run_record_tables import Metric

        # the idle worker may have trained a step or two before the cancel reached it: its points give way
        session.execute(Metric.__table__.delete().where(Metric.job_id == job["id"]))
        session.execute(Metric.__table__.insert(), rows)
    return job["id"]


@contextlib.contextmanager
def service_database(stack) -> Iterator[Any]:
    """A session on the embedded service's own database (this process's settings pointed at its data folder)."""
    from tests.support.app_caches import reset_caches

    with pytest.MonkeyPatch.context() as patch:
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "ARTIFACT_ROOT", "ENVIRONMENT"):
            patch.delenv(name, raising=False)
        patch.setenv("DATA_DIR", str(stack.data_dir))
        reset_caches()
        try:
            from app.db.session import session_scope

            with session_scope() as session:
                yield session
        finally:
            reset_caches()


def model_rows(stack, count: int) -> list[str]:
    """`count` translation models of the stack's key written straight into its database (no files: the registry
    card never loads them), oldest first."""
    with service_database(stack) as session:
        from app.db.keys import identify
        from app.db.tables import TrainedModel
        from model.nn.config import ModelConfig

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


def four_digits(x: float) -> str:
    """A number as the dashboard shows it (ui.js fmtNumber): four significant digits, no trailing zeros."""
    rounded = float(f"{x:.4g}")
    return str(int(rounded)) if rounded.is_integer() else repr(rounded)


def shot(locator, name: str) -> None:
    """A screenshot of one part of the page, at full size, beside the pages' own."""
    from tests.browser.conftest import ARTIFACTS  # here: the conftest imports this module

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def trial_rows(p: Page) -> list[int]:
    """The sweep page's trials table: each row's trial number, in the order shown."""
    return [int(n) for n in p.page.locator("#trials-table tbody tr").evaluate_all("rs => rs.map(r => r.dataset.trial)")]
