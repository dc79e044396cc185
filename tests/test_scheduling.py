"""How `make test` splits the suite between its workers (tests/conftest.py): files one by one, except the files
that share a stack started once per worker."""

from __future__ import annotations

from tests.conftest import scope_of


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
