"""INFERENCE_WARM_MODELS on a real inference worker (threads pool, PostgreSQL, Redis, the API as a process): the
models load when the worker starts, before any request, and GET /v1/workers lists them; a reference that names no
model is reported and the worker serves on. The models are the trained ones of tests/e2e/conftest.py."""

from __future__ import annotations

import os
import signal

import httpx
from sqlalchemy import create_engine, text

from bench.harness.rows import insert_model
from bench.harness.stack import wait_for


def _serving(api, prefix: str):
    for worker in api.http.get("/v1/workers").json()["workers"]:
        if worker["hostname"].startswith(prefix):
            return worker["serving"]
    return None


def test_a_worker_loads_its_warm_models_at_start_and_lists_them(served):
    api, env, processes = served["api"], served["env"], served["processes"]
    trained, denoising = served["models"]["translation"], served["models"]["denoising"]
    with create_engine(env["DATABASE_URL"]).connect() as c:
        key, sha = c.execute(text("SELECT storage_key, sha256 FROM models WHERE id = :m"), {"m": trained}).one()
    copy = insert_model(env["DATABASE_URL"], "alice", key, sha)  # the trained files, under a name of its own
    named = api.http.patch(f"/v1/models/{copy}", json={"name": "warm-numbers"})
    assert named.status_code == 200, named.text
    assert api.http.put("/v1/models/warm-numbers/aliases/live", json={"version": 1}).status_code == 200

    refs = ["warm-numbers@live", "no-such-model@live", denoising]
    worker = processes.start_worker(
        {**env, "INFERENCE_WARM_MODELS": ",".join(refs)}, "inference", "warm", pool="threads", concurrency=4
    )
    try:
        record = wait_for(
            lambda: (r := _serving(api, "warm@")) and not r["warming"] and r,
            timeout=180,
            what="the warm worker to report its warm models",
            interval=1,
        )
        assert worker.poll() is None, processes.log("warm")  # the bad reference did not stop it
        assert (record["backend_auto"], record["backend_note"]) == ("ctranslate2", None)  # a CPU worker
        models = {m["model_id"]: m for m in record["warm_models"]}
        assert set(models) == {copy, denoising}, record
        assert (models[copy]["ref"], models[copy]["backend"], models[copy]["pinned"]) == (
            "warm-numbers@live", "ctranslate2", True
        )  # fmt: skip
        assert (models[denoising]["ref"], models[denoising]["backend"], models[denoising]["pinned"]) == (
            denoising, "pytorch", True
        )  # fmt: skip
        assert all(m["load_ms"] > 0 for m in models.values())
        assert record["warm_failed"] == [
            {"ref": "no-such-model@live", "error": "no model is registered under the name 'no-such-model'"}
        ]
        log = processes.log("warm")
        assert f"loaded model {copy} (translation)" in log and f"model {copy} on CTranslate2 cpu:0" in log
        assert "service.translate[" not in log  # loaded before any request: none was sent while it ran
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)

    # The stack's own inference worker reports too: a model it holds is warm, loaded by a request, not pinned.
    answer = api.http.post(f"/v1/models/{trained}/translate", json={"texts": ["seven"]})
    assert answer.status_code == 200, answer.text
    record = wait_for(
        lambda: (r := _serving(api, "server@")) and any(m["model_id"] == trained for m in r["warm_models"]) and r,
        timeout=60,
        what="the stack's inference worker to report the model it served",
        interval=1,
    )
    assert record["backend_auto"] == "ctranslate2" and not record["warm_failed"]
    assert all(not m["pinned"] and m["ref"] is None for m in record["warm_models"])
    assert all(w["serving"] is None for w in httpx.get(f"{served['url']}/healthz").json()["workers"])
