"""The client CLI (`python -m app.cli`, app/client/) against the API in process: its requests go through the
TestClient to the real routes and database; only `connection.open_client` is replaced (see `cli` in conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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
