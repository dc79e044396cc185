"""The client CLI following a job (`status --watch`, `logs`) against the API in process, as in tests/api/test_cli.py:
plain lines without a terminal, a rich bar on one, a failed job's error and exit code, reconnecting with the last
event id when the stream drops, and a job's log lines by level until it ends."""

from __future__ import annotations

import threading
import time
from io import StringIO

import httpx
import httpx2
from sqlalchemy import select

from tests.api.test_cli import _key
from tests.api.test_job_labels import job_rows


def _running_job(owner: str, **training) -> str:
    """A running job at step 3 of 10 with a train_loss point and the speed its worker reported."""
    from app.db.run_record_tables import Metric
    from app.db.session import session_scope
    from app.db.tables import Job

    job_id = job_rows(owner, 1, status="running", training_config={"max_steps": 10, **training})[0]
    with session_scope() as session:
        job = session.get(Job, job_id)
        job.step, job.tokens_per_second, job.eta_seconds = 3, 1234.0, 70.0
        session.add(Metric(job_id=job_id, step=3, name="train_loss", value=4.5))
    return job_id


def _finish_later(job_id: str, owner: str, delay: float, after: threading.Event | None = None) -> threading.Thread:
    """What a worker does, `delay` seconds from now (from when `after` is set, if given): a step with a new loss,
    then success with a model."""
    from app.db.access_tables import Owner
    from app.db.run_record_tables import Metric
    from app.db.session import session_scope
    from app.db.tables import Job, TrainedModel

    def work() -> None:
        if after is not None:
            assert after.wait(60), "the watcher never read the job"
        time.sleep(delay)
        with session_scope() as session:
            job = session.get(Job, job_id)
            job.step = 6
            session.add(Metric(job_id=job_id, step=6, name="train_loss", value=3.25))
        time.sleep(1.5)
        with session_scope() as session:
            job = session.get(Job, job_id)
            job.step, job.status, job.eta_seconds = 10, "succeeded", 0.0
            job.auto_settings = {  # the worker chose the job's preset
                "fields": ["preset"],
                "chosen": {"preset": "small"},
                "reasons": {"preset": "small: predicted loss 8.57 against tiny 10.83"},
            }
            session.add(Metric(job_id=job_id, step=10, name="valid_loss", value=2.5))
            owner_id = session.scalar(select(Owner.id).where(Owner.name == owner))
            session.add(
                TrainedModel(
                    id="model-of-" + job_id[:8], owner_id=owner_id, job_id=job_id, objective="translation",
                    config={}, tokenizer_fingerprint="f", metrics={}, source="last@10", parameters=1,
                    storage_key="models/x", sha256="0" * 64, size_bytes=1,
                )
            )  # fmt: skip

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_status_watch_without_a_terminal_prints_plain_lines_until_the_end_and_the_model(cli, client, alice):
    job_id = _running_job("alice")
    read = threading.Event()  # the first line must show step 3: the worker moves on once the watcher has read it
    client.event_hooks["response"].append(
        lambda response: read.set() if response.request.url.path == f"/v1/jobs/{job_id}" else None
    )
    thread = _finish_later(job_id, "alice", delay=0.2, after=read)
    code, out, err = cli("status", job_id, "--watch", "--interval", "0", "--key", _key(alice))
    thread.join()
    lines = out.splitlines()
    assert code == 0 and lines[-1] == f"model: model-of-{job_id[:8]}", lines
    assert "preset: small, chosen by the worker: small: predicted loss 8.57 against tiny 10.83" in err
    assert lines[0].startswith("running   [#########") and "3/10 1234 tok/s ETA 01:10 train_loss=4.5" in lines[0]
    assert any("6/10" in line and "train_loss=3.25" in line for line in lines), lines  # from the metric event
    assert lines[-2].startswith("succeeded [" + "#" * 30 + "] 10/10") and "valid_loss=2.5" in lines[-2], lines
    assert sum(line.startswith("succeeded") for line in lines) == 1, lines


def test_status_watch_of_a_failed_job_prints_its_error_and_exits_1(cli, alice):
    from app.db.session import session_scope
    from app.db.tables import Job

    job_id = job_rows("alice", 1, status="failed")[0]
    with session_scope() as session:
        session.get(Job, job_id).error = "out of memory at step 3"
    code, out, _ = cli("status", job_id, "--watch", "--key", _key(alice))
    assert code == 1 and out.splitlines()[-1] == "error: out of memory at step 3"
    assert cli("status", "nope", "--watch", "--key", _key(alice))[1:] == ("", "error 404: job nope not found\n")


