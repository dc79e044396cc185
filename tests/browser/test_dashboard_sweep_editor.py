"""The new-job form's Sweep… editor in a real browser: it starts a sweep of the form's job (its trials then on the
sweep's page) or shows the service's 422 for a bad space or name, and offers the job settings a sweep may search,
with values the job schema takes. The sweep's own pages: tests/browser/test_dashboard_sweeps.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Page
from tests.browser.support import api, shot, trial_rows

DASHBOARD = Path(__file__).resolve().parents[2] / "app" / "dashboard"


def _sweep_editor(p: Page, tmp_path: Path) -> None:
    """Sign in, fill the new-job form (a fresh upload, tiny, 60 steps, GPU workers only) and open its sweep editor."""
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{n}\t{n} de\n" for n in ("one", "two", "three", "four")))
    p.sign_in()
    p.page.get_by_role("navigation").get_by_role("link", name="New job").click()
    p.page.locator("#upload-file").set_input_files(str(data))
    p.page.get_by_role("button", name="Upload dataset").click()
    p.page.wait_for_selector("#upload-status .ok")
    p.page.select_option("#preset", "tiny")
    p.page.locator("#vocab_size").fill("300")
    p.page.locator("#max_steps").fill("60")
    p.page.select_option("#accelerator", "gpu")  # the trials stay queued: nothing trains here
    p.page.locator("#new-job-name").fill("Warm-up search")
    p.page.get_by_role("button", name="Sweep…").click()
    p.page.locator("#sweep-form").wait_for()
    assert p.page.locator("#submit-job").is_hidden()


def test_the_new_job_form_starts_a_sweep_of_its_job(page, stack, tmp_path):
    _sweep_editor(page, tmp_path)
    assert page.page.locator("#sweep-name").input_value() == "warm-up-search"  # from the job's name
    rows = page.page.locator("#sweep-space-rows .space-row")
    first = rows.nth(0)
    assert first.get_by_label("setting").input_value() == "training.lr_scale"
    assert first.get_by_label("type").input_value() == "float" and first.get_by_label("log scale").is_checked()
    first.get_by_label("low").fill("0.5")
    first.get_by_label("high").fill("2")
    page.page.get_by_role("button", name="Add a setting").click()
    second = rows.nth(1)
    second.get_by_label("setting").select_option("model.activation")
    assert second.get_by_label("values").input_value() == "relu, gelu, swish"
    assert second.get_by_label("low").is_hidden()
    second.get_by_label("values").fill("relu, gelu")
    page.page.get_by_role("button", name="Add a setting").click()
    third = rows.nth(2)
    third.get_by_label("setting").select_option("model.n_encoder_layers")
    assert third.get_by_label("type").input_value() == "int"
    third.get_by_label("low").fill("1")
    third.get_by_label("high").fill("3")
    page.page.locator("#sweep-budget-trials").fill("4")
    page.page.locator("#sweep-budget-minutes").fill("30")
    page.page.locator("#sweep-concurrent").fill("2")
    page.page.select_option("#sweep-metric", "chrf")
    page.page.select_option("#sweep-pruner", "median")
    page.screenshot("sweep-editor")
    shot(page.page.locator("#sweep-form"), "sweep-editor-form")
    page.page.get_by_role("button", name="Start sweep").click()
    page.page.wait_for_url(re.compile(r".*#/sweeps/[0-9a-f-]{36}$"))
    sweep_id = page.page.url.rsplit("/", 1)[-1]
    page.page.locator("#trials-table").wait_for()
    assert page.page.locator("h1").inner_text().startswith("Sweep warm-up-search")
    assert trial_rows(page) == [0, 1]  # two at once
    assert "needs 3 complete trials" in page.page.locator("#importance-needs").inner_text()
    assert page.page.locator("#sweep-best").inner_text().endswith("No trial has completed yet.")
    sweep = api(stack).get(f"/v1/sweeps/{sweep_id}").json()
    assert sweep["space"] == {
        "training.lr_scale": {"type": "float", "low": 0.5, "high": 2.0, "log": True},
        "model.activation": {"type": "choice", "values": ["relu", "gelu"]},
        "model.n_encoder_layers": {"type": "int", "low": 1, "high": 3, "step": 1, "log": False},
    }
    assert sweep["budget"] == {"minutes": 30.0, "trials": 4} and sweep["max_concurrent_trials"] == 2
    assert (sweep["metric"], sweep["direction"], sweep["pruner"]) == ("chrf", "maximize", "median")
    job = sweep["job"]  # the form's job, as the form would have submitted it
    assert job["model"] == {"preset": "tiny", "vocab_size": 300} and job["name"] == "Warm-up search"
    assert job["training"]["max_steps"] == 60 and job["training"]["accelerator"] == "gpu"
    page.screenshot("sweep-from-form")
    page.page.once("dialog", lambda dialog: dialog.accept())
    page.page.locator("#cancel-sweep").click()
    page.page.locator('#view[data-status="cancelled"]').wait_for()
    assert page.page.locator("#sweep-summary .badge").first.inner_text() == "cancelled"


def test_a_bad_space_or_name_shows_the_services_422(page, stack, tmp_path):
    before = api(stack).get("/v1/sweeps").json()["total"]
    _sweep_editor(page, tmp_path)
    row = page.page.locator("#sweep-space-rows .space-row").first
    row.get_by_label("setting").select_option("model.dropout")
    row.get_by_label("high").fill("1.5")
    page.page.get_by_role("button", name="Start sweep").click()
    error = page.page.locator("#sweep-status .error")
    error.wait_for()
    assert error.inner_text().startswith("The sweep was not started: space: model.dropout=1.5 makes no valid job")
    page.screenshot("sweep-422")
    row.get_by_label("high").fill("0.2")
    page.page.locator("#sweep-name").fill("Not A Name")
    page.page.get_by_role("button", name="Start sweep").click()
    expect(error).to_contain_text("name: Value error, name 'Not A Name' must match")
    assert re.search(r"#/new$", page.page.url)
    assert api(stack).get("/v1/sweeps").json()["total"] == before


def _searchable() -> dict[str, dict[str, Any]]:
    """sweepform.js's SEARCHABLE: each setting the editor offers and its first guess, read from the file."""
    text = (DASHBOARD / "sweepform.js").read_text()
    block = text[text.index("export const SEARCHABLE = {") : text.index("\n};")]
    out = {}
    for name, guess in re.findall(r'^\s+"([a-z_]+\.[a-z_]+)": \{ (.*) \},$', block, re.M):
        fields = dict(re.findall(r'(\w+): ("[^"]*"|[\w.]+)', guess))
        out[name] = {k: v.strip('"') for k, v in fields.items()}
    assert len(out) == block.count('": {'), "a SEARCHABLE line this reader does not parse"
    return out


