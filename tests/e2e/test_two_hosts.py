"""Two hosts, one S3 store: workers that share no disk read each other's datasets, checkpoints and models.

One API process, a training worker on host A and an inference worker on host B (each with its own DATA_DIR;
where the machine allows, also its own network, mount and UTS namespaces: see tests/support/hosts.py), on one
fresh PostgreSQL database, Redis and a moto S3 server, with ARTIFACT_ROOT=s3://<bucket>/svc everywhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from bench.harness import services
from bench.harness.stack import Processes, create_key, free_port, run_cli, service_env, wait_for
from model.data.demo import numbers_to_words_task, split_numbers
from tests.support.client import Api, write_jsonl
from tests.support.hosts import Hosts
from tests.support.s3 import S3Server

FAST_LEASES = {"JOB_LEASE_SECONDS": "10", "WORKER_HEARTBEAT_SECONDS": "2", "JOB_REDISPATCH_SECONDS": "30"}
PREFIX = "svc"
LOOPBACK = ("127.0.0.1", "localhost")


@dataclass
class Cluster:
    url: str
    env: dict[str, str]  # what every process shares; each host adds its DATA_DIR
    processes: Processes
    hosts: Hosts
    s3: S3Server
    bucket: str
    api: Api
    numbers: dict  # the uploaded training dataset
    held_out: list[int]

    def start_worker(self, host: str, queue: str, name: str, pool: str = "prefork", concurrency: int = 1):
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker.celery_app",
            "worker",
            "-Q",
            queue,
            "-P",
            pool,
            "-c",
            str(concurrency),
            "-n",
            f"{name}@%h",
            "--loglevel",
            "INFO",
        ]
        child = self.processes.start(
            name, self.hosts.command(host, argv), {**self.env, "DATA_DIR": str(self.hosts.data_dirs[host])}
        )
        wait_for(lambda: self._seen(name), timeout=90, what=f"worker {name} on {host}")
        return child

    def stop_workers(self) -> None:
        """Stop the workers an earlier test started, so that only this test's workers take its jobs."""
        for name, child in self.processes.children.items():
            if name != "api" and child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=60)

    def _seen(self, name: str) -> bool:
        try:
            workers = httpx.get(f"{self.url}/healthz", timeout=5).json().get("workers", [])
        except (httpx.HTTPError, ValueError):
            return False
        return any(w["hostname"].startswith(f"{name}@") for w in workers)

    def objects(self, under: str) -> list[str]:
        return [name.removeprefix(f"{PREFIX}/") for name in self.s3.object_names(self.bucket, f"{PREFIX}/{under}")]

    def cache(self, host: str) -> Path:
        return self.hosts.data_dirs[host] / "cache" / "s3" / self.bucket / PREFIX


def _port(url: str, default: int) -> tuple[str, int]:
    parts = urlsplit(url.replace("postgresql+psycopg", "postgresql"))
    return parts.hostname or "127.0.0.1", parts.port or default


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, postgres_url, redis_url, s3_server):
    tmp = tmp_path_factory.mktemp("two-hosts")
    name = f"t_{uuid.uuid4().hex[:12]}"
    services.create_database(postgres_url, name)
    shared = [_port(postgres_url, 5432), _port(redis_url, 6379), _port(s3_server.endpoint_url, 80)]
    (tmp / "api").mkdir()
    hosts = Hosts(tmp / "hosts", [port for _, port in shared], hidden=[tmp / "api"])
    hosts.isolated = hosts.isolated and all(host in LOOPBACK for host, _ in shared)
    for host in ("host-a", "host-b", "host-c", "host-d"):
        hosts.add(host)
    bucket = s3_server.bucket_name()
    env = service_env(
        DATABASE_URL=services.with_database(postgres_url, name),
        CELERY_BROKER_URL=redis_url,
        ARTIFACT_ROOT=f"s3://{bucket}/{PREFIX}",
        **s3_server.env,
        **FAST_LEASES,
    )
    api_env = {**env, "DATA_DIR": str(tmp / "api")}
    run_cli(api_env, "migrate")
    processes = Processes(tmp)
    url = processes.start_api(api_env, free_port())
    try:
        wait_for(lambda: _answers(url), timeout=60, what="the API")
        api = Api(url, create_key(api_env, "alice"))
        train_numbers, held_out = split_numbers(0, 999, held_out=0.1, seed=0)
        numbers = api.upload(  # no worker yet: parsed by the first that takes the data queue
            write_jsonl(tmp / "numbers.jsonl", numbers_to_words_task(len(train_numbers), numbers=train_numbers)),
            "parallel",
            wait=False,
        )
        yield Cluster(url, env, processes, hosts, s3_server, bucket, api, numbers, held_out)
    finally:
        processes.stop(timeout=30)
        hosts.close()
        services.drop_database(postgres_url, name)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code in (200, 503)
    except httpx.HTTPError:
        return False


