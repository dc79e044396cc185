"""Tables. Schema changes go through Alembic (migrations/); tests check the two agree.

Organisations, members and API keys are in app/db/access_tables.py, imported here: every `owner_id` below refers
to its `owners` table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Integer, String, Text, UniqueConstraint, false
from sqlalchemy.orm import Mapped, mapped_column, object_session, relationship

import app.db.access_tables  # noqa: F401  (the owners table every owner_id refers to)
import app.db.run_record_tables  # noqa: F401  (a job's metrics, checkpoints, dynamics, memory and log)
from app.db.base import Base, UTCDateTime, UUIDString, new_id, utcnow
from app.db.registry_tables import ModelAlias
from model.train.shrink import cut_from


def _gone(row: Base, table: type[Base], row_id: str | None) -> bool:
    """Whether the row `row` names by `row_id` (a job, a parent) was deleted: the lineage keeps the id and says so."""
    session = object_session(row)
    return row_id is not None and session is not None and session.get(table, row_id) is None


class Ping(Base):
    """A round trip API -> broker -> worker; the worker stamps `answered_at` and its name."""

    __tablename__ = "pings"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    queue: Mapped[str] = mapped_column(String(50))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    answered_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)


class Worker(Base):
    """A Celery worker process as last seen by its heartbeat; health reports recent ones."""

    __tablename__ = "workers"

    hostname: Mapped[str] = mapped_column(String(255), primary_key=True)
    queues: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int]
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    # Set when the worker is told to shut down (SIGTERM): its training jobs checkpoint and go back to the queue.
    draining: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The device it computes on (worker/device.py), as its heartbeat last saw it; None before the worker reported.
    device_kind: Mapped[str | None] = mapped_column(String(10), nullable=True)  # cpu | cuda
    device_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    device_memory_total: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # bytes
    device_memory_free: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # bytes
    # An inference worker's models and backends (worker/warm.py): warm_models, warm_failed, backend_auto,
    # backend_note, ...; None for other workers and before its first heartbeat.
    serving: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class Dataset(Base):
    """A corpus: its file lives in the artifact store under `storage_key` (or is read in place from `source_uri`), and
    a worker parses it after upload (worker/data/ingest.py): processing -> ready | failed. A filtered dataset names
    its parent and the rules that made it (worker/data/filtering.py)."""

    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))  # parallel | monolingual
    format: Mapped[str] = mapped_column(String(20))  # jsonl | tsv | text; auto until parsed
    rows: Mapped[int]  # 0 until parsed
    size_bytes: Mapped[int] = mapped_column(BigInteger)  # as stored (compressed, for a gzip file)
    sha256: Mapped[str] = mapped_column(String(64))  # of the stored bytes; "" until parsed for a registered URI
    stats: Mapped[dict[str, Any]] = mapped_column(JSON)
    storage_key: Mapped[str] = mapped_column(String(500))  # "" for a dataset read in place from source_uri
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    status: Mapped[str] = mapped_column(String(20), default="ready", server_default="ready", index=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)  # why it failed, naming the line
    error_line: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    compression: Mapped[str] = mapped_column(String(10), default="none", server_default="none")  # none | gzip
    source_uri: Mapped[str | None] = mapped_column(String(1000), nullable=True)  # s3://bucket/key, read in place
    source_language: Mapped[str | None] = mapped_column(String(20), nullable=True)  # as declared (ISO 639-1)
    target_language: Mapped[str | None] = mapped_column(String(20), nullable=True)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # model/data/report.py
    # no foreign key: a deleted parent's id stays, and `parent_deleted` says it was deleted
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    filter_rules: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    filter_counts: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    lineage: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # made by the service: its source
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Its parse's task was sent this many times, the last at dispatched_at (None: once, at created_at); the reaper
    # sends it again when it stays processing too long, and fails it after DATASET_MAX_ATTEMPTS (dataset_rows.py).
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    @property
    def parent_deleted(self) -> bool:
        return _gone(self, Dataset, self.parent_id)


class Sweep(Base):
    """A hyperparameter sweep: trials are ordinary jobs (jobs.sweep_id) sampled and pruned by an Optuna study whose
    journal is sweep_journal. running -> succeeded | failed | cancelled (app/services/sweeps.py)."""

    __tablename__ = "sweeps"
    __table_args__ = (UniqueConstraint("owner_id", "idempotency_key"),)

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    # The key that created it: the registry records who moved name@best (app/services/registry.py).
    key_id: Mapped[str] = mapped_column(String(36))
    key_prefix: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(64))  # the registry name its best model is registered under
    objective: Mapped[str] = mapped_column(String(20))  # the trials' job objective: translation | denoising
    job_config: Mapped[dict[str, Any]] = mapped_column(JSON)  # the fixed job fields, as given (unset ones left out)
    space: Mapped[dict[str, Any]] = mapped_column(JSON)  # "section.field" -> dimension
    metric: Mapped[str] = mapped_column(String(50))
    direction: Mapped[str] = mapped_column(String(10))  # maximize | minimize
    budget_minutes: Mapped[float | None] = mapped_column(Float, nullable=True)  # worker minutes, all trials
    budget_trials: Mapped[int | None] = mapped_column(Integer, nullable=True)
    max_concurrent: Mapped[int]
    sampler: Mapped[str] = mapped_column(String(20))
    pruner: Mapped[str] = mapped_column(String(20))
    seed: Mapped[int]
    resource: Mapped[str] = mapped_column(String(10))  # what a trial's reports are indexed by: seconds | steps
    status: Mapped[str] = mapped_column(String(20), default="running", index=True)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    stop_reason: Mapped[str | None] = mapped_column(Text, nullable=True)  # why no further trial was started
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    best_job_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    best_model_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    importance: Mapped[dict[str, float] | None] = mapped_column(JSON, nullable=True)
    # Bumped by every change of the study: the UPDATE locks the row, so those who advance it take turns.
    version: Mapped[int] = mapped_column(default=0)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    request_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SweepJournalEntry(Base):
    """One operation of a sweep's Optuna study, in order (app/services/sweep_journal.py replays them)."""

    __tablename__ = "sweep_journal"

    sweep_id: Mapped[str] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    entry: Mapped[dict[str, Any]] = mapped_column(JSON)


