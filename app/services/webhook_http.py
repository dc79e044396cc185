"""Where a webhook may be sent (the SSRF guard), and the one HTTP request that a delivery attempt makes.

A receiver's URL is an address the service will connect to on its owner's behalf, from inside the operator's
network: without a guard, `http://169.254.169.254/...` or `http://127.0.0.1:6379/` would let any key holder reach
what only the service should. So a URL must be http(s), and every address its host resolves to must be public: not
loopback, private, link-local, multicast, reserved, unspecified or otherwise not globally routable, IPv4 and IPv6
alike (an IPv4-mapped IPv6 address, `::ffff:127.0.0.1`, or a 6to4 one is judged by the IPv4 address inside it).
WEBHOOK_ALLOW_PRIVATE=true lifts this for receivers on the operator's own machines. A public address is reached only
on port 80, 443 or one the operator lists in WEBHOOK_ALLOWED_PORTS: an owner's URL may not aim the service at a
public host's other services (a mail server's port 25, a database's 5432).

The check runs when an endpoint is registered or changed, and again at every attempt, because DNS can change in
between: an attempt resolves the host, checks every address, and connects to a checked address itself (the `Host`
header and TLS's server name stay the URL's), so a second lookup cannot swap in another. Redirects are never
followed (a 3xx is a failed attempt), proxies from the environment are not used, and the whole attempt, from the
lookup to the answer's headers, is bounded by WEBHOOK_TIMEOUT_SECONDS (connecting by at most CONNECT_SECONDS of it).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
DEFAULT_PORTS = {"http": 80, "https": 443}
CONNECT_SECONDS = 5.0
SNIPPET_BYTES = 300  # of a refusing receiver's answer, kept in the delivery's last_error
USER_AGENT = "transformer-service-webhooks/1"
ALLOW_HINT = "webhook receivers must be public (an operator may allow others with WEBHOOK_ALLOW_PRIVATE=true)"
STANDARD_PORTS: frozenset[int] = frozenset(DEFAULT_PORTS.values())  # always allowed
# What makes an address no public receiver's, in the order a refusal names it.
NOT_PUBLIC: tuple[tuple[str, Callable[[IPAddress], bool]], ...] = (
    ("an unspecified address", lambda a: a.is_unspecified),
    ("a loopback address", lambda a: a.is_loopback),
    ("a link-local address", lambda a: a.is_link_local),
    ("a multicast address", lambda a: a.is_multicast),
    ("a private address", lambda a: a.is_private),
    ("a reserved address", lambda a: a.is_reserved),
    ("not a globally routable address", lambda a: not a.is_global),
)


class UnsafeTarget(ValueError):
    """A URL the service will not send to; the message names the URL and why."""


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str  # http | https
    host: str  # as the URL names it (IDNA for a non-ASCII name): the Host header, TLS's server name
    port: int
    path: str  # path and query, "/" at least


@dataclass(frozen=True)
class Answer:
    """How an attempt went: the status (None: no HTTP answer), the time to the answer's headers, and what went wrong
    (None: a 2xx)."""

    status: int | None
    latency_ms: float
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


def parse(url: str) -> Target:
    """The URL's parts; UnsafeTarget naming it when it is no http(s) URL of a host."""
    if not url.isprintable() or any(c.isspace() for c in url):
        raise UnsafeTarget(f"url {url!r} holds spaces or control characters")
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError as exc:  # e.g. an unclosed [ of an IPv6 address
        raise UnsafeTarget(f"url {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise UnsafeTarget(f"url {url!r}: the scheme must be http or https, not {parts.scheme or 'none'!r}")
    if parts.username is not None or parts.password is not None:
        raise UnsafeTarget(f"url {url!r} may not carry a user name or password: receivers check the signature")
    if not hostname:
        raise UnsafeTarget(f"url {url!r} names no host")
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
        host = hostname if hostname.isascii() else hostname.encode("idna").decode("ascii")
    except (ValueError, UnicodeError) as exc:
        raise UnsafeTarget(f"url {url!r}: {exc}") from exc
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(url=url, scheme=scheme, host=host, port=port, path=path)


def problem_with(address: IPAddress) -> str | None:
    """Why no webhook may go to `address` (e.g. "a loopback address"); None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        inner_problem = problem_with(inner) if inner is not None else None
        if inner_problem is not None:
            return f"{inner_problem} ({inner}) in IPv6 form"
        if address.ipv4_mapped is not None:
            return None  # ::ffff:a.b.c.d is a.b.c.d, public
    for problem, applies in NOT_PUBLIC:
        if applies(address):
            return problem
    return None


def port_refusal(target: Target, allowed_ports: Collection[int]) -> str:
    """Why a public receiver may not be reached on the target's port, naming it and the ports allowed."""
    ports = ", ".join(str(port) for port in sorted({*STANDARD_PORTS, *allowed_ports}))
    return (
        f"url {target.url!r}: port {target.port} is not allowed for a receiver on a public address; allowed ports: "
        f"{ports} (an operator may allow others with WEBHOOK_ALLOWED_PORTS)"
    )


def resolve(target: Target, allow_private: bool, allowed_ports: Collection[int] = ()) -> list[str]:
    """Every address the target's host resolves to, in the resolver's order, each checked: UnsafeTarget naming the
    URL, the address and why, when one is not public and allow_private is off, when one is public and the port is
    neither 80, 443 nor one of `allowed_ports`, or when the host does not resolve."""
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise UnsafeTarget(f"url {target.url!r}: host {target.host!r} does not resolve ({reason})") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    port_allowed = target.port in STANDARD_PORTS or target.port in allowed_ports
    for address in addresses:
        problem = problem_with(ipaddress.ip_address(address.split("%", 1)[0]))
        if problem is not None and not allow_private:
            named = f"is {problem}" if address == target.host else f"resolves to {address}, {problem}"
            raise UnsafeTarget(f"url {target.url!r}: host {target.host!r} {named}; {ALLOW_HINT}")
        if problem is None and not port_allowed:
            raise UnsafeTarget(port_refusal(target, allowed_ports))
    return addresses


def check_url(url: str, allow_private: bool, allowed_ports: Collection[int] = ()) -> Target:
    """What registering or changing an endpoint checks: an http(s) URL whose host resolves to public addresses, on
    port 80, 443 or one of `allowed_ports` (WEBHOOK_ALLOWED_PORTS) for a public one."""
    target = parse(url)
    resolve(target, allow_private, allowed_ports)
    return target


class _Connection(http.client.HTTPConnection):
    """HTTP over a socket already connected to a checked address (http.client would resolve the host again)."""

    def __init__(self, target: Target, sock: socket.socket) -> None:
        super().__init__(target.host, target.port)
        self.default_port = DEFAULT_PORTS[target.scheme]  # so Host carries the port only when it is not the usual one
        self.sock = sock


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    allow_private: bool,
    timeout: float,
    allowed_ports: Collection[int] = (),
) -> Answer:
    """POST `body` to `url` once: resolved and checked now (the port too), connected to a checked address, no
    redirect followed, everything within `timeout` seconds. Never raises for what the receiver or the network does."""
    start = time.monotonic()
    deadline = start + timeout

    def elapsed_ms() -> float:
        return round((time.monotonic() - start) * 1000, 1)

    try:
        target = parse(url)
        addresses = resolve(target, allow_private, allowed_ports)
    except UnsafeTarget as exc:
        return Answer(None, elapsed_ms(), f"not sent: {exc}")
    failures = []
    for address in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            sock = socket.create_connection((address, target.port), timeout=min(CONNECT_SECONDS, remaining))
        except TimeoutError:
            failures.append(f"{address} port {target.port}: no connection within {min(CONNECT_SECONDS, remaining):g} s")
            continue
        except OSError as exc:
            failures.append(f"{address} port {target.port}: {exc.strerror or exc}")
            continue
        status, error = _exchange(sock, target, body, headers, deadline, timeout)
        return Answer(status, elapsed_ms(), error)
    return Answer(None, elapsed_ms(), "could not connect: " + ("; ".join(failures) or f"no time left of {timeout:g} s"))


