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
from json import dumps, loads
from pathlib import Path
from queue import Empty
from time import monotonic
from typing import Any, ClassVar

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import sqlalchemy as kombu_sqla
from kombu.utils.encoding import bytes_to_str
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

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
    """kombu's SQLAlchemy channel; on SQLite (the embedded default) each look, claim and publish is one plain SQL
    statement on a queue id looked up once, and a claimed message is deleted.

    kombu's own built ORM queries each time (the queue row looked up by name, then the message), which took most of
    an inference worker's CPU on a 2-core machine: 14 ms a request, against 5 for the rest of the worker. It also
    kept every delivered message as a hidden row forever (visible = 0, never read again: a message that is not
    acknowledged is put back by kombu from memory, not from that row), so a busy `make run` grew its broker file by
    a row a request; this channel deletes the message it claims, and the hidden rows an earlier version left."""

    _shed: ClassVar[set[str]] = set()  # broker URLs whose hidden rows this process removed

    def _engine_from_config(self) -> Any:
        """kombu's engine, on SQLite in WAL mode without an fsync per commit: a publish or a pick-up took about
        3 ms, most of it fsync, and a request pays three of them."""
        engine = super()._engine_from_config()
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
        return engine

    def _open(self) -> Any:
        engine, session = super()._open()
        url = self.connection.client.hostname
        if engine.dialect.name == "sqlite" and url not in self._shed:
            self._shed.add(url)
            with engine.begin() as connection:  # delivered messages an earlier version kept
                connection.exec_driver_sql(f"DELETE FROM {self.message_tablename} WHERE visible = 0")
        return engine, session

    @property
    def _on_sqlite(self) -> bool:
        return bool(self.session.bind.dialect.name == "sqlite")

    def _queue_id(self, queue: str) -> int:
        """The queue's row id, looked up (or created) once a channel: kombu never deletes a queue's row."""
        ids: dict[str, int] = self.__dict__.setdefault("_queue_ids", {})
        for _ in range(2):  # a second look finds the row that another process was creating at the same time
            if queue in ids:
                break
            try:
                queue_id = self._get_or_create(queue).id
            finally:
                self.session.rollback()  # ends the read
            if queue_id is not None:
                ids[queue] = queue_id
        else:
            raise OperationalError(f"the broker's row of queue {queue!r}", None, RuntimeError("not created"))
        return ids[queue]

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        if self._on_sqlite:
            queue_id = self._queue_id(queue)
            try:
                self.session.connection().exec_driver_sql(
                    f"INSERT INTO {self.message_tablename} (queue_id, visible, payload, version) VALUES (?, 1, ?, 1)",
                    (queue_id, dumps(payload)),
                )
                self.session.commit()
            except OperationalError:  # the publish fails (and is retried), as kombu's does
                self.session.rollback()
                raise
        else:
            super()._put(queue, payload, **kwargs)
        notify(wake_folder(self.connection.client.hostname), queue)  # committed: a consumer woken now finds it

    def _get(self, queue: str) -> Any:
        """A message of `queue`, or Empty. On SQLite a plain read looks first (in WAL mode it takes no lock); only a
        queue with a message takes the write lock to claim it (and delete it), so idle queues never hold up a
        publish. Oldest first, as kombu's: ids only grow (AUTOINCREMENT)."""
        if not self._on_sqlite:
            return super()._get(queue)
        queue_id, table = self._queue_id(queue), self.message_tablename
        try:
            waiting = self.session.connection().exec_driver_sql(
                f"SELECT 1 FROM {table} WHERE queue_id = ? AND visible != 0 LIMIT 1", (queue_id,)
            )
            if waiting.first() is None:
                raise Empty()
        finally:
            self.session.rollback()  # ends the read
        connection = self.session.connection()
        connection.exec_driver_sql("BEGIN IMMEDIATE TRANSACTION")
        try:
            row = connection.exec_driver_sql(
                f"SELECT id, payload FROM {table} WHERE queue_id = ? AND visible != 0 ORDER BY id LIMIT 1", (queue_id,)
            ).first()
            if row is None:  # another consumer claimed it between the look and the lock
                raise Empty()
            connection.exec_driver_sql(f"DELETE FROM {table} WHERE id = ?", (row[0],))
        finally:
            self.session.commit()
        return loads(bytes_to_str(row[1]))

    def _size(self, queue: str) -> int:
        """Messages waiting in `queue` (the API's queue-depth check, a request at a time)."""
        if not self._on_sqlite:
            return int(super()._size(queue))
        queue_id = self._queue_id(queue)
        try:
            counted = self.session.connection().exec_driver_sql(
                f"SELECT COUNT(*) FROM {self.message_tablename} WHERE queue_id = ? AND visible != 0", (queue_id,)
            )
            return int(counted.scalar_one())
        finally:
            self.session.rollback()


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
