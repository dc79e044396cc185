"""app/services/model_refs.parse: what a model route's `{model_id}` stands for (pure; resolving is in tests/api)."""

from __future__ import annotations

import pytest

from app.services.model_refs import ModelRef, parse


@pytest.mark.parametrize(
    ("ref", "parsed"),
    [
        ("3f1c2a9e-0000-4000-8000-000000000000", ModelRef(model_id="3f1c2a9e-0000-4000-8000-000000000000")),
        ("en-de@3", ModelRef(name="en-de", version=3)),
        ("opus.en_de@12", ModelRef(name="opus.en_de", version=12)),
        ("en-de@production", ModelRef(name="en-de", alias="production")),
        ("en-de@latest", ModelRef(name="en-de", alias="latest")),
        ("0@a-b_c", ModelRef(name="0", alias="a-b_c")),
    ],
)
def test_ids_versions_and_aliases(ref, parsed):
    assert parse(ref) == parsed


@pytest.mark.parametrize(
    "ref", ["en-de@", "@3", "En@3", "en de@3", "en-de@0", "en-de@-1", "en-de@Prod", "en-de@a@b", "en@1.5", "en@٣"]
)
def test_malformed_references_stand_for_nothing(ref):
    assert parse(ref) is None
