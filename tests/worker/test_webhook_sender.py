"""The process's webhook sender thread (app/services/webhooks.py): drain() waits until it has sent what it was given,
so that tests switching the environment never have a send read the settings of the one being left."""

from __future__ import annotations

import threading
import time

from app.services import webhooks


class SlowSender:
    def __init__(self) -> None:
        self.sent: list[str] = []
        self.release = threading.Event()

    def send_task(self, name, args, **options) -> None:
        self.release.wait(5)
        self.sent.append(args[0])


def test_drain_waits_for_the_message_being_sent(monkeypatch):
    sender = SlowSender()
    monkeypatch.setattr(webhooks, "get_sender", lambda: sender)
    webhooks.send(["d-1", "d-2"])
    assert webhooks.drain(timeout=0.1) is False  # the first is held in send_task
    threading.Timer(0.2, sender.release.set).start()
    started = time.monotonic()
    assert webhooks.drain(timeout=5) is True
    assert sender.sent == ["d-1", "d-2"] and time.monotonic() - started >= 0.15


def test_a_message_that_fails_to_send_is_not_waited_for(monkeypatch):
    def broken():
        raise ConnectionError("the broker is away")

    monkeypatch.setattr(webhooks, "get_sender", broken)
    webhooks.send(["d-3"])
    assert webhooks.drain(timeout=2) is True
