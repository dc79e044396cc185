"""The stack most end-to-end tests of trained models share: started once for the package, with two models."""

from __future__ import annotations

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
from model.data.demo import grammar_sentences, numbers_to_words_task, split_numbers
from tests.support.client import Api, write_jsonl

METRICS_TOKEN = "served-metrics"  # GET /metrics of the served stack
LIMITS = {
    "MAX_TEXTS_PER_REQUEST": "8",
    "MAX_CHARS_PER_TEXT": "300",
    "MAX_BEAM_SIZE": "6",
    "MAX_TOP_K": "10",
    "MAX_BODY_KB": "64",
    "INFERENCE_TIMEOUT_SECONDS": "20",
}


@pytest.fixture(scope="package")
def served(tmp_path_factory, postgres_url, redis_url):
    """A stack with one training and one inference worker, and two trained models (translation, fill-mask)."""
    tmp = tmp_path_factory.mktemp("served")
    name = f"t_{uuid.uuid4().hex[:12]}"
    services.create_database(postgres_url, name)
    env = service_env(
        DATABASE_URL=services.with_database(postgres_url, name),
        # Its workers live for the whole package: on a Redis database of their own, or they would take the tasks
        # sent to the stacks that other tests start on redis_url.
        CELERY_BROKER_URL=services.redis_db_below(redis_url, 2),
        DATA_DIR=str(tmp / "var"),
        ARTIFACT_ROOT=str(tmp / "artifacts"),
        METRICS_TOKEN=METRICS_TOKEN,
        **LIMITS,
    )
    run_cli(env, "migrate")
    processes = Processes(tmp)
    url = processes.start_api(env, free_port())
    processes.start_worker(env, "training", "trainer")
    processes.start_worker(env, "inference", "server", pool="threads", concurrency=16)
    try:
        wait_for(healthy_with_workers(url, 2), timeout=START_TIMEOUT_S, what="workers")
        api = Api(url, create_key(env, "alice"))
        train_numbers, held_out = split_numbers(0, 999, held_out=0.1, seed=0)
        numbers = api.upload(
            write_jsonl(tmp / "n.jsonl", numbers_to_words_task(len(train_numbers), numbers=train_numbers)), "parallel"
        )
        (tmp / "g.txt").write_text("\n".join(grammar_sentences(3000, seed=0)) + "\n")
        grammar = api.upload(tmp / "g.txt", "monolingual")
        common = {
            "warmup_steps": 50,
            "eval_every": 100,
            "checkpoint_every": 100,
            "max_length": 40,
            "max_tokens_per_batch": 2048,
            "seed": 3,
            "lr_scale": 1.0,  # the rate these toy runs were tuned at; by default it follows the batch (0.82 at 2,048)
        }
        translation_job = api.submit(
            {
                "objective": "translation",
                "dataset_id": numbers["id"],
                "model": {"preset": "tiny", "vocab_size": 500},
                "training": {**common, "max_steps": 300},
            }
        )
        denoising_job = api.submit(
            {
                "objective": "denoising",
                "dataset_id": grammar["id"],
                "model": {"preset": "tiny", "vocab_size": 450},
                "training": {**common, "max_steps": 300, "noise": "token"},
            }
        )
        models = {}
        for kind, job in (("translation", translation_job), ("denoising", denoising_job)):
            done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=600)
            assert done["status"] == "succeeded", done["error"]
            models[kind] = done["model_id"]
        yield {
            "url": url,
            "env": env,
            "api": api,
            "models": models,
            "held_out": held_out,
            "processes": processes,
            "artifacts": tmp / "artifacts",
        }
    finally:
        processes.stop(timeout=30)
        services.drop_database(postgres_url, name)
