"""Adaptation settings compared on one original model: the service folder a bench/corrections.py run left behind
(its gettext@1 and its 500 corrections) is started again, and each variant (a POST .../adaptations body) adapts
gettext@1 and is scored on the same test sets (new domain, original domain). One JSON line per variant.

    .venv/bin/python bench/adaptation_variants.py /tmp/corrections-XXXX \\
        '{"lr10": {"max_minutes": 2, "training": {"lr_scale": 0.1}}, "s15": {"mix_share": 0.15}}'
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.corrections import score  # noqa: E402
from bench.harness.stack import Processes, free_port, service_env, wait_for  # noqa: E402
from bench.service_session import translate_all  # noqa: E402

CORPUS = ROOT / "var" / "corpus" / "corrections-en-fr"


def read(path: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(r["source"], r["target"]) for r in rows]


def main() -> None:
    folder, variants = Path(sys.argv[1]), json.loads(sys.argv[2])
    new_test, old_test = read(CORPUS / "new_test.jsonl"), read(CORPUS / "test.jsonl")[:800]
    port = free_port()
    env = {
        **service_env(DATA_DIR=str(folder / "var"), PORT=str(port), OMP_NUM_THREADS="2", MAX_TEXTS_PER_REQUEST="64"),
        "RATE_LIMIT_PER_MINUTE": "1000000",
        "TORCH_THREADS": "2",
    }
    (folder / "variants").mkdir(exist_ok=True)
    processes = Processes(folder / "variants")
    processes.start("serve", [sys.executable, "-m", "app.cli", "serve"], env)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, 120, "the service")
        key = (folder / "var" / "local-api-key").read_text().strip()
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=600)
        for name, body in variants.items():
            made = client.post("/v1/models/gettext@1/adaptations", json={"register_as": name, **body})
            made.raise_for_status()
            job_id = made.json()["job_id"]

            def over(job_id: str = job_id) -> dict | None:
                job = client.get(f"/v1/jobs/{job_id}").json()
                return job if job["status"] in ("succeeded", "failed", "cancelled") else None

            done = wait_for(over, 3600, f"job {job_id}", interval=5)
            if done["status"] != "succeeded":
                raise SystemExit(f"{name}: job {job_id} {done['status']}: {done.get('error')}")
            model = client.get(f"/v1/models/{done['model_id']}").json()
            result = {
                "variant": name,
                "body": body,
                "steps": done["progress"]["step"],
                "source": model["source"],
                "new": score(translate_all(client, model["id"], [s for s, _ in new_test]), new_test),
                "old": score(translate_all(client, model["id"], [s for s, _ in old_test]), old_test),
            }
            print(json.dumps(result), flush=True)
    finally:
        processes.stop()


if __name__ == "__main__":
    main()
