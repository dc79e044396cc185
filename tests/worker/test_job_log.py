"""The job log handler (worker/training/job_log.py) against a real PostgreSQL database: it keeps our lines bound
to a job, redacted and clipped, writes them only when asked (in one batch), bounds each job's log, and swallows a
database error after a warning on stderr."""

from __future__ import annotations

import logging

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import select, text

from app.core import logs
from bench.harness.stack import ROOT

LOGGER = "worker.tasks.training"  # one of the product's loggers


@pytest.fixture
def database(settings_env, fresh_postgres_url):
    settings_env(DATABASE_URL=fresh_postgres_url)
    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")
    return fresh_postgres_url


def new_job(owner: str = "alice") -> str:
    from app.db.access_tables import Owner
    from app.db.session import session_scope
    from app.db.tables import Job

    with session_scope() as session:
        row = session.scalar(select(Owner).where(Owner.name == owner)) or Owner(name=owner)
        session.add(row)
        session.flush()
        job = Job(
            owner_id=row.id,
            objective="translation",
            model_config={"preset": "tiny", "vocab_size": 500},
            training_config={"max_steps": 10},
            max_attempts=3,
            total_steps=10,
            request_sha256="",
        )
        session.add(job)
        session.flush()
        return job.id


def stored(job_id: str) -> list[tuple[int, str, str, str, int | None]]:
    from app.db.run_record_tables import JobLog
    from app.db.session import session_scope

    with session_scope() as session:
        rows = session.scalars(select(JobLog).where(JobLog.job_id == job_id).order_by(JobLog.seq)).all()
        return [(r.seq, r.level, r.logger, r.message, r.attempt) for r in rows]


@pytest.fixture
def handler(database):
    """A JobLogHandler on the root logger (5 lines a job, 300 characters a line), the root at INFO meanwhile."""
    from worker.training.job_log import JobLogHandler

    root = logging.getLogger()
    level, handler = root.level, JobLogHandler(max_lines=5, max_chars=300)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        logs.unbind_task()


def test_lines_bound_to_a_job_wait_in_memory_and_are_written_in_one_batch(handler):
    job_id, other = new_job(), new_job()
    log = logging.getLogger(LOGGER)
    log.info("not about a job")  # nothing bound: not kept
    with logs.bound_to(job_id=job_id):
        handler.begin(job_id, 2)
        log.info("read %d rows", 900)
        log.debug("below INFO: not kept")
        logging.getLogger("celery.worker").warning("not the product's logger: not kept")
        logging.getLogger("model.train.step").warning("a warning of the step")
        logging.getLogger("model.train.trainer").info("resumed from /var/lib/x at step 3")  # a local path: not kept
    logging.getLogger("worker.training.auto_settings").error("bound explicitly", extra={"job_id": other})
    assert stored(job_id) == []  # logging wrote nothing to the database
    handler.write(job_id)
    assert stored(job_id) == [
        (1, "info", LOGGER, "read 900 rows", 2),
        (2, "warning", "model.train.step", "a warning of the step", 2),
    ]
    assert stored(other) == []
    handler.write(other)
    assert stored(other) == [(1, "error", "worker.training.auto_settings", "bound explicitly", None)]
    with logs.bound_to(job_id=job_id):
        log.critical("later")
    handler.write(job_id, final=True)
    assert [line[0] for line in stored(job_id)] == [1, 2, 3]


def test_secrets_are_redacted_from_messages_and_tracebacks(handler):
    job_id = new_job()
    key = "tsk_" + "S3cretKeyValue" * 3
    with logs.bound_to(job_id=job_id):
        logging.getLogger(LOGGER).info("store at postgresql://trainer:hunter2@db:5432/jobs with %s", key)
        try:
            raise RuntimeError(
                f"cannot reach redis://:topsecret@cache:6379/0?token=abc123 ({key}), aws_secret_access_key=wJalrXUt"
            )
        except RuntimeError:
            logging.getLogger(LOGGER).exception("attempt 1 crashed")
    handler.write(job_id)
    (_, _, _, first, _), (_, level, _, failure, _) = stored(job_id)
    assert first == "store at postgresql://trainer:[redacted]@db:5432/jobs with tsk_[redacted]"
    assert level == "error" and failure.startswith("attempt 1 crashed\nTraceback (most recent call last):")
    assert "RuntimeError: cannot reach redis://:[redacted]@cache:6379/0?token=[redacted]" in failure
    assert failure.endswith("), aws_secret_access_key=[redacted]")
    for secret in ("hunter2", "topsecret", "abc123", key, "wJalrXUt"):
        assert secret not in first + failure


