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
