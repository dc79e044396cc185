"""MAX_TEXTS_PER_REQUEST follows the inference workers' devices when unset (app/services/inference_limits.py): 64
texts while they compute on CPUs, 512 once one computes on a GPU. No GPU here: a GPU worker is a heartbeat that says
so, and the worker's answer is injected."""

from __future__ import annotations

from app.services import inference_limits
from tests.api.test_inference_errors import answer_with  # noqa: F401  # the fixture
from worker.device import DeviceInfo
from worker.heartbeat import beat

H100 = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", 80 * 2**30, 79 * 2**30)


def _translate(client, headers, model: str, n: int):  # noqa: ANN202
    return client.post(f"/v1/models/{model}/translate", json={"texts": ["one"] * n}, headers=headers)


def test_the_limit_is_64_texts_with_cpu_workers_and_512_with_a_gpu_one(client, alice, answer_with):  # noqa: F811
    from tests.api.test_init_model import _model_row

    model = _model_row("alice")
    beat("inference@cpu-host", ["inference", "data"], starting=True, info=DeviceInfo("cpu", "x", 1, 1))
    response = _translate(client, alice, model, 65)
    assert response.status_code == 422, response.text
    assert "65 texts exceed the limit of 64" in response.text and "CPU inference workers" in response.text

    answer_with({"translations": [{"text": "eins", "score": -0.1}] * 65, "backend": "pytorch", "compute_ms": 3.0})
    beat("inference@gpu-host", ["inference"], starting=True, info=H100)
    inference_limits.forget()  # as WORKERS_TTL seconds later
    response = _translate(client, alice, model, 65)
    assert response.status_code == 200, response.text
    assert len(response.json()["translations"]) == 65
    response = _translate(client, alice, model, 513)
    assert response.status_code == 422 and "513 texts exceed the limit of 512" in response.text
    assert "GPU inference worker" in response.text


def test_a_gpu_training_worker_does_not_raise_the_limit(client, alice, answer_with):  # noqa: F811
    from tests.api.test_init_model import _model_row

    model = _model_row("alice")
    beat("training@gpu-host", ["training", "training.gpu"], starting=True, info=H100)
    assert _translate(client, alice, model, 65).status_code == 422


def test_the_setting_wins_over_the_devices(client, alice, settings_env, answer_with):  # noqa: F811
    from tests.api.test_init_model import _model_row

    settings_env(MAX_TEXTS_PER_REQUEST="3")
    model = _model_row("alice")
    beat("inference@gpu-host", ["inference"], starting=True, info=H100)
    response = _translate(client, alice, model, 4)
    assert response.status_code == 422 and "4 texts exceed the limit of 3 per request (MAX_TEXTS_PER_REQUEST)" in (
        response.text
    )
