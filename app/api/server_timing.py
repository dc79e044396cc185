"""The `Server-Timing` header of the inference routes: where a request's time went, as browsers' developer tools
and curl -i show it (https://www.w3.org/TR/server-timing/).

    Server-Timing: queue;dur=2.70;desc="everything but compute", compute;dur=12.40, total;dur=15.10

`compute` is the worker's time on the task (tokenizing, decoding, the micro-batch it waited for), `total` the
route's from the request's arrival to its answer, `queue` what lies between them (HTTP parsing, the key and model
checks, the broker both ways, waiting for a worker, the result's way back).
"""

from __future__ import annotations

from fastapi import Response


def set_server_timing(response: Response, total_ms: float, compute_ms: float) -> None:
    queue_ms = max(0.0, total_ms - compute_ms)
    response.headers["Server-Timing"] = (
        f'queue;dur={queue_ms:.2f};desc="everything but compute", '
        f"compute;dur={compute_ms:.2f}, total;dur={total_ms:.2f}"
    )