class Job(Base):
    """A training job. The row is the truth; Celery messages carry only its id.

    queued -> running -> succeeded | failed | cancelled; running -> queued when the lease expires.
    """

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("owner_id", "idempotency_key"),)

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    # The API key that submitted it (a sweep's trial: the sweep's key). A key with scope train but not read sees only
    # the jobs it submitted (app/services/job_visibility.py). A plain id, as the audit trail keeps it: a key is never
    # deleted, only revoked. Null for a job whose submitting key is unknown (stored before revision 0031, and not named
    # by the audit trail): only keys with scope read see those.
    key_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    # SET NULL: a dataset may be deleted once no running job needs it; the job's record stays.
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), index=True)
    valid_dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), index=True)
    # Evaluated (an Evaluation of the trained model) when the job succeeds.
    test_dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), nullable=True)
    objective: Mapped[str] = mapped_column(String(20))  # translation | denoising
    model_config: Mapped[dict[str, Any]] = mapped_column(JSON)  # the request's "model" section, as validated
    training_config: Mapped[dict[str, Any]] = mapped_column(JSON)  # the request's "training" section, defaults filled
    # The model whose weights and tokenizer the job starts from (fine-tuning); kept as a plain id, so deleting that
    # model later leaves the record (a queued job whose start is gone fails, saying so).
    init_model_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    # mixed fine-tuning (model/data/mixing.py); register_as: the name its model is published under
    mix_dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), nullable=True)
    mix_share: Mapped[float | None] = mapped_column(Float, nullable=True)
    register_as: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # What it translates from and to (BCP 47), as the request says or the model it starts from; its model keeps them.
    source_language: Mapped[str | None] = mapped_column(String(20), nullable=True)
    target_language: Mapped[str | None] = mapped_column(String(20), nullable=True)
    # {"fields": [...]} when the worker is to choose those settings from the time budget (model/train/budget.py);
    # the worker adds "chosen", "reasons" and "inputs", and writes the chosen values into the two configs.
    auto_settings: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    attempt: Mapped[int] = mapped_column(default=0)  # claims so far; 1 while the first run trains
    max_attempts: Mapped[int]
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    request_sha256: Mapped[str] = mapped_column(String(64))
    # Dispatch and lease: who runs it, until when. A reaper re-queues expired leases.
    dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True, index=True)
    # Progress, written by the worker a few times a second at most.
    step: Mapped[int] = mapped_column(default=0)
    total_steps: Mapped[int]
    tokens_seen: Mapped[int] = mapped_column(BigInteger, default=0)
    tokens_per_second: Mapped[float | None] = mapped_column(Float, nullable=True)
    eta_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    device: Mapped[str | None] = mapped_column(String(50), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Labels for telling experiments apart (PATCH /v1/jobs/{id}); the tags are rows of job_tags, so a list filters
    # on them in SQL.
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    # A trial of a sweep (app/services/sweeps.py): its number in the sweep's study; null for a job of its own.
    sweep_id: Mapped[str | None] = mapped_column(
        ForeignKey("sweeps.id", ondelete="SET NULL"), nullable=True, index=True
    )
    trial_number: Mapped[int | None] = mapped_column(Integer, nullable=True)

    tag_rows: Mapped[list[JobTag]] = relationship(
        order_by="JobTag.position", cascade="all, delete-orphan", passive_deletes=True
    )

    pair_rows: Mapped[list[JobPair]] = relationship(
        order_by="JobPair.position", cascade="all, delete-orphan", passive_deletes=True
    )

    @property
    def tags(self) -> list[str]:
        return [row.tag for row in self.tag_rows]


class JobNode(Base):
    """A host of a multi-host job's attempt (training.nodes > 1): node 0 is the worker that claimed the job, nodes
    1..N-1 the workers that took its join tasks. One row per (job, attempt, node): a join task delivered twice
    finds its node taken and leaves. `error` says why the node's share of the group failed, if it did."""

    __tablename__ = "job_nodes"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker: Mapped[str] = mapped_column(String(255))  # "<celery hostname>/<pid>"
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    left_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class JobTag(Base):
    """One tag of a job; `position` keeps the order it was given in. Indexed by tag for `GET /v1/jobs?tag=`."""

    __tablename__ = "job_tags"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)
    position: Mapped[int]


