"""Inference answers on the embedded default (app/services/result_files.py): a file each, written under a temporary
name and renamed, removed by the API once read, and by the workers' sweep once expired when nobody read it."""

from __future__ import annotations

import os
import threading
import time

import pytest

from app.core.settings import Settings
from app.services import answer_wake, inference_client, result_files
from app.services.queueing import make_celery
from worker import reaper


@pytest.fixture
def celery(tmp_path, monkeypatch):  # noqa: ANN201  # celery ships no types
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery would take it over its configuration
    monkeypatch.delenv("CELERY_RESULT_BACKEND", raising=False)
    var = tmp_path / "var"
    settings = Settings(data_dir=var, celery_broker_url=f"sqla+sqlite:///{var / 'broker.db'}", celery_result_backend="")
    assert settings.celery_result_backend == f"file://{var.resolve() / 'results'}"
    return make_celery("results-test", settings)


def test_the_embedded_default_keeps_answers_as_files_it_makes_a_folder_for(celery, tmp_path):
    backend = celery.backend
    assert isinstance(backend, result_files.ResultFiles)
    backend.store_result("t-1", {"translations": [{"text": "eins"}]}, "SUCCESS")
    assert os.listdir(tmp_path / "var" / "results") == ["celery-task-meta-t-1"]  # no partial file left
    assert celery.AsyncResult("t-1").get(timeout=1) == {"translations": [{"text": "eins"}]}


def test_a_reader_never_sees_half_an_answer(celery, tmp_path):
    """Fault: the answer's file is looked for while it is being written (the writer stopped half-way). Pass: the
    reader finds nothing yet rather than half of it."""
    backend, written = celery.backend, []

    class HalfWritten:
        def __init__(self, path, mode):  # noqa: ANN001
            self.file = open(path, mode)  # noqa: SIM115

        def __enter__(self):  # noqa: ANN204
            return self

        def __exit__(self, *exc):  # noqa: ANN002
            self.file.close()

        def write(self, data: bytes) -> None:
            self.file.write(data[: len(data) // 2])
            self.file.flush()
            written.append(backend.get_task_meta("t-2")["status"])  # a reader's look, now
            self.file.write(data[len(data) // 2 :])

    backend.open = lambda path, mode: HalfWritten(path, mode) if "w" in mode else open(path, mode)  # noqa: SIM115
    backend.store_result("t-2", {"text": "zwei"}, "SUCCESS")
    assert written == ["PENDING"]
    assert backend.get_task_meta("t-2")["result"] == {"text": "zwei"}


def test_the_api_removes_an_answer_once_read(celery, tmp_path):
    celery.backend.store_result("t-3", {"text": "drei"}, "SUCCESS")
    result = celery.AsyncResult("t-3")
    assert result.get(timeout=1) == {"text": "drei"}
    inference_client.forget(result)
    assert os.listdir(tmp_path / "var" / "results") == []


def test_the_sweep_removes_answers_nobody_read_once_expired(celery, tmp_path):
    celery.conf.result_expires = 60
    celery.backend.expires = 60
    celery.backend.store_result("old", {"text": "vier"}, "SUCCESS")
    celery.backend.store_result("new", {"text": "fünf"}, "SUCCESS")
    old = tmp_path / "var" / "results" / "celery-task-meta-old"
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    reaper.clean_results(celery, force=True)
    assert os.listdir(tmp_path / "var" / "results") == ["celery-task-meta-new"]


def test_a_waiting_request_is_woken_when_its_answer_is_written(celery, tmp_path, monkeypatch):
    """The API's look for an answer is woken by the write (app/services/answer_wake.py): with the safety look set to
    a minute, an answer written after the request began waiting is still read at once."""
    from app.core.settings import get_settings

    monkeypatch.setattr(answer_wake, "SAFETY_LOOK_SECONDS", 60.0)
    settings = get_settings().model_copy(update={"celery_result_backend": celery.backend.url})
    result = celery.AsyncResult("t-5")
    writer = threading.Timer(0.3, lambda: celery.backend.store_result("t-5", {"text": "sechs"}, "SUCCESS"))
    writer.start()
    started = time.monotonic()
    assert inference_client.wait_for_answer(result, settings, timeout=5) == {"text": "sechs"}
    assert time.monotonic() - started < 5  # woken: not the minute's look, nor the timeout
    waits = answer_wake.answer_waits(celery.backend.url)
    assert waits is not None and "t-5" not in waits._events  # its event went with it


def test_the_wait_for_an_answer_nobody_writes_times_out(celery, monkeypatch):
    from celery.exceptions import TimeoutError as CeleryTimeout

    from app.core.settings import get_settings

    settings = get_settings().model_copy(update={"celery_result_backend": celery.backend.url})
    with pytest.raises(CeleryTimeout, match="no answer to task t-6 within 0.2s"):
        inference_client.wait_for_answer(celery.AsyncResult("t-6"), settings, timeout=0.2)
