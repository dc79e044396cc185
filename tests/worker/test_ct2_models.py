"""The CTranslate2 translators of a worker process: one per model and weights, the least recently used out
beyond the capacity, and a model that could not be converted or loaded left to PyTorch for RETRY_SECONDS."""

from __future__ import annotations

from typing import Any

import pytest

from worker.serving.ct2_models import RETRY_SECONDS, Ct2Models
from worker.serving.errors import RequestError
from worker.serving.model_cache import LoadedModel


def _model(model_id: str, sha: str = "0" * 64) -> LoadedModel:
    return LoadedModel(model_id, "translation", None, None, "span", {"sha256": sha})  # type: ignore[arg-type]


class Builds:
    def __init__(self, fails: tuple[str, ...] = ()) -> None:
        self.made: list[str] = []
        self.fails = set(fails)

    def __call__(self, loaded: LoadedModel) -> Any:
        self.made.append(f"{loaded.model_id}:{loaded.meta['sha256'][:1]}")
        if loaded.model_id in self.fails:
            raise ValueError(f"cannot convert {loaded.model_id}")
        return object()


def test_one_translator_per_model_and_weights_least_recently_used_out():
    builds = Builds()
    models = Ct2Models(2, build=builds)
    a = models.get(_model("a"), required=False)
    assert models.get(_model("a"), required=False) is a
    models.get(_model("a", sha="1" * 64), required=False)  # new weights: a new translator
    models.get(_model("a"), required=False)  # a:0 used last, so a:1 goes first
    models.get(_model("b"), required=False)
    models.get(_model("a"), required=False)
    models.get(_model("a", sha="1" * 64), required=False)
    assert builds.made == ["a:0", "a:1", "b:0", "a:1"]


def test_a_model_that_cannot_be_loaded_waits_retry_seconds_unless_ctranslate2_is_named():
    now = [0.0]
    builds = Builds(fails={"m"})
    models = Ct2Models(4, build=builds, clock=lambda: now[0])
    assert models.get(_model("m"), required=False) is None
    now[0] = RETRY_SECONDS - 1
    assert models.get(_model("m"), required=False) is None
    assert builds.made == ["m:0"]  # not tried again yet
    with pytest.raises(RequestError) as named:
        models.get(_model("m"), required=True)
    assert named.value.status == 503 and "cannot convert m" in named.value.detail and len(builds.made) == 2
    now[0] += RETRY_SECONDS
    builds.fails.clear()  # the disk has room again
    assert models.get(_model("m"), required=False) is not None
    assert len(builds.made) == 3


def test_a_pinned_model_keeps_its_translator_and_held_says_how_long_each_took():
    now = [0.0]
    builds = Builds()

    def build(loaded: LoadedModel) -> Any:
        now[0] += 2.5  # seconds converting and loading
        return builds(loaded)

    models = Ct2Models(1, build=build, clock=lambda: now[0])
    models.pin("warm")
    warm = models.get(_model("warm"), required=False)
    models.get(_model("b"), required=False)  # loaded for its request, not kept: `warm` fills the only slot
    assert models.get(_model("warm"), required=False) is warm
    models.get(_model("b"), required=False)
    assert builds.made == ["warm:0", "b:0", "b:0"]
    assert models.held() == {"warm": (warm, 2500.0)}
