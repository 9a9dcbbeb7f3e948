"""CONNECT tunnels that are allowed: bytes pass unchanged, both ways."""

import os
import select
import socket
import ssl
import time

import pytest

from sluicetest.checks import STANDARD_ALLOW, assert_decision
from sluicetest.client import Conn, connect, echo_both_ways
from sluicetest.pattern import BIG, digest, pattern


def test_connect_tunnel_echoes_64_mib_byte_exact(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = connect(s.port, "origin.test:9000", timeout=60)
    assert resp.status == 200, resp
    payload = pattern(BIG, seed=2)
    back = echo_both_ways(conn.sock, payload)
    assert len(back) == BIG and digest(back) == digest(payload)
    conn.close()
    d = s.decision_for(conn.local_port)
    assert_decision(d, "allow", "allowlisted", "origin.test", 9000, "CONNECT")
    assert d.get("addr") == "11.0.0.1"
    close = s.close_for(d["id"])
    assert close["bytes_up"] == BIG and close["bytes_down"] == BIG


def _tls_in_tunnel(conn, ca):
    ctx = ssl.create_default_context(cafile=str(ca))
    tls = ctx.wrap_socket(conn.sock, server_hostname="origin.test")
    return tls, Conn.wrap(tls)


def test_connect_to_https_origin_does_a_real_tls_handshake_and_moves_64_mib_both_ways(sluice, tls):
    s = sluice(allow=STANDARD_ALLOW, config={"policy": {"sni_check": "yes"}})
    resp, conn = connect(s.port, "origin.test:443", timeout=60)
    assert resp.status == 200, resp
    tsock, tconn = _tls_in_tunnel(conn, tls["ca"])
    assert tsock.getpeercert()["subjectAltName"] == (("DNS", "origin.test"),)
    r = tconn.request("GET", f"/bytes/{BIG}", host="origin.test")
    assert r.status == 200 and len(r.body) == BIG and digest(r.body) == digest(pattern(BIG))
    up = pattern(BIG, seed=3)
    r = tconn.request("POST", "/echo", host="origin.test", body=up)
    assert r.status == 200 and len(r.body) == BIG and digest(r.body) == digest(up)
    tsock.close()
    d = s.decision_for(conn.local_port)
    assert_decision(d, "allow", "allowlisted", "origin.test", 443, "CONNECT")


def test_curl_fetches_https_through_the_tunnel(sluice, tls, tmp_path):
    from sluicetest.client import curl
    s = sluice(allow=STANDARD_ALLOW)
    out = tmp_path / "body"
    r = curl(s.port, "--cacert", str(tls["ca"]), "-o", str(out), "-w", "%{http_code}",
             "https://origin.test/bytes/1000000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"200"
    assert out.read_bytes() == pattern(1000000)


def test_ipv6_only_name_is_reached_over_ipv6(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = connect(s.port, "v6.test:9000")
    assert resp.status == 200, resp
    assert echo_both_ways(conn.sock, b"over six" * 1000) == b"over six" * 1000
    conn.close()
    d = s.decision_for(conn.local_port)
    assert_decision(d, "allow", "allowlisted", "v6.test", 9000)
    assert d.get("addr") == "2c0f:fff0::1"


@pytest.mark.parametrize("target", ["11.0.0.1:9000", "[2c0f:fff0::1]:9000"])
def test_connect_to_an_allowlisted_canonical_ip_literal_passes(sluice, dns, target):
    s = sluice(allow=STANDARD_ALLOW)
    mark = dns.mark()
    resp, conn = connect(s.port, target)
    assert resp.status == 200, resp
    assert echo_both_ways(conn.sock, b"literal") == b"literal"
    conn.close()
    assert dns.queries_since(mark) == [], "an IP literal must not be resolved"


@pytest.mark.parametrize("target", ["ORIGIN.Test:9000", "origin.test.:9000"])
def test_connect_host_matches_case_insensitively_and_without_trailing_dot(sluice, target):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = connect(s.port, target)
    assert resp.status == 200, resp
    assert echo_both_ways(conn.sock, b"x" * 100) == b"x" * 100
    conn.close()


def test_tunnel_half_close_delivers_the_rest(sluice):
    """The client shuts down its sending side; the echo's answer still
    arrives, then the tunnel closes."""
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    payload = pattern(300000, seed=5)
    conn.sock.sendall(payload)
    conn.sock.shutdown(socket.SHUT_WR)
    got = conn.read_until_eof()
    assert got == payload


@pytest.mark.parametrize("size", [1000, 200000])
def test_bytes_sent_ahead_and_a_half_close_before_the_tunnel_is_up_all_arrive(sluice, size):
    """The client sends CONNECT, its first bytes (more than the gate reads
    ahead, in the larger case) and its end at once, while the gate is still
    resolving and connecting: the origin gets every byte, then the end, and
    the echo comes back."""
    s = sluice(allow=STANDARD_ALLOW)
    conn = Conn(s.port, timeout=15.0)
    payload = pattern(size, seed=11)
    conn.sock.sendall(b"CONNECT origin.test:9000 HTTP/1.1\r\nHost: origin.test:9000\r\n\r\n" + payload[:size // 2])
    conn.sock.sendall(payload[size // 2:])
    conn.sock.shutdown(socket.SHUT_WR)
    resp = conn.read_response("CONNECT")
    assert resp.status == 200
    got = conn.read_until_eof()
    assert got == payload
    d = s.decision_for(conn.local_port)
    close = s.close_for(d["id"])
    assert (close["bytes_up"], close["bytes_down"]) == (size, size)
    assert close["end"] in ("client_eof", "origin_eof")


def test_idle_tunnel_is_closed_after_idle_ms(sluice):
    s = sluice(allow=STANDARD_ALLOW, config={"timeouts": {"idle_ms": 1000}})
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    conn.sock.sendall(b"ping")
    assert conn.read_exact(4) == b"ping"
    t0 = time.monotonic()
    assert conn.at_eof(timeout=6.0), "idle tunnel not closed"
    elapsed = time.monotonic() - t0
    assert 0.8 <= elapsed <= 3.0, f"idle tunnel closed after {elapsed:.2f}s, idle_ms is 1000"
    d = s.decision_for(conn.local_port)
    close = s.close_for(d["id"])
    assert close["bytes_up"] == 4 and close["bytes_down"] == 4


def test_dual_stack_name_is_reached(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = connect(s.port, "dual.test:9000")
    assert resp.status == 200, resp
    assert echo_both_ways(conn.sock, b"dual") == b"dual"
    conn.close()
    d = s.decision_for(conn.local_port)
    assert d.get("addr") in ("11.0.0.1", "2c0f:fff0::1"), d


def _plateau(origins, tag, timeout=20.0, still=0.5):
    """Wait until the origin's progress on body `tag` stops moving (or the
    whole body went out); return the bytes it handed to the kernel."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = origins.progress.get(tag, 0)
        if now >= BIG:
            return now
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still and now > 0:
            return now
        time.sleep(0.05)
    return origins.progress.get(tag, 0)


@pytest.mark.parametrize("mode", ["tunnel", "http"])
def test_client_that_does_not_read_holds_back_the_origin(sluice, origins, mode):
    """Backpressure: with a client that reads nothing, sluice stops reading
    the origin instead of buffering a 64 MiB body."""
    s = sluice(allow=STANDARD_ALLOW + ["origin.test:80"])
    tag = f"bp-{mode}-{os.getpid()}-{time.monotonic_ns()}"
    req = f"GET {{}}/bytes/{BIG}?tag={tag} HTTP/1.1\r\nHost: origin.test\r\n\r\n"
    if mode == "tunnel":
        resp, conn = connect(s.port, "origin.test:80")
        assert resp.status == 200
        conn.sock.sendall(req.format("").encode())
    else:
        conn = Conn(s.port)
        conn.sock.sendall(req.format("http://origin.test").encode())
    sent = _plateau(origins, tag)
    assert sent < BIG * 3 // 4, f"origin could send {sent} bytes to a client that reads nothing"
    # and once the client reads, everything arrives intact
    conn.settimeout(60)
    r = conn.read_response()
    assert r.status == 200 and len(r.body) == BIG and digest(r.body) == digest(pattern(BIG))
    conn.close()
