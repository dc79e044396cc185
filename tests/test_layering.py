"""The API never imports torch or worker/: its image stays small and it enqueues by task name. Only the routers
and the app factory know FastAPI and Starlette, so the worker never loads them."""

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


HTTP_FRAMEWORKS = {"fastapi", "starlette"}
WORKER_ENTRY_POINTS = (
    "worker.celery_app",
    "worker.tasks.training",
    "worker.tasks.inference",
    "worker.tasks.evaluation",
    "worker.tasks.export",
    "worker.tasks.file_translation",
    "worker.tasks.model_import",
    "worker.tasks.ping",
    "worker.tasks.webhook",
)


def test_only_the_routers_and_the_app_factory_import_fastapi_or_starlette():
    """Services and core raise domain errors (app/services/errors.py); app/api/ and app/main.py turn them into HTTP,
    so what the worker shares with the API never drags the web framework along."""
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_roots(path) & HTTP_FRAMEWORKS)
        for path in (ROOT / "app").rglob("*.py")
        if path != ROOT / "app" / "main.py" and (ROOT / "app" / "api") not in path.parents
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_worker_tasks_loads_no_fastapi_or_starlette():
    """A worker image need not carry the web framework: no task module reaches it, even through app/ modules.
    One interpreter imports them in turn (torch loads once) and names the first whose import brought one in."""
    code = (
        "import sys, importlib\n"
        f"for module in {WORKER_ENTRY_POINTS!r}:\n"
        "    importlib.import_module(module)\n"
        f"    bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(HTTP_FRAMEWORKS)!r})\n"
        "    if bad:\n"
        "        sys.exit(f'importing {module} loaded {bad[:5]}')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_model_package_does_not_depend_on_the_service():
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            _imported_roots(path) & {"app", "worker", "celery", "sqlalchemy", "fastapi"}
        )
        for path in (ROOT / "model").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_benchmarks_import_nothing_from_the_tests():
    """bench/ runs where tests/ is not (a GPU host given bench/ and the product): what both need is bench/harness/."""
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "bench").rglob("*.py") if "tests" in _imported_roots(p)]
    assert offenders == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _first_party_imports(path: Path, modules: set[str]) -> set[str]:
    """Modules of ours that `path` imports anywhere (inside functions too: a lazy import is a dependency that
    was hidden, not removed). `from a.b import c` names a.b.c when that is a module, else a.b."""
    found: set[str] = set()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from its package, up level - 1 more
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if candidate in modules:
                    found.add(candidate)
                elif base in modules:
                    found.add(base)
    return found - {_module_name(path)}


def test_services_and_core_never_import_the_routers_or_the_app():
    """What a request does (app/services/) and what everything shares (app/core/) sit below the HTTP layer: a
    service raises a domain error rather than borrowing an HTTP helper from app/api/."""
    files = list((ROOT / "app").rglob("*.py"))
    modules = {_module_name(p) for p in files}
    offenders = {
        _module_name(path): sorted(
            m for m in _first_party_imports(path, modules) if m in ("app.main", "app.api") or m.startswith("app.api.")
        )
        for path in files
        if _module_name(path).split(".")[:2] in (["app", "services"], ["app", "core"])
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_import_cycles_among_our_modules():
    """Two modules that import each other (even lazily) are one idea split badly, or one that belongs in a third."""
    files = [p for package in ("app", "worker", "model") for p in (ROOT / package).rglob("*.py")]
    modules = {_module_name(p) for p in files}
    graph = {_module_name(p): _first_party_imports(p, modules) for p in files}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    assert cycles == []
    assert {"app.cli", "model.train.loop", "worker.tasks.training"} <= modules  # the walk saw the packages


# model/'s subpackages, lowest first: each imports only from itself and those before it (decode and probes are
# side by side: neither imports the other).
MODEL_LAYERS = (("data",), ("nn",), ("decode", "probes"), ("io",), ("train",))


def test_model_subpackages_stack_without_an_import_back_up():
    rank = {package: i for i, layer in enumerate(MODEL_LAYERS) for package in layer}
    files = sorted((ROOT / "model").rglob("*.py"))
    modules = {_module_name(p) for p in files}
    assert {m.split(".")[1] for m in modules if m.count(".") >= 1} == set(rank)  # every subpackage has its place
    upward = []
    for path in files:
        own = _module_name(path).split(".")
        if len(own) < 3:  # model/__init__.py and the subpackages' own __init__ files
            continue
        for imported in _first_party_imports(path, modules):
            parts = imported.split(".")
            if parts[0] == "model" and len(parts) > 1 and parts[1] != own[1]:
                if rank[parts[1]] >= rank[own[1]]:
                    upward.append(f"{'.'.join(own)} imports {imported}")
    assert upward == []