def test_a_job_keeps_its_newest_lines_and_says_how_many_were_dropped(handler):
    job_id = new_job()
    log = logging.getLogger(LOGGER)
    with logs.bound_to(job_id=job_id):
        for n in range(1, 13):  # 12 lines; 5 wait in memory at most
            log.info("line %d", n)
    handler.write(job_id)
    lines = stored(job_id)
    assert [(seq, message) for seq, _, _, message, _ in lines] == [
        (8, "… 8 earlier lines dropped (a job keeps its newest 4)"),
        (9, "line 9"),
        (10, "line 10"),
        (11, "line 11"),
        (12, "line 12"),
    ]
    assert lines[0][1:3] == ("warning", "job_logs")
    with logs.bound_to(job_id=job_id):
        log.info("line 13")
        log.info("x" * 1000 + "the end")  # clipped to 300 characters: its head and its tail stay
    handler.write(job_id)
    lines = stored(job_id)
    assert [seq for seq, *_ in lines] == [10, 11, 12, 13, 14]
    assert lines[0][3] == "… 10 earlier lines dropped (a job keeps its newest 4)"
    clipped = lines[-1][3]
    assert len(clipped) <= 300 and clipped.startswith("xxx") and clipped.endswith("the end")
    assert "characters dropped" in clipped


def test_a_database_error_is_swallowed_with_a_warning_and_the_lines_kept_for_the_next_write(handler, database, capsys):
    from app.db.session import get_engine

    job_id = new_job()
    log = logging.getLogger(LOGGER)
    with get_engine().begin() as connection:
        connection.execute(text("ALTER TABLE job_logs RENAME TO job_logs_away"))
    with logs.bound_to(job_id=job_id):
        log.info("before the outage")
    handler.write(job_id)  # does not raise
    handler.write(job_id)
    assert capsys.readouterr().err.count(f"job log: 1 lines of job {job_id} not written (kept for the next try)") == 1
    with get_engine().begin() as connection:
        connection.execute(text("ALTER TABLE job_logs_away RENAME TO job_logs"))
    with logs.bound_to(job_id=job_id):
        log.info("after it")
    handler.write(job_id)
    assert [message for _, _, _, message, _ in stored(job_id)] == ["before the outage", "after it"]


def test_the_final_write_drops_what_it_cannot_write_and_a_deleted_jobs_lines_go_quietly(handler, capsys):
    from app.db.session import session_scope
    from app.db.tables import Job

    job_id = new_job()
    with logs.bound_to(job_id=job_id):
        logging.getLogger(LOGGER).info("about a job about to go")
    with session_scope() as session:
        session.delete(session.get(Job, job_id))
    handler.write(job_id, final=True)
    assert capsys.readouterr().err == "" and stored(job_id) == []
    handler.write(job_id)  # nothing waits any more
    assert capsys.readouterr().err == ""


def test_install_keeps_the_products_info_lines_while_the_service_logs_at_log_level(database):
    import io

    from app.core.settings import Settings
    from worker.training import job_log

    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    buffer = io.StringIO()
    try:
        logs.configure(Settings(log_level="warning"), stream=buffer)
        installed = job_log.install()
        job_id = new_job()
        with logs.bound_to(job_id=job_id):
            logging.getLogger(LOGGER).info("data statistics")
        job_log.write(job_id)
        assert [message for _, _, _, message, _ in stored(job_id)] == ["data statistics"]
        assert buffer.getvalue() == ""  # the service's output stays at warning
        assert (
            job_log.install() is not installed and sum(isinstance(h, job_log.JobLogHandler) for h in root.handlers) == 1
        )
    finally:
        root.handlers[:] = before
        root.setLevel(level)
        for name in job_log.PRODUCT_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)
        job_log._installed = None
        logs.unbind_task()


