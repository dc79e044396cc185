"""The sweep commands of the CLI (app/client/sweeps.py) against the API in process (the `cli` fixture of
conftest.py): the --space mini-syntax, a sweep file merged with the flags, create, list, status, watch and cancel.
No worker runs: a trial's end is written to its job row and the sweep moved on as the worker would (`_end`)."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from sqlalchemy import select

from tests.api.test_cli import _key


def _end(sweep_id: str, number: int, status: str, bleu: float | None = None, error: str | None = None) -> None:
    """What the worker does when trial `number` ends: its evaluation reported, its job's final status, then
    sweep_runner.advance (which starts the next trial while the budget lasts)."""
    from app.core.settings import get_settings
    from app.db.base import utcnow
    from app.db.run_record_tables import Metric
    from app.db.session import session_scope
    from app.db.tables import Job
    from app.services import sweep_runner

    with session_scope() as session:
        job = session.scalars(select(Job).where(Job.sweep_id == sweep_id, Job.trial_number == number)).one()
        job.status, job.started_at = "running", utcnow() - timedelta(minutes=2)
        job_id = job.id
    if bleu is not None:
        with session_scope() as session:
            sweep_runner.report(session, job_id, 10, 60.0, {"bleu": bleu})
    with session_scope() as session:
        job = session.get(Job, job_id)
        job.status, job.error, job.finished_at = status, error, utcnow()
        if bleu is not None:
            session.add(Metric(job_id=job_id, step=10, name="bleu", value=bleu))
    with session_scope() as session:
        sweep_runner.advance(session, get_settings(), sweep_id)


def _args(parallel_id: str, *extra: str) -> list[str]:
    return [
        "sweep", "--name", "enfr", "--dataset", parallel_id, "--max-minutes", "2", "--budget-trials", "2",
        "--concurrent", "2", "--space", "training.lr_scale=float:0.1:3:log",
        "--space", "model.preset=choice:tiny,small",
        *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "dimension"),
    [
        ("float:0.1:3:log", {"type": "float", "low": 0.1, "high": 3.0, "log": True}),
        ("float:0:0.3", {"type": "float", "low": 0.0, "high": 0.3}),
        ("float:1e-4:1e-2:log", {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}),
        ("int:50:800:log", {"type": "int", "low": 50, "high": 800, "log": True}),
        ("int:2:8:2", {"type": "int", "low": 2, "high": 8, "step": 2}),
        ("choice:tiny,small", {"type": "choice", "values": ["tiny", "small"]}),
        ("choice:64, 128,true", {"type": "choice", "values": [64, 128, True]}),
        ('choice:["a,b", 0.5]', {"type": "choice", "values": ["a,b", 0.5]}),
    ],
)
def test_the_space_mini_syntax_reads_each_form(spec, dimension):
    from app.client.sweep_spec import parse_space

    name, parsed = parse_space(f"training.x={spec}")
    assert name == "training.x" and parsed == dimension
    assert [type(v) for v in parsed.get("values", [])] == [type(v) for v in dimension.get("values", [])]


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("training.lr_scale", "'training.lr_scale': expected SETTING=TYPE:..., e.g. training.lr_scale=float:0.1:3"),
        ("=float:0:1", "'=float:0:1': expected SETTING=TYPE:..."),
        ("m.d=gauss:0:1", "m.d=gauss:0:1: a dimension is float:LOW:HIGH[:log], int:LOW:HIGH[:STEP][:log] or choice"),
        ("m.d=float", "m.d=float: a dimension is float:LOW:HIGH[:log]"),
        ("m.d=float:0.1", "m.d=float:0.1: expected float:LOW:HIGH[:log]"),
        ("m.d=float:a:1", "m.d=float:a:1: low 'a' is not a number"),
        ("m.d=float:0:inf", "m.d=float:0:inf: high 'inf' is not a finite number"),
        ("m.d=int:1.5:3", "m.d=int:1.5:3: low '1.5' is not an integer"),
        ("m.d=float:0.1:1:lg", "m.d=float:0.1:1:lg: unexpected 'lg'; expected float:LOW:HIGH[:log]"),
        ("m.d=float:0:1:2", "m.d=float:0:1:2: unexpected '2'; expected float:LOW:HIGH[:log]"),
        ("m.d=float:3:0.1", "m.d=float:3:0.1: low=3.0 is above high=0.1"),
        ("m.d=float:0:1:log", "m.d=float:0:1:log: a log range needs low > 0, got low=0.0"),
        ("m.d=int:2:64:2:log", "m.d=int:2:64:2:log: a log range takes step 1, got step=2"),
        ("m.d=int:1:5:0", "m.d=int:1:5:0: step: Input should be greater than or equal to 1"),
        ("m.d=choice:", "m.d=choice:: an empty value; expected choice:A,B,..."),
        ("m.d=choice:a,,b", "m.d=choice:a,,b: an empty value"),
        ("m.d=choice:[1,", "m.d=choice:[1,: the list is not valid JSON"),
        ("m.d=choice:[null]", "m.d=choice:[null]: null is no choice: a value is text, a number or a bool"),
        ("m.d=choice:[]", "m.d=choice:[]: values: List should have at least 1 item"),
    ],
)
def test_a_bad_space_string_is_refused_naming_it_before_sending(cli, alice, client, parallel_id, assignment, message):
    from app.client.sweep_spec import SpecError, parse_space

    with pytest.raises(SpecError) as refused:
        parse_space(assignment)
    assert str(refused.value).startswith(message), str(refused.value)
    code, out, err = cli(*_args(parallel_id, "--space", assignment, "--key", _key(alice)))
    assert (code, out) == (1, "") and err.strip() == f"error: {refused.value}"
    assert client.get("/v1/sweeps", headers=alice).json()["total"] == 0


FILE = {
    "name": "from-file",
    "job": {"objective": "translation", "dataset_id": "DATASET", "training": {"max_minutes": 5, "max_steps": 50}},
    "space": {
        "training.lr_scale": {"type": "float", "low": 0.5, "high": 2.0},
        "training.warmup_steps": "int:50:800:log",
        "model.dropout": "float:0:0.3",
    },
    "budget": {"minutes": 60},
    "pruner": "median",
}
YAML = """\
name: from-file
job:
  objective: translation
  dataset_id: DATASET
  training: {max_minutes: 5, max_steps: 50}
