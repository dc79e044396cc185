"""The PyTorch models' cache of an inference worker process: the least recently used model out beyond its capacity,
except pinned ones (INFERENCE_WARM_MODELS), which no other model evicts; and what it reports it holds."""

from __future__ import annotations

from worker.serving.model_cache import LoadedModel, ModelCache


class Loads:
    def __init__(self) -> None:
        self.made: list[str] = []

    def __call__(self, model_id: str) -> LoadedModel:
        self.made.append(model_id)
        return LoadedModel(model_id, "translation", None, None, "span", {"sha256": "0" * 64})  # type: ignore[arg-type]


def test_the_least_recently_used_model_goes_first():
    loads = Loads()
    cache = ModelCache(2, load=loads)
    for model_id in ("a", "b", "a", "c", "a", "b"):
        cache.get(model_id)
    assert loads.made == ["a", "b", "c", "b"]  # c evicted b; b then evicted c, a being used since
    assert [h.model_id for h in cache.held()] == ["a", "b"]


def test_a_pinned_model_stays_whatever_is_loaded_after_it():
    loads = Loads()
    cache = ModelCache(2, load=loads)
    cache.pin("warm")
    cache.get("warm")
    for model_id in ("b", "c", "d", "b"):  # each evicts the other unpinned one, never `warm`
        cache.get(model_id)
    cache.get("warm")
    assert loads.made == ["warm", "b", "c", "d", "b"]
    held = {h.model_id: h for h in cache.held()}
    assert set(held) == {"warm", "b"} and held["warm"].pinned and not held["b"].pinned
    assert held["warm"].load_ms >= 0 and held["warm"].loaded_at.tzinfo is not None


def test_where_pinned_models_fill_every_slot_another_is_loaded_for_its_request_and_not_kept():
    loads = Loads()
    cache = ModelCache(1, load=loads)
    cache.pin("warm")
    cache.get("warm")
    assert cache.get("other").model_id == "other"  # served all the same
    cache.get("other")
    assert loads.made == ["warm", "other", "other"]
    assert [(h.model_id, h.pinned) for h in cache.held()] == [("warm", True)]
