"""Bounds on what a client controls: head size and count, time to send a
head, number of clients; and many clients at once."""

import asyncio
import select
import socket
import time

import pytest

from sluicetest.checks import STANDARD_ALLOW, assert_decision, assert_refused
from sluicetest.client import Closed, Conn, connect, echo_both_ways, raw_exchange


def _cut_or_408(conn, timeout):
    """Wait for sluice to give up on a client: EOF/reset, or a 408."""
    closed, got = conn.drain_until_closed(timeout)
    if got:
        assert got.startswith(b"HTTP/1.1 408"), f"unexpected reply to a stalled head: {got[:200]!r}"
    return closed


def test_client_that_stalls_mid_header_is_cut_at_header_ms_while_others_are_served(sluice):
    s = sluice(allow=STANDARD_ALLOW, config={"timeouts": {"header_ms": 1000}})
    t0 = time.monotonic()
    slow = Conn(s.port)
    slow.send(b"CONNECT origin.test:9000 HTTP/1.1\r\nHo")
    # meanwhile others are served, start to end
    for i in range(3):
        resp, conn = connect(s.port, "origin.test:9000")
        assert resp.status == 200
        assert echo_both_ways(conn.sock, b"served %d" % i) == b"served %d" % i
        conn.close()
    assert time.monotonic() - t0 < 0.9, "others were not served while one client stalled"
    r, _, _ = select.select([slow.sock], [], [], 0)
    assert not r, "the stalled client was cut before header_ms"
    assert _cut_or_408(slow, 5.0), "stalled client not cut"
    elapsed = time.monotonic() - t0
    assert 0.9 <= elapsed <= 1.0 + 1.5, f"stalled head cut after {elapsed:.2f}s, header_ms = 1000"
    slow.close()


def test_client_that_sends_nothing_gets_408_at_header_ms_while_others_are_served(sluice):
    s = sluice(allow=STANDARD_ALLOW, config={"timeouts": {"header_ms": 1000}})
    t0 = time.monotonic()
    mute = Conn(s.port)
    for i in range(3):
        resp, conn = connect(s.port, "origin.test:9000")
        assert resp.status == 200
        assert echo_both_ways(conn.sock, b"served %d" % i) == b"served %d" % i
        conn.close()
    r, _, _ = select.select([mute.sock], [], [], 0)
    assert not r, "a client that sent nothing was answered before header_ms"
    closed, got = mute.drain_until_closed(5.0)
    elapsed = time.monotonic() - t0
    assert got.startswith(b"HTTP/1.1 408"), f"no 408 for a client that sent nothing: {got[:200]!r}"
    assert closed
    assert 0.9 <= elapsed <= 1.0 + 1.5, f"silent client answered after {elapsed:.2f}s, header_ms = 1000"
    d = s.decision_for(mute.local_port)
    assert (d["decision"], d["reason"]) == ("deny", "bad_request"), d
    mute.close()


