"""The webhooks' SSRF guard (app/services/webhook_http.py): only http(s) URLs whose host resolves to public addresses
are accepted, IPv4 and IPv6 alike, IPv4 inside IPv6 judged as itself; names are resolved for real (`localhost`); a
public address only on port 80, 443 or one of WEBHOOK_ALLOWED_PORTS."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

import pytest

from app.services.webhook_http import UnsafeTarget, check_url, parse, post, problem_with


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.10", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("169.254.169.254", "a link-local address"),  # the cloud metadata service
        ("224.0.0.1", "a multicast address"),
        ("0.0.0.0", "an unspecified address"),
        ("240.0.0.1", "a private address"),  # reserved 240/4: Python also lists it as private
        ("255.255.255.255", "a private address"),
        ("100.64.0.1", "not a globally routable address"),  # carrier-grade NAT
        ("::1", "a loopback address"),
        ("::", "an unspecified address"),
        ("fe80::1", "a link-local address"),
        ("ff02::1", "a multicast address"),
        ("fc00::1", "a private address"),
        ("::ffff:127.0.0.1", "a loopback address (127.0.0.1) in IPv6 form"),
        ("::ffff:10.0.0.1", "a private address (10.0.0.1) in IPv6 form"),
        ("::ffff:169.254.169.254", "a link-local address (169.254.169.254) in IPv6 form"),
        ("2002:7f00:1::", "a loopback address (127.0.0.1) in IPv6 form"),  # 6to4 of 127.0.0.1
        ("64:ff9b::7f00:1", "a reserved address"),  # NAT64 of 127.0.0.1
    ],
)
def test_non_public_addresses_are_named_with_why(address, problem):
    assert problem_with(ipaddress.ip_address(address)) == problem


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "::ffff:93.184.215.14"])
def test_public_addresses_pass(address):
    assert problem_with(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://93.184.215.14/hook", "the scheme must be http or https, not 'ftp'"),
        ("file:///etc/passwd", "the scheme must be http or https, not 'file'"),
        ("93.184.215.14/hook", "the scheme must be http or https, not 'none'"),
        ("http:///hook", "names no host"),
        ("https://user:pw@93.184.215.14/hook", "may not carry a user name or password"),
        ("https://93.184.215.14:99999/hook", "Port out of range"),
        ("https://93.184.215.14/a hook", "holds spaces or control characters"),
        ("https://93.184.215.14/\nhook", "holds spaces or control characters"),
    ],
)
def test_urls_that_are_no_http_url_of_a_host_are_refused_naming_them(url, says):
    with pytest.raises(UnsafeTarget) as refused:
        check_url(url, allow_private=True)
    assert says in str(refused.value) and repr(url) in str(refused.value)


def test_a_public_address_is_accepted_and_its_parts_kept():
    target = check_url("https://93.184.215.14:8443/hooks/in?x=1#frag", allow_private=False, allowed_ports=(8443,))
    assert (target.scheme, target.host, target.port, target.path) == ("https", "93.184.215.14", 8443, "/hooks/in?x=1")
    assert parse("HTTP://[2606:4700::1111]/").port == 80
    assert check_url("http://93.184.215.14:80/", allow_private=False).port == 80
    assert check_url("https://[2606:4700::1111]/", allow_private=False).port == 443


@pytest.mark.parametrize(
    ("url", "allowed", "says"),
    [
        ("http://93.184.215.14:25/hook", (), "port 25 is not allowed for a receiver on a public address"),
        ("http://93.184.215.14:25/hook", (), "allowed ports: 80, 443 (an operator"),
        ("https://93.184.215.14:6379/", (), "port 6379 is not allowed"),
        ("https://[2606:4700::1111]:8443/hook", (), "port 8443 is not allowed"),
        ("http://93.184.215.14:443/hook", (8443,), None),  # 443 with http: a standard port is a standard port
        ("https://93.184.215.14:5432/hook", (8443, 9000), "allowed ports: 80, 443, 8443, 9000"),
    ],
)
def test_a_public_receiver_is_reached_only_on_80_443_or_an_allowed_port(url, allowed, says):
    """Fault: an owner's URL aims the service at another service of a public host (SMTP on 25, Redis on 6379). Pass:
    refused naming the URL, the port and the ports allowed, and how an operator allows another."""
    if says is None:
        check_url(url, allow_private=False, allowed_ports=allowed)
        return
    with pytest.raises(UnsafeTarget) as refused:
        check_url(url, allow_private=False, allowed_ports=allowed)
    message = str(refused.value)
    assert repr(url) in message and says in message and "WEBHOOK_ALLOWED_PORTS" in message


def test_a_receiver_on_an_allowed_private_address_may_use_any_port():
    """The port rule is for public addresses: WEBHOOK_ALLOW_PRIVATE is the operator's own machines, any port."""
    assert check_url("http://127.0.0.1:8080/hook", allow_private=True).port == 8080
    with pytest.raises(UnsafeTarget, match="is a loopback address"):  # not public, not allowed: refused as such
        check_url("http://127.0.0.1:8080/hook", allow_private=False)


