"""The embedded broker without its one-second poll: kombu's SQLAlchemy transport, woken when a message is sent.

kombu's virtual transports have no way to wait for a message: a consumer whose queues are empty sleeps its
`polling_interval` (1 s) and looks again, so on the embedded default (SQLite broker) a worker picked up at most
about one task a second and every translation took a second. Polling faster would burn a core while idle.

Here each consuming process binds a Unix datagram socket in a folder named after the broker's database, and every
publish sends the queue's name to each socket there once the message is committed. A consumer whose queues are
empty waits on its socket instead of sleeping: it looks again as soon as a message for one of its queues is sent,
and otherwise once every `polling_interval`, as before (for a wake-up that was lost, or a message sent by a process
without this transport). Idle, it costs what it did; busy, a message is picked up in well under a millisecond.

A socket left by a process that died is removed by the next sender that finds nobody listening. Where Unix
datagram sockets do not exist (Windows) the transport polls as kombu's does.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import logging
import os
import select
import socket
import tempfile
import threading
from pathlib import Path
from queue import Empty
from time import monotonic
from typing import Any

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import sqlalchemy as kombu_sqla
from sqlalchemy import event

log = logging.getLogger(__name__)
TRANSPORT = f"{__name__}:Transport"
POLLING_INTERVAL = 1.0  # seconds between looks at the queues when no wake-up comes (kombu's default)
_serial = itertools.count()


def wake_folder(database_url: str) -> Path:
    """Where the consumers of the broker at `database_url` listen: a short path under the temporary folder, since
    a socket's path is limited to about 100 bytes."""
    digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"tfs-broker-{digest}"


def notify(folder: Path, queue: str) -> None:
    """Tell every consumer listening in `folder` that `queue` has a message; never raises."""
    try:
        names = os.listdir(folder)
    except OSError:
        return  # nobody has listened yet
    payload = queue.encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for name in names:
            path = folder / name
            try:
                sender.sendto(payload, str(path))
            except BlockingIOError:
                pass  # its buffer is full of wake-ups it has not read yet: it is awake already
            except OSError as exc:
                if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):  # its process is gone
                    path.unlink(missing_ok=True)


class Listener:
    """This process's socket in the wake folder."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = folder / f"{os.getpid()}-{next(_serial)}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.setblocking(False)

    def wait(self, seconds: float, queues: set[str]) -> bool:
        """True as soon as a wake-up for one of `queues` arrives (at once if one came while we looked), False after
        `seconds` without one. Wake-ups for other queues are read and ignored."""
        deadline = monotonic() + seconds
        while (left := deadline - monotonic()) > 0:
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return False
            woken = False
            while True:
                try:
                    woken |= self.sock.recv(256).decode(errors="replace") in queues
                except BlockingIOError:
                    break
            if woken:
                return True
        return False

    def close(self) -> None:
        self.sock.close()
        self.path.unlink(missing_ok=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers and the writer do not block each other
    cursor.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: no fsync per commit, safe against a process crash
    cursor.close()


# kombu's transport classes carry no annotations: ours take them as Any.
_SqlaChannel: Any = kombu_sqla.Channel
_SqlaTransport: Any = kombu_sqla.Transport


class Channel(_SqlaChannel):  # type: ignore[misc]
    def _engine_from_config(self) -> Any:
        """kombu's engine, on SQLite in WAL mode without an fsync per commit: a publish or a pick-up took about
        3 ms, most of it fsync, and a request pays three of them."""
        engine = super()._engine_from_config()
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
        return engine

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        super()._put(queue, payload, **kwargs)
        notify(wake_folder(self.connection.client.hostname), queue)  # committed: a consumer woken now finds it

    def _get(self, queue: str) -> Any:
        """A message of `queue`, or Empty. On SQLite a plain read looks first (in WAL mode it takes no lock); only a
        queue with a message takes the write lock to claim it, so idle queues never hold up a publish."""
        if self.session.bind.dialect.name == "sqlite" and not self._has_visible(queue):
            raise Empty()
        return super()._get(queue)

    def _has_visible(self, queue: str) -> bool:
        obj = self._get_or_create(queue)
        try:
            found = (
                self.session.query(self.message_cls.id)
                .filter(self.message_cls.queue_id == obj.id, self.message_cls.visible != False)  # noqa: E712
                .limit(1)
                .first()
            )
        finally:
            self.session.rollback()  # ends the read
        return found is not None


class Transport(_SqlaTransport):  # type: ignore[misc]
    """kombu's SQLAlchemy transport whose consumers wait for a wake-up instead of sleeping between polls."""

    Channel = Channel
    polling_interval = POLLING_INTERVAL

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self._listener: Listener | None = None
        self._listener_lock = threading.Lock()
        self._listening = hasattr(socket, "AF_UNIX")

    def _listen(self) -> Listener | None:
        with self._listener_lock:
            if self._listener is None and self._listening:
                try:
                    self._listener = Listener(wake_folder(self.client.hostname))
                except OSError as exc:
                    log.warning("broker wake-ups unavailable (%s); polling every %.1f s", exc, self.polling_interval)
                    self._listening = False
            return self._listener

    def _consumed_queues(self) -> set[str]:
        return {queue for channel in self.channels for queue in channel._active_queues}

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        listener = self._listen()  # bound before the first look, so a message sent after it is never missed
        if listener is None:
            super().drain_events(connection, timeout)
            return
        started = monotonic()
        while True:
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                elapsed = monotonic() - started
                if timeout is not None and elapsed >= timeout:
                    raise TimeoutError() from None
                wait = self.polling_interval if timeout is None else min(self.polling_interval, timeout - elapsed)
                listener.wait(wait, self._consumed_queues())

    def close_connection(self, connection: Any) -> None:
        with self._listener_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
        super().close_connection(connection)


def install() -> None:
    """Make this the transport of `sqla+...` broker URLs in this process. kombu picks a transport by the URL's
    prefix, and Celery's CELERY_BROKER_URL variable overrides its configuration, so the alias is the one place
    that decides it whatever the URL came from."""
    for alias in ("sqla", "sqlalchemy"):
        TRANSPORT_ALIASES[alias] = TRANSPORT
