"""GET /v1/workers: live workers with the device each computes on, as their heartbeats report it."""

from __future__ import annotations

from worker.device import DeviceInfo
from worker.heartbeat import beat

H100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", 81_559 * 2**20, 80_000 * 2**20)


def test_workers_show_their_device_kind_name_and_memory(client, make_key):
    beat("training-gpu@host-a", ["training", "training.gpu"], starting=True, info=H100)
    beat(
        "inference@host-b", ["inference"], starting=True, info=DeviceInfo("cpu", "AMD EPYC (2 cores)", 24 * 2**30, None)
    )
    response = client.get("/v1/workers", headers=make_key("alice"))
    assert response.status_code == 200, response.text
    workers = {w["hostname"]: w for w in response.json()["workers"]}
    gpu = workers["training-gpu@host-a"]
    assert (gpu["device_kind"], gpu["device_name"]) == ("cuda", "NVIDIA H100 80GB HBM3")
    assert (gpu["device_memory_total"], gpu["device_memory_free"]) == (H100.memory_total, H100.memory_free)
    assert gpu["queues"] == ["training", "training.gpu"]
    cpu = workers["inference@host-b"]
    assert cpu["device_kind"] == "cpu" and cpu["device_memory_free"] is None
    assert client.get("/healthz").json()["workers"][1]["device_name"] == "NVIDIA H100 80GB HBM3"


def test_a_later_heartbeat_updates_free_memory_and_one_without_info_keeps_it(client, make_key):
    beat("w@h", ["training"], starting=True, info=H100)
    beat("w@h", ["training"], info=DeviceInfo("cuda", H100.name, H100.memory_total, 10 * 2**30))
    beat("w@h", ["training"])
    (worker,) = client.get("/v1/workers", headers=make_key("alice")).json()["workers"]
    assert worker["device_memory_free"] == 10 * 2**30


def test_workers_need_an_api_key(client):
    assert client.get("/v1/workers").status_code == 401


SERVING = {
    "backend_auto": "pytorch",
    "backend_note": "CTranslate2 cannot translate on cuda:0 (CTranslate2 sees 0 CUDA device(s), not cuda:0); PyTorch "
    "translates on cuda:0",
    "cache_slots": 4,
    "warming": False,
    "warm_models": [
        {
            "model_id": "m-1",
            "pinned": True,
            "ref": "en-de@live",
            "backend": "pytorch",
            "loaded_at": "2026-11-28T10:00:00+00:00",
            "load_ms": 12345.6,
        }
    ],
    "warm_failed": [{"ref": "nope@live", "error": "no model is registered under the name 'nope'"}],
}


def test_an_inference_workers_record_says_what_it_serves_with_a_key_only(client, make_key):
    """What its heartbeat wrote (worker/warm.py) is in GET /v1/workers; /healthz, which needs no key, leaves it out;
    a record the API cannot read (written by a worker of another version) is left out rather than a 500."""
    from tests.api.test_init_model import _model_row

    alice = make_key("alice")
    alices = _model_row("alice")
    serving = {**SERVING, "warm_models": [{**SERVING["warm_models"][0], "model_id": alices}]}
    beat("inference@gpu-host", ["inference"], starting=True, info=H100, serving=serving)
    beat("training@h", ["training"], starting=True)
    workers = {w["hostname"]: w for w in client.get("/v1/workers", headers=alice).json()["workers"]}
    shown = workers["inference@gpu-host"]["serving"]
    assert shown["warm_models"][0].pop("loaded_at").startswith("2026-11-28T10:00:00")
    assert shown == {
        **serving,
        "warm_models": [{k: v for k, v in serving["warm_models"][0].items() if k != "loaded_at"}],
        "other_models": 0,
    }
    assert workers["training@h"]["serving"] is None
    assert all(w["serving"] is None for w in client.get("/healthz").json()["workers"])
    beat("inference@gpu-host", ["inference"])  # a beat without a record keeps the last one
    (kept,) = [w for w in client.get("/v1/workers", headers=make_key("alice")).json()["workers"] if w["serving"]]
    assert kept["serving"]["warm_models"][0]["model_id"] == alices
    beat("inference@gpu-host", ["inference"], serving={"warm_models": "not a list"})
    workers = {w["hostname"]: w for w in client.get("/v1/workers", headers=make_key("alice")).json()["workers"]}
    assert workers["inference@gpu-host"]["serving"] is None


def test_another_organisation_sees_how_many_warm_models_a_worker_holds_not_which(client, make_key):
    """A worker serves every organisation: bob sees alice's warm model only as a count; a key without the admin scope
    does not see the references the worker could not load (an operator's settings)."""
    from app.db.keys import create_key
    from app.db.session import session_scope
    from tests.api.test_init_model import _model_row

    make_key("alice")
    record = {**SERVING, "warm_models": [{**SERVING["warm_models"][0], "model_id": _model_row("alice")}]}
    beat("inference@gpu-host", ["inference"], starting=True, info=H100, serving=record)
    (shown,) = [w["serving"] for w in client.get("/v1/workers", headers=make_key("bob")).json()["workers"]]
    assert (shown["warm_models"], shown["other_models"]) == ([], 1)
    assert shown["warm_failed"] == SERVING["warm_failed"]  # bob's key has every scope of his organisation's admin
    with session_scope() as session:
        _row, clear = create_key(session, "viewer-key", "bob", member_name="vera", role="viewer")
    (shown,) = [
        w["serving"] for w in client.get("/v1/workers", headers={"Authorization": f"Bearer {clear}"}).json()["workers"]
    ]
    assert (shown["warm_models"], shown["other_models"], shown["warm_failed"]) == ([], 1, [])