def test_a_public_receiver_on_a_port_not_allowed_is_not_connected_to_at_delivery():
    """At delivery the port is checked again, before any connection: nothing is sent, and the error says why."""
    start = time.monotonic()
    answer = post("http://93.184.215.14:25/hook", b"{}", {}, allow_private=False, timeout=2, allowed_ports=(8443,))
    assert answer.status is None and time.monotonic() - start < 1
    assert answer.error == (
        "not sent: url 'http://93.184.215.14:25/hook': port 25 is not allowed for a receiver on a public address; "
        "allowed ports: 80, 443, 8443 (an operator may allow others with WEBHOOK_ALLOWED_PORTS)"
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:8080/hook", "host '127.0.0.1' is a loopback address"),
        ("http://10.0.0.7/hook", "host '10.0.0.7' is a private address"),
        ("http://169.254.169.254/latest/meta-data/", "host '169.254.169.254' is a link-local address"),
        ("http://[::1]/hook", "host '::1' is a loopback address"),
        ("http://[::ffff:127.0.0.1]:6379/", "host '::ffff:127.0.0.1' is a loopback address (127.0.0.1) in IPv6 form"),
        ("http://[fe80::1]/hook", "is a link-local address"),
        ("http://0.0.0.0:8000/", "is an unspecified address"),
    ],
)
def test_private_addresses_are_refused_unless_allowed(url, says):
    with pytest.raises(UnsafeTarget) as refused:
        check_url(url, allow_private=False)
    message = str(refused.value)
    assert repr(url) in message and says in message and "WEBHOOK_ALLOW_PRIVATE=true" in message
    check_url(url, allow_private=True)  # an operator's choice


def test_a_name_that_resolves_to_loopback_is_refused_naming_the_address():
    """`localhost` is resolved for real, as any name: refused for the address it gives, not for its spelling."""
    resolved = {info[4][0] for info in socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)}
    with pytest.raises(UnsafeTarget) as refused:
        check_url("http://localhost:9000/hook", allow_private=False)
    message = str(refused.value)
    assert "host 'localhost' resolves to " in message and "a loopback address" in message
    assert any(f"resolves to {address}," in message for address in resolved)
    assert check_url("http://localhost:9000/hook", allow_private=True).host == "localhost"


def test_a_name_that_does_not_resolve_is_refused():
    with pytest.raises(UnsafeTarget, match=r"host 'no-such-host\.invalid' does not resolve"):
        check_url("https://no-such-host.invalid/hook", allow_private=False)


def test_a_refused_address_is_not_connected_to_at_delivery():
    """At delivery the URL is resolved and checked again: a receiver that the guard refuses is never contacted."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        answer = post(f"http://127.0.0.1:{port}/hook", b"{}", {}, allow_private=False, timeout=2)
        assert answer.status is None and answer.error is not None
        assert answer.error.startswith("not sent: url ") and "is a loopback address" in answer.error
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing connected
    finally:
        listener.close()


def test_an_attempt_is_bounded_even_by_a_receiver_that_answers_a_byte_at_a_time():
    """Fault: a receiver trickles its status line one byte every 0.2 s, so no single read times out. Pass: the attempt
    ends at its deadline, saying so."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    stop = threading.Event()

    def trickle() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 1000:
                if stop.is_set():
                    return
                try:
                    connection.send(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.2)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        start = time.monotonic()
        answer = post(f"http://127.0.0.1:{port}/hook", b"{}", {}, allow_private=True, timeout=1.5)
        took = time.monotonic() - start
        assert answer.error == "no answer within 1.5 s" and answer.status is None
        assert 1.4 < took < 2.5, took
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)


@pytest.mark.parametrize("url", ["http://[::1/hook", "http://[zz]/hook", "https://" + "a" * 300 + ".com/"])
def test_a_url_that_does_not_parse_or_resolve_is_refused_not_an_error(url):
    with pytest.raises(UnsafeTarget):
        check_url(url, allow_private=False)
