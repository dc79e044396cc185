"""Service settings, read from environment variables (and an optional `.env` file).

With nothing set, everything lives under `DATA_DIR` (./var): an SQLite database, a Celery broker
on the SQLAlchemy transport over another SQLite file, and artifacts on disk. Production points
`DATABASE_URL` at PostgreSQL and `CELERY_BROKER_URL` at Redis; the code is the same.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.core.object_uris import S3_BUCKET, parse_prefix

DATABASE_SCHEMES = ("sqlite", "postgresql+psycopg")
BROKER_SCHEMES = ("sqla+sqlite", "redis", "rediss")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# Svix's schedule: the waits before each retry of a failed webhook delivery (8 attempts over 27.6 hours).
WEBHOOK_RETRY_SCHEDULE = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)


def parse_s3_root(root: str) -> tuple[str, str]:
    """s3://bucket/some/prefix -> ("bucket", "some/prefix"); ValueError naming the bad part."""
    scheme, _, rest = root.partition("://")
    if scheme != "s3":
        raise ValueError(f"ARTIFACT_ROOT scheme {scheme!r} is not supported; use a folder path or s3://bucket/prefix")
    bucket, _, prefix = rest.partition("/")
    if not S3_BUCKET.fullmatch(bucket):
        raise ValueError(
            f"ARTIFACT_ROOT={root!r} names no valid S3 bucket: {bucket!r} must be 3-63 lowercase "
            "letters, digits, dots or hyphens"
        )
    prefix = prefix.strip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ValueError(f"ARTIFACT_ROOT={root!r} has an invalid prefix {prefix!r} (empty, '.' or '..' parts)")
    return bucket, prefix


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False)

    environment: Literal["local", "production"] = "local"
    data_dir: Path = Path("var")
    database_url: str = ""  # default: sqlite:///<data_dir>/service.db
    celery_broker_url: str = ""  # default: sqla+sqlite:///<data_dir>/broker.db
    # Where inference answers travel back to the API; default: the Redis broker, or file://<data_dir>/results
    celery_result_backend: str = ""
    artifact_root: str = ""  # default: <data_dir>/artifacts; or s3://bucket/prefix (cached under <data_dir>/cache)
    # The S3-compatible store reads the standard AWS variables; empty ones leave it to boto3 (~/.aws, instance roles).
    aws_endpoint_url: str = ""  # e.g. http://minio:9000; empty: AWS itself
    aws_access_key_id: str = ""
    aws_secret_access_key: SecretStr = SecretStr("")
    aws_default_region: str = ""
    # A worker host's local copy of an S3 store (DATA_DIR/cache) is trimmed to this size, least recently used first.
    artifact_cache_gb: float = Field(20.0, ge=0)  # 0: no bound
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # json: one JSON object per line with request/job/model/owner ids (app/core/logs.py); text: for a terminal.
    log_format: Literal["json", "text"] = "json"

    # Jobs and the broker. A task's message must not be redelivered while its lease is alive,
    # so the broker's visibility timeout has to outlast the lease (checked below).
    job_lease_seconds: int = Field(120, ge=10)
    job_max_attempts: int = Field(3, ge=1, le=20)
    broker_visibility_timeout: int = Field(6 * 3600, ge=60)
    worker_heartbeat_seconds: int = Field(10, ge=1, le=300)
    job_redispatch_seconds: int = Field(600, ge=5)  # re-send a queued job's message after this long unclaimed
    # A dataset still processing this long after its parse was sent is sent again (its worker died, or the message
    # was lost), and failed once sent DATASET_MAX_ATTEMPTS times. An hour: 4.5 times the 788 s a 5M-pair corpus
    # took on a loaded 2-core host (a slow parse sent again is parsed twice; the first to finish is recorded).
    dataset_processing_timeout_seconds: int = Field(3600, ge=5)
    dataset_max_attempts: int = Field(2, ge=1, le=20)
    # A running evaluation, file translation or dataset translation whose progress has not moved this long is what a
    # dead worker leaves (on Redis its message comes back only after BROKER_VISIBILITY_TIMEOUT): the reaper sends its
    # task again, and fails it once sent BACKGROUND_MAX_ATTEMPTS times. Progress moves every chunk of sentences
    # (1,024 at most: a minute or two for a big model on a slow CPU); 15 minutes leaves room for the last steps.
    background_stall_seconds: int = Field(900, ge=5)
    background_max_attempts: int = Field(3, ge=1, le=20)
    # Files of deleted jobs, models and datasets stay this long before the collector deletes them (worker/tasks/
    # collect.py): far longer than a cancelled job's last checkpoint write or an export being built takes.
    artifact_grace_seconds: int = Field(3600, ge=0)
    worker_memory_limit_gb: float = Field(16.0, gt=0)
    # The device a worker process computes on: cpu, cuda (= cuda:0) or cuda:N, N counted among the GPUs that
    # CUDA_VISIBLE_DEVICES leaves visible. Empty: cuda:0 when the host has a GPU, else cpu. One worker per GPU:
    # give each its own WORKER_DEVICE (or CUDA_VISIBLE_DEVICES). A worker given a device it lacks refuses to start.
    worker_device: str = Field("", pattern=r"^(cpu|cuda(:\d{1,3})?)?$")
    max_devices_per_job: int = Field(8, ge=1, le=64)  # training.devices above it is refused (GPUs of a worker host)
    # Multi-host jobs (training.nodes > 1, docs/operations.md): the address and port at which the worker that claims
    # one hosts its rendezvous, which the other hosts' workers must reach (empty: this host's name; port 0: a free
    # one); how long the job waits for all its hosts to join; and the most hosts a job may ask for.
    worker_rendezvous_host: str = ""
    worker_rendezvous_port: int = Field(0, ge=0, le=65535)
    job_nodes_timeout_seconds: int = Field(600, ge=5)
    max_nodes_per_job: int = Field(4, ge=1, le=64)
    torch_threads: int = Field(0, ge=0, le=512)  # CPU threads per worker process; 0 = PyTorch's default
    # Batch tokens per second that settings chosen from a job's time budget assume (model/train/budget.py); 0: measured
    # by a few timed steps at the job's start. Pin it to make those choices the same on every host.
    worker_tokens_per_second: float = Field(0.0, ge=0)
    # Where that measurement times several batch sizes (a curve, whose knee the batch is at least): on a GPU, whose
    # throughput grows steeply with the batch; always; or never (one batch size, as on a CPU).
    worker_throughput_curve: Literal["gpu", "always", "never"] = "gpu"

    # Request limits.
    max_upload_mb: int = Field(100, ge=1, le=10_000)  # a file to translate
    # A dataset or a model archive: streamed to the artifact store, never held in memory (WMT14 en-de is 1.4 GB).
    max_dataset_mb: int = Field(2000, ge=1, le=1_000_000)
    # A dataset file is parsed a line at a time (worker/data/source.py): a line longer than this, newline not counted,
    # fails the dataset naming its line; so does a gzip file that unpacks to more than DATASET_UNPACKED_RATIO times
    # MAX_DATASET_MB (or times its own size, if larger: a file read in place from a URI). A small file that unpacks
    # to gigabytes, or holds no newline, fails instead of exhausting the worker's memory.
    max_dataset_line_kb: int = Field(1024, ge=1, le=1_048_576)
    dataset_unpacked_ratio: int = Field(10, ge=1, le=10_000)
    # A model archive (POST /v1/models/import) is unpacked by an inference worker a member at a time and refused at the
    # first past a limit, before a byte more is unpacked: more members than IMPORT_MAX_MEMBERS, more than
    # IMPORT_UNPACKED_RATIO times MAX_DATASET_MB in all, or a JSON file or SentencePiece model (parsed whole) over
    # IMPORT_MAX_METADATA_MB. Its model's dimensions over IMPORT_MAX_* are refused before any model is built, and its
    # weights' shapes must be those its config implies: the model built is no larger than the weights unpacked.
    import_max_members: int = Field(100, ge=5, le=100_000)
    import_unpacked_ratio: int = Field(4, ge=1, le=100)  # safetensors barely compress
    import_max_metadata_mb: int = Field(32, ge=1, le=4096)
    import_max_vocab_size: int = Field(256_000, ge=300)
    import_max_d_model: int = Field(4096, ge=8)
    import_max_layers: int = Field(64, ge=1)  # encoder and decoder, each
    import_max_heads: int = Field(256, ge=1)
    import_max_d_ff: int = Field(65536, ge=8)
    import_max_positions: int = Field(16384, ge=16)
    # Object-store URIs a dataset may be registered from and read in place (comma-separated prefixes such as
    # "s3://corpora/,s3://shared/wmt/", compared segment by segment: app/core/object_uris.py), with the AWS_*
    # credentials; empty: none. The ceiling: an organisation's admin may narrow it for the organisation.
    dataset_uri_prefixes: Annotated[tuple[str, ...], NoDecode] = ()
    max_body_kb: int = Field(1024, ge=1)
    max_texts_per_request: int | None = Field(None, ge=1)  # default 64, 512 with a GPU inference worker
    max_chars_per_text: int = Field(2000, ge=1)
    max_beam_size: int = Field(16, ge=1)
    max_top_k: int = Field(50, ge=1)
    inference_timeout_seconds: float = Field(30.0, gt=0)
    # How long GET /v1/models/{id}/export waits for a worker to build an export before answering 202 (retry).
    export_timeout_seconds: float = Field(120.0, gt=0)
    # Which backend translates when a request (or an evaluation, a file translation) leaves it to the service: auto =
    # CTranslate2 wherever it is installed and the model converts, PyTorch otherwise (worker/serving/translation.py).
    serving_backend: Literal["auto", "pytorch", "ctranslate2"] = "auto"
    # CTranslate2 backend's compute type: auto (float16 on a GPU, int8 on an Intel CPU with VNNI, float32 on an AMD
    # one or one without VNNI, whose int8 sums saturate),
    # default (float32, as converted), or any type CTranslate2 names (int8_float16, bfloat16, ...).
    ct2_compute_type: str = "auto"
    # Weights of PyTorch models on an inference worker: auto (bf16 on a GPU, fp32 on a CPU), fp32, bf16 or fp16.
    serving_dtype: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    # torch.compile the layers of PyTorch models served (model/nn/compile.py); eager again if compiling fails.
    serving_compile: bool = False
    inference_queue_limit: int = Field(256, ge=1)  # waiting inference requests before 503 + Retry-After
    inference_cache_models: int = Field(4, ge=1)  # models kept loaded per inference worker process
    # Models an inference worker loads when it starts and never evicts (comma-separated ids, name@alias or
    # name@version; worker/warm.py): their first request is not a cold one. At most INFERENCE_CACHE_MODELS load.
    inference_warm_models: str = ""
    # Sentences decoded together (a micro-batch); default 64 on a CPU worker, 1024 on a GPU (serving/decode_limits.py)
    inference_max_batch: int | None = Field(None, ge=1)
    # How long a batch waits for company. 0: none, requests that arrive while a batch decodes form the next one.
    inference_batch_wait_ms: float = Field(0.0, ge=0, le=1000)
    # How long an inference worker's thread holding the GIL runs before a waiting one takes its turn (Python: 5).
    inference_gil_switch_ms: float = Field(0.5, gt=0, le=100)
    health_timeout_seconds: float = Field(2.0, gt=0)
    # Abuse limits (0 = off): queued + running jobs of a key's owner, and requests per minute per API key.
    max_active_jobs_per_key: int = Field(8, ge=0)
    rate_limit_per_minute: int = Field(600, ge=0)
    # Quotas per organisation (0 = unlimited; an organisation's own value in the owners table replaces each one):
    # bytes stored (datasets, models, checkpoints), jobs queued or running, and worker minutes per UTC day.
    quota_storage_gb: float = Field(0.0, ge=0)
    quota_active_jobs: int = Field(0, ge=0)
    quota_worker_minutes_per_day: int = Field(0, ge=0)
    # How long an API process reuses a key's or a model's lookup (app/api/ttl_cache.py); a revoked key or deleted model
    # can keep working this long in the other API processes. 0: look both up on every request.
    auth_cache_seconds: float = Field(5.0, ge=0, le=300)
    # Bearer token a Prometheus scraper sends to GET /metrics; empty: /metrics is off. A secret: never printed.
    metrics_token: SecretStr = SecretStr("")

    # Webhooks (app/services/webhooks.py, worker/tasks/webhook.py). Receivers on loopback, private, link-local and other
    # non-public addresses are refused unless allowed here (a receiver on this machine or the LAN: tests, a lab).
    webhook_allow_private: bool = False
    # Seconds to wait before each retry after a failed attempt: "5,300,1800" (or a JSON list); empty: no retries.
    webhook_retry_schedule: Annotated[tuple[float, ...], NoDecode] = WEBHOOK_RETRY_SCHEDULE
    # Ports a receiver on a public address may use besides 80 and 443: "8443,9000" (or a JSON list); empty: those two.
    webhook_allowed_ports: Annotated[tuple[int, ...], NoDecode] = ()
    # One attempt's limit from the first byte of DNS to the answer's headers (connecting: at most 5 s of it).
    webhook_timeout_seconds: float = Field(10.0, gt=0, le=60)
    # A delivery due this long whose task no worker has taken has its message sent again (by the reaper).
    webhook_redispatch_seconds: int = Field(120, ge=5)

    @field_validator("webhook_retry_schedule", "webhook_allowed_ports", "dataset_uri_prefixes", mode="before")
    @classmethod
    def _parse_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip().strip("[]")
            return tuple(part.strip().strip("\"'") for part in text.split(",") if part.strip().strip("\"'"))
        return value

    @field_validator("dataset_uri_prefixes")
    @classmethod
    def _check_prefixes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(dict.fromkeys(str(parse_prefix(prefix)) for prefix in value))
        except ValueError as exc:
            raise ValueError(f"DATASET_URI_PREFIXES: {exc}") from None

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _check_schedule(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if len(value) > 20 or any(not 0 < wait <= 7 * 86400 for wait in value):
            raise ValueError(
                f"WEBHOOK_RETRY_SCHEDULE={','.join(f'{w:g}' for w in value)}: at most 20 waits, each over 0 and at "
                "most 604800 seconds (a week)"
            )
        return value

    @field_validator("webhook_allowed_ports")
    @classmethod
    def _check_ports(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        bad = [port for port in value if not 1 <= port <= 65535]
        if bad:
            raise ValueError(f"WEBHOOK_ALLOWED_PORTS: {', '.join(map(str, bad))} is not a port (1-65535)")
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _fill_defaults_and_refuse_unsafe(self) -> Settings:
        data_dir = self.data_dir.resolve()
        if not self.database_url:
            self.database_url = f"sqlite:///{data_dir / 'service.db'}"
        if not self.celery_broker_url:
            self.celery_broker_url = f"sqla+sqlite:///{data_dir / 'broker.db'}"
        if not self.celery_result_backend:
            self.celery_result_backend = (
                f"file://{data_dir / 'results'}"
                if self.celery_broker_url.startswith("sqla+")
                else self.celery_broker_url
            )
        if not self.artifact_root:
            self.artifact_root = str(data_dir / "artifacts")
        problems: list[str] = []
        if "://" in self.artifact_root:
            try:
                parse_s3_root(self.artifact_root)
            except ValueError as exc:
                problems.append(str(exc))
        db_scheme = self.database_url.split("://", 1)[0]
        if db_scheme not in DATABASE_SCHEMES:
            hint = " (use postgresql+psycopg://)" if db_scheme.startswith("postgres") else ""
            problems.append(
                f"DATABASE_URL scheme {db_scheme!r} is not supported{hint}; "
                f"expected one of {', '.join(DATABASE_SCHEMES)}"
            )
        broker_scheme = self.celery_broker_url.split("://", 1)[0]
        if broker_scheme not in BROKER_SCHEMES:
            problems.append(
                f"CELERY_BROKER_URL scheme {broker_scheme!r} is not supported; "
                f"expected one of {', '.join(BROKER_SCHEMES)}"
            )
        if self.broker_visibility_timeout <= 2 * self.job_lease_seconds:
            problems.append(
                f"BROKER_VISIBILITY_TIMEOUT={self.broker_visibility_timeout} must exceed twice "
                f"JOB_LEASE_SECONDS={self.job_lease_seconds}, or the broker redelivers running tasks"
            )
        if self.worker_heartbeat_seconds * 2 > self.job_lease_seconds:
            problems.append(
                f"WORKER_HEARTBEAT_SECONDS={self.worker_heartbeat_seconds} must be at most half of "
                f"JOB_LEASE_SECONDS={self.job_lease_seconds}, or healthy jobs lose their lease"
            )
        if self.environment == "production":
            if db_scheme == "sqlite":
                problems.append("DATABASE_URL is SQLite, which is unsafe with ENVIRONMENT=production; use PostgreSQL")
            if broker_scheme == "sqla+sqlite":
                problems.append(
                    "CELERY_BROKER_URL is the SQLite transport, which is unsafe with ENVIRONMENT=production; use Redis"
                )
        elif self.host not in LOOPBACK_HOSTS:
            problems.append(
                f"HOST={self.host!r} exposes the embedded (local) service beyond this machine; "
                "bind to 127.0.0.1 or set ENVIRONMENT=production"
            )
        if problems:
            raise ValueError("unsafe or invalid settings: " + "; ".join(problems))
        return self

    @property
    def warm_model_refs(self) -> list[str]:
        """INFERENCE_WARM_MODELS as a list, blanks and repeats dropped, in its order."""
        return list(dict.fromkeys(ref.strip() for ref in self.inference_warm_models.split(",") if ref.strip()))

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def embedded_broker(self) -> bool:
        return self.celery_broker_url.startswith("sqla+")

    def ensure_dirs(self) -> None:
        """Create the data folder and, for a local artifact store, its folder."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if "://" not in self.artifact_root:
            Path(self.artifact_root).mkdir(parents=True, exist_ok=True)
        if self.is_sqlite:
            Path(self.database_url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        if self.embedded_broker:
            Path(self.celery_broker_url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)


@lru_cache
def get_settings() -> Settings:
    return Settings()
