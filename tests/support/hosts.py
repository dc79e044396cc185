"""Hosts for end-to-end tests: worker processes that share no disk and no network with each other.

Each host has its own DATA_DIR. Where this machine allows it (root, `ip netns`, `unshare`), a host's processes
also run in their own network namespace, which has only a loopback interface, and in their own mount and UTS
namespaces, where every other host's folder is an empty tmpfs and the hostname is the host's name. A bridge in
the test process carries connections to 127.0.0.1:<port> inside a host's namespace to the same port on this
machine's loopback, for the services all hosts share (PostgreSQL, Redis, S3); nothing else is reachable.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import socket
import subprocess
import threading
import uuid
from pathlib import Path

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def namespaces_available() -> bool:
    """True when this process may create network, mount and UTS namespaces (root with iproute2 and unshare)."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
        return False
    name = f"probe-{uuid.uuid4().hex[:8]}"
    try:
        _ip("netns", "add", name)
        _ip("netns", "del", name)
        subprocess.run(["unshare", "--mount", "--uts", "true"], check=True, capture_output=True, timeout=10)
        return True
    except (OSError, subprocess.SubprocessError):
        return False


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def _listen_in(netns: str, port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:port inside the named network namespace (setns applies to this thread)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            return socket.create_server(("127.0.0.1", port))
        finally:
            _setns(own)
    finally:
        os.close(own)
        os.close(target)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class LoopbackBridge:
    """127.0.0.1:<port> inside a network namespace, carried to 127.0.0.1:<port> outside it, for each port."""

    def __init__(self, netns: str, ports: list[int]) -> None:
        self.listeners = [_listen_in(netns, port) for port in ports]
        for listener, port in zip(self.listeners, ports):
            threading.Thread(target=self._accept, args=(listener, port), daemon=True).start()

    def _accept(self, listener: socket.socket, port: int) -> None:
        while True:
            try:
                inner, _ = listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._carry, args=(inner, port), daemon=True).start()

    @staticmethod
    def _carry(inner: socket.socket, port: int) -> None:
        try:
            outer = socket.create_connection(("127.0.0.1", port), timeout=10)
            outer.settimeout(None)
        except OSError:
            inner.close()
            return
        back = threading.Thread(target=_pump, args=(outer, inner), daemon=True)
        back.start()
        _pump(inner, outer)
        back.join()
        inner.close()
        outer.close()

    def close(self) -> None:
        for listener in self.listeners:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            except OSError:
                pass
            listener.close()


class Hosts:
    """Named hosts under one folder; `command` wraps a program so that it runs on a host."""

    def __init__(self, root: Path, shared_ports: list[int], hidden: list[Path] = ()) -> None:
        self.root, self.shared_ports, self.hidden = root, shared_ports, list(hidden)
        self.isolated = namespaces_available()
        self.data_dirs: dict[str, Path] = {}
        self._netns: dict[str, str] = {}
        self._bridges: list[LoopbackBridge] = []

    def add(self, name: str) -> Path:
        """Create host `name` and return its DATA_DIR."""
        data_dir = self.root / name
        data_dir.mkdir(parents=True)
        self.data_dirs[name] = data_dir
        if self.isolated:
            netns = f"t-{name}-{uuid.uuid4().hex[:8]}"
            _ip("netns", "add", netns)
            self._netns[name] = netns
            _ip("-n", netns, "link", "set", "lo", "up")
            self._bridges.append(LoopbackBridge(netns, self.shared_ports))
        return data_dir

    def command(self, name: str, argv: list[str]) -> list[str]:
        """argv run on host `name`: in its namespaces, where the other hosts' folders are empty."""
        if not self.isolated:
            return argv
        others = [d for n, d in self.data_dirs.items() if n != name] + self.hidden
        mounts = "".join(f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(str(d))} && " for d in others)
        script = f'hostname {shlex.quote(name)} && {mounts}exec "$@"'
        return [
            "ip",
            "netns",
            "exec",
            self._netns[name],
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            name,
            *argv,
        ]

    def close(self) -> None:
        for bridge in self._bridges:
            bridge.close()
        for netns in self._netns.values():
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, timeout=10)
