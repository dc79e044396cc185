"""Prometheus series for operators: HTTP traffic, inference batch sizes, and the state read at scrape time.

Two kinds of series:
- live ones, counted as things happen in this process: requests by method, route template and status,
  their latency (counted by the middleware in app/api/http_metrics.py), and the micro-batch size each
  translation was decoded in (reported back by the worker);
- scrape-time ones, read by `ServiceCollector` when /metrics is asked: jobs by status, tokens/s and
  progress of running jobs, workers alive by queue (heartbeats), and the depth of the Celery queues.

Several API processes (`uvicorn --workers N`): set `PROMETHEUS_MULTIPROC_DIR` to an empty folder before
they start (prometheus_client's multi-process mode); live series then add up over the processes. Without it
each scrape sees only the process that answered it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from datetime import timedelta
from functools import lru_cache

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from app.core.settings import get_settings
from app.core.task_names import QUEUES
from app.db.base import utcnow
from app.db.job_rows import CANCELLED, FAILED, PRUNED, QUEUED, RUNNING, SUCCEEDED
from app.db.session import get_sessionmaker
from app.db.tables import Job, Worker
from app.services.queueing import read_depth  # the same reading the inference queue limit uses

log = logging.getLogger(__name__)
JOB_STATUSES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, PRUNED)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
INFERENCE_BUCKETS = (0.001, 0.0025, *LATENCY_BUCKETS)  # a request on a warm worker takes milliseconds
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# No `*_created` series: Prometheus does not need them and they double the output.
disable_created_metrics()

# registry=None: the scrape registry below decides how they are read (this process, or all of them).
HTTP_REQUESTS = Counter(
    "http_requests",
    "HTTP requests answered, by method, route template and status.",
    ("method", "route", "status"),
    registry=None,
)
HTTP_LATENCY = Histogram(
    "http_request_duration_seconds",
    "Time from a request's arrival to its last byte, by method and route template.",
    ("method", "route"),
    buckets=LATENCY_BUCKETS,
    registry=None,
)
INFERENCE_BATCH = Histogram(
    "inference_batch_size",
    "Sentences in the micro-batch each translate task was decoded in (one observation a task; requests that "
    "arrive while one is in flight go as one task).",
    buckets=BATCH_BUCKETS,
    registry=None,
)


INFERENCE_TIME = Histogram(
    "inference_duration_seconds",
    "Where an inference request's time went, by task: `compute` on the worker, `queue` the rest (the broker both "
    "ways, waiting for a worker, the answer's way back), `total` from sending to the answer.",
    ("task", "part"),
    buckets=INFERENCE_BUCKETS,
    registry=None,
)


def observe_batch_size(size: int) -> None:
    INFERENCE_BATCH.observe(size)


def observe_inference(task: str, total_ms: float, compute_ms: float) -> None:
    """One inference task's time (task: its name's last part, e.g. `translate`)."""
    for part, ms in (("total", total_ms), ("compute", compute_ms), ("queue", max(0.0, total_ms - compute_ms))):
        INFERENCE_TIME.labels(task, part).observe(ms / 1000)


# --- Scrape time: the database and the broker ----------------------------------------------------------------


def _queue_depths() -> dict[str, int]:
    return {queue: read_depth(queue) for queue in QUEUES}


class ServiceCollector(Collector):
    """Series read from the database and the broker each time /metrics is scraped."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "metrics_source_up", "1 when the source could be read for this scrape, else 0.", labels=["source"]
        )
        try:
            yield from self._database()
            up.add_metric(["database"], 1)
        except Exception as exc:  # a scrape reports what it can; the gauge says what it could not
            log.warning("metrics: the database could not be read: %s: %s", type(exc).__name__, exc)
            up.add_metric(["database"], 0)
        try:
            depth = GaugeMetricFamily("celery_queue_length", "Messages waiting in a Celery queue.", labels=["queue"])
            for queue, n in _queue_depths().items():
                depth.add_metric([queue], n)
            yield depth
            up.add_metric(["broker"], 1)
        except Exception as exc:
            log.warning("metrics: the broker's queues could not be read: %s: %s", type(exc).__name__, exc)
            up.add_metric(["broker"], 0)
        yield up

    @staticmethod
    def _database() -> Iterable[Metric]:
        settings = get_settings()
        horizon = utcnow() - timedelta(seconds=3 * settings.worker_heartbeat_seconds)  # as /healthz counts them
        with get_sessionmaker()() as session:
            by_status = dict(session.execute(select(Job.status, func.count()).group_by(Job.status)).all())
            running = session.execute(
                select(Job.id, Job.tokens_per_second, Job.step, Job.total_steps).where(Job.status == RUNNING)
            ).all()
            worker_queues = session.scalars(select(Worker.queues).where(Worker.last_seen_at >= horizon)).all()
        jobs = GaugeMetricFamily("training_jobs", "Training jobs by status.", labels=["status"])
        for name in sorted(set(JOB_STATUSES) | set(by_status)):
            jobs.add_metric([name], by_status.get(name, 0))
        speed = GaugeMetricFamily(
            "training_job_tokens_per_second", "Tokens per second of a running job.", labels=["job_id"]
        )
        progress = GaugeMetricFamily(
            "training_job_progress_ratio", "Steps done over total steps of a running job.", labels=["job_id"]
        )
        for job_id, tokens_per_second, step, total_steps in running:
            if tokens_per_second is not None:
                speed.add_metric([job_id], tokens_per_second)
            progress.add_metric([job_id], step / total_steps if total_steps else 0.0)
        alive = GaugeMetricFamily(
            "celery_workers_alive", "Workers with a recent heartbeat, by queue they consume.", labels=["queue"]
        )
        for queue in sorted(set(QUEUES) | {q for row in worker_queues for q in row.split(",") if q}):
            alive.add_metric([queue], sum(queue in row.split(",") for row in worker_queues))
        return [jobs, speed, progress, alive]


@lru_cache
def scrape_registry() -> CollectorRegistry:
    """What /metrics exposes: the live series (of every process in multi-process mode) and the scrape-time ones."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        for series in (HTTP_REQUESTS, HTTP_LATENCY, INFERENCE_BATCH, INFERENCE_TIME):
            registry.register(series)
    registry.register(ServiceCollector())
    return registry
