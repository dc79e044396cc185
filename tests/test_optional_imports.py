"""The API and the workers start on a host that lacks the optional integrations, as a GPU host's image does
(bench/gpu_wheels.sh carries no boto3, psycopg, rapidfuzz or translate-toolkit): each is imported where it is used,
so only an s3:// store, a PostgreSQL URL, a translation memory or a TBX glossary needs it. So do the data report's
and the cleaning filters' packages (OpusFilter, py3langid), which the GPU wheels carry: a worker that never
processes a dataset starts without them
too."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Import names a bare GPU host lacks, and what needs them.
ABSENT = {
    "boto3": "the S3 artifact store (ARTIFACT_ROOT=s3://...) and datasets registered from s3:// URIs",
    "botocore": "boto3's",
    "s3transfer": "boto3's",
    "psycopg": "PostgreSQL URLs (SQLAlchemy's dialect imports it)",
    "translate_toolkit": "TBX glossaries (app/services/glossaries.py; its import name is translate)",
    "translate": "translate-toolkit's import name",
    "rapidfuzz": "translation-memory lookups (3 MB more than the 64 MiB a device run carries)",
}
# Blocked as well: integrations a worker needs only to process a dataset.
DATA_ONLY = {
    "opusfilter": "the cleaning filters and the data report's duplicate hash",
    "xxhash": "OpusFilter's (the data report's hash of a source)",
    "py3langid": "the language of each side in the data report and the language filter",
}
# Modules whose purpose is an absent integration itself: loaded only where it is configured.
INTEGRATIONS = {
    "app.artifacts.s3": "the S3 artifact store: app.artifacts.get_store imports it for an s3:// ARTIFACT_ROOT only",
}

START = """
import importlib, importlib.abc, pkgutil, sys

ABSENT, INTEGRATIONS = {absent!r}, {integrations!r}


class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Absent())
for name in ABSENT:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        pass
    else:
        sys.exit(f"{{name}} was imported although it is blocked")

# The API process (uvicorn app.main:app) and the CLI that starts everything (`python -m app.cli serve`).
import app.cli, app.embedded, app.main

# The worker process: the Celery app, the task modules it includes at start, and its start-up signals.
from celery.signals import setup_logging, worker_init, worker_process_init

import worker.celery_app

worker.celery_app.app.loader.import_default_modules()
setup_logging.send(sender=None, loglevel="INFO")
worker_init.send(sender=None)
worker_process_init.send(sender=None)

# Every other module of ours, but the integrations themselves.
failed = []
for package in ("app", "worker", "model"):
    root = importlib.import_module(package)
    for module in pkgutil.walk_packages(root.__path__, package + "."):
        if module.name in INTEGRATIONS:
            continue
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as exc:
            failed.append(f"{{module.name}}: {{exc}}")
if failed:
    sys.exit("\\n".join(failed))
print("started")
"""


def test_the_api_and_the_worker_start_without_the_optional_integrations(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "DATA_DIR": str(tmp_path / "data"),  # the embedded defaults: SQLite, a local store and broker
        "WORKER_DEVICE": "cpu",
        "TORCH_THREADS": "1",
    }
    code = START.format(absent=sorted({**ABSENT, **DATA_ONLY}), integrations=sorted(INTEGRATIONS))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "started" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]


def _gpu_wheels() -> tuple[set[str], set[str], set[str]]:
    """What bench/gpu_wheels.sh says a GPU host has: the image's packages, the worker extras it downloads (with their
    dependencies or without), and the
    prefixes of the API's dependencies it skips."""
    script = (ROOT / "bench" / "gpu_wheels.sh").read_text()
    image = re.search(r"IMAGE_HAS='([^']*)'", script)
    keep = re.search(r"^keep = \(([^)]*)\)", script, re.M)
    no_deps = re.search(r"^no_deps = \(([^)]*)\)", script, re.M)
    skip = re.search(r"^skip = \(([^)]*)\)", script, re.M)
    assert image and keep and no_deps and skip, "bench/gpu_wheels.sh no longer lists IMAGE_HAS, keep, no_deps, skip"

    def names(listed: str) -> set[str]:
        return set(re.findall(r"[\w.-]+", listed.replace('"', " ")))

    return names(image.group(1)), names(keep.group(1)) | names(no_deps.group(1)), names(skip.group(1))


def _name(requirement: str) -> str:
    return re.split(r"[\[=<>~!; ]", requirement, maxsplit=1)[0].lower().replace("-", "_")


def test_the_blocked_modules_are_what_the_gpu_image_lacks():
    image, keep, skip = _gpu_wheels()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    skipped = {_name(r) for r in project["dependencies"] if r.startswith(tuple(skip))}
    not_carried = {_name(r) for r in project["optional-dependencies"]["worker"]} - keep - image
    assert skipped | not_carried <= set(ABSENT), "a package the GPU image lacks is not blocked here"
    assert set(ABSENT) & (image | keep) == set(), "a package the GPU image has is blocked here"
