"""The API's side of an inference task that fails: a decoding task that raised on the worker is a 503 naming its
backend (never a 502 or a 500), a worker's own answer keeps its status, and a result it cannot read is a 503. The
broker and the worker's answers are injected."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.task_names import ATTENTION, EXPORT, FILL_MASK, NEIGHBORS, TRANSLATE
from app.services import inference_client
from app.services.errors import BackendFailed, ServiceError, WorkerFailed, WorkerRefused


class Result:
    """What send_task returns: get() gives the answer, or the exception the task raised (propagate=False)."""

    id = "task-1"

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.backend = self

    def get_task_meta(self, task_id: str) -> dict[str, Any]:  # the look at the result backend: ready at once
        if isinstance(self.outcome, ConnectionError):
            raise self.outcome
        return {"status": "SUCCESS"}

    def forget(self) -> None:
        pass

    def get(self, timeout: float, propagate: bool, interval: float = 0.0) -> Any:
        if isinstance(self.outcome, ConnectionError):  # raised here, reading the result
            raise self.outcome
        if isinstance(self.outcome, BaseException) and propagate:
            raise self.outcome
        return self.outcome


@pytest.fixture
def answer_with(monkeypatch, settings_env):
    """Make the next call's task end with `outcome`."""

    def set_outcome(outcome: Any) -> None:
        class Sender:
            def send_task(self, *_args: Any, **_kwargs: Any) -> Result:
                return Result(outcome)

        monkeypatch.setattr(inference_client, "queue_depth", lambda: 0)
        monkeypatch.setattr(inference_client, "get_sender", Sender)

    return set_outcome


def _failure(task: str, args: list[Any], kwargs: dict[str, Any] | None = None) -> ServiceError:
    from app.core.settings import get_settings

    with pytest.raises(ServiceError) as failed:
        inference_client.call(get_settings(), task, args, kwargs)
    return failed.value


@pytest.mark.parametrize(
    ("task", "args", "kwargs", "backend"),
    [
        (TRANSLATE, ["m-1", ["one"]], {"backend": "ctranslate2"}, "ctranslate2"),
        (TRANSLATE, ["m-1", ["one"]], {"backend": "pytorch"}, "pytorch"),
        (FILL_MASK, ["m-1", "a <mask>", 5], None, "pytorch"),
        (ATTENTION, ["m-1", "one", None], None, "pytorch"),
        (NEIGHBORS, ["m-1", "one", 10], None, "pytorch"),
    ],
)
def test_a_decoding_task_that_raised_is_a_503_naming_its_backend(answer_with, caplog, task, args, kwargs, backend):
    answer_with(RuntimeError("CUDA error: device-side assert triggered"))
    error = _failure(task, args, kwargs)
    assert isinstance(error, BackendFailed) and error.status == 503
    assert error.detail == f"inference backend {backend!r} failed on model m-1: RuntimeError"
    assert error.headers == {"Retry-After": "10"}
    assert f"inference backend {backend!r} failed on model m-1" in caplog.text


def test_the_workers_503_keeps_its_words_and_gets_retry_after(answer_with):
    detail = "inference backend 'ctranslate2' failed on model m-1: ValueError: no position encodings"
    answer_with({"error": {"status": 503, "detail": detail}})
    error = _failure(TRANSLATE, ["m-1", ["one"]], {"backend": "ctranslate2"})
    assert isinstance(error, WorkerRefused)
    assert (error.status, error.detail, error.headers) == (503, detail, {"Retry-After": "10"})


def test_a_refused_request_keeps_its_4xx(answer_with):
    answer_with({"error": {"status": 422, "detail": "text has no <mask> to fill: 'a b'"}})
    error = _failure(FILL_MASK, ["m-1", "a b", 5])
    assert (error.status, error.headers) == (422, None)


def test_an_answer_that_cannot_be_read_is_a_503(answer_with):
    answer_with(ConnectionError("Connection refused"))
    error = _failure(ATTENTION, ["m-1", "one", None])
    assert error.status == 503 and error.detail == "result backend unavailable: ConnectionError"
    assert error.headers == {"Retry-After": "5"}


def test_a_task_that_decodes_nothing_still_fails_as_a_bad_gateway(answer_with):
    answer_with(KeyError("sha256"))
    error = _failure(EXPORT, ["m-1", "native", None])
    assert isinstance(error, WorkerFailed)
    assert error.status == 502 and error.detail == "the inference worker failed: KeyError"


def test_the_api_answers_a_service_error_with_its_status_detail_and_headers(client, alice, answer_with):
    """The one handler in app/main.py: the body and headers an HTTPException with the same fields got."""
    from tests.api.test_init_model import _model_row

    model = _model_row("alice")
    detail = f"inference backend 'pytorch' failed on model {model}: RuntimeError: CUDA error"
    answer_with({"error": {"status": 503, "detail": detail}})
    response = client.post(f"/v1/models/{model}/translate", json={"texts": ["one"]}, headers=alice)
    assert (response.status_code, response.json()) == (503, {"detail": detail}), response.text
    assert response.headers["Retry-After"] == "10"
    answer_with({"error": {"status": 422, "detail": "text has no <mask> to fill: 'a b'"}})
    response = client.post(f"/v1/models/{model}/translate", json={"texts": ["one"]}, headers=alice)
    assert (response.status_code, response.json()) == (422, {"detail": "text has no <mask> to fill: 'a b'"})
    assert "Retry-After" not in response.headers
