"""tests/security/schemathesis.toml says what it means: each [[operations]] block reaches the operations it names.

Schemathesis ORs the include-... keys of a block, so a block with include-path and include-method (or their
regexes) would loosen the checks of every operation of that method; a route renamed would leave its block matching
nothing. Read by Schemathesis' own loader, against the service's own OpenAPI.
"""

from __future__ import annotations

import tomllib

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig

from app.main import app
from tests.security.test_openapi_fuzz import CONFIG

VARIABLES = ("FUZZ_OPERATOR_KEY", "FUZZ_SPARE_KEY_ID", "FUZZ_JOB_ID", "FUZZ_PING_ID", "FUZZ_METRICS_TOKEN")
BLOCKS = tomllib.loads(CONFIG.read_text())["operations"]


@pytest.fixture(scope="module")
def matched() -> list[list[str]]:
    """For each block, in order, the labels ("METHOD /path") of the operations it applies to."""
    with pytest.MonkeyPatch.context() as env:  # the loader fills ${...}: any value will do here
        for name in VARIABLES:
            env.setenv(name, "x")
        blocks = SchemathesisConfig.from_path(str(CONFIG)).projects.default.operations.operations
    operations = [result.ok() for result in schemathesis.openapi.from_dict(app.openapi()).get_all_operations()]
    return [[op.label for op in operations if block._filter_set.applies_to(op)] for block in blocks]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_block_has_one_include_key_and_reaches_an_operation(index, matched):
    block = BLOCKS[index]
    includes = [key for key in block if key.startswith("include-")]
    assert len(includes) == 1, f"block {index} ({includes}): its include keys are ORed, name one operation instead"
    assert matched[index], f"block {index} ({block[includes[0]]!r}) matches no operation of the OpenAPI"
    if includes == ["include-name"]:
        names = block["include-name"]
        assert sorted(matched[index]) == sorted([names] if isinstance(names, str) else names)


def test_the_loosened_checks_stay_on_the_operations_that_need_them(matched):
    """Where negative-data rejection is off (GET /v1/models, POST /v1/datasets), it is off there alone."""
    off = [
        label
        for block, labels in zip(BLOCKS, matched, strict=True)
        if block.get("checks", {}).get("negative_data_rejection", {}).get("enabled") is False
        for label in labels
    ]
    assert sorted(off) == ["GET /v1/models", "POST /v1/datasets"]
