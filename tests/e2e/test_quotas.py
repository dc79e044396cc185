"""Quotas at their limits with real workers: a running job stops when its organisation's worker minutes for the
day are spent, as at the end of a time budget; an imported model is charged the size it is stored at, not its
archive's. Real uvicorn, Celery workers, PostgreSQL and Redis."""

from __future__ import annotations

import tarfile
import uuid

import pytest

from bench.harness import services
from bench.harness.stack import (
    START_TIMEOUT_S,
    Processes,
    create_key,
    free_port,
    healthy_with_workers,
    run_cli,
    service_env,
    wait_for,
)
from tests.support.client import Api
from tests.support.training import FAST_LEASES, numbers_files, numbers_job

DONE = ("succeeded", "failed", "cancelled")


@pytest.fixture(scope="module")
def stack(tmp_path_factory, postgres_url, redis_url):
    """API, a training (and data) worker and an inference worker, on a database of their own."""
    tmp = tmp_path_factory.mktemp("quotas")
    name = f"t_{uuid.uuid4().hex[:12]}"
    services.create_database(postgres_url, name)
    env = service_env(
        DATABASE_URL=services.with_database(postgres_url, name),
        CELERY_BROKER_URL=redis_url,
        DATA_DIR=str(tmp / "var"),
        ARTIFACT_ROOT=str(tmp / "artifacts"),
        **FAST_LEASES,
    )
    run_cli(env, "migrate")
    processes = Processes(tmp)
    url = processes.start_api(env, free_port())
    processes.start_worker(env, "training,data", "trainer")
    processes.start_worker(env, "inference", "server", pool="threads", concurrency=2)
    try:
        wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="workers")
        yield {"url": url, "env": env, "tmp": tmp}
    finally:
        processes.stop(timeout=30)
        services.drop_database(postgres_url, name)


def test_a_running_job_stops_when_the_organisations_minutes_for_the_day_are_spent(stack):
    """Fault: a job that started with minutes left ran on past the day's limit (to its max_steps). Pass: it stops
    once the organisation's minute is spent (three quarters of it by a job deleted earlier today, which still counts),
    with its final evaluation and checkpoint, succeeded with a model and a log line saying why; the minutes used stay
    near the limit; the next job is 429."""
    env = stack["env"]
    api = Api(stack["url"], create_key(env, "alice"))
    files = numbers_files(stack["tmp"])
    train, valid = api.upload(files["train"], "parallel"), api.upload(files["valid"], "parallel")
    run_cli(env, "set-quota", "alice", "--worker-minutes-per-day", "1")
    _spent_today(env["DATABASE_URL"], "alice", minutes=0.75)  # a deleted job's 45 s: the next job has 15 s left
    job = api.submit(numbers_job(train["id"], valid["id"], max_steps=100_000, eval_every=100, checkpoint_every=100))
    done = api.wait(job["id"], DONE, timeout=180)
    assert done["status"] == "succeeded", done["error"]
    assert done["model_id"] is not None and 0 < done["progress"]["step"] < 100_000
    lines = api.http.get(f"/v1/jobs/{job['id']}/logs", params={"limit": 2000}).json()["lines"]
    stopped = [line["message"] for line in lines if "worker minutes for today" in line["message"]]
    assert stopped and "QUOTA_WORKER_MINUTES_PER_DAY) are spent: the run ends here" in stopped[0], stopped
    assert any("succeeded at step" in line["message"] and "are spent" in line["message"] for line in lines)
    minutes = api.http.get("/v1/usage").json()["worker_minutes_today"]
    assert 0.95 <= minutes < 1.4, minutes  # the final evaluation, checkpoint and model follow the stop
    refused = api.http.post("/v1/jobs", json=numbers_job(train["id"], valid["id"]))
    assert refused.status_code == 429 and refused.json()["detail"].startswith("worker minutes quota: ")


def _spent_today(database_url: str, organisation: str, minutes: float) -> None:
    """The usage a job deleted earlier today leaves (deleted_job_usage): `minutes` of one process, ending now."""
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO deleted_job_usage (owner_id, job_id, started_at, finished_at, processes, deleted_at) "
                    "SELECT id, :job, now() - make_interval(secs => :seconds), now(), 1, now() FROM owners "
                    "WHERE name = :name"
                ),
                {"job": str(uuid.uuid4()), "seconds": minutes * 60, "name": organisation},
            )
    finally:
        engine.dispose()


def _zeros_archive(folder) -> tuple:
    """A native export of a tiny model whose weights are all zero: a few KB compressed, about 1 MB stored."""
    import torch

    from model.data.tokenizer import Tokenizer
    from model.io.checkpoint import save_checkpoint
    from model.nn.config import ModelConfig
    from model.nn.transformer import Transformer

    tokenizer = Tokenizer.train([f"{n} apples and {n + 1} pears" for n in range(60)], vocab_size=300)
    model = Transformer(ModelConfig.from_preset("tiny", tokenizer.vocab_size, max_positions=64))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    checkpoint = save_checkpoint(folder / "zeros", model, tokenizer, "translation", step=1, kind="model")
    archive = folder / "zeros.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(checkpoint, arcname="zeros")
    return archive, sum(f.stat().st_size for f in checkpoint.iterdir())


def _files(folder) -> set:
    return {p for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


def test_an_import_is_charged_the_size_it_is_stored_at(stack, tmp_path):
    """Fault: an import was checked against its archive's size; an archive of a few KB stored a model of 1 MB past
    the storage quota. Pass: 413 naming the limit, no model row, no model files, nothing charged."""
    env = stack["env"]
    api = Api(stack["url"], create_key(env, "carol"))
    archive, stored = _zeros_archive(tmp_path)
    limit = 100_000
    assert archive.stat().st_size < limit < stored
    run_cli(env, "set-quota", "carol", "--storage-gb", str(limit / 1024**3))
    models = stack["tmp"] / "artifacts" / "models"
    before = _files(models)
    with open(archive, "rb") as f:
        response = api.http.post("/v1/models/import", files={"file": ("zeros.tar.gz", f)}, timeout=120)
    assert response.status_code == 413, response.text
    detail = response.json()["detail"]
    assert detail.startswith("zeros.tar.gz: storage quota exceeded: 0 bytes stored + "), detail
    assert f"would pass the limit of {limit} bytes" in detail
    assert api.http.get("/v1/models").json()["total"] == 0
    assert api.http.get("/v1/usage").json()["storage_bytes"] == 0
    assert _files(models) == before