def test_status_watch_on_a_terminal_draws_a_rich_bar_of_the_api_fraction(client, alice):
    """A time budget binds before the steps: the API says half done at step 3 of 10 000, and the bar says 50%."""
    from rich.console import Console

    from app.client import watch
    from app.db.session import session_scope
    from app.db.tables import Job

    job_id = _running_job("alice", max_minutes=2)
    with session_scope() as session:
        job = session.get(Job, job_id)
        job.total_steps, job.tokens_seen = 10_000, 3 * 1234  # 9,997 steps to go at a second each: time binds
    client.headers.update(alice)
    screen = StringIO()
    view = watch.RichView(Console(file=screen, force_terminal=True, width=150))
    view.update(client.get(f"/v1/jobs/{job_id}").json())
    view.stop()
    shown = screen.getvalue()
    assert "\x1b[" in shown and "━" in shown  # drawn for a terminal: colours and a bar
    assert " 42%" in shown and "ETA 01:10" in shown  # 1 - 70 s / 120 s
    assert "0.8/2 min (step 3)" in shown and "3/10000" not in shown  # by the minutes, as the bar
    assert "1,234 tok/s" in shown and "train_loss=4.5" in shown


def test_status_watch_on_a_terminal_follows_to_the_end_and_prints_the_model(client, alice):
    from rich.console import Console

    from app.client import watch

    job_id = _running_job("alice")
    thread = _finish_later(job_id, "alice", delay=0.5)
    client.headers.update(alice)
    screen = StringIO()
    code = watch.watch(client, job_id, 2.0, Console(file=screen, force_terminal=True, width=150))
    thread.join()
    shown = screen.getvalue()
    assert code == 0 and "100%" in shown and "step 10/10" in shown and "valid_loss=2.5" in shown
    assert shown.rstrip().endswith(f"model: model-of-{job_id[:8]}"), shown[-300:]


class _DropFirstEvents(httpx2.BaseTransport):
    """Passes requests to the app (the TestClient's transport: httpx2, starlette's fork of httpx), but cuts the
    first event stream after its first event (the `retry`) with the error httpx raises on a real connection."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self.inner, self.event_requests = inner, list[httpx2.Request]()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = self.inner.handle_request(request)
        if not request.url.path.endswith("/events"):
            return response
        self.event_requests.append(request)
        if len(self.event_requests) > 1:
            return response
        response.read()
        first = response.content.split(b"\n\n")[0] + b"\n\n"

        class Cut(httpx2.SyncByteStream):
            def __iter__(self):
                yield first
                raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

        return httpx2.Response(200, headers=response.headers, stream=Cut(), request=request)


def test_status_watch_reconnects_with_the_last_event_id_when_the_stream_drops(client, alice, capsys):
    """Fault: the first event stream is cut after one event. Pass: the CLI says so, reconnects with the id of
    the last metric it knows, and still ends on the job's status and model."""
    from rich.console import Console

    from app.client import watch

    job_id = _running_job("alice")
    thread = _finish_later(job_id, "alice", delay=0.5)
    transport = _DropFirstEvents(client._transport)
    last_id = client.get(f"/v1/jobs/{job_id}/metrics", headers=alice).json()["last_event_id"]
    with httpx2.Client(base_url=str(client.base_url), headers=alice, transport=transport) as dropping:
        code = watch.watch(dropping, job_id, 0.0, Console(file=StringIO(), force_terminal=False))
    thread.join()
    out, err = capsys.readouterr()
    assert code == 0 and out.splitlines()[-1] == f"model: model-of-{job_id[:8]}"
    assert len(transport.event_requests) == 2
    assert "events interrupted (RemoteProtocolError: peer closed connection" in err and "reconnecting in 2s" in err
    assert transport.event_requests[1].headers["last-event-id"] == str(last_id)


def test_logs_prints_a_jobs_lines_by_level_and_follows_until_the_job_ends(cli, alice, monkeypatch):
    from app.client import job_logs as logs_command
    from app.db.session import session_scope
    from app.db.tables import Job
    from tests.api.test_job_logs import append

    key = ("--key", _key(alice))
    job_id = _running_job("alice")
    append(job_id, ("info", "read 30 rows"), ("warning", "out of memory: retrying"), ("info", "evaluation at step 3"))
    code, out, _ = cli("logs", job_id, *key)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3 and lines[1].split()[2:4] == ["WARNING", "worker.tasks.training:"]
    assert lines[1].endswith("out of memory: retrying")
    assert cli("logs", job_id, "--level", "warning", "--json", *key)[1].count("\n") == 1
    # --follow: reads again while the job runs; lines written after its end still arrive
    reads = []

    def later(seconds: float) -> None:
        reads.append(seconds)
        if len(reads) == 1:
            append(job_id, ("info", "evaluation at step 6"))
        elif len(reads) == 2:
            with session_scope() as session:
                session.get(Job, job_id).status = "cancelled"
            append(job_id, ("info", "cancelled at step 6"))

    monkeypatch.setattr(logs_command.time, "sleep", later)
    code, out, _ = cli("logs", job_id, "--follow", "--interval", "0.5", *key)
    assert code == 0 and out.splitlines()[-1].endswith("cancelled at step 6") and len(out.splitlines()) == 5
    assert reads == [0.5, 0.5, logs_command.SETTLE_SECONDS]
    code, _, err = cli("logs", "no-such-job", *key)
    assert code == 1 and "error 404" in err
