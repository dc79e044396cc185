"""A job's name, tags and note: set at submission and by PATCH /v1/jobs/{id}, filtered on by GET /v1/jobs, and
the CLI's `tag` and `jobs --tag --status` (no worker involved)."""

from __future__ import annotations

import hashlib
import json
from contextlib import nullcontext

import pytest
from sqlalchemy import select

from tests.api.test_jobs import _job


def job_rows(owner: str, count: int, tags: tuple[str, ...] = (), **fields) -> list[str]:
    """Insert `count` jobs of `owner` directly (cheaper than POST /v1/jobs); their ids, oldest first."""
    from app.db.access_tables import Owner
    from app.db.base import utcnow
    from app.db.session import session_scope
    from app.db.tables import Job, JobTag

    with session_scope() as session:
        owner_id = session.scalar(select(Owner.id).where(Owner.name == owner))
        now = utcnow()
        jobs = [
            Job(
                owner_id=owner_id,
                objective=fields.get("objective", "translation"),
                status=fields.get("status", "queued"),
                model_config=fields.get("model_config", {"preset": "tiny", "vocab_size": 500}),
                training_config=fields.get("training_config", {"max_steps": 10}),
                max_attempts=3,
                total_steps=10,
                request_sha256="",
                name=fields.get("name"),
                started_at=fields.get("started_at"),
                created_at=now,
                tag_rows=[JobTag(tag=t, position=i) for i, t in enumerate(tags)],
            )
            for _ in range(count)
        ]
        session.add_all(jobs)
        session.flush()
        return [job.id for job in jobs]


def test_name_tags_and_note_round_trip_through_post_patch_and_get(client, alice, parallel_id):
    body = _job(parallel_id, name="baseline", tags=["ablation", "lr:1e-3", "ablation", "v2/small"], note="first")
    created = client.post("/v1/jobs", json=body, headers=alice)
    assert created.status_code == 201, created.text
    job = created.json()
    assert (job["name"], job["tags"], job["note"]) == ("baseline", ["ablation", "lr:1e-3", "v2/small"], "first")
    read = client.get(f"/v1/jobs/{job['id']}", headers=alice).json()
    assert (read["name"], read["tags"], read["note"]) == ("baseline", ["ablation", "lr:1e-3", "v2/small"], "first")

    # Only the fields given change; tags are replaced, keeping a tag that stays and the new order.
    patched = client.patch(f"/v1/jobs/{job['id']}", json={"tags": ["v2/small", "warm-up_400"]}, headers=alice)
    assert patched.status_code == 200, patched.text
    assert (patched.json()["name"], patched.json()["tags"], patched.json()["note"]) == (
        "baseline",
        ["v2/small", "warm-up_400"],
        "first",
    )
    client.patch(f"/v1/jobs/{job['id']}", json={"name": "renamed", "note": "x" * 10_000}, headers=alice)
    read = client.get(f"/v1/jobs/{job['id']}", headers=alice).json()
    assert (read["name"], read["tags"], len(read["note"])) == ("renamed", ["v2/small", "warm-up_400"], 10_000)
    cleared = client.patch(f"/v1/jobs/{job['id']}", json={"name": None, "tags": None}, headers=alice).json()
    assert (cleared["name"], cleared["tags"], cleared["note"]) == (None, [], "x" * 10_000)
    listed = client.get("/v1/jobs", headers=alice).json()["data"]
    assert [(j["id"], j["tags"]) for j in listed] == [(job["id"], [])]


def test_a_job_without_labels_keeps_its_idempotency_digest(client, alice, parallel_id):
    """Labels and languages left out are not part of the request's digest, so a key used before they existed
    still replays; labels or languages given make it another request."""
    from app.db.session import session_scope
    from app.db.tables import Job
    from app.schemas.jobs import JobCreate
    from app.services.job_submission import request_digest

    body = _job(parallel_id, training={"max_steps": 5})
    job = client.post("/v1/jobs", json=body, headers={**alice, "Idempotency-Key": "k1"}).json()
    with session_scope() as session:
        stored = session.get(Job, job["id"])
        assert stored is not None
        without_labels = JobCreate.model_validate(body, strict=False).model_dump(
            mode="json",
            exclude={
                "name": True, "tags": True, "note": True, "source_language": True, "target_language": True,
                "mix_dataset_id": True, "mix_share": True, "register_as": True, "pairs": True,
                "training": {"best_metric", "reverse", "pair_temperature", "best_pair"},
            },
        )  # fmt: skip
        expected = hashlib.sha256(json.dumps(without_labels, sort_keys=True, separators=(",", ":")).encode())
        assert stored.request_sha256 == expected.hexdigest() == request_digest(JobCreate.model_validate(body))
    labelled = client.post("/v1/jobs", json={**body, "tags": ["x"]}, headers={**alice, "Idempotency-Key": "k1"})
    assert labelled.status_code == 409
    german = client.post("/v1/jobs", json={**body, "target_language": "de"}, headers={**alice, "Idempotency-Key": "k1"})
    assert german.status_code == 409


