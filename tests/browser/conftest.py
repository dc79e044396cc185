"""Browser tests: a real headless Chromium (Debian's /usr/bin/chromium) against the service as processes.

The embedded stack (`python -m app.cli serve`: SQLite, the SQLAlchemy broker, one worker per queue) and the browser
start once for the folder (the folder runs whole on one test worker); a module that needs other settings starts a
stack of its own (usage, webhooks). A missing Chromium skips these tests locally and fails them in CI.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.harness.stack import ROOT, START_TIMEOUT_S, free_port, healthy_with_workers, service_env, wait_for
from tests.browser.support import fill_training_form, new_job_form

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _require_browser() -> None:
    problems = []
    if not CHROMIUM.exists():
        problems.append(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        problems.append("the playwright package is not installed (pip install playwright)")
    if problems:
        message = "browser tests need a headless Chromium: " + "; ".join(problems)
        if IN_CI:
            pytest.fail(f"{message} (CI requires it)", pytrace=False)
        pytest.skip(message)


@dataclass
class Stack:
    url: str
    key: str
    data_dir: Path
    env: dict[str, str]
    log: Path


@contextmanager
def serve(folder: Path, **settings: str) -> Iterator[Stack]:
    """`python -m app.cli serve` (the API and a worker per queue) on a data folder of its own, with `settings`."""
    _require_browser()
    port = free_port()
    data_dir = folder / "var"
    env = service_env(DATA_DIR=str(data_dir), PORT=str(port), **settings)
    log = folder / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="the embedded service")
        except AssertionError:
            print(log.read_text(errors="replace")[-5000:])
            raise
        key = (data_dir / "local-api-key").read_text().strip()
        yield Stack(url=url, key=key, data_dir=data_dir, env=env, log=log)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Iterator[Stack]:
    with serve(tmp_path_factory.mktemp("dashboard")) as started:
        yield started


@pytest.fixture(scope="session")
def browser():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class Page:
    """A Playwright page plus the uncaught script errors seen on it (a test fails if there are any) and the paths of
    the API requests it sent, in order (Playwright records them while a test calls it)."""

    def __init__(self, page, stack: Stack) -> None:
        self.page = page
        self.stack = stack
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("request", lambda request: self._record(request.url))
        page.set_default_timeout(20_000)

    def _record(self, url: str) -> None:
        if url.startswith(f"{self.stack.url}/v1/"):
            self.requests.append(url.removeprefix(self.stack.url))

    def open(self, route: str = "") -> None:
        self.page.goto(f"{self.stack.url}/dashboard{route}")

    def sign_in(self, key: str | None = None) -> None:
        self.open()
        self.page.get_by_label("API key").fill(key or self.stack.key)
        self.page.get_by_role("button", name="Sign in").click()

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


def new_page(browser, stack: Stack, **context_options) -> Page:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **context_options)
    return Page(context.new_page(), stack)


@pytest.fixture
def page(browser, stack) -> Iterator[Page]:
    p = new_page(browser, stack)
    yield p
    p.page.context.close()
    assert p.errors == [], f"uncaught script errors: {p.errors}"


@pytest.fixture(scope="session")
def demo_files(tmp_path_factory):
    from model.data.demo import write_demo_files

    return write_demo_files(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="session")
def submitted(browser, stack, demo_files):
    """One page, signed in, that uploaded the demo corpus and submitted a tiny job from the form.

    Shared, in order: tests/browser/test_dashboard.py watches the job train, test_dashboard_models.py uses the model
    it produced (the folder runs whole on one test worker, its files in order).
    """
    p = new_page(browser, stack)
    new_job_form(p, demo_files["translation_train"], "numbers en-de")
    assert "Uploaded numbers en-de" in p.page.inner_text("#upload-status")
    p.page.select_option("#objective", "translation")
    p.page.select_option("#preset", "tiny")
    fill_training_form(
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