class JobPair(Base):
    """A language pair of a job that trains one model for several: its dataset and that dataset's declared languages
    when the job was submitted (swapped for a reverse job), in the order given."""

    __tablename__ = "job_pairs"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(primary_key=True)
    # SET NULL as the job's own dataset_id: deletable once no active job needs it (app/services/deletion.py)
    dataset_id: Mapped[str | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), index=True)
    source_language: Mapped[str] = mapped_column(String(20))
    target_language: Mapped[str] = mapped_column(String(20))


class TrainedModel(Base):
    """The product of a succeeded job: its best (or averaged) checkpoint, ready to serve.

    Registered under a `name` (PATCH /v1/models/{id}) it is `version` N of that name: the owner's Nth model
    published under it (model_names counts them, so a number is never given twice)."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("owner_id", "name", "version"),)

    id: Mapped[str] = mapped_column(UUIDString, primary_key=True, default=new_id)
    owner_id: Mapped[str] = mapped_column(ForeignKey("owners.id", ondelete="CASCADE"), index=True)
    # None for an imported model (POST /v1/models/import)
    # no foreign key: a model outlives the job that trained it (DELETE /v1/jobs/{id}), and keeps its id
    job_id: Mapped[str | None] = mapped_column(String(36), unique=True, nullable=True)
    objective: Mapped[str] = mapped_column(String(20))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # the full ModelConfig
    tokenizer_fingerprint: Mapped[str] = mapped_column(String(64))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    source: Mapped[str] = mapped_column(String(50))  # e.g. "best@1200" or "average of 3"
    parameters: Mapped[int] = mapped_column(BigInteger)
    storage_key: Mapped[str] = mapped_column(String(500))
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    parent_model_id: Mapped[str | None] = mapped_column(String(36), nullable=True)  # the job's init_model_id
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The registry (app/services/registry.py): a name and its version come and go together; both None: unregistered.
    name: Mapped[str | None] = mapped_column(String(64), nullable=True)
    version: Mapped[int | None] = mapped_column(nullable=True)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    # What it translates from and to, as its owner says (the rows it was trained on carry no language).
    source_language: Mapped[str | None] = mapped_column(String(20), nullable=True)
    target_language: Mapped[str | None] = mapped_column(String(20), nullable=True)
    license: Mapped[str | None] = mapped_column(String(64), nullable=True)  # as its owner says: an SPDX id, "other"
    # The low-confidence threshold calibrated on the job's validation pairs (model/decode/calibration.py); None for
    # an imported model, a denoising one, or too few validation pairs.
    confidence_calibration: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # A model of several language pairs: [[source, target], ...] as its job trained them (kept here: the job may go).
    pairs: Mapped[list[list[str]] | None] = mapped_column(JSON, nullable=True)
    # The beam a request that names none decodes with (as Marian's decoder.yml or Hugging Face's generation_config
    # carry one); None: DEFAULT_BEAM_SIZE.
    beam_size: Mapped[int | None] = mapped_column(nullable=True)

    job: Mapped[Job | None] = relationship(primaryjoin="foreign(TrainedModel.job_id) == Job.id", viewonly=True)
    tag_rows: Mapped[list[ModelTag]] = relationship(
        order_by="ModelTag.position", cascade="all, delete-orphan", passive_deletes=True
    )
    alias_rows: Mapped[list[ModelAlias]] = relationship(
        order_by="ModelAlias.alias", cascade="all, delete-orphan", passive_deletes=True
    )

    @property
    def tags(self) -> list[str]:
        return [row.tag for row in self.tag_rows]

    @property
    def aliases(self) -> list[str]:
        return [row.alias for row in self.alias_rows]

    @property
    def job_deleted(self) -> bool:
        """The job that trained it was deleted (DELETE /v1/jobs/{id}); `job_id` still names it."""
        return _gone(self, Job, self.job_id)

    @property
    def parent_model_deleted(self) -> bool:
        """The model it was fine-tuned from was deleted; `parent_model_id` still names it."""
        return _gone(self, TrainedModel, self.parent_model_id)

    @property
    def cut_from(self) -> dict[str, Any] | None:
        """The parent's layers it kept when its job started from fewer of them (model/train/shrink.py); None when it
        kept them all, has no parent or the parent was deleted."""
        session = object_session(self)
        parent = session.get(TrainedModel, self.parent_model_id) if session and self.parent_model_id else None
        return cut_from(parent.config, self.config) if parent is not None else None


class ModelTag(Base):
    """One tag of a model, as JobTag is of a job: `GET /v1/models?tag=` filters on it in SQL."""

    __tablename__ = "model_tags"

    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)
    position: Mapped[int]


class ArtifactTombstone(Base):
    """A store prefix whose rows were deleted (a job's checkpoints, a model's files and exports, a dataset's file).
    Written in the transaction that deletes the rows; the collector (worker/tasks/collect.py) deletes the files once
    ARTIFACT_GRACE_SECONDS have passed and nothing refers to the prefix, then this row."""

    __tablename__ = "artifact_tombstones"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    owner_id: Mapped[str] = mapped_column(String(36))  # plain: the files go even when the organisation went
    kind: Mapped[str] = mapped_column(String(20))  # "job", "model" or "dataset"
    object_id: Mapped[str] = mapped_column(String(36))  # the deleted row's id
    prefix: Mapped[str] = mapped_column(String(500))
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
