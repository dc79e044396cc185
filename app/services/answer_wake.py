"""The API learns that an inference answer is in its file when the worker writes it, instead of looking for it.

Each API process listens on one Unix datagram socket in a folder named after the result folder (as the broker's
consumers do: app/services/broker_wake.py); the worker sends the task's id to every socket there once the answer's
file is in place (app/services/result_files.py). A request thread waits on an event for its task, set by the
process's reader thread, and looks at the file when woken, and every SAFETY_LOOK_SECONDS in case a wake-up was
lost. So an answer is read within a fraction of a millisecond of being written, and a waiting request costs
nothing: before, every waiting request looked for its file every 1 to 5 ms, and with several at once those looks
took the API's threads and its GIL from the requests themselves.
"""

from __future__ import annotations

import hashlib
import logging
import select
import threading
from functools import lru_cache
from pathlib import Path

from app.services import broker_wake

log = logging.getLogger(__name__)
SAFETY_LOOK_SECONDS = 0.05  # a waiting request looks for its answer at least this often, woken or not


def wake_folder(results: str) -> Path:
    """Where the API processes reading answers from the folder `results` listen."""
    digest = hashlib.sha256(results.encode()).hexdigest()[:16]
    return broker_wake.wake_folder(f"answers:{digest}")


def answer_written(results: str, task_id: str) -> None:
    """Tell the API processes that `task_id`'s answer is in the folder `results`; never raises."""
    broker_wake.notify(wake_folder(results), task_id)


class AnswerWaits:
    """This process's socket, its reader thread, and an event per task a request is waiting for."""

    def __init__(self, results: str) -> None:
        self.listener = broker_wake.Listener(wake_folder(results))
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, name="answer-wake", daemon=True).start()

    def expect(self, task_id: str) -> threading.Event:
        """The event set when `task_id`'s answer is written; call before the first look, so none is missed."""
        with self._lock:
            return self._events.setdefault(task_id, threading.Event())

    def done(self, task_id: str) -> None:
        with self._lock:
            self._events.pop(task_id, None)

    def _read(self) -> None:
        sock = self.listener.sock
        while True:
            try:
                select.select([sock], [], [])
                while True:
                    task_id = sock.recv(256).decode(errors="replace")
                    with self._lock:
                        event = self._events.get(task_id)
                    if event is not None:
                        event.set()
            except BlockingIOError:
                continue
            except OSError:  # the socket was closed: the process is ending
                log.warning("answer wake-ups stopped; requests look for their answers every %.2f s",
                            SAFETY_LOOK_SECONDS)  # fmt: skip
                return


@lru_cache
def answer_waits(results: str) -> AnswerWaits | None:
    """This process's waits on the folder `results`, or None where Unix datagram sockets are missing (then requests
    look for their answers every SAFETY_LOOK_SECONDS ... as a fallback: app/services/inference_client.py)."""
    try:
        return AnswerWaits(results)
    except (OSError, AttributeError) as exc:
        log.warning("answer wake-ups unavailable (%s)", exc)
        return None
