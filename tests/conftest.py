"""Shared fixtures: real PostgreSQL and Redis (skipped on a laptop without them, required in CI)."""

from __future__ import annotations

import ast
import functools
import os
import resource
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# One intra-op thread a process, set before torch is first imported: `make test` runs two pytest workers on two cores,
# each beside the stacks its tests start, and a second OpenMP thread a worker only waits at barriers for a core the
# other holds (a 250-step tiny model trained in 7 s alone took 136 s in a run). A test that wants more threads asks.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Triton's kernels (model/nn/fused_add_norm.py) run on the CPU under its interpreter; read when triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from bench.harness import services  # noqa: E402
from tests.support.app_caches import reset_caches  # noqa: E402
from tests.support.s3 import S3Server, start_s3_server  # noqa: E402

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# `make test` runs the suite on pytest-xdist workers (four on two cores: a test waiting on its stack leaves a core to
# the others). Each file goes whole to one worker, in order, except where files share a stack that starts once per
# worker (SHARED_SCOPES): those go together (FolderScheduling). Each worker sends Celery tasks on Redis databases of
# its own (gw0 from CELERY_BROKER_URL's, gw1 REDIS_DBS_PER_WORKER below it, ...): two stacks on one database would
# take each other's tasks.
REDIS_DBS_PER_WORKER = 4  # a worker's stacks use its database and the two below it (services.redis_db_below)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_WORKER_INDEX = int(_WORKER[2:]) if _WORKER.startswith("gw") and _WORKER[2:].isdigit() else 0
if _WORKER_INDEX:
    os.environ["CELERY_BROKER_URL"] = services.shifted_redis_url(
        services.redis_url(), REDIS_DBS_PER_WORKER * _WORKER_INDEX
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist's own scope scheduling with scope_of's scopes (a file, or the files sharing a stack).

    Written here, not `--dist loadgroup` with a mark per folder: xdist 3.8 marks a group by rewriting `item._nodeid`,
    which pytest 9 no longer reads, so every test went to either worker."""
    from xdist.scheduler import LoadScopeScheduling

    class FolderScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    # xdist by default hands out the scopes with the most tests first, whatever their length: the longest scopes,
    # of a few long tests each, went last and ran on alone at the end (the order of pytest_collection_modifyitems
    # below is kept instead).
    config.option.loadscopereorder = False
    return FolderScheduling(config, log)


# Folders whose files share a stack started once per worker (a session or package fixture): each goes whole to one
# worker. tests/e2e's files that ask for its `served` stack (tests/e2e/conftest.py) go together as "tests/e2e"; its
# other files start stacks of their own and go one by one, as do the files of every other folder: whole folders on
# two workers left one finishing alone for minutes (tests/e2e alone took a third of a run).
SHARED_SCOPES = ("browser", "security")


def scope_of(nodeid: str) -> str:
    """The scope a test is scheduled with: its file, or the folder whose files share a stack."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) > 2 and parts[1] in SHARED_SCOPES:
        return "/".join(parts[:2])
    if len(parts) == 3 and parts[1] == "e2e" and parts[2].startswith("test_") and _uses_served(parts[2]):
        return "tests/e2e"
    return path


@functools.cache
def _uses_served(file_name: str) -> bool:
    """Whether a test of tests/e2e/<file_name> asks for the package's `served` stack."""
    tree = ast.parse((Path(__file__).parent / "e2e" / file_name).read_text())
    functions = (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return any(arg.arg == "served" for f in functions for arg in f.args.args)


# The scopes the workers take first, longest first, so that none starts late and runs on alone at the end (seconds
# under `make test` on two cores, 2026-11-30: the run's "seconds per scope" list gives them anew).
LONGEST_SCOPES = (
    "tests/security",  # 501
    "tests/e2e",  # the files sharing the `served` stack
    "tests/browser",  # 361
    "tests/model/train/test_learning.py",  # 331
    "tests/reliability/test_worker_faults.py",  # 302
    "tests/model/train/test_compile.py",  # 295
    "tests/e2e/test_training_jobs.py",  # 201
    "tests/e2e/test_ddp_job.py",  # 190
    "tests/bench/test_gpu_suite.py",  # 170
    "tests/e2e/test_two_hosts.py",  # 171
    "tests/e2e/test_ping.py",  # 119
    "tests/reliability/test_soak.py",  # 100
)
# Then the folders in this order, the many short files last to even out the ends. Folders not named come after.
FOLDER_ORDER = ("e2e", "reliability", "model", "bench", "browser", "security", "api", "worker", "storage")


def _folder(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 else ""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The LONGEST_SCOPES first, then the other tests grouped by folder in FOLDER_ORDER, each scope's and folder's
    own order kept (a stable sort)."""
    first = {scope: i for i, scope in enumerate(LONGEST_SCOPES)}
    rank = {name: len(first) + i for i, name in enumerate(FOLDER_ORDER)}

    def order(item: pytest.Item) -> int:
        scope = scope_of(item.nodeid)
        return first[scope] if scope in first else rank.get(_folder(item.nodeid), len(first) + len(rank))

    items.sort(key=order)


_FOLDER_SECONDS: dict[str, float] = {}
_SCOPE_SECONDS: dict[str, float] = {}
_FOLDER_CPU: dict[str, float] = {}
_SCOPE_CPU: dict[str, float] = {}
_WORKER_ENDS: dict[str, tuple[float, str]] = {}  # worker -> (the end of its latest test, that test's scope)
_STARTED: list[float] = []
SLOWEST_SCOPES = 15  # listed after the folders: LONGEST_SCOPES is ordered by them
CPU_PROPERTY = "cpu_seconds"  # a report's user property: the CPU its phase took (_cpu_seconds)
_CPU_MARK: list[float] = []  # _cpu_seconds() at the end of the latest phase, in this process


def _cpu_seconds() -> float:
    """CPU seconds of this process and of every process it started and reaped (stacks, their workers, their pool
    children): on two cores a run's length is its CPU over two, whatever the wall-clock seconds of each test say. A
    process killed without being waited for, or a stack started for the session, counts when and where it is
    reaped (a session's stack: in the last test of its worker)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_collection_finish(session: pytest.Session) -> None:
    _CPU_MARK[:] = [_cpu_seconds()]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Each phase's report carries the CPU spent since the previous phase ended (CPU_PROPERTY)."""
    outcome = yield
    now = _cpu_seconds()
    spent = now - (_CPU_MARK[0] if _CPU_MARK else now)
    _CPU_MARK[:] = [now]
    report = outcome.get_result()  # a new list: the item's own is shared by its three reports
    report.user_properties = [*report.user_properties, (CPU_PROPERTY, round(spent, 3))]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Seconds and CPU seconds spent per folder and per scope (setup, call and teardown), and when each worker
    ended its latest test, on the controller as on a single process."""
    folder = _folder(report.nodeid) or "(top level)"
    _FOLDER_SECONDS[folder] = _FOLDER_SECONDS.get(folder, 0.0) + report.duration
    scope = scope_of(report.nodeid)
    _SCOPE_SECONDS[scope] = _SCOPE_SECONDS.get(scope, 0.0) + report.duration
    cpu = sum(float(value) for name, value in report.user_properties if name == CPU_PROPERTY)
    _FOLDER_CPU[folder] = _FOLDER_CPU.get(folder, 0.0) + cpu
    _SCOPE_CPU[scope] = _SCOPE_CPU.get(scope, 0.0) + cpu
    start, stop = getattr(report, "start", None), getattr(report, "stop", None)
    if start is not None and stop is not None:
        _STARTED[:] = [min([start, *_STARTED])]
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", "main")
        if stop >= _WORKER_ENDS.get(worker, (0.0, ""))[0]:
            _WORKER_ENDS[worker] = (stop, scope)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _FOLDER_SECONDS and not os.environ.get("PYTEST_XDIST_WORKER"):
        terminalreporter.write_sep("=", "seconds and CPU seconds per folder of tests/")
        for folder, seconds in sorted(_FOLDER_SECONDS.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{seconds:9.1f}  {_FOLDER_CPU.get(folder, 0.0):9.1f}  tests/{folder}")
        terminalreporter.write_line(
            f"{sum(_FOLDER_SECONDS.values()):9.1f}  {sum(_FOLDER_CPU.values()):9.1f}  in all (CPU: the tests' "
            "processes and those they started and reaped)"
        )
        terminalreporter.write_sep(
            "=", f"seconds and CPU seconds of the {SLOWEST_SCOPES} slowest scopes (a file, or files sharing a stack)"
        )
        for scope, seconds in sorted(_SCOPE_SECONDS.items(), key=lambda kv: -kv[1])[:SLOWEST_SCOPES]:
            terminalreporter.write_line(f"{seconds:9.1f}  {_SCOPE_CPU.get(scope, 0.0):9.1f}  {scope}")
        terminalreporter.write_sep("=", f"CPU seconds and seconds of the {SLOWEST_SCOPES} costliest scopes")
        for scope, cpu in sorted(_SCOPE_CPU.items(), key=lambda kv: -kv[1])[:SLOWEST_SCOPES]:
            terminalreporter.write_line(f"{cpu:9.1f}  {_SCOPE_SECONDS.get(scope, 0.0):9.1f}  {scope}")
        if _STARTED and len(_WORKER_ENDS) > 1:  # a worker ending long after the others: a scope to start earlier
            terminalreporter.write_sep(
                "=", "minutes after the first test at which each worker ended, and its last scope"
            )
            for worker, (stop, scope) in sorted(_WORKER_ENDS.items(), key=lambda kv: kv[1][0]):
                terminalreporter.write_line(f"{(stop - _STARTED[0]) / 60:9.1f}  {worker}  {scope}")


def _require(name: str, reachable: bool, url: str) -> None:
    if reachable:
        return
    message = f"{name} is not reachable at {services.redact(url)}"
    if IN_CI:
        pytest.fail(f"{message} (CI requires it)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a PostgreSQL database we may create other databases from."""
    url = services.postgres_url()
    _require("PostgreSQL", services.postgres_reachable(url), url)
    return url


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """A new, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    services.create_database(postgres_url, name)
    try:
        yield services.with_database(postgres_url, name)
    finally:
        services.drop_database(postgres_url, name)


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = services.redis_url()
    _require("Redis", services.redis_reachable(url), url)
    if _WORKER_INDEX:  # CI empties CELERY_BROKER_URL's database before a run; a worker's own is emptied here
        services.redis_db_below(url, 0)
    return url


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    """A real S3-compatible server (moto in server mode) on 127.0.0.1 for the whole session."""
    server = start_s3_server(tmp_path_factory.mktemp("s3") / "moto.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """Point the in-process settings at a fresh embedded data folder; returns a function to override more."""

    def apply(**env: str) -> None:
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "ARTIFACT_ROOT", "ENVIRONMENT", "HOST"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("DATA_DIR", str(tmp_path / "var"))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        reset_caches()

    apply()
    yield apply
    reset_caches()
