"""How `make test` splits the suite between its two workers (tests/conftest.py): whole folders, tests/e2e as two."""

from __future__ import annotations

from tests.conftest import OWN_STACKS, scope_of


def test_a_folder_is_one_scope_with_its_subfolders():
    assert scope_of("tests/model/train/test_loss.py::test_x") == "tests/model"
    assert scope_of("tests/api/test_jobs.py::test_y[param]") == "tests/api"
    assert scope_of("tests/test_docs.py::test_z") == "tests"


def test_e2e_files_sharing_the_served_stack_stay_together_and_the_others_go_apart():
    assert scope_of("tests/e2e/test_inference_api.py::test_a") == "tests/e2e"  # asks for `served`
    assert scope_of("tests/e2e/test_cli.py::test_b") == "tests/e2e"  # through a fixture of its own that asks for it
    assert scope_of("tests/e2e/test_ddp_job.py::test_c") == OWN_STACKS
    assert scope_of("tests/e2e/test_walkthrough.py::test_d") == OWN_STACKS