def _values(guess: dict[str, str]) -> list[Any]:
    """The values a guess offers, as sweepform.js's parseValues reads them (a range: its ends)."""
    if guess["type"] != "choice":
        cast = float if guess["type"] == "float" else int
        return [cast(guess["low"]), cast(guess["high"])]
    parsed: list[Any] = []
    for v in (v.strip() for v in guess["values"].split(",")):
        parsed.append(v == "true" if v in ("true", "false") else float(v) if re.fullmatch(r"-?[\d.]+", v) else v)
    return [int(v) if isinstance(v, float) and v.is_integer() else v for v in parsed]


def test_the_sweep_editor_offers_job_settings_with_values_the_job_schema_takes():
    """Every setting the editor offers is a field of the job's model or training section, and each value of its
    first guess (every choice, both ends of a range) makes a job body the schema accepts."""
    from app.schemas.jobs import JobCreate, ModelSpec, TrainingSpec

    sections = {"model": ModelSpec, "training": TrainingSpec}
    offered = _searchable()
    assert len(offered) >= 20 and "training.lr_scale" in offered and "model.preset" in offered
    for name, guess in offered.items():
        section, field = name.split(".")
        assert field in sections[section].model_fields, name
        for value in _values(guess):
            body = {"objective": "translation", "dataset_id": "00000000-0000-0000-0000-000000000000", section: {}}
            body[section][field] = value
            JobCreate.model_validate(body)  # raises, naming the field, for a value it refuses