@pytest.fixture
def warnings_captured(handler, monkeypatch):
    """The job log's warnings hook, over a stand-in for how Python shows a warning outside a job."""
    import warnings

    from worker.training import job_log

    shown: list[str] = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *_args, **_kw: shown.append(str(message)))
    monkeypatch.setattr(warnings, "filters", [])  # pytest's own filters aside: Python's default action
    warnings.simplefilter("default")
    job_log.capture_warnings()
    return shown


def test_a_warning_raised_while_the_training_task_trains_is_a_warning_line_of_its_job(
    warnings_captured, handler, monkeypatch
):
    """Fault: torch warns (a UserWarning) in the middle of a job's training, twice, on the task's thread while the
    lease keeper runs beside it. Pass: the job's log has it once, at warning, with the place it was raised (not
    the worker's paths); the same warning in the next job is in that job's log too."""
    import warnings

    from celery.backends.cache import CacheBackend

    from app.core.settings import get_settings
    from model.train.events import TrainResult
    from worker import celery_app  # noqa: F401  # its task signals bind the task's job id
    from worker.tasks import training
    from worker.training import job_log

    get_settings().data_dir.mkdir(parents=True, exist_ok=True)  # where Celery keeps the result of apply()
    # The task's own result backend, in memory: the app's was configured by whichever test imported it first, and
    # its SQLite file may be gone with that test's folder.
    monkeypatch.setattr(training.train_job, "_backend", CacheBackend(app=training.train_job.app, backend="memory"))
    monkeypatch.setattr(job_log, "_installed", handler)  # the handler the task writes with

    text = "enable_nested_tensor is True, but self.use_nested_tensor is False"

    def warning_train(job, data, device, root, callbacks, state):
        for _ in range(2):
            warnings.warn(text, UserWarning, stacklevel=1)
        return TrainResult("cancelled", 3, 0.1, {}, None, None, None, None, None, None)

    monkeypatch.setattr(training, "_prepare", lambda claim, state: (load_job(claim.job_id), None, "cpu", None))
    monkeypatch.setattr(training, "_train", warning_train)
    for job_id in (new_job(), new_job()):
        training.train_job.apply(args=[job_id], throw=True)
        warned = [line for line in stored(job_id) if line[2] == "worker.warnings"]
        assert [(level, message.split(" (")[0]) for _, level, _, message, _ in warned] == [
            ("warning", f"UserWarning: {text}")
        ]
        assert warned[0][3].endswith(f"(tests/worker/test_job_log.py:{warning_train.__code__.co_firstlineno + 2})")
    assert warnings_captured == []


def load_job(job_id: str):
    from app.db.session import session_scope
    from app.db.tables import Job

    with session_scope() as session:
        job = session.get(Job, job_id)
        session.expunge(job)
        return job


def test_concurrent_jobs_in_one_process_each_keep_their_own_warnings(warnings_captured, handler):
    """Fault: two jobs warn at once on two threads of one worker, and a third thread warns with no job. Pass:
    each warning is in its own job's log only; the one outside a job is shown as Python shows it."""
    import threading
    import warnings

    jobs = [new_job(), new_job()]
    barrier = threading.Barrier(3)

    def warn(job_id: str | None) -> None:
        with logs.bound_to(job_id=job_id):
            barrier.wait()
            warnings.warn(f"raised for {job_id}", UserWarning, stacklevel=1)

    threads = [threading.Thread(target=warn, args=(job_id,)) for job_id in (*jobs, None)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for job_id in jobs:
        handler.write(job_id)
        assert [message.split(" (")[0] for _, _, _, message, _ in stored(job_id)] == [
            f"UserWarning: raised for {job_id}"
        ]
    assert warnings_captured == ["raised for None"]


def test_a_warnings_place_never_names_the_workers_paths():
    from worker.training.job_log import warning_place

    assert warning_place("/opt/venv/lib/python3.11/site-packages/torch/nn/modules/transformer.py") == (
        "torch/nn/modules/transformer.py"
    )
    assert warning_place(str(ROOT / "model" / "train" / "loop.py")) == "model/train/loop.py"
    assert warning_place("/srv/elsewhere/script.py") == "script.py"