space:
  training.lr_scale: {type: float, low: 0.5, high: 2.0}
  training.warmup_steps: int:50:800:log
  model.dropout: "float:0:0.3"
budget:
  minutes: 60
pruner: median
"""


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_a_sweep_file_with_flags_over_it(cli, alice, client, parallel_id, tmp_path, suffix):
    text = json.dumps(FILE) if suffix == ".json" else YAML
    file = tmp_path / f"sweep{suffix}"
    file.write_text(text.replace("DATASET", parallel_id))
    code, out, err = cli(
        "sweep", str(file), "--name", "enfr", "--max-minutes", "3", "--set", "model.vocab_size=2000",
        "--space", "training.lr_scale=float:0.1:3:log", "--space", "model.preset=choice:tiny,small",
        "--budget-trials", "4", "--seed", "7", "--key", _key(alice),
    )  # fmt: skip
    assert code == 0, err
    sweep = client.get(f"/v1/sweeps/{out.strip()}", headers=alice).json()
    assert sweep["name"] == "enfr" and sweep["pruner"] == "median" and sweep["seed"] == 7
    assert sweep["budget"] == {"minutes": 60, "trials": 4}
    assert sweep["job"]["training"] == {"max_minutes": 3, "max_steps": 50}  # the flag over the file's
    assert sweep["job"]["model"] == {"vocab_size": 2000}
    assert sweep["space"] == {  # the file's strings read as the flags' are, a --space over the file's dimension
        "training.lr_scale": {"type": "float", "low": 0.1, "high": 3.0, "log": True},
        "training.warmup_steps": {"type": "int", "low": 50, "high": 800, "step": 1, "log": True},
        "model.dropout": {"type": "float", "low": 0.0, "high": 0.3, "log": False},
        "model.preset": {"type": "choice", "values": ["tiny", "small"]},
    }


def test_first_trial_flags_are_the_points_tried_first_in_order(cli, alice, client, parallel_id):
    code, out, err = cli(
        "sweep", "--name", "enfr", "--dataset", parallel_id, "--max-minutes", "3", "--budget-trials", "4",
        "--space", "training.lr_scale=float:0.1:3:log", "--space", "model.preset=choice:tiny,small",
        "--first-trial", "training.lr_scale=1,model.preset=small", "--first-trial", "model.preset=tiny",
        "--key", _key(alice),
    )  # fmt: skip
    assert code == 0, err
    sweep = client.get(f"/v1/sweeps/{out.strip()}", headers=alice).json()
    assert sweep["first_trials"] == [{"training.lr_scale": 1.0, "model.preset": "small"}, {"model.preset": "tiny"}]
    assert sweep["trials"][0]["params"] == {"training.lr_scale": 1.0, "model.preset": "small"}
    assert sweep["trials"][0]["given"]
    code, _, err = cli(
        "sweep", "--name", "enfr2", "--dataset", parallel_id, "--max-minutes", "3", "--budget-trials", "4",
        "--space", "model.preset=choice:tiny,small", "--first-trial", "model.preset", "--key", _key(alice),
    )  # fmt: skip
    assert code == 1 and "'model.preset': expected FIELD=VALUE" in err and "Traceback" not in err, err


def test_yaml_reads_an_exponent_without_a_dot_as_a_number(tmp_path):
    from app.client.sweep_spec import load_file

    file = tmp_path / "s.yaml"
    file.write_text("space:\n  training.lr_scale: {type: float, low: 1e-4, high: 3E+0, log: true}\nname: 1e3x\n")
    data = load_file(file)
    assert data["space"]["training.lr_scale"] == {"type": "float", "low": 1e-4, "high": 3.0, "log": True}
    assert data["name"] == "1e3x"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("s.toml", "name = 1", "s.toml: a sweep file ends in .yaml, .yml, .json, got '.toml'"),
        ("s.yaml", "name: [unclosed", "s.yaml: not valid YAML: "),
        ("s.json", '{"name": ', "s.json: not valid JSON: Expecting value: line 1 column 10"),
        ("s.yaml", "- a\n- b\n", "s.yaml: expected a mapping of the sweep's fields (name, job, space, budget, ..."),
        ("s.yaml", "job: 3\n", "job is 3, not a mapping: cannot set job.dataset_id"),
        ("s.yaml", "space: {training.lr_scale: 'float:1:0.5'}\n", "training.lr_scale=float:1:0.5: low=1.0 is above"),
    ],
)  # fmt: skip
def test_a_bad_sweep_file_is_named_with_what_is_wrong(cli, alice, tmp_path, parallel_id, name, text, message):
    (tmp_path / name).write_text(text)
    code, _, err = cli("sweep", str(tmp_path / name), "--dataset", parallel_id, "--key", _key(alice))
    assert code == 1 and message in err, err
    assert "Traceback" not in err
    assert cli("sweep", str(tmp_path / "missing.yaml"), "--key", _key(alice))[2].startswith("error: ")


def test_every_sweep_flag_sets_a_field_of_the_request():
    from app.client.jobs import _field
    from app.client.sweep_spec import SWEEP_FLAGS
    from app.schemas.sweeps import SweepCreate

    for key in SWEEP_FLAGS.values():
        section, _, rest = key.partition(".")
        assert section in SweepCreate.model_fields, key
        if section == "job":
            _field(rest)
        elif rest:
            assert rest in SweepCreate.model_fields[section].annotation.model_fields, key


def test_create_list_status_and_cancel(cli, alice, client, parallel_id):
    key = ("--key", _key(alice))
    code, out, err = cli(*_args(parallel_id, "--idempotency-key", "one"), *key)
    assert code == 0, err
    sweep_id = out.strip()
    sweep = client.get(f"/v1/sweeps/{sweep_id}", headers=alice).json()
    assert err.splitlines()[0] == f"sweep {sweep_id} enfr: running, 2 trials queued"
    for line, trial in zip(err.splitlines()[1:], sweep["trials"], strict=True):
        assert line.startswith(f"  trial {trial['number']} queued (job {trial['job_id']}) training.lr_scale=")
    code, out, _ = cli(*_args(parallel_id, "--idempotency-key", "one", "--json"), *key)  # replayed: the same sweep
    assert code == 0 and json.loads(out)["id"] == sweep_id
    other = json.loads(cli(*_args(parallel_id, "--name", "other", "--json"), *key)[1])["id"]

    code, out, _ = cli("sweeps", *key)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["ID", "NAME", "STATUS", "METRIC", "TRIALS", "BEST", "MINUTES", "CREATED"]
    assert [line.split()[:7] for line in lines[1:]] == [
        [other[:8], "other", "running", "bleu:max", "queued:2", "-", "0.0"],
        [sweep_id[:8], "enfr", "running", "bleu:max", "queued:2", "-", "0.0"],
    ]
    code, out, _ = cli("sweeps", "--json", "--limit", "1", *key)
    assert [json.loads(line)["id"] for line in out.splitlines()] == [other]

    code, out, _ = cli("sweep-status", sweep_id[:8], *key)  # the prefix `sweeps` shows
    header, table = out.split("\n\n")
    assert code == 0 and header.splitlines()[0] == f"sweep {sweep_id} enfr: running"
    assert "budget: 2 trials; spent 0.0 worker minutes" in header and "trials: 2 queued" in header
    rows = [row.split() for row in table.splitlines()]
    assert rows[0] == ["#", "STATUS", "VALUE", "BEST", "lr_scale", "preset", "MIN", "STOP", "REASON"]
    for row, trial in zip(rows[1:], sweep["trials"], strict=True):
        assert row[:3] == [str(trial["number"]), "queued", "-"] and row[5] == trial["params"]["model.preset"]
        assert float(row[4]) == pytest.approx(trial["params"]["training.lr_scale"], rel=1e-3)
    assert json.loads(cli("sweep-status", sweep_id, "--json", *key)[1])["trials"] == sweep["trials"]

    code, out, _ = cli("sweep-cancel", sweep_id, *key)
    assert (code, out) == (0, f"{sweep_id}  cancelled (cancel requested)\n")
    assert [row.split()[1] for row in cli("sweep-status", sweep_id, *key)[1].split("\n\n")[1].splitlines()[1:]] == [
        "cancelled",
        "cancelled",
    ]
    assert cli("sweeps", "--status", "running", *key)[1].splitlines()[1].split()[0] == other[:8]
    code, _, err = cli("sweep-cancel", sweep_id, *key)
    assert code == 1 and err.strip() == f"error 409: sweep {sweep_id} is already cancelled"
    code, _, err = cli("sweep-status", "ffffffff", *key)
    assert code == 1 and err.strip() == "error: no sweep's id starts with 'ffffffff'"
    code, _, err = cli("sweep-status", "0" * 36, *key)
    assert code == 1 and err.strip() == f"error 404: sweep {'0' * 36} not found"


def test_a_space_the_api_refuses_is_its_422_naming_the_field(cli, alice, client, parallel_id):
    code, out, err = cli(*_args(parallel_id, "--space", "training.lr_rate=float:0.1:1"), "--key", _key(alice))
    assert (code, out) == (1, "")
    assert err.startswith("error 422: space: 'training.lr_rate' is not a job setting"), err
    code, _, err = cli(*_args(parallel_id, "--space", "model.dropout=float:0.1:1.5"), "--key", _key(alice))
    assert code == 1 and err.startswith("error 422: ") and "model.dropout=1.5 makes no valid" in err, err
    code, _, err = cli("sweep", "--dataset", parallel_id, "--space", "model.dropout=float:0:0.1", "--key", _key(alice))
    assert code == 1 and "error 422: " in err and "name: Field required" in err and "budget: Field required" in err
    assert client.get("/v1/sweeps", headers=alice).json()["total"] == 0


def test_watch_without_a_terminal_prints_each_change_until_cancelled(cli, alice, client, parallel_id, monkeypatch):
    from app.client import sweep_view

    key = ("--key", _key(alice))
    sweep_id = cli(*_args(parallel_id), *key)[1].strip()
    reads = []

    def later(seconds: float) -> None:  # the watch's wait between reads: the sweep moves on meanwhile
        reads.append(seconds)
        if len(reads) == 1:
            _end(sweep_id, 0, "failed", error="out of memory at step 3")
        else:
            client.post(f"/v1/sweeps/{sweep_id}/cancel", headers=alice)

    monkeypatch.setattr(sweep_view.time, "sleep", later)
    code, out, _ = cli("sweep-status", sweep_id, "--watch", "--interval", "0.5", *key)
    assert code == 1 and reads == [0.5, 0.5], out  # cancelled, as a cancelled job's watch: 1
    lines = out.splitlines()
    assert lines[0].startswith("trial 0 queued (job ") and lines[1].startswith("trial 1 queued (job ")
    assert lines[2] == "running   trials: 2 queued; no best yet; 0.0 worker minutes"
    assert lines[3].startswith("trial 0 failed (job ") and lines[3].endswith(": out of memory at step 3")
    assert lines[4] == "running   trials: 1 queued, 1 failed; no best yet; 2.0 worker minutes"
    assert lines[5].startswith("trial 1 cancelled (job ")
    assert lines[6] == "cancelled trials: 1 failed, 1 cancelled; no best yet; 2.0 worker minutes"
    final = out.split("\n\n", 1)[1]
    assert final.startswith(f"sweep {sweep_id} enfr: cancelled\n") and "stopped: cancelled" in final
    rows = [row.split(maxsplit=4) for row in final.split("\n\n")[1].splitlines()]
    assert rows[1][:2] == ["0", "failed"] and rows[1][-1].endswith("out of memory at step 3")
    assert rows[2][:2] == ["1", "cancelled"] and rows[2][-1].endswith("-")  # its reason is its status


def test_watch_of_a_sweep_that_succeeds_exits_0_with_the_best(cli, alice, client, parallel_id, monkeypatch):
    from app.client import sweep_view

    key = ("--key", _key(alice))
    sweep_id = cli(*_args(parallel_id, "--budget-trials", "3", "--concurrent", "3"), *key)[1].strip()

    def later(_seconds: float) -> None:
        for number, bleu in enumerate((12.5, 20.25, 3.0)):
            _end(sweep_id, number, "succeeded", bleu=bleu)

    monkeypatch.setattr(sweep_view.time, "sleep", later)
    code, out, _ = cli("sweep-status", sweep_id, "--watch", "--interval", "0", *key)
    sweep = client.get(f"/v1/sweeps/{sweep_id}", headers=alice).json()
    assert code == 0 and sweep["status"] == "succeeded", out
    best = sweep["best"]["params"]
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in best.items())
    assert f"best: #1 bleu=20.25 ({params})" in out
    assert "stopped: the budget of 3 trials is spent" in out
    importance = sorted(sweep["importance"].items(), key=lambda item: -item[1])
    assert f"importance: {importance[0][0]} {importance[0][1]:.2f}, {importance[1][0]} " in out
    rows = [row.split() for row in out.split("\n\n")[-1].splitlines()]
    assert [row[:4] for row in rows[1:]] == [
        ["0", "succeeded", "12.5", "12.5"],
        ["1", "succeeded", "20.25", "20.25"],
        ["2", "succeeded", "3", "3"],
    ]
    assert out.count("succeeded trials: 3 succeeded; best bleu=20.25 (#1); 6.0 worker minutes") == 1


def test_watch_of_a_sweep_whose_trials_all_fail_exits_1_with_its_error(cli, alice, parallel_id, monkeypatch):
    from app.client import sweep_view

    key = ("--key", _key(alice))
    sweep_id = cli(*_args(parallel_id), *key)[1].strip()
    _end(sweep_id, 0, "failed", error="CUDA out of memory")
    _end(sweep_id, 1, "failed", error="CUDA out of memory")
    monkeypatch.setattr(sweep_view.time, "sleep", lambda _s: pytest.fail("an ended sweep is read once"))
    code, out, _ = cli("sweep-status", sweep_id, "--watch", *key)
    assert code == 1 and "enfr: failed" in out
    assert "error: no trial completed (the budget of 2 trials is spent)" in out
    assert cli("sweep-status", "nope", "--watch", *key)[1:] == ("", "error: no sweep's id starts with 'nope'\n")


def test_watch_on_a_terminal_redraws_the_header_and_trials_table(client, alice, parallel_id, monkeypatch, cli):
    from rich.console import Console

    from app.client import sweep_view

    sweep_id = cli(*_args(parallel_id), "--key", _key(alice))[1].strip()
    monkeypatch.setattr(
        sweep_view.time, "sleep", lambda _s: client.post(f"/v1/sweeps/{sweep_id}/cancel", headers=alice)
    )
    client.headers.update(alice)
    screen = StringIO()
    code = sweep_view.watch(client, sweep_id, 1.0, Console(file=screen, force_terminal=True, width=140, height=40))
    shown = screen.getvalue()
    assert code == 1 and "\x1b[" in shown  # drawn for a terminal
    assert f"sweep {sweep_id} enfr: running" in shown and f"sweep {sweep_id} enfr: cancelled" in shown
    assert "lr_scale" in shown and "preset" in shown and "STOP REASON" in shown
    assert "trials: 2 cancelled" in shown and "no further trials: the budget of 2 trials is spent" in shown
