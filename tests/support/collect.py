"""Run the collector once over a stack's database and store, as the reaper does once the grace period has passed."""

from __future__ import annotations

import ast
import subprocess
import sys

from bench.harness.stack import ROOT

_COLLECT = (
    "from datetime import timedelta\n"
    "from app.artifacts import get_store\n"
    "from worker import collector\n"
    "print(collector.collect(get_store(), collector.due_ids(timedelta(0)), timedelta(0)))\n"
)


def collect_now(env: dict[str, str]) -> list[str]:
    """The prefixes the collector deleted, every tombstone taken as due."""
    done = subprocess.run(
        [sys.executable, "-c", _COLLECT], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    return list(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