def test_patch_of_another_owners_job_is_not_found(client, alice, make_key):
    job_id = job_rows("alice", 1, tags=("mine",))[0]
    bob = make_key("bob")
    response = client.patch(f"/v1/jobs/{job_id}", json={"tags": ["stolen"]}, headers=bob)
    assert response.status_code == 404
    assert response.json()["detail"] == f"job {job_id} not found"
    assert client.get(f"/v1/jobs/{job_id}", headers=alice).json()["tags"] == ["mine"]


def refused_by_patch_and_post(client, alice, parallel_id, body, loc, message) -> str:
    """PATCH of a job tagged "kept" and POST of a new job, both with `body`: each a 422 at `loc` whose message holds
    `message`, the job's tags unchanged. The job's id."""
    job_id = job_rows("alice", 1, tags=("kept",))[0]
    for response in (
        client.patch(f"/v1/jobs/{job_id}", json=body, headers=alice),
        client.post("/v1/jobs", json=_job(parallel_id, **body), headers=alice),
    ):
        assert response.status_code == 422, response.text
        detail = response.json()["detail"][0]
        assert detail["loc"] == loc and message in detail["msg"], detail
    assert client.get(f"/v1/jobs/{job_id}", headers=alice).json()["tags"] == ["kept"]
    return job_id


@pytest.mark.parametrize(
    ("body", "loc", "message"),
    [
        ({"tags": ["good", "has space"]}, ["body", "tags", 1], "tag 'has space' must be 1 to 64 characters"),
        ({"tags": [""]}, ["body", "tags", 0], "tag '' must be 1 to 64 characters"),
        ({"tags": ["x" * 65]}, ["body", "tags", 0], "must be 1 to 64 characters"),
        ({"tags": ["é"]}, ["body", "tags", 0], "tag 'é'"),
        ({"tags": [f"t{i}" for i in range(21)]}, ["body", "tags"], "at most 20 items"),
        ({"tags": "one"}, ["body", "tags"], "valid list"),
        ({"name": "n" * 201}, ["body", "name"], "at most 200 characters"),
        ({"note": "n" * 10_001}, ["body", "note"], "at most 10000 characters"),
        ({"status": "succeeded"}, ["body", "status"], "Extra inputs are not permitted"),
    ],
)
def test_invalid_labels_are_422_naming_the_field(client, alice, parallel_id, body, loc, message):
    refused_by_patch_and_post(client, alice, parallel_id, body, loc, message)


def test_list_filters_by_every_tag_given_status_and_objective(client, alice, make_key):
    a = job_rows("alice", 1, tags=("lr", "small"))[0]
    b = job_rows("alice", 1, tags=("lr",), status="succeeded")[0]
    c = job_rows("alice", 1, tags=("small",), objective="denoising", status="succeeded")[0]
    make_key("bob")
    job_rows("bob", 1, tags=("lr", "small"))

    def ids(query: str) -> set[str]:
        page = client.get(f"/v1/jobs?{query}", headers=alice).json()
        assert page["total"] == len(page["data"])
        return {job["id"] for job in page["data"]}

    assert ids("tag=lr") == {a, b}
    assert ids("tag=lr&tag=small") == {a}
    assert ids("tag=small&status=succeeded") == {c}
    assert ids("objective=denoising") == {c}
    assert ids("objective=translation&status=succeeded") == {b}
    assert ids("tag=none") == set()
    assert ids("") == {a, b, c}
    assert client.get("/v1/jobs?objective=poetry", headers=alice).status_code == 422


