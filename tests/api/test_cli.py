"""The client CLI (`python -m app.cli`, app/client/) against the API in process: its requests go through the
TestClient to the real routes and database; only `connection.open_client` is replaced (see `cli` in conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from io import StringIO

import httpx
import httpx2
import pytest
from sqlalchemy import select

from bench.harness.stack import ROOT
from tests.api.test_init_model import _model_row
from tests.api.test_job_labels import job_rows


def _key(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def test_jobs_pages_past_the_first_hundred_and_filters(cli, alice):
    sweep = set(job_rows("alice", 130, tags=("sweep",)))
    failed = job_rows("alice", 3, tags=("sweep",), status="failed")
    denoising = job_rows("alice", 4, objective="denoising")
    key = _key(alice)
    code, out, _ = cli("jobs", "--key", key, "--json")
    assert code == 0 and len({json.loads(line)["id"] for line in out.splitlines()}) == 137
    code, out, _ = cli("jobs", "--key", key, "--tag", "sweep", "--status", "queued", "--json")
    assert {json.loads(line)["id"] for line in out.splitlines()} == sweep
    code, out, _ = cli("jobs", "--key", key, "--tag", "sweep", "--status", "failed")
    lines = out.splitlines()
    assert lines[0].startswith("ID ") and {line.split()[0] for line in lines[1:]} == set(failed)
    assert all(line.split()[2:5] == ["translation", "-", "failed"] for line in lines[1:]), lines
    code, out, _ = cli("jobs", "--key", key, "--objective", "denoising")
    assert {line.split()[0] for line in out.splitlines()[1:]} == set(denoising)
    code, out, _ = cli("jobs", "--key", key, "--limit", "5", "--json")
    assert len(out.splitlines()) == 5
    assert cli("jobs", "--key", key, "--status", "sleeping")[0] == 2  # argparse names the choices


def test_models_pages_filters_by_objective_and_prints_a_table(cli, alice):
    translation = {_model_row("alice") for _ in range(205)}
    denoising = _model_row("alice", objective="denoising")
    key = _key(alice)
    code, out, _ = cli("models", "--key", key, "--json")
    assert code == 0 and {json.loads(line)["id"] for line in out.splitlines()} == translation | {denoising}
    code, out, _ = cli("models", "--key", key, "--objective", "denoising")
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "OBJECTIVE", "PARAMS", "SOURCE", "PARENT", "CREATED", "METRICS"]
    assert len(lines) == 2 and lines[1].split()[:5] == [denoising, "-", "denoising", "1", "last@1"], lines
    code, out, _ = cli("models", "--key", key, "--objective", "translation", "--limit", "3", "--json")
    assert len(out.splitlines()) == 3 and all(json.loads(line)["id"] in translation for line in out.splitlines())


def test_submit_labels_the_job_with_its_name_tags_and_note(cli, alice, client, parallel_id):
    key = _key(alice)
    code, out, err = cli(
        "submit", "--dataset", parallel_id, "--max-steps", "5", "--name", "warm-up 400", "--tag", "baseline",
        "--tag", "en-de", "--note", "the paper's schedule", "--source-language", "en", "--target-language", "de",
        "--key", key,
    )  # fmt: skip
    assert code == 0, err
    assert "preset: auto (the worker chooses when the job starts)" in err  # no --preset: the worker's to choose
    job = client.get(f"/v1/jobs/{out.strip()}", headers=alice).json()
    assert job["model"]["preset"] == "auto"
    assert (job["name"], job["tags"], job["note"]) == ("warm-up 400", ["baseline", "en-de"], "the paper's schedule")
    assert (job["source_language"], job["target_language"]) == ("en", "de")
    code, out, _ = cli("jobs", "--tag", "en-de", "--key", key)
    assert out.splitlines()[1].split()[:3] == [job["id"], "warm-up", "400"]
    code, _, err = cli("submit", "--dataset", parallel_id, "--tag", "no spaces", "--key", key)
    assert code == 1 and "error 422" in err and "'no spaces'" in err


def test_submit_reaches_every_field_of_a_job_by_its_dotted_key(cli, alice, client, parallel_id):
    key = _key(alice)
    code, out, err = cli(
        "submit", "--dataset", parallel_id, "--test-dataset", parallel_id, "--preset", "small",
        "--set", "training.max_steps=100", "--set", "model.vocab_size=2000", "--set", "name=123",
        "--set", 'training.probe_tokens=["the"]', "--set", "training.precision=bf16", "--set", "model.dropout=null",
        "--key", key,
    )  # fmt: skip
    assert code == 0 and "preset:" not in err, err  # a named preset is not the worker's to choose
    job = client.get(f"/v1/jobs/{out.strip()}", headers=alice).json()
    assert job["test_dataset_id"] == parallel_id and job["name"] == "123"  # JSON 123 is no name: read as text
    assert (job["model"]["preset"], job["model"]["vocab_size"], job["model"]["dropout"]) == ("small", 2000, None)
    assert (job["training"]["max_steps"], job["training"]["probe_tokens"], job["training"]["precision"]) == (
        100, ["the"], "bf16",
    )  # fmt: skip
    code, out, err = cli(
        "submit", "--dataset", parallel_id, "--set", f"test_dataset_id={parallel_id}", "--max-steps", "9",
        "--set", "training.max_steps=10", "--key", key,
    )  # fmt: skip
    job = client.get(f"/v1/jobs/{out.strip()}", headers=alice).json()
    assert job["test_dataset_id"] == parallel_id and job["training"]["max_steps"] == 10  # --set after the flags


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("training.learning_rate=1", "no field 'training.learning_rate'; training has: training.accelerator, "),
        ("colour=red", "no field 'colour'; a job has: dataset_id, "),
        ("training=1", "'training' is a section: name one of its fields, training.accelerator, "),
        ("training.max_steps.x=1", "'training.max_steps' has no fields"),
        ("training.max_steps=0", "training.max_steps=0: Input should be greater than or equal to 1"),
        ("training.max_steps=many", "training.max_steps=many: Input should be a valid integer"),
        ("model.preset=huge", "model.preset=huge: Input should be 'auto', 'tiny', 'small', 'base' or 'big'"),
        ("test_dataset_id=nope", "test_dataset_id=nope: Input should be a valid UUID"),
        ("training.max_steps", "'training.max_steps': expected FIELD=VALUE"),
    ],
)
def test_submit_refuses_a_bad_setting_naming_it_before_sending(cli, alice, client, parallel_id, assignment, message):
    code, _, err = cli("submit", "--dataset", parallel_id, "--set", assignment, "--key", _key(alice))
    assert code == 1 and f"error: {message}" in err, err
    assert client.get("/v1/jobs", headers=alice).json()["total"] == 0


def test_every_submit_flag_sets_a_field_of_the_request():
    from app.client.jobs import SUBMIT_FLAGS, _field

    for key in SUBMIT_FLAGS.values():
        _field(key)  # SettingError for a key that names no field, or a section


def test_a_rule_across_fields_is_the_apis_to_check_and_its_422_is_shown(cli, alice, parallel_id):
    code, _, err = cli("submit", "--dataset", parallel_id, "--set", "training.average_last=5", "--key", _key(alice))
    assert code == 1 and "error 422" in err and "average_last=5 needs keep_checkpoints >= 5, got 3" in err, err


def test_cancel_a_queued_job_and_a_finished_one_is_an_error_naming_it(cli, alice, client):
    queued = job_rows("alice", 2)
    done = job_rows("alice", 1, status="succeeded")[0]
    code, out, _ = cli("cancel", *queued, "--key", _key(alice))
    assert code == 0 and out.splitlines() == [f"{job}  cancelled (cancel requested)" for job in queued]
    assert {client.get(f"/v1/jobs/{job}", headers=alice).json()["status"] for job in queued} == {"cancelled"}
    code, _, err = cli("cancel", done, "--key", _key(alice))
    assert code == 1 and err.strip() == f"error 409: job {done} is already succeeded"
    assert "Traceback" not in err


def test_delete_a_model_and_a_dataset_then_they_are_404(cli, alice, client, parallel_id):
    model = _model_row("alice")
    key = _key(alice)
    assert cli("delete", "model", model, "--key", key)[:2] == (0, f"deleted model {model}\n")
    assert client.get(f"/v1/models/{model}", headers=alice).status_code == 404
    assert cli("delete", "dataset", parallel_id, "--key", key)[:2] == (0, f"deleted dataset {parallel_id}\n")
    code, _, err = cli("delete", "dataset", parallel_id, "--key", key)
    assert code == 1 and err.strip() == f"error 404: dataset {parallel_id} not found"
    code, _, err = cli("delete", "job", "x", "--key", key)
    assert code == 1 and err.strip() == "error 404: job x not found"


def test_delete_a_stopped_job_and_refuse_a_queued_one(cli, alice, client):
    queued = job_rows("alice", 1)[0]
    done = job_rows("alice", 1, status="succeeded")[0]
    key = _key(alice)
    assert cli("delete", "job", done, "--key", key)[:2] == (0, f"deleted job {done}\n")
    assert client.get(f"/v1/jobs/{done}", headers=alice).status_code == 404
    code, _, err = cli("delete", "job", queued, "--key", key)
    assert code == 1 and err.strip().startswith(f"error 409: job {queued} is queued: cancel it first"), err


def test_delete_a_model_with_an_alias_and_a_name_with_its_versions(cli, alice, client):
    v1, v2 = _model_row("alice"), _model_row("alice")
    key = _key(alice)
    for model in (v1, v2):
        assert client.patch(f"/v1/models/{model}", json={"name": "en-de"}, headers=alice).status_code == 200
    assert client.put("/v1/models/en-de/aliases/prod", json={"version": 1}, headers=alice).status_code == 200
    code, _, err = cli("delete", "model", v1, "--key", key)
    assert code == 1 and f"error 409: model {v1} is what en-de@prod point(s) at" in err, err
    code, out, _ = cli("delete", "model", v1, "--move-aliases-to", "en-de@2", "--key", key)
    assert (code, out) == (0, f"deleted model {v1}\n  alias en-de@prod moved to v2 {v2}\n")
    code, _, err = cli("delete", "name", "en-de", "--key", key)
    assert code == 1 and err.startswith(f"error 409: name en-de has versions en-de@2 ({v2})"), err
    code, out, _ = cli("delete", "name", "en-de", "--versions", "--key", key)
    assert (code, out) == (0, f"deleted name en-de\n  version 2 {v2}\n  alias en-de@prod dropped\n")
    assert client.get(f"/v1/models/{v2}", headers=alice).status_code == 404


def test_datasets_lists_every_dataset(cli, alice, parallel_id, mono_id):
    code, out, _ = cli("datasets", "--key", _key(alice))
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "NAME", "KIND", "STATUS", "FORMAT", "ROWS", "SIZE", "CREATED"]
    assert {line.split()[0]: line.split()[2] for line in lines[1:]} == {parallel_id: "parallel", mono_id: "monolingual"}


def test_a_model_reference_travels_unchanged_as_one_path_segment(cli, alice):
    from app.client.connection import path

    assert path("models", "my-en-de@production", "translate") == "/v1/models/my-en-de@production/translate"
    assert path("models", "a/b?c#d") == "/v1/models/a%2Fb%3Fc%23d"
    code, _, err = cli("translate", "my-en-de@production", "--text", "one", "--key", _key(alice))
    assert code == 1 and err.strip() == "error 404: model my-en-de@production not found"
    code, _, err = cli("translate", "my-en-de@production", "--key", _key(alice))
    assert code == 1 and err.strip() == "error: give FILE or --text"


def test_the_key_comes_from_the_flag_then_the_environment_then_the_local_file(
    cli, make_key, monkeypatch, settings_env, tmp_path
):
    """Three owners, one job each: whose jobs are listed tells which key was sent."""
    keys = {owner: _key(make_key(owner)) for owner in ("flag", "env", "file")}
    jobs = {owner: job_rows(owner, 1)[0] for owner in keys}
    (tmp_path / "var" / "local-api-key").write_text(keys["file"] + "\n")
    monkeypatch.setenv("TRANSFORMER_API_KEY", keys["env"])

    def listed(*argv: str) -> str:
        code, out, err = cli("jobs", "--json", *argv)
        assert code == 0, err
        return json.loads(out)["id"]

    assert listed("--key", keys["flag"]) == jobs["flag"]
    assert listed() == jobs["env"]
    monkeypatch.delenv("TRANSFORMER_API_KEY")
    assert listed() == jobs["file"]
    (tmp_path / "var" / "local-api-key").unlink()
    code, out, err = cli("jobs")
    assert code == 2 and out == ""
    assert "--key" in err and "TRANSFORMER_API_KEY" in err and str(tmp_path / "var" / "local-api-key") in err


def test_a_missing_key_is_exit_code_2_with_the_three_ways_and_no_traceback(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "DATA_DIR": str(tmp_path / "var"), "TRANSFORMER_URL": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "models"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        f"error: no API key: pass --key KEY, set TRANSFORMER_API_KEY, or put the key in {tmp_path / 'var'}"
        "/local-api-key (`make run` writes it there)"
    )
    unreachable = subprocess.run(
        [sys.executable, "-m", "app.cli", "models", "--key", "k"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert unreachable.returncode == 1 and "Traceback" not in unreachable.stderr
    assert unreachable.stderr.startswith("error: cannot reach the API at http://127.0.0.1:9"), unreachable.stderr


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


def test_register_names_models_and_alias_points_moves_lists_and_shows_history(cli, alice):
    from tests.api.test_init_model import _model_row

    key = ("--key", _key(alice))
    first, second = _model_row("alice"), _model_row("alice")
    code, out, _ = cli("register", first, "en-de", "--tag", "baseline", "--description", "first try", *key)
    assert (code, out) == (0, "en-de@1\n")
    assert cli("register", second, "en-de", *key)[1] == "en-de@2\n"
    code, out, _ = cli("alias", "en-de", "production", "--version", "1", *key)
    assert code == 0 and out.strip() == f"en-de@production -> version 1 (model {first})"
    assert cli("alias", "en-de", "production", "--model", second, *key)[1].startswith("en-de@production -> version 2")
    code, out, _ = cli("alias", "en-de", *key)
    assert code == 0 and out.splitlines()[0].split() == ["ALIAS", "VERSION", "MODEL", "UPDATED"]
    assert out.splitlines()[1].split()[:3] == ["en-de@production", "2", second]
    code, out, _ = cli("alias", "en-de", "production", "--history", "--json", *key)
    moves = [json.loads(line) for line in out.splitlines()]
    assert [(m["from_version"], m["to_version"]) for m in moves] == [(1, 2), (None, 1)]  # newest first
    code, out, _ = cli("models", "--name", "en-de", "--tag", "baseline", *key)
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [[first, "en-de@1"]]
    assert cli("alias", "en-de", "production", "--delete", *key)[0] == 0
    code, _, err = cli("alias", "en-de", "production", *key)
    assert code == 1 and "error 404" in err
    code, _, err = cli("register", first, "Not A Name", *key)
    assert code == 1 and "error 422" in err and "Not A Name" in err


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
