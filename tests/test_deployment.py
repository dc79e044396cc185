"""docker-compose.yml and the Dockerfile agree with the settings (no Docker engine runs here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from app.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SERVICE_NAMES = {
    "postgres",
    "redis",
    "minio",
    "migrate",
    "api",
    "worker-training",
    "worker-training-gpu",
    "worker-inference",
    "worker-inference-gpu",
    "flower",
}
OUR_SERVICES = ("migrate", "api", "worker-training", "worker-training-gpu", "worker-inference", "worker-inference-gpu")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _env(service: dict) -> dict[str, str]:
    """The service's variables as compose would set them: defaults filled, required secrets given a value."""

    def fill(value: str) -> str:
        return re.sub(r"\$\{(\w+):\?[^}]*\}", r"secret-\1", re.sub(r"\$\{(\w+):-([^}]*)\}", r"\2", value))

    return {k: fill(str(v)) for k, v in service.get("environment", {}).items()}


def test_compose_has_the_production_services(compose):
    assert set(compose["services"]) == SERVICE_NAMES


@pytest.mark.parametrize("name", OUR_SERVICES)
def test_every_variable_is_a_setting_and_the_settings_load(compose, name):
    env = _env(compose["services"][name])
    fields = {field.upper() for field in Settings.model_fields}
    assert set(env) - fields == set(), f"{name} sets variables the service does not read"
    settings = Settings(**{k.lower(): v for k, v in env.items()})
    assert settings.database_url.startswith("postgresql+psycopg://")
    assert settings.celery_broker_url.startswith("redis://")
    assert settings.environment == "production"


def test_workers_consume_their_queues(compose):
    training = compose["services"]["worker-training"]["command"]
    inference = compose["services"]["worker-inference"]["command"]
    assert training[training.index("-Q") + 1] == "training" and training[training.index("-c") + 1] == "1"
    assert inference[inference.index("-Q") + 1] == "inference"
    assert all(
        s["build"]["target"] == "worker"
        for s in (compose["services"]["worker-training"], compose["services"]["worker-inference"])
    )


def test_the_gpu_training_worker_reserves_the_hosts_gpus_only_in_its_profile(compose):
    gpu, cpu = compose["services"]["worker-training-gpu"], compose["services"]["worker-training"]
    assert gpu["profiles"] == ["gpu"] and "profiles" not in cpu  # a laptop without GPUs still starts
    assert gpu["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}
    ]
    assert (
        gpu["command"][gpu["command"].index("-Q") + 1] == "training"
        and gpu["stop_grace_period"] == cpu["stop_grace_period"]
    )


def test_the_gpu_inference_worker_takes_one_gpu_only_in_its_profile(compose):
    gpu, cpu = compose["services"]["worker-inference-gpu"], compose["services"]["worker-inference"]
    assert gpu["profiles"] == ["gpu"] and "profiles" not in cpu
    assert gpu["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}
    ]
    assert _env(gpu)["WORKER_DEVICE"] == "cuda"  # refuses to start rather than serve from the CPU unnoticed
    command = gpu["command"]
    assert command[command.index("-Q") + 1] == "inference" and command[command.index("-P") + 1] == "threads"


GPU_WORKERS = ("worker-training-gpu", "worker-inference-gpu")


def test_the_gpu_profile_holds_only_the_gpu_workers(compose):
    assert {name for name, s in compose["services"].items() if "gpu" in s.get("profiles", [])} == set(GPU_WORKERS)


@pytest.mark.parametrize("name", GPU_WORKERS)
def test_a_gpu_worker_refuses_to_start_where_it_sees_no_gpu(compose, name):
    """WORKER_DEVICE=cuda: on a host whose GPU the container does not see, the worker exits naming the device
    instead of quietly computing on the CPU (a training one would also take the jobs that asked for a CPU)."""
    import torch

    from worker.device import DeviceError, resolve_device

    setting = Settings(**{k.lower(): v for k, v in _env(compose["services"][name]).items()}).worker_device
    assert setting == "cuda"
    with pytest.raises(DeviceError, match="WORKER_DEVICE='cuda' but this host has no CUDA device"):
        resolve_device(setting, 0)
    assert resolve_device(setting, 8) == torch.device("cuda", 0)


