"""The TCP sockets a process listens on, read from /proc (Linux): which addresses a process exposes."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

LISTEN = "0A"  # the state column of /proc/net/tcp for a listening socket


def _address(hex_address: str) -> str:
    """An address of /proc/net/tcp{,6}: the IP as 32-bit words in host (little-endian) order, then the port."""
    ip_hex, port_hex = hex_address.split(":")
    raw = b"".join(bytes.fromhex(ip_hex[i : i + 8])[::-1] for i in range(0, len(ip_hex), 8))
    return f"{ipaddress.ip_address(raw)}:{int(port_hex, 16)}"


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in (Path("/proc") / str(pid) / "fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def listening(pid: int) -> list[str]:
    """ "ip:port" of every TCP socket `pid` listens on (empty if the process is gone)."""
    try:
        inodes = _socket_inodes(pid)
        tables = [(Path("/proc") / str(pid) / "net" / name).read_text() for name in ("tcp", "tcp6")]
    except OSError:
        return []
    found = []
    for table in tables:
        for line in table.splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                found.append(_address(fields[1]))
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.rsplit(":", 1)[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))