def test_a_client_pages_past_the_first_hundred_jobs_of_a_tag(client, alice):
    tagged = set(job_rows("alice", 130, tags=("sweep",)))
    job_rows("alice", 7, tags=("other",))
    seen: list[str] = []
    offset = 0
    while True:
        page = client.get(f"/v1/jobs?tag=sweep&limit=50&offset={offset}", headers=alice).json()
        assert (page["total"], page["limit"], page["offset"]) == (130, 50, offset)
        seen += [job["id"] for job in page["data"]]
        if offset + page["limit"] >= page["total"]:
            break
        offset += page["limit"]
    assert offset == 100 and len(seen) == 130 and set(seen) == tagged  # three pages, none repeated or lost
    assert client.get("/v1/jobs?limit=500", headers=alice).json()["total"] == 137


def test_cli_tag_adds_removes_and_sets_the_name_and_note(client, alice, monkeypatch, capsys):
    import app.client.connection as connection
    from app.cli import main

    job_id = job_rows("alice", 1, tags=("a", "b", "c"))[0]
    client.headers.update(alice)
    monkeypatch.setattr(connection, "open_client", lambda args: nullcontext(client))  # requests in process
    main(["tag", job_id, "--add", "d", "--remove", "b", "--add", "a", "--name", "run 1", "--note", "why"])
    assert capsys.readouterr().out.strip() == f"{job_id}  name='run 1' tags=a,c,d"
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert (job["name"], job["tags"], job["note"]) == ("run 1", ["a", "c", "d"], "why")
    main(["tag", job_id, "--note", "only the note"])
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert (job["name"], job["tags"], job["note"]) == ("run 1", ["a", "c", "d"], "only the note")
    with pytest.raises(SystemExit, match="tags.0: Value error, tag 'bad tag'"):
        main(["tag", job_id, "--remove", "a", "--remove", "c", "--remove", "d", "--add", "bad tag"])


def test_cli_jobs_filters_by_tag_and_status(client, alice, monkeypatch, capsys):
    import app.client.connection as connection
    from app.cli import main

    wanted = job_rows("alice", 1, tags=("sweep", "lr"), status="succeeded", name="best")[0]
    others = job_rows("alice", 1, tags=("sweep",), status="succeeded") + job_rows("alice", 1, tags=("sweep", "lr"))
    client.headers.update(alice)
    monkeypatch.setattr(connection, "open_client", lambda args: nullcontext(client))
    main(["jobs", "--tag", "sweep", "--tag", "lr", "--status", "succeeded"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "OBJECTIVE",
        "DATASET",
        "STATUS",
        "STEP",
        "DONE",
        "ETA",
        "TAGS",
        "CREATED",
    ]
    assert len(lines) == 2 and lines[1].split()[:6] == [wanted, "best", "translation", "-", "succeeded", "0/10"], lines
    assert lines[1].index("sweep,lr") == lines[0].index("TAGS"), lines  # the columns are aligned
    main(["jobs", "--tag", "sweep"])
    assert {line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]} == {wanted, *others}


def test_add_and_remove_tags_change_the_tags_the_job_has_and_concurrent_taggers_both_keep_theirs(client, alice):
    from concurrent.futures import ThreadPoolExecutor

    (job,) = job_rows("alice", 1, ("a", "b", "c"))
    body = client.patch(f"/v1/jobs/{job}", headers=alice, json={"add_tags": ["d", "a"], "remove_tags": ["b"]}).json()
    assert body["tags"] == ["a", "c", "d"]  # a kept where it was, d after
    both = client.patch(f"/v1/jobs/{job}", headers=alice, json={"tags": ["x"], "add_tags": ["y"]})
    assert both.status_code == 422 and "not both" in both.text
    too_many = client.patch(f"/v1/jobs/{job}", headers=alice, json={"add_tags": [f"t{i}" for i in range(18)]})
    assert too_many.status_code == 422 and "21 tags" in too_many.text
    # twelve clients each add a tag of their own at once: every one is kept (the API applies each to the tags the
    # job has when it holds the row; a client reading the list and writing it back whole could lose another's)
    with ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(
            lambda i: client.patch(f"/v1/jobs/{job}", headers=alice, json={"add_tags": [f"run-{i}"]}).status_code,
            range(12),
        ))  # fmt: skip
    assert codes == [200] * 12
    tags = client.get(f"/v1/jobs/{job}", headers=alice).json()["tags"]
    assert tags[:3] == ["a", "c", "d"] and sorted(tags[3:]) == sorted(f"run-{i}" for i in range(12))
