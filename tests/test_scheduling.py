"""How `make test` splits the suite between its workers (tests/conftest.py): files one by one, except the files
that share a stack started once per worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import LONGEST_SCOPES, _cpu_seconds, pytest_collection_modifyitems, scope_of


def test_a_file_is_a_scope_of_its_own():
    assert scope_of("tests/model/train/test_loss.py::test_x") == "tests/model/train/test_loss.py"
    assert scope_of("tests/api/test_jobs.py::test_y[param]") == "tests/api/test_jobs.py"
    assert scope_of("tests/test_docs.py::test_z") == "tests/test_docs.py"
    assert scope_of("tests/reliability/test_soak.py::test_s") == "tests/reliability/test_soak.py"


def test_files_sharing_a_stack_stay_together():
    assert scope_of("tests/browser/test_dashboard.py::test_a") == "tests/browser"  # a session stack
    assert scope_of("tests/security/test_logs.py::test_b") == "tests/security"  # a package stack
    assert scope_of("tests/e2e/test_inference_api.py::test_a") == "tests/e2e"  # asks for `served`
    assert scope_of("tests/e2e/test_cli.py::test_b") == "tests/e2e"  # through a fixture of its own that asks for it
    assert scope_of("tests/e2e/test_ddp_job.py::test_c") == "tests/e2e/test_ddp_job.py"
    assert scope_of("tests/e2e/test_walkthrough.py::test_d") == "tests/e2e/test_walkthrough.py"


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_the_longest_scopes_go_first_then_the_folders_in_order():
    nodeids = [
        "tests/api/test_jobs.py::test_a",
        "tests/test_docs.py::test_b",
        "tests/model/train/test_loss.py::test_c",
        "tests/model/train/test_learning.py::test_d",
        "tests/e2e/test_walkthrough.py::test_e",
        "tests/security/test_logs.py::test_f",
        "tests/model/train/test_learning.py::test_g",
    ]
    items = [_Item(n) for n in nodeids]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/security/test_logs.py::test_f",  # LONGEST_SCOPES, in their order
        "tests/model/train/test_learning.py::test_d",
        "tests/model/train/test_learning.py::test_g",
        "tests/e2e/test_walkthrough.py::test_e",  # then FOLDER_ORDER
        "tests/model/train/test_loss.py::test_c",
        "tests/api/test_jobs.py::test_a",
        "tests/test_docs.py::test_b",  # folders not named last
    ]


def test_every_longest_scope_names_a_scope_that_exists():
    root = Path(__file__).parent.parent
    for scope in LONGEST_SCOPES:
        assert (root / scope).exists(), scope
        nodeid = (
            f"{scope}::t"
            if scope.endswith(".py")
            else f"{scope}/test_{'inference_api' if 'e2e' in scope else 'x'}.py::t"
        )
        assert scope_of(nodeid) == scope, scope


def test_the_cpu_report_counts_the_processes_a_test_starts_and_reaps():
    """The run's CPU per scope counts a stack's processes once they are reaped, not only the test's own."""
    before = _cpu_seconds()
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    assert _cpu_seconds() - before >= 0.5