def _exchange(
    sock: socket.socket, target: Target, body: bytes, headers: dict[str, str], deadline: float, timeout: float
) -> tuple[int | None, str | None]:
    """The request and the answer's status line and headers on a connected socket, by the deadline: each socket
    operation waits at most what is left, and a watchdog shuts the socket at the deadline against a receiver that
    answers a byte at a time."""
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the TCP socket under TLS too: the blocked read returns
        except OSError:
            pass

    watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), cut)
    watchdog.daemon = True
    watchdog.start()
    connection = None
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        if target.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=target.host)
        connection = _Connection(target, sock)
        connection.request("POST", target.path, body=body, headers={"User-Agent": USER_AGENT, **headers})
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        response = connection.getresponse()
        status = response.status
        if 200 <= status < 300:
            return status, None
        if 300 <= status < 400:
            where = response.getheader("Location") or "no Location"
            return status, f"HTTP {status}: redirects are not followed (to {where[:300]})"
        snippet = response.read(SNIPPET_BYTES).decode("utf-8", "replace").replace("\x00", "").strip()
        return status, f"HTTP {status}" + (f": {snippet}" if snippet else "")
    except ssl.SSLError as exc:
        return None, f"TLS with {target.host}: {exc.reason or exc}"
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError) or time.monotonic() >= deadline:
            return None, f"no answer within {timeout:g} s"
        return None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    finally:
        watchdog.cancel()
        if connection is not None:
            connection.close()
        else:
            sock.close()
