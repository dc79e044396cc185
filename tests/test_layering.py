"""The API never imports torch or worker/: its image stays small and it enqueues by task name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("torch", "worker", "tokenizers", "safetensors")


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_app_sources_never_import_torch_or_worker():
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_roots(path) & set(FORBIDDEN))
        for path in (ROOT / "app").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_api_and_cli_loads_no_torch_or_worker():
    code = (
        "import sys, app.main, app.cli, app.embedded;"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_model_package_does_not_depend_on_the_service():
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_roots(path) & {"app", "worker", "celery", "sqlalchemy", "fastapi"})
        for path in (ROOT / "model").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
