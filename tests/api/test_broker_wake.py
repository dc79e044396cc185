"""The embedded broker's wake-ups (app/services/broker_wake.py): a consumer waiting on an empty queue takes a message
as soon as it is sent, instead of at its next poll. The polling interval is set to a minute here, so a consumer that
was not woken would not see the message before the test gives up."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from app.core.settings import Settings
from app.services import broker_wake
from app.services.queueing import make_celery

NEVER = 60.0  # seconds: a poll the tests never reach


def _celery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202  # celery ships no types
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery would take it over its configuration
    var = tmp_path / "var"
    settings = Settings(data_dir=var, celery_broker_url=f"sqla+sqlite:///{var / 'broker.db'}", celery_result_backend="")
    settings.ensure_dirs()
    monkeypatch.setattr(broker_wake.Transport, "polling_interval", NEVER)
    return make_celery("wake-test", settings)


def test_the_embedded_default_uses_the_waking_transport(tmp_path, monkeypatch):
    celery = _celery(tmp_path, monkeypatch)
    with celery.connection_for_write() as connection:
        assert isinstance(connection.transport, broker_wake.Transport)
        assert connection.transport.polling_interval == NEVER


def test_a_waiting_consumer_takes_a_message_when_it_is_sent(tmp_path, monkeypatch):
    celery = _celery(tmp_path, monkeypatch)
    received: list[object] = []
    listening = threading.Event()

    def consume() -> None:
        with celery.connection_for_read() as connection:
            channel = connection.channel()
            channel.queue_declare(queue="inference", passive=False)
            channel.basic_consume(
                "inference", no_ack=True, consumer_tag="wake-test", callback=lambda m: received.append(m.payload)
            )
            listening.set()
            try:
                connection.drain_events(timeout=20)
            except TimeoutError:
                pass

    consumer = threading.Thread(target=consume)
    consumer.start()
    assert listening.wait(10)
    threading.Event().wait(0.3)  # the consumer has looked at the empty queue and is waiting
    with celery.connection_for_write() as connection:
        with connection.Producer() as producer:
            producer.publish({"n": 1}, routing_key="inference", exchange="", serializer="json")
    consumer.join(timeout=15)  # one drain: it returns once the message is delivered, or after 20 s without it
    assert not consumer.is_alive()
    assert received == [{"n": 1}]


def test_a_listener_wakes_for_its_queues_only(tmp_path):
    folder = tmp_path / "wake"
    listener = broker_wake.Listener(folder)
    try:
        broker_wake.notify(folder, "training")
        assert listener.wait(0.2, {"inference"}) is False  # read and ignored
        broker_wake.notify(folder, "inference")
        assert listener.wait(NEVER, {"inference"}) is True
    finally:
        listener.close()
    assert not listener.path.exists()


def test_a_socket_whose_process_is_gone_is_removed_by_the_next_sender(tmp_path):
    folder = tmp_path / "wake"
    gone, alive = broker_wake.Listener(folder), broker_wake.Listener(folder)
    try:
        gone.sock.close()  # as a process that died leaves it: the file, nobody reading
        broker_wake.notify(folder, "inference")
        assert not gone.path.exists()
        assert alive.wait(NEVER, {"inference"}) is True
    finally:
        alive.close()


def test_sending_with_nobody_listening_is_harmless(tmp_path):
    broker_wake.notify(tmp_path / "never-made", "inference")
    assert not (tmp_path / "never-made").exists()


def _rows(database: Path) -> list[tuple[int, int]]:
    """(queue_id, visible) of every message row in the broker's SQLite file."""
    with sqlite3.connect(database) as connection:
        return list(connection.execute("SELECT queue_id, visible FROM kombu_message ORDER BY id"))


def test_messages_come_oldest_first_are_counted_and_deleted_once_taken(tmp_path, monkeypatch):
    """kombu's transport kept every delivered message as a hidden row forever; ours deletes the row it claims, and
    removes the hidden rows an earlier version left when it first opens the file."""
    celery = _celery(tmp_path, monkeypatch)
    database = tmp_path / "var" / "broker.db"
    with celery.connection_for_write() as connection:
        channel = connection.channel()
        channel.queue_declare(queue="inference", passive=False)
        with connection.Producer() as producer:
            for n in range(3):
                producer.publish({"n": n}, routing_key="inference", exchange="", serializer="json")
        assert channel.queue_declare(queue="inference", passive=True).message_count == 3  # the API's depth check
        assert [channel.basic_get("inference", no_ack=True).payload for _ in range(2)] == [{"n": 0}, {"n": 1}]
        assert len(_rows(database)) == 1 and channel.queue_declare(queue="inference", passive=True).message_count == 1
    with sqlite3.connect(database) as old:  # as kombu's own transport left a delivered message
        old.execute("UPDATE kombu_message SET visible = 0")
    broker_wake.Channel._shed.clear()  # a new process
    with celery.connection_for_write() as connection:
        assert connection.channel().basic_get("inference", no_ack=True) is None
    assert _rows(database) == []