@pytest.mark.parametrize("name", ["worker-training", "worker-training-gpu"])
def test_training_workers_are_reachable_only_on_an_internal_network_with_their_datastores(compose, name):
    """Fault: a training worker shares a network with the API or anything with a route out, where a job of several
    hosts would listen (docs/security.md). Pass: it is on internal networks only, with no published port, and the
    datastores it needs (PostgreSQL, Redis, MinIO) are on one of them; the API and the inference workers are not."""
    service = compose["services"][name]
    networks = service.get("networks", ["default"])
    assert networks and all(compose.get("networks", {}).get(n, {}).get("internal") for n in networks), networks
    assert "ports" not in service
    for store in ("postgres", "redis", "minio"):
        assert set(networks) & set(compose["services"][store].get("networks", ["default"])), store
    for other in ("api", "worker-inference", "worker-inference-gpu", "flower"):
        assert not set(networks) & set(compose["services"][other].get("networks", ["default"])), other


def test_migrate_runs_alembic_before_api_and_workers(compose):
    assert compose["services"]["migrate"]["command"] == ["alembic", "upgrade", "head"]
    for name in ("api", "worker-training", "worker-inference"):
        assert compose["services"][name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_flower_watches_the_same_broker(compose):
    assert (
        compose["services"]["flower"]["environment"]["CELERY_BROKER_URL"]
        == _env(compose["services"]["api"])["CELERY_BROKER_URL"]
    )


def test_dockerfile_api_target_has_no_torch_and_worker_target_does():
    stages: dict[str, str] = {}
    current = None
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        match = re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.I)
        if match:
            current = match.group(1)
            stages[current] = ""
        elif current:
            stages[current] += line + "\n"
    assert {"api", "worker"} <= set(stages)
    assert "torch" not in stages["api"] and "[worker]" not in stages["api"]
    assert "torch==2.13.0" in stages["worker"] and "'.[worker]'" in stages["worker"]


def test_the_gpu_inference_worker_has_cublas_12_for_ctranslate2(compose):
    """The CTranslate2 wheel opens libcublas.so.12 at its first GPU translation; a CUDA 13 host has none, so the
    GPU inference image installs the pinned wheel of the `gpu` extra (worker/serving/cuda_libs.py loads it)."""
    import tomllib

    assert compose["services"]["worker-inference-gpu"]["build"]["target"] == "worker-gpu"
    stage = (ROOT / "Dockerfile").read_text().split("AS worker-gpu", 1)[1]
    assert "FROM worker AS worker-gpu" in (ROOT / "Dockerfile").read_text() and "'.[worker,gpu]'" in stage
    gpu = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["gpu"]
    assert any(re.fullmatch(r"nvidia-cublas-cu12==12\.[\d.]+", requirement) for requirement in gpu), gpu


LONG_RUNNING = SERVICE_NAMES - {"migrate"}
SECRETS = ("POSTGRES_PASSWORD", "MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "FLOWER_BASIC_AUTH")


def test_secrets_are_required_never_defaulted():
    text = (ROOT / "docker-compose.yml").read_text()
    for name in SECRETS:
        assert re.search(rf"\$\{{{name}:\?", text), f"{name} is not required"
        assert not re.search(rf"\$\{{{name}(:?-|\}})", text), f"{name} has a default or may be empty"


def test_long_running_services_restart_and_workers_report_health(compose):
    services = compose["services"]
    assert {name for name in LONG_RUNNING if services[name].get("restart") != "unless-stopped"} == set()
    assert "restart" not in services["migrate"]  # a one-shot
    for name in ("worker-training", "worker-training-gpu", "worker-inference", "worker-inference-gpu"):
        check = services[name]["healthcheck"]["test"]
        node = services[name]["command"][services[name]["command"].index("-n") + 1].split("@")[0]
        assert "inspect ping" in check[-1] and f"-d {node}@" in check[-1], (name, check)
        assert any(v.endswith(":/data") for v in services[name]["volumes"]), f"{name} has no cache volume"
        assert _env(services[name])["DATA_DIR"] == "/data"


def test_flower_needs_a_password_and_listens_on_loopback(compose):
    flower = compose["services"]["flower"]
    assert "FLOWER_BASIC_AUTH" in flower["environment"]
    assert all(str(port).startswith("127.0.0.1:") for port in flower["ports"])


def test_the_build_context_leaves_out_the_local_environment_and_its_secrets():
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".venv", "var", ".git", ".env"} <= ignored
    copied = re.findall(r"^COPY (?!--from)(.+?) \S+$", (ROOT / "Dockerfile").read_text(), re.M)
    assert all(part not in ignored for line in copied for part in line.split()), copied
