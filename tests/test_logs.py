"""Structured logs (app/core/logs.py): one JSON object per line with the ids bound where the line was written, keys
redacted from the finished line, ids carried from a request to the Celery task it sends."""

from __future__ import annotations

import io
import json
import logging
import secrets
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.request_id import HEADER, RequestId
from app.core import logs
from app.core.settings import Settings


@pytest.fixture
def stream():
    """The root handler writing into a buffer (restored afterwards, with the ids and the root level)."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    buffer = io.StringIO()
    logs.configure(Settings(log_level="debug"), stream=buffer)
    try:
        yield buffer
    finally:
        logs.unbind_task()
        root.handlers[:] = before
        root.setLevel(level)


def lines(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line]


def test_a_line_is_one_json_object_with_the_bound_ids(stream):
    log = logging.getLogger("tests.logs")
    log.info("before anything is bound")
    logs.bind(request_id="r-1", owner_id="owner-1", job_id="job-1")
    log.warning("queued %s", "job-1")
    first, second = lines(stream)
    assert first["message"] == "before anything is bound" and first["level"] == "INFO"
    assert not set(logs.FIELDS) & set(first), "ids that were not bound appear on the line"
    assert second["message"] == "queued job-1" and second["logger"] == "tests.logs" and second["level"] == "WARNING"
    assert (second["request_id"], second["owner_id"], second["job_id"]) == ("r-1", "owner-1", "job-1")
    assert "model_id" not in second and "time" in second and "pid" in second


def test_bound_to_restores_what_was_bound_before(stream):
    logs.bind(job_id="outer")
    with logs.bound_to(job_id="inner", model_id="m"):
        assert logs.bound() == {"job_id": "inner", "model_id": "m"}
    assert logs.bound() == {"job_id": "outer"}


def test_library_loggers_write_through_the_one_handler(stream):
    logging.getLogger("uvicorn.access").info('127.0.0.1 - "GET /v1/me HTTP/1.1" 200')
    (line,) = lines(stream)
    assert line["logger"] == "uvicorn.access" and "GET /v1/me" in line["message"]


def test_a_urls_password_is_redacted_and_the_rest_of_the_url_kept(stream):
    log = logging.getLogger("tests.logs")
    log.warning("cannot reach %s", "postgresql+psycopg://trainer:p@ss:w0rd@db.internal:5432/jobs")
    log.warning("broker redis://:hunter2@cache:6379/0, store https://minio:9000/bucket, db postgresql://u@h/d")
    parsed = lines(stream)
    assert parsed[0]["message"] == "cannot reach postgresql+psycopg://trainer:[redacted]@db.internal:5432/jobs"
    assert parsed[1]["message"] == (
        "broker redis://:[redacted]@cache:6379/0, store https://minio:9000/bucket, db postgresql://u@h/d"
    )
    assert "w0rd" not in stream.getvalue() and "hunter2" not in stream.getvalue()


def test_keys_are_redacted_from_the_message_the_arguments_the_fields_and_the_traceback(stream):
    key = "tsk_" + secrets.token_urlsafe(32)
    log = logging.getLogger("tests.logs")
    log.info("key %s", key)
    log.info(f'GET /v1/me?api_key={key[4:]}" 401')
    log.info("extra", extra={"header": f"Bearer {key}"})
    logs.bind(job_id=key)  # a key pasted where an id goes
    try:
        raise ValueError(f"bad key {key}")
    except ValueError:
        log.exception("failed")
    text = stream.getvalue()
    assert key[4:] not in text and key[4:20] not in text
    parsed = lines(stream)  # still valid JSON after redaction
    assert parsed[0]["message"] == "key tsk_[redacted]"
    assert parsed[1]["message"] == 'GET /v1/me?api_key=[redacted]" 401'
    assert parsed[2]["header"] == "Bearer tsk_[redacted]"
    assert parsed[3]["job_id"] == "tsk_[redacted]" and "ValueError: bad key tsk_[redacted]" in parsed[3]["exc_info"]


def test_the_text_format_shows_the_ids_too(stream):
    logs.configure(Settings(log_format="text"), stream=stream)
    logs.bind(request_id="r-2", model_id="m-2")
    logging.getLogger("tests.logs").info("translated")
    (line,) = stream.getvalue().splitlines()
    assert line.endswith("INFO tests.logs: translated [request_id=r-2 model_id=m-2]")
    assert len([h for h in logging.getLogger().handlers if isinstance(h, logs.ServiceHandler)]) == 1


def test_a_task_binds_the_request_id_it_was_sent_with_and_the_ids_among_its_arguments(stream):
    def run(model_id: str, texts: list[str], beam_size: int = 4) -> None: ...

    task = SimpleNamespace(request={"request_id": "r-3"}, run=run)
    logs.bind(owner_id="left over from the last task")
    logs.bind_task(task=task, args=("model-3", ["a"]), kwargs={"beam_size": 2})
    assert logs.bound() == {"request_id": "r-3", "model_id": "model-3"}
    logs.unbind_task()
    assert logs.bound() == {}

    def train(job_id: str) -> None: ...

    logs.bind_task(task=SimpleNamespace(request={}, run=train), args=(), kwargs={"job_id": "job-3"})
    assert logs.bound() == {"job_id": "job-3"}
    logs.bind_task(task=SimpleNamespace(request={}, run=train), args=(1, 2, 3), kwargs={})  # does not fit: no ids
    assert logs.bound() == {}


def test_a_published_task_carries_the_bound_request_id(stream):
    headers: dict = {}
    logs.publish_request_id(headers=headers)
    assert headers == {}, "nothing bound, nothing sent"
    logs.bind(request_id="r-4")
    logs.publish_request_id(headers=headers)
    assert headers == {logs.TASK_HEADER: "r-4"}


def test_the_request_id_middleware_takes_a_plausible_client_id_and_binds_it(stream):
    api = FastAPI()
    api.add_middleware(RequestId)

    @api.get("/where")
    async def where() -> dict:
        logging.getLogger("tests.logs").info("inside")
        return logs.bound()

    with TestClient(api) as client:
        given = client.get("/where", headers={HEADER: "client-id.42"})
        assert given.headers[HEADER] == "client-id.42" and given.json() == {"request_id": "client-id.42"}
        for bad in ("has space", "x" * 65, '{"json": 1}'):
            made = client.get("/where", headers={HEADER: bad})
            assert made.headers[HEADER] != bad and len(made.headers[HEADER]) == 32
            assert made.json() == {"request_id": made.headers[HEADER]}
        assert client.get("/where").headers[HEADER] != made.headers[HEADER], "each request gets its own id"
    inside = [line for line in lines(stream) if line["message"] == "inside"]
    assert inside[0]["request_id"] == "client-id.42"


@pytest.mark.parametrize(
    ("logged", "shown"),
    [
        ("connecting with password=hunter2 to the store", "connecting with password=[redacted] to the store"),
        ("PASSWORD = hunter2, retrying", "PASSWORD = [redacted], retrying"),
        ("db_password: hunter2", "db_password: [redacted]"),
        ("secret=s3cr3t-value&next=1", "secret=[redacted]&next=1"),
        ("Client_Secret: 'two words'", "Client_Secret: '[redacted]'"),
        ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG+bPxRfiCY", "aws_secret_access_key=[redacted]"),
        ("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AWS_ACCESS_KEY_ID=[redacted]"),
        (
            "{'aws_session_token': 'FwoGZXIvYXdz', 'region': 'eu'}",
            "{'aws_session_token': '[redacted]', 'region': 'eu'}",
        ),
        ('{"token": "abc123", "step": 4}', '{"token": "[redacted]", "step": 4}'),
        ("auth_token:abc123)", "auth_token:[redacted])"),
        ("retrying with token=abc123", "retrying with token=[redacted]"),
    ],
)
def test_a_credential_named_in_a_key_value_pair_is_redacted(stream, logged, shown):
    logging.getLogger("tests.logs").warning(logged)
    (line,) = lines(stream)  # still valid JSON after redaction
    assert line["message"] == shown


def test_names_that_are_not_credentials_keep_their_values(stream):
    message = (
        "max_tokens_per_batch=4096 eos_token=2 tokens: 512 tokenizer=byte_bpe secretary=Ann unknown token: cat, "
        "eos token: </s>"
    )
    logging.getLogger("tests.logs").info(message)
    assert lines(stream)[0]["message"] == message


def test_the_s3_secret_key_of_the_settings_is_redacted_wherever_it_appears_traceback_included(stream):
    secret = "wJalrXUtnFEMI/K7MDENG/" + secrets.token_urlsafe(12)
    logs.configure(Settings(aws_secret_access_key=secret), stream=stream)
    log = logging.getLogger("tests.logs")
    log.warning("signing with %s", secret)
    try:
        raise RuntimeError(f"SignatureDoesNotMatch for key {secret}; retry with secret_key={secret}")
    except RuntimeError:
        log.exception("upload failed")
    try:
        raise ConnectionError("login failed: password=hunter2 auth_token: abc123")
    except ConnectionError:
        log.exception("attempt 2 crashed")
    text = stream.getvalue()
    assert secret not in text and secret[:20] not in text
    for word in ("hunter2", "abc123"):
        assert word not in text
    first, second, third = lines(stream)
    assert first["message"] == "signing with [redacted]"
    assert second["exc_info"].endswith(
        "RuntimeError: SignatureDoesNotMatch for key [redacted]; retry with secret_key=[redacted]"
    )
    assert third["exc_info"].endswith("ConnectionError: login failed: password=[redacted] auth_token: [redacted]")


def test_celerys_lines_of_each_request_task_are_dropped_and_other_tasks_keep_theirs(stream):
    """The inference worker's configuration drops the received and succeeded lines of the tasks a request waits for
    (a translation's succeeded line held the user's texts); a training task keeps both, and a failure is logged."""
    from celery.app import trace

    from app.core.task_names import TRAIN, TRANSLATE
    from worker.celery_app import _configure_logging

    root = logging.getLogger()
    _configure_logging(loglevel="INFO")
    logs.configure(Settings(log_level="info"), stream=stream)  # the worker's filters stay, our buffer takes the lines
    received = logging.getLogger("celery.worker.strategy")
    try:
        for name in (TRANSLATE, TRAIN):
            context = {"id": f"id-{name}", "name": name, "args": "()", "kwargs": "{}", "eta": None}
            received.info(trace.LOG_RECEIVED, context, extra={"data": context})  # as celery.worker.strategy does
            trace.info(trace.LOG_SUCCESS, {**context, "return_value": "{'translations': ['Bonjour']}", "runtime": 0.1})
        failed = {"id": "id-failed", "name": TRANSLATE, "description": "raised unexpected", "exc": "ValueError()"}
        trace.logger.error(trace.LOG_FAILURE, failed, extra={"data": failed})
        messages = [line["message"] for line in lines(stream)]
        assert messages == [
            f"Task {TRAIN}[id-{TRAIN}] received",
            f"Task {TRAIN}[id-{TRAIN}] succeeded in 0.1s: {{'translations': ['Bonjour']}}",
            f"Task {TRANSLATE}[id-failed] raised unexpected: ValueError()",
        ]
    finally:
        for name in logs.TASK_LINE_LOGGERS:
            logger = logging.getLogger(name)
            logger.filters[:] = [f for f in logger.filters if not isinstance(f, logs.QuietTaskLines)]
        root.handlers[:] = [h for h in root.handlers if not isinstance(h, logs.ServiceHandler)]
