"""POST /v1/estimate: parameter counts by component and a memory estimate, before a job is submitted."""

from __future__ import annotations


def test_estimate_tiny_model_counts_every_component(client, alice):
    response = client.post(
        "/v1/estimate", json={"model": {"preset": "tiny", "vocab_size": 500}, "tokens_per_batch": 2048}, headers=alice
    )
    assert response.status_code == 200, response.text
    body = response.json()
    d, d_ff, V = 64, 256, 500
    attention = 4 * (d * d + d)
    assert body["config"]["d_model"] == d and body["config"]["n_heads"] == 4
    assert body["by_component"]["embeddings"] == V * d  # shared source/target/output matrix (Sec. 3.4)
    assert body["by_component"]["encoder.layers.0.self_attn"] == attention
    assert body["by_component"]["decoder.layers.1.encoder_attn"] == attention
    assert body["by_component"]["encoder.layers.1.ffn"] == d * d_ff + d_ff + d_ff * d + d
    assert body["total_parameters"] == sum(body["by_component"].values())
    symbols = {p["symbol"] for p in body["parameters"] if p["component"] == "decoder.layers.0.self_attn"}
    assert {"W_Q", "W_K", "W_V", "W_O"} <= symbols
    memory = body["memory"]
    assert memory["weights_bytes"] == 4 * body["total_parameters"]
    assert memory["training_total_bytes"] == 4 * memory["weights_bytes"] + memory["activations_bytes"]
    assert body["tokens_per_batch"] == 2048 and body["fits_worker_memory"] is True


def test_estimate_applies_overrides_and_flags_a_config_over_the_worker_limit(client, alice, settings_env):
    settings_env(WORKER_MEMORY_LIMIT_GB="1")
    small = client.post(
        "/v1/estimate", json={"model": {"preset": "tiny", "vocab_size": 500, "n_encoder_layers": 1}}, headers=alice
    ).json()
    assert "encoder.layers.1.self_attn" not in small["by_component"]
    big = client.post(
        "/v1/estimate", json={"model": {"preset": "big", "vocab_size": 37000}, "tokens_per_batch": 25000}, headers=alice
    ).json()
    assert big["total_parameters"] > 200_000_000 and big["fits_worker_memory"] is False
    assert big["worker_memory_limit_bytes"] == 1024**3


def test_estimate_invalid_config_is_422_naming_the_problem(client, alice):
    response = client.post(
        "/v1/estimate", json={"model": {"preset": "tiny", "vocab_size": 500, "n_heads": 3}}, headers=alice
    )
    assert response.status_code == 422
    assert response.json()["detail"] == [
        {"loc": ["body", "model"], "type": "value_error", "msg": "d_model=64 is not divisible by n_heads=3"}
    ]


def test_estimate_refuses_unknown_fields_and_out_of_range_values(client, alice):
    unknown = client.post("/v1/estimate", json={"model": {"preset": "tiny", "layers": 2}}, headers=alice)
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["body", "model", "layers"]
    zero = client.post("/v1/estimate", json={"model": {"preset": "tiny"}, "tokens_per_batch": 0}, headers=alice)
    assert zero.status_code == 422 and zero.json()["detail"][0]["loc"] == ["body", "tokens_per_batch"]


def test_estimate_needs_a_key(client):
    response = client.post("/v1/estimate", json={"model": {"preset": "tiny"}})
    assert response.status_code == 401
