"""The client CLI as a user runs it (a subprocess, no terminal) against the shared stack of trained models:
translating texts, following a real job's event stream through uvicorn, and cancelling it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.harness.stack import ROOT, run_cli, wait_for


@pytest.fixture(scope="module")
def env(served):
    key = served["api"].http.headers["authorization"].removeprefix("Bearer ")
    return {**served["env"], "TRANSFORMER_URL": served["url"], "TRANSFORMER_API_KEY": key}


def test_translate_texts_prints_one_translation_a_line_and_the_n_best(served, env):
    model = served["models"]["translation"]
    texts = ["seven", "three hundred and twelve"]
    expected = served["api"].http.post(f"/v1/models/{model}/translate", json={"texts": texts}).json()
    out = run_cli(env, "translate", model, "--text", texts[0], "--text", texts[1])
    assert out.splitlines() == [t["text"] for t in expected["translations"]]
    lines = [
        line.split("\t") for line in run_cli(env, "translate", model, "--text", texts[1], "--n-best", "3").splitlines()
    ]
    assert [line[0] for line in lines] == ["0", "0", "0"] and lines[0][2] == expected["translations"][1]["text"]
    scores = [float(line[1]) for line in lines]
    assert scores == sorted(scores, reverse=True), lines


def test_translate_texts_with_confidence_prints_it_before_each_translation(served, env):
    model = served["models"]["translation"]
    texts = ["seven", "three hundred and twelve"]
    body = {"texts": texts, "return_token_probs": True}
    expected = served["api"].http.post(f"/v1/models/{model}/translate", json=body).json()["translations"]
    out = run_cli(env, "translate", model, "--text", texts[0], "--text", texts[1], "--confidence")
    assert out.splitlines() == [f"{t['confidence']:.4f}\t{t['text']}" for t in expected]
    (line,) = run_cli(env, "translate", model, "--text", texts[0], "--confidence", "--json").splitlines()
    # one text alone against it in a batch of two: the same tokens, probabilities equal to float32 rounding (the
    # padded batch sums in another order)
    alone = json.loads(line)["token_probs"]
    assert [t["token"] for t in alone] == [t["token"] for t in expected[0]["token_probs"]]
    assert [t["prob"] for t in alone] == pytest.approx([t["prob"] for t in expected[0]["token_probs"]], rel=1e-4)


def test_models_by_objective(served, env):
    translation, denoising = served["models"]["translation"], served["models"]["denoising"]
    listed = run_cli(env, "models", "--objective", "denoising")
    assert denoising in listed and translation not in listed


def test_status_watch_follows_a_running_job_until_it_is_cancelled(served, env):
    dataset = served["api"].http.get("/v1/datasets").json()["data"][-1]["id"]
    job = run_cli(env, "submit", "--dataset", dataset, "--max-steps", "100000", "--set", "model.vocab_size=500").strip()
    watch = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "status", job, "--watch", "--interval", "1"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(
            lambda: served["api"].http.get(f"/v1/jobs/{job}").json()["progress"]["step"] > 0,
            timeout=180,
            what="the job's first steps",
        )
        assert run_cli(env, "cancel", job).split() == [job, "running", "(cancel", "requested)"]
        out, err = watch.communicate(timeout=120)
    finally:
        watch.kill()
    lines = out.splitlines()
    assert watch.returncode == 1, out + err
    assert any(line.startswith("running ") and "tok/s ETA" in line for line in lines), lines
    final = [line for line in lines if not line.startswith("error: ")][-1]  # a cancelled job may say why
    assert final.startswith("cancelled ") and "/100000" in final, lines
