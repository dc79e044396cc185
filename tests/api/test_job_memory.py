"""GET /v1/jobs/{id}/memory: the report the worker stored before the job's first step; only the caller's jobs."""

from __future__ import annotations

from tests.api.test_job_labels import job_rows

ACTIVATIONS = {"attention_scores": 0, "attention_softmax": 0, "ffn_hidden": 557056, "logits": 124800, "other": 1597696}
REPORT = {  # as model/train/memory_profile.memory_report returns it
    "measured": {
        "device": "cpu",
        "precision": "fp32",
        "tokens_per_batch": 512,
        "batch": {"sentences": 8, "source_length": 21, "target_length": 13, "padded_tokens": 168, "target_tokens": 104},
        "peak_bytes": 6161924,
        "by_kind": {
            "weights": 1010688,
            "gradients": 1010688,
            "adam_moments": 2021376,
            "autocast_weights": 0,
            "activations": ACTIVATIONS,
            "temporary": 0,
        },
        "seconds": 0.5,
    },
    "estimated": {  # at the job's max_tokens_per_batch, as POST /v1/estimate gives it
        "weights_bytes": 1010688,
        "gradients_bytes": 1010688,
        "adam_bytes": 2021376,
        "activations_bytes": 11714560,
        "training_total_bytes": 15757312,
        "inference_bytes": 3722240,
    },
    "estimated_for_batch": {  # at the batch's 168 padded tokens
        "weights_bytes": 1010688,
        "gradients_bytes": 1010688,
        "adam_bytes": 2021376,
        "activations_bytes": 3843840,
        "training_total_bytes": 7886592,
        "inference_bytes": 1900416,
    },
    "differences": ["activations measured 2.17 MiB, 0.59x the estimate (3.67 MiB)"],
}


def _store(job_id: str, report: dict) -> None:
    """The report as the worker stores it (worker/training/step_memory.py)."""
    from app.db import memory_rows
    from app.db.session import session_scope

    with session_scope() as session:
        memory_rows.record(session, job_id, report)


def test_a_measured_job_has_its_report_beside_the_estimate(client, alice):
    job = job_rows("alice", 1)[0]
    _store(job, REPORT)
    body = client.get(f"/v1/jobs/{job}/memory", headers=alice).json()
    assert body == {"job_id": job, **REPORT, "error": None}


def test_a_job_not_measured_yet_is_200_with_nothing_measured(client, alice):
    job = job_rows("alice", 1)[0]
    response = client.get(f"/v1/jobs/{job}/memory", headers=alice)
    assert response.status_code == 200
    assert response.json() == {"job_id": job, "measured": None, "estimated": None, "estimated_for_batch": None,
                               "differences": [], "error": None}  # fmt: skip


def test_a_report_stored_with_only_the_batch_estimate_has_no_estimate_for_the_job_settings(client, alice):
    """Reports stored before the settings' estimate was kept hold one `estimated`, for the measured batch."""
    job = job_rows("alice", 1)[0]
    old = {k: v for k, v in REPORT.items() if k != "estimated_for_batch"} | {"estimated": REPORT["estimated_for_batch"]}
    _store(job, old)
    body = client.get(f"/v1/jobs/{job}/memory", headers=alice).json()
    assert body["estimated"] is None and body["estimated_for_batch"] == REPORT["estimated_for_batch"]


def test_a_failed_measurement_says_why(client, alice):
    job = job_rows("alice", 1)[0]
    _store(job, {"error": "OutOfMemoryError: CUDA out of memory"})
    _store(job, {"error": "RuntimeError: profiler"})  # another attempt: the newest report is kept
    body = client.get(f"/v1/jobs/{job}/memory", headers=alice).json()
    assert body["measured"] is None and body["error"] == "RuntimeError: profiler"


def test_another_owners_job_memory_is_404(client, alice, make_key):
    job = job_rows("alice", 1)[0]
    _store(job, REPORT)
    response = client.get(f"/v1/jobs/{job}/memory", headers=make_key("bob"))
    assert response.status_code == 404 and job in response.json()["detail"]
    assert client.get("/v1/jobs/no-such-job/memory", headers=alice).status_code == 404


def test_the_worker_measures_a_job_until_it_has_a_report(client, alice):
    """worker/training/step_memory.py: the callback stores what the trainer reports; once a report is stored a later
    attempt gets no callback (nothing measured again), unless the stored one is an error."""
    from worker.training.step_memory import memory_callback

    job = job_rows("alice", 1)[0]
    on_memory = memory_callback(job)
    assert on_memory is not None
    on_memory({"error": "RuntimeError: profiler"})
    retry = memory_callback(job)
    assert retry is not None
    retry(REPORT)
    assert memory_callback(job) is None
    assert client.get(f"/v1/jobs/{job}/memory", headers=alice).json()["measured"] == REPORT["measured"]
