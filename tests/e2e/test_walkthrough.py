"""The README walk-through on the embedded default: demo data, upload, submit, watch, list models."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from bench.harness.stack import ROOT, START_TIMEOUT_S, free_port, healthy_with_workers, service_env, wait_for


def _cli(env, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_walkthrough_with_the_cli_on_sqlite_and_the_embedded_broker(tmp_path):
    port = free_port()
    env = service_env(DATA_DIR=str(tmp_path / "var"), PORT=str(port), TRANSFORMER_URL=f"http://127.0.0.1:{port}")
    log = open(tmp_path / "serve.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="the embedded service")
        demo = _cli(env, "model.data.demo", str(tmp_path / "demo"))
        assert demo.returncode == 0, demo.stderr
        upload = _cli(
            env, "app.cli", "upload", str(tmp_path / "demo" / "numbers_en_de_train.jsonl"), "--kind", "parallel"
        )
        assert upload.returncode == 0, upload.stderr
        dataset_id = upload.stdout.strip()
        submit = _cli(
            env,
            "app.cli",
            "submit",
            "--dataset",
            dataset_id,
            "--max-steps",
            "60",
            "--set",
            "model.vocab_size=500",
            "--set",
            "training.eval_every=30",
            "--set",
            "training.checkpoint_every=30",
            "--set",
            "training.warmup_steps=30",
            "--set",
            "training.max_tokens_per_batch=2048",
        )
        assert submit.returncode == 0, submit.stderr
        job_id = submit.stdout.strip()
        watch = _cli(env, "app.cli", "status", job_id, "--watch", "--interval", "1", timeout=400)
        assert watch.returncode == 0, watch.stdout + watch.stderr
        lines = watch.stdout.strip().splitlines()
        assert "succeeded" in lines[-2] and "60/60" in lines[-2] and "[" in lines[-2]
        assert any("ETA" in line and "running" in line for line in lines), lines
        model_id = lines[-1].removeprefix("model: ")
        models = _cli(env, "app.cli", "models")
        assert models.returncode == 0 and model_id in models.stdout and "translation" in models.stdout
        bad = _cli(env, "app.cli", "submit", "--dataset", dataset_id, "--set", "model.n_heads=3")
        assert bad.returncode != 0 and "error 422: model: d_model=64 is not divisible by n_heads=3" in bad.stderr
        # download it for transformers and load it as any Marian model, as the README does
        archive = tmp_path / f"{model_id}-huggingface.tar.gz"
        exported = _cli(env, "app.cli", "export", model_id, "--format", "huggingface", "-o", str(archive), timeout=300)
        assert exported.returncode == 0, exported.stdout + exported.stderr
        subprocess.run(["tar", "xzf", archive.name], cwd=tmp_path, check=True)
        load = (
            "import sys; from transformers import MarianMTModel, AutoTokenizer as T; d = sys.argv[1]\n"
            "m, t = MarianMTModel.from_pretrained(d), T.from_pretrained(d)\n"
            "print(t.batch_decode(m.generate(**t(['forty two'], return_tensors='pt')), skip_special_tokens=True))"
        )
        loaded = subprocess.run(
            [sys.executable, "-c", load, str(tmp_path / f"{model_id}-huggingface")],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert loaded.returncode == 0 and loaded.stdout.startswith("['"), loaded.stdout + loaded.stderr
        # score it on a test set, then fine-tune it on the thousands
        test_set = _cli(
            env, "app.cli", "upload", str(tmp_path / "demo" / "thousands_en_de_test.jsonl"), "--kind", "parallel"
        ).stdout.strip()
        hypotheses = tmp_path / "hyp.txt"
        scored = _cli(
            env, "app.cli", "evaluate", model_id, "--dataset", test_set, "--interval", "0.5", "-o", str(hypotheses)
        )
        assert scored.returncode == 0, scored.stderr
        lines = [line.split() for line in scored.stdout.splitlines()]
        # the model's low-confidence flag on this test set comes before the backend where the job calibrated one
        assert [line[0] for line in lines if line[0] != "flagged"] == ["bleu", "chrf", "chrf++", "backend"], (
            scored.stdout
        )
        assert [line[0] for line in lines][3:-1] in ([], ["flagged"]), scored.stdout
        assert lines[-1][1] == "ctranslate2"  # the default backend, where the model converts
        assert "tok:13a" in scored.stdout and len(hypotheses.read_text().splitlines()) == 100
        child = _cli(
            env, "app.cli", "submit", "--dataset", test_set, "--init-model", model_id, "--max-steps", "5",
            "--set", "training.max_tokens_per_batch=2048",
        )  # fmt: skip
        assert child.returncode == 0, child.stderr
        watch = _cli(env, "app.cli", "status", child.stdout.strip(), "--watch", "--interval", "1", timeout=400)
        assert watch.returncode == 0 and "succeeded" in watch.stdout, watch.stdout + watch.stderr
        child_model = watch.stdout.strip().splitlines()[-1].removeprefix("model: ")
        assert f"{child_model}" in _cli(env, "app.cli", "models").stdout
    finally:
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=60)