def test_client_that_closes_before_sending_anything_leaves_no_line_and_others_are_served(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    ports = []
    for _ in range(20):
        c = Conn(s.port)
        ports.append(c.local_port)
        c.close()
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    assert echo_both_ways(conn.sock, b"after") == b"after"
    s.decision_for(conn.local_port)
    conn.close()
    mine = [l for l in s.log_lines() if any(str(l.get("client", "")).endswith(f":{p}") for p in ports)]
    assert mine == [], f"log lines for clients that asked nothing: {mine}"
    assert s.alive()


def test_client_that_trickles_its_header_is_cut_at_header_ms(sluice):
    s = sluice(allow=STANDARD_ALLOW, config={"timeouts": {"header_ms": 1000}})
    head = b"CONNECT origin.test:9000 HTTP/1.1\r\nHost: origin.test:9000\r\nX-Pad: " + b"a" * 100
    conn = Conn(s.port)
    t0 = time.monotonic()
    cut = None
    for i in range(len(head)):
        if conn.send(head[i:i + 1]):
            cut = time.monotonic()
            break
        r, _, _ = select.select([conn.sock], [], [], 0.05)
        if r:
            cut = time.monotonic()
            assert _cut_or_408(conn, 1.0)
            break
    assert cut is not None, "a head trickled for several seconds was never cut"
    elapsed = cut - t0
    assert 0.9 <= elapsed <= 1.0 + 1.5, f"trickled head cut after {elapsed:.2f}s, header_ms = 1000"
    conn.close()


async def _tunnel(port, i, gate, ready, sem, results):
    async with sem:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"CONNECT origin.test:9000 HTTP/1.1\r\nHost: origin.test:9000\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        writer.close()
        raise AssertionError(f"tunnel {i}: {head[:100]!r}")
    ready.append(i)
    await gate.wait()
    payload = (b"%06d:" % i) * 700
    writer.write(payload)
    await writer.drain()
    back = await reader.readexactly(len(payload))
    writer.close()
    results[i] = back == payload


async def _many(port, n):
    gate = asyncio.Event()
    ready, results = [], {}
    sem = asyncio.Semaphore(100)
    tasks = [asyncio.create_task(_tunnel(port, i, gate, ready, sem, results)) for i in range(n)]
    deadline = time.monotonic() + 120
    while len(ready) < n:
        failed = [t for t in tasks if t.done() and t.exception()]
        if failed:
            gate.set()
            raise failed[0].exception()
        assert time.monotonic() < deadline, f"only {len(ready)} of {n} tunnels opened"
        await asyncio.sleep(0.05)
    gate.set()    # all n tunnels are open at once now
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    return results


def test_a_thousand_concurrent_tunnels_all_carry_their_data(sluice):
    n = 1000
    s = sluice(allow=STANDARD_ALLOW, config={"proxy": {"max_clients": 2000}})
    results = asyncio.run(_many(s.port, n))
    assert len(results) == n and all(results.values()), \
        f"{sum(1 for v in results.values() if not v)} tunnels returned wrong bytes"
    lines = s.wait_count(lambda l: l.get("event") == "close", n, timeout=30, what="close lines")
    decisions = [l for l in lines if l.get("event") == "decision"]
    assert len(decisions) == n and all(l["decision"] == "allow" for l in decisions)
    sizes = {(l["bytes_up"], l["bytes_down"]) for l in lines if l.get("event") == "close"}
    assert sizes == {(7 * 700, 7 * 700)}


def _reply_without_or_with_request(port, request, wait=1.0):
    """A client for a server that may answer at accept, before the request."""
    conn = Conn(port)
    r, _, _ = select.select([conn.sock], [], [], wait)
    if not r:
        conn.send(request)
    return conn.read_response("CONNECT"), conn


def test_client_over_max_clients_gets_503(sluice):
    s = sluice(allow=STANDARD_ALLOW, config={"proxy": {"max_clients": 2}})
    held = []
    for _ in range(2):
        resp, conn = connect(s.port, "origin.test:9000")
        assert resp.status == 200
        assert echo_both_ways(conn.sock, b"held") == b"held"
        held.append(conn)
    resp, third = _reply_without_or_with_request(
        s.port, b"CONNECT origin.test:9000 HTTP/1.1\r\nHost: origin.test:9000\r\n\r\n")
    third.close()
    assert_refused(resp, 503, "too_many_clients")
    d = s.decision_for(third.local_port)
    assert d["reason"] == "too_many_clients"
    # a slot frees when a client leaves
    first_id = s.decision_for(held[0].local_port)["id"]
    held[0].close()
    s.close_for(first_id)
    deadline = time.monotonic() + 5
    while True:
        resp, conn = connect(s.port, "origin.test:9000")
        conn.close()
        if resp.status == 200 or time.monotonic() > deadline:
            break
    assert resp.status == 200, f"slot not freed after a client left: {resp!r}"
    for c in held[1:]:
        c.close()


def test_request_line_over_8_kib_is_431(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = raw_exchange(s.port, b"GET http://origin.test/" + b"a" * 9000 +
                              b" HTTP/1.1\r\nHost: origin.test\r\n\r\n")
    conn.close()
    assert_refused(resp, 431, "bad_request")
    assert s.decision_for(conn.local_port)["reason"] == "bad_request"


def test_request_line_over_8_kib_without_end_is_cut_with_431(sluice):
    """The limit applies as bytes arrive, not only once a line ends."""
    s = sluice(allow=STANDARD_ALLOW)
    conn = Conn(s.port)
    conn.send(b"GET http://origin.test/" + b"a" * 20000)
    resp = conn.read_response()
    conn.close()
    assert_refused(resp, 431, "bad_request")


def test_more_than_100_headers_is_431(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(100))
    resp, conn = raw_exchange(s.port, b"GET http://origin.test/headers HTTP/1.1\r\n"
                              b"Host: origin.test\r\n" + headers + b"\r\n")
    conn.close()
    assert_refused(resp, 431, "bad_request")


def test_exactly_100_headers_are_accepted(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(99))
    resp, conn = raw_exchange(s.port, b"GET http://origin.test/headers HTTP/1.1\r\n"
                              b"Host: origin.test\r\n" + headers + b"\r\n")
    conn.close()
    assert resp.status == 200, resp


def test_head_over_32_kib_is_431(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    headers = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 500) for i in range(70))
    resp, conn = raw_exchange(s.port, b"GET http://origin.test/headers HTTP/1.1\r\n"
                              b"Host: origin.test\r\n" + headers + b"\r\n")
    conn.close()
    assert_refused(resp, 431, "bad_request")


@pytest.mark.parametrize("garbage", [
    b"HELLO\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n",
    b"GET http://origin.test/ HTTP/9.9\r\nHost: origin.test\r\n\r\n",
    b"GET http://origin.test/ HTTP/1.1\r\nHost: origin.test\r\nBad Header: x\r\n\r\n",
    b"GET http://origin.test/ HTTP/1.1\r\nHost: origin.test\r\n folded: x\r\n\r\n",
    b"GET http://origin.test/ HTTP/1.1\nHost: origin.test\n\n",
    b"GET http://origin.test/ HTTP/1.1\r\nHost: origin.test\r\nHost: origin.test\r\n\r\n",
    b"GET ftp://origin.test/ HTTP/1.1\r\nHost: origin.test\r\n\r\n",
    b"GET http://user:pw@origin.test/ HTTP/1.1\r\nHost: origin.test\r\n\r\n",
    b"GET /relative HTTP/1.1\r\nHost: origin.test\r\n\r\n",
], ids=["word", "tls", "version", "space-in-name", "obs-fold", "bare-lf", "two-hosts",
        "ftp", "userinfo", "origin-form"])
def test_garbage_request_is_400(sluice, garbage):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = raw_exchange(s.port, garbage)
    conn.close()
    assert_refused(resp, 400, "bad_request")
    assert s.decision_for(conn.local_port)["reason"] == "bad_request"
