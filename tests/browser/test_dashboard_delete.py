"""Delete buttons: a stopped job's page and a model's page offer Delete behind a confirm; a read-only key sees them
disabled naming the scope; a model whose job was deleted says so where the job link was."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bench.harness.stack import run_cli
from model.nn.config import ModelConfig


def _job_and_model(stack) -> tuple[str, str]:
    """A succeeded job and its model in the stack's database (no files: the pages read only rows)."""
    from app.db.access_tables import Owner
    from app.db.tables import Job, TrainedModel

    engine = create_engine(f"sqlite:///{stack.data_dir / 'service.db'}")
    with Session(engine) as session, session.begin():
        owner_id = session.scalar(select(Owner.id).where(Owner.name == "local"))
        job = Job(
            owner_id=owner_id,
            objective="translation",
            model_config={"preset": "tiny"},
            training_config={},
            status="succeeded",
            max_attempts=3,
            total_steps=1,
            request_sha256="",
        )
        session.add(job)
        session.flush()
        model = TrainedModel(
            owner_id=owner_id,
            job_id=job.id,
            objective="translation",
            config=ModelConfig.from_preset("tiny", 489).to_dict(),
            tokenizer_fingerprint="f",
            metrics={},
            source="last@1",
            parameters=1,
            storage_key=f"models/{job.id}",
            sha256="0" * 64,
            size_bytes=1,
        )
        session.add(model)
        session.flush()
        ids = job.id, model.id
    engine.dispose()
    return ids


@pytest.fixture(scope="module")
def viewer_key(stack) -> str:
    out = run_cli(stack.env, "create-key", "vic-laptop", "--owner", "local", "--member", "vic", "--role", "viewer")
    return out.strip().splitlines()[-1]


def test_delete_a_job_then_its_model_says_the_job_was_deleted(page):
    job_id, model_id = _job_and_model(page.stack)
    p = page.page
    page.sign_in()
    p.goto(f"{page.stack.url}/dashboard#/jobs/{job_id}")
    button = p.locator("#delete-job")
    button.wait_for()
    p.once("dialog", lambda dialog: dialog.accept())
    button.click()
    p.get_by_role("heading", name="Jobs").wait_for()

    p.goto(f"{page.stack.url}/dashboard#/models/{model_id}")
    p.locator("#model-job").wait_for()
    assert p.locator("#model-job").inner_text().endswith("(deleted)")
    page.screenshot("model-of-a-deleted-job")
    p.once("dialog", lambda dialog: dialog.accept())
    p.locator("#delete-model").click()
    p.get_by_role("heading", name="Models").wait_for()
    headers = {"Authorization": f"Bearer {page.stack.key}"}
    assert httpx.get(f"{page.stack.url}/v1/models/{model_id}", headers=headers, timeout=10).status_code == 404


def test_a_read_only_key_sees_the_delete_buttons_disabled(page, viewer_key):
    job_id, model_id = _job_and_model(page.stack)
    p = page.page
    page.sign_in(viewer_key)
    p.goto(f"{page.stack.url}/dashboard#/jobs/{job_id}")
    p.locator("#delete-job").wait_for()
    assert p.locator("#delete-job").is_disabled()
    p.goto(f"{page.stack.url}/dashboard#/models/{model_id}")
    p.locator("#delete-model").wait_for()
    assert p.locator("#delete-model").is_disabled()
    assert "needs scope models:write" in (p.locator("#delete-model").get_attribute("title") or "")
