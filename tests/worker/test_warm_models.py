"""INFERENCE_WARM_MODELS (worker/warm.py): the models an inference worker loads when it starts, resolved as the routes
resolve references but for every organisation, loaded and pinned in the PyTorch models' cache and, where auto means
CTranslate2, in CTranslate2's; a reference that names no model or fails to load is reported, never a crash. On a
migrated SQLite database in process, with the loading injected (tests/e2e/test_warm_models.py loads real ones)."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from app.db.keys import create_key
from app.db.registry_tables import ModelAlias
from app.db.session import session_scope
from app.db.tables import TrainedModel
from tests.support.api_app import migrated_client
from worker import warm
from worker.serving import ct2, translation
from worker.serving.ct2_models import Ct2Models
from worker.serving.errors import ModelUnavailable
from worker.serving.model_cache import LoadedModel, ModelCache
from worker.tasks import inference


def _model(owner_id: str, objective: str = "translation", name: str | None = None, version: int | None = None) -> str:
    with session_scope() as session:
        row = TrainedModel(
            owner_id=owner_id, objective=objective, config={}, tokenizer_fingerprint="", metrics={}, source="import",
            parameters=1, storage_key="models/x", sha256="0" * 64, size_bytes=1, name=name, version=version,
        )  # fmt: skip
        session.add(row)
        session.flush()
        return row.id


@pytest.fixture
def registry(settings_env, monkeypatch) -> dict[str, str]:
    """Alice's en-de versions 1 and 2 (`en-de@live` is 1) and a denoising model; Bob's model, and a name both use."""
    with migrated_client():
        with session_scope() as session:
            alice = create_key(session, "alice")[0].owner_id
            bob = create_key(session, "bob")[0].owner_id
        ids = {
            "v1": _model(alice, name="en-de", version=1),
            "v2": _model(alice, name="en-de", version=2),
            "denoising": _model(alice, "denoising"),
            "bob": _model(bob),
            "shared-alice": _model(alice, name="shared", version=1),
            "shared-bob": _model(bob, name="shared", version=1),
        }
        with session_scope() as session:
            session.add(ModelAlias(owner_id=alice, name="en-de", alias="live", model_id=ids["v1"]))
        monkeypatch.setattr(ct2, "available", lambda: True)
        monkeypatch.setattr(translation, "_off_gpu", {})
        monkeypatch.setattr(translation, "_on_gpu", set())
        yield ids


class Loads:
    """The cache's loading: each model as its row's objective says, `fails` raising what they map to."""

    def __init__(self, objectives: dict[str, str], fails: dict[str, Exception] | None = None) -> None:
        self.objectives, self.fails, self.made = objectives, fails or {}, []

    def __call__(self, model_id: str) -> LoadedModel:
        self.made.append(model_id)
        if model_id in self.fails:
            raise self.fails[model_id]
        objective = self.objectives.get(model_id, "translation")
        return LoadedModel(model_id, objective, None, None, "span", {"sha256": "0" * 64})  # type: ignore[arg-type]


def _ct2(monkeypatch) -> list[str]:
    built: list[str] = []

    def build(loaded: LoadedModel) -> Any:
        built.append(loaded.model_id)
        return SimpleNamespace(off_gpu=None)

    monkeypatch.setattr(translation, "_ct2_models", Ct2Models(4, build=build))
    return built


def test_references_resolve_for_any_organisation_and_the_models_load_pinned(registry, monkeypatch):
    built = _ct2(monkeypatch)
    loads = Loads({registry["denoising"]: "denoising"})
    cache = ModelCache(4, load=loads)
    refs = ["en-de@live", "en-de@2", registry["denoising"], registry["bob"]]
    results = warm.warm_up(refs, cache, warm.State())
    assert [(w.ref, w.model_id, w.error) for w in results] == [
        ("en-de@live", registry["v1"], None),
        ("en-de@2", registry["v2"], None),
        (registry["denoising"], registry["denoising"], None),
        (registry["bob"], registry["bob"], None),
    ]
    assert loads.made == [registry["v1"], registry["v2"], registry["denoising"], registry["bob"]]
    assert built == [registry["v1"], registry["v2"], registry["bob"]]  # CTranslate2 translates; not denoising
    assert all(h.pinned for h in cache.held())
    for other in ("a", "b", "c"):  # requests for other models evict none of them
        cache.get(other)
    assert {registry["v1"], registry["v2"], registry["denoising"], registry["bob"]} <= {
        h.model_id for h in cache.held()
    }


@pytest.mark.parametrize(
    ("ref", "error"),
    [
        ("00000000-0000-4000-8000-000000000000", "no model has the id '00000000-0000-4000-8000-000000000000'"),
        ("En-De@live", "'En-De@live' is neither a model id nor name@version, name@alias or name@latest"),
        ("fr-en@live", "no model is registered under the name 'fr-en'"),
        ("en-de@staging", "'en-de' has no alias 'staging'"),
        ("en-de@7", "'en-de' has no version 7"),
        ("shared@latest", "2 organisations have models named 'shared': name the model by its id"),
    ],
)
def test_a_reference_that_names_no_model_is_reported_and_the_others_still_load(
    registry, monkeypatch, caplog, ref, error
):
    _ct2(monkeypatch)
    loads = Loads({})
    with caplog.at_level(logging.ERROR, logger="worker.warm"):
        results = warm.warm_up([ref, "en-de@latest"], ModelCache(4, load=loads), warm.State())
    assert [(w.ref, w.error) for w in results] == [(ref, error), ("en-de@latest", None)]
    assert loads.made == [registry["v2"]]
    assert f"warm model {ref} not loaded: {error}" in caplog.text


def test_a_model_that_fails_to_load_is_reported_not_raised(registry, monkeypatch):
    """Its files missing from the store (ModelUnavailable, as the cache raises it), or anything else loading
    raises: each reported with its reason; the warm-up goes on, and the worker with it."""
    _ct2(monkeypatch)
    missing = ModelUnavailable(503, f"model {registry['v1']}: its files are missing from the artifact store")
    loads = Loads({}, fails={registry["v1"]: missing, registry["v2"]: RuntimeError("CUDA out of memory")})
    state = warm.State()
    warm.warm_up([registry["v1"], registry["v2"], registry["bob"]], ModelCache(4, load=loads), state)
    assert [w.error for w in state.results] == [missing.detail, "RuntimeError: CUDA out of memory", None]
    assert not state.warming


def test_a_model_that_fails_to_load_leaves_its_slot_to_the_next_reference(registry, monkeypatch):
    _ct2(monkeypatch)
    loads = Loads({}, fails={registry["v1"]: RuntimeError("CUDA out of memory")})
    cache = ModelCache(1, load=loads)
    results = warm.warm_up([registry["v1"], registry["v2"]], cache, warm.State())
    assert [w.error is None for w in results] == [False, True]
    loads.fails.clear()
    cache.get(registry["v1"])  # a request for it later: served, not pinned, so not kept beside v2
    assert [(h.model_id, h.pinned) for h in cache.held()] == [(registry["v2"], True)]


def test_no_more_models_are_pinned_than_the_cache_has_slots(registry, monkeypatch, caplog):
    _ct2(monkeypatch)
    cache = ModelCache(2, load=Loads({}))
    with caplog.at_level(logging.WARNING, logger="worker.warm"):
        results = warm.warm_up([registry["v1"], "en-de@live", registry["v2"], registry["bob"]], cache, warm.State())
    assert [w.error is None for w in results] == [True, True, True, False]  # en-de@live is v1: one slot
    assert results[3].error == (
        "no cache slot left: the 2 slots (INFERENCE_CACHE_MODELS) are taken by the warm models before it"
    )
    assert "INFERENCE_WARM_MODELS names 4 models but INFERENCE_CACHE_MODELS=2" in caplog.text
    assert "the warm models take all 2 cache slots" in caplog.text
    assert [h.model_id for h in cache.held()] == [registry["v1"], registry["v2"]]


def test_the_worker_warms_in_the_background_and_its_record_says_what_is_warm(registry, monkeypatch, settings_env):
    """start() returns at once (the worker is ready, its heartbeat beats); the record says it is warming until the
    models are loaded, then lists them pinned, with their reference and backend, and the references that failed."""
    settings_env(
        INFERENCE_WARM_MODELS=f" en-de@live, nope@live ,{registry['denoising']},en-de@live", WORKER_DEVICE="cpu"
    )
    _ct2(monkeypatch)
    release = threading.Event()
    loads = Loads({registry["denoising"]: "denoising"})

    def slow(model_id: str) -> LoadedModel:
        assert release.wait(30)
        return loads(model_id)

    cache = ModelCache(4, load=slow)
    monkeypatch.setattr(inference, "cache", lambda: cache)
    state = warm.State()
    warm.start(in_process=True, state=state)
    record = warm.report(state)
    assert record["warming"] and record["warm_models"] == []
    release.set()
    for thread in [t for t in threading.enumerate() if t.name == "warm-models"]:
        thread.join(30)
    record = warm.report(state)
    assert not record["warming"] and record["cache_slots"] == 4
    assert (record["backend_auto"], record["backend_note"]) == ("ctranslate2", None)
    models = {m["model_id"]: m for m in record["warm_models"]}
    assert (models[registry["v1"]]["ref"], models[registry["v1"]]["backend"]) == ("en-de@live", "ctranslate2")
    assert (models[registry["denoising"]]["ref"], models[registry["denoising"]]["backend"]) == (
        registry["denoising"], "pytorch"
    )  # fmt: skip
    assert all(m["pinned"] and m["load_ms"] >= 0 for m in models.values())
    assert record["warm_failed"] == [{"ref": "nope@live", "error": "no model is registered under the name 'nope'"}]


def test_a_prefork_worker_loads_nothing_and_says_why(registry, monkeypatch, settings_env):
    settings_env(INFERENCE_WARM_MODELS="en-de@live")
    monkeypatch.setattr(inference, "cache", lambda: pytest.fail("a prefork worker's main process loaded a model"))
    state = warm.State()
    warm.start(in_process=False, state=state)
    record = warm.report(state)
    assert record["backend_auto"] is None and record["backend_note"] == warm.PREFORK_NOTE
    assert record["warm_failed"] == [{"ref": "en-de@live", "error": f"not loaded: {warm.PREFORK_NOTE}"}]
