"""A job on a dataset that takes long to parse, on a real stack (uvicorn, Celery prefork workers, PostgreSQL, Redis):
its training task looks again every DATASET_WAIT_SECONDS for as long as it takes, past Celery's default of three
retries."""

from __future__ import annotations

from bench.harness.stack import START_TIMEOUT_S, healthy_with_workers, wait_for
from tests.reliability.conftest import open_stack
from tests.support.training import numbers_job


def test_a_job_waits_past_three_retries_for_a_slow_parse_then_trains_and_succeeds(
    tmp_path, fresh_postgres_url, redis_url, data_files
):
    """Fault: the dataset is still processing after the job's task has looked at it five times (four retries, 8 s;
    here no worker reads the data queue until then). Pass: the job waits, queued, naming the dataset; once a data
    worker parses it, the same job trains and succeeds. The reaper does not send the job's message again meanwhile
    (JOB_REDISPATCH_SECONDS is 600): every look is a retry of the first message."""
    with open_stack(tmp_path, fresh_postgres_url, redis_url, JOB_REDISPATCH_SECONDS="600") as stack:
        stack.processes.start_worker(stack.env, "training", "trainer")
        wait_for(healthy_with_workers(stack.url, 1), timeout=START_TIMEOUT_S, what="the trainer")
        api = stack.api("hana")
        dataset = api.upload(data_files["train"], "parallel", wait=False)
        job = api.submit(numbers_job(dataset["id"], max_steps=20, warmup_steps=5, eval_every=20, checkpoint_every=20))

        def looks() -> int:
            return stack.processes.log("trainer").count(f"job {job['id']} waits for dataset(s) {dataset['id']}")

        wait_for(lambda: looks() >= 5, timeout=30, what="the job's task to look at its dataset five times")
        waiting = api.job(job["id"])
        assert waiting["status"] == "queued" and waiting["waiting_for"] == f"dataset {dataset['id']} to be parsed"

        stack.processes.start_worker(stack.env, "data", "parser")  # the real parse, at last
        assert api.processed(dataset["id"], timeout=60)["status"] == "ready"
        done = api.wait(job["id"], ("succeeded", "failed", "cancelled"), timeout=240)
        assert done["status"] == "succeeded", done["error"]
        assert done["attempt"] == 1 and done["progress"]["step"] == 20