def _numbers_job(dataset_id: str, **training) -> dict:
    base = {
        "max_steps": 300,
        "warmup_steps": 50,
        "eval_every": 100,
        "checkpoint_every": 100,
        "max_length": 40,
        "max_tokens_per_batch": 2048,
        "seed": 3,
    }
    return {
        "objective": "translation",
        "dataset_id": dataset_id,
        "model": {"preset": "tiny", "vocab_size": 500},
        "training": {**base, **training},
    }


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_model_trained_on_host_a_is_served_from_s3_on_host_b(cluster):
    """Fails if the upload, the checkpoints or the model miss the S3 store, or if host B could only serve the
    model by reading host A's disk: A's cache is deleted before B serves, and B's files must equal S3's objects."""
    from num2words import num2words

    dataset_key = f"datasets/{cluster.numbers['id']}/data.jsonl"
    assert cluster.objects(f"datasets/{cluster.numbers['id']}/") == [dataset_key]  # the API wrote to S3 only
    assert not (cluster.hosts.root.parent / "api" / "artifacts").exists()
    cluster.stop_workers()
    trainer = cluster.start_worker("host-a", "training", "trainer")
    server = cluster.start_worker("host-b", "inference", "server", pool="threads", concurrency=4)
    job = cluster.api.submit(_numbers_job(cluster.numbers["id"]))
    done = cluster.api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=600)
    assert done["status"] == "succeeded", done["error"]
    model_id = done["model_id"]
    checkpoints = [f"jobs/{job['id']}/checkpoints/step-{c['step']:08d}" for c in cluster.api.checkpoints(job["id"])]
    assert checkpoints and all(f"{c}/manifest.json" in cluster.objects(c + "/") for c in checkpoints)
    model_objects = cluster.objects(f"models/{model_id}/")
    assert (
        f"models/{model_id}/manifest.json" in model_objects and f"models/{model_id}/model.safetensors" in model_objects
    )
    # Host A read the dataset from S3 and wrote its checkpoints and the model in its own cache.
    assert (cluster.cache("host-a") / dataset_key).is_file()
    assert (cluster.cache("host-a") / "models" / model_id / "manifest.json").is_file()
    assert not (cluster.cache("host-b") / "models" / model_id).exists()
    if cluster.hosts.isolated:  # B's view of A's folder (through its mount namespace) is empty
        assert os.listdir(f"/proc/{server.pid}/root{cluster.hosts.data_dirs['host-a']}") == []
    shutil.rmtree(cluster.hosts.data_dirs["host-a"] / "cache")

    numbers = cluster.held_out[:32]  # 8 were too few to tell a model that learned: 5 or 6 of them by the CPU
    translations = []
    for start in range(0, len(numbers), 8):  # at most 8 texts a request on every stack of tests/e2e
        texts = [num2words(n, lang="en") for n in numbers[start : start + 8]]
        response = cluster.api.http.post(f"/v1/models/{model_id}/translate", json={"texts": texts, "beam_size": 4})
        assert response.status_code == 200, response.text
        translations += response.json()["translations"]
    correct = sum(t["text"] == num2words(n, lang="de") for t, n in zip(translations, numbers))
    assert correct >= 16, (correct, translations)  # half of 32 numbers it never saw (untrained: none)
    fetched = _files(cluster.cache("host-b") / "models" / model_id)
    client = cluster.s3.client()
    assert fetched == {
        name.removeprefix(f"models/{model_id}/"): client.get_object(Bucket=cluster.bucket, Key=f"{PREFIX}/{name}")[
            "Body"
        ].read()
        for name in model_objects
    }
    assert json.loads(fetched["manifest.json"])["files"].keys() <= fetched.keys()
    assert not (cluster.hosts.data_dirs["host-a"] / "cache").exists()  # B did not refill A's folder
    assert re.search(rf'"GET /{cluster.bucket}/{PREFIX}/models/{model_id}/model.safetensors', _moto_log(cluster))
    assert trainer.poll() is None and server.poll() is None


def test_checkpoint_written_on_one_host_resumes_on_another(cluster):
    """SIGKILL the training worker on host C after a checkpoint; a worker on host D (another DATA_DIR, C's folder
    hidden) resumes from the checkpoint it fetched from S3 and finishes (attempt 2). Fails if D starts over,
    loses more than one checkpoint interval, or the store keeps checkpoints the database no longer lists."""
    cluster.stop_workers()
    doomed = cluster.start_worker("host-c", "training,data", "doomed")  # parses the dataset if no one has yet
    job = cluster.api.submit(
        _numbers_job(cluster.numbers["id"], max_steps=160, checkpoint_every=40, eval_every=40, keep_checkpoints=2)
    )
    wait_for(lambda: any(c["step"] >= 40 for c in cluster.api.checkpoints(job["id"])), timeout=300, what="a checkpoint")
    killed_at = cluster.api.job(job["id"])["progress"]["step"]
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.wait()
    cluster.start_worker("host-d", "training", "rescuer")
    done = cluster.api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=300)
    assert done["status"] == "succeeded", done["error"]
    assert done["attempt"] == 2
    log = cluster.processes.log("rescuer")
    resumed = re.search(r"resumed from (\S+) at step (\d+)", log)
    assert resumed, log[-3000:]
    resumed_from, resumed_at = Path(resumed.group(1)), int(resumed.group(2))
    assert resumed_from.is_relative_to(cluster.cache("host-d"))  # D's own cache, filled from S3
    assert 40 <= resumed_at <= killed_at and killed_at - resumed_at <= 40
    listed = sorted(f"jobs/{job['id']}/checkpoints/step-{c['step']:08d}" for c in cluster.api.checkpoints(job["id"]))
    stored = sorted({"/".join(name.split("/")[:4]) for name in cluster.objects(f"jobs/{job['id']}/checkpoints/")})
    assert stored == listed and len(listed) <= 3  # rotated checkpoints left the store too


def _moto_log(cluster: Cluster) -> str:
    return cluster.s3.log_path.read_text(errors="replace")
