"""A hostile origin against sluice's plain-HTTP exchange engine.

Every origin here is the scriptable one (sluicetest/scripted.py): each test
says byte for byte what the origin sends on each connection. Each test
asserts what the client receives, that the next request on the same client
connection (where it survives) gets its own response, what each origin
connection received (the differential check, sluicetest/differential.py),
and the decision log: one decision line per request, the close lines' `end`
(proxy/README.md, "Close lines").

The behaviour asserted is the new engine's (the lead's engine.md, E1-E12);
where that leaves something open, the test's docstring says what it
expects and why."""

import threading
import time
from socket import timeout as socket_timeout

import pytest

from sluicetest.checks import assert_refused
from sluicetest.client import Conn
from sluicetest.differential import Sent, assert_origin_traffic, request
from sluicetest.hostile import (assert_exchanges, gate, read_until, small_rcvbuf_conn,
                                syn_sent_ports, wait_new_syn_sent, wait_origin_side_ended,
                                fresh_client_is_served)
from sluicetest.scripted import (H1, Call, Close, HalfClose, NoRead, Reset, Script, Send, SendForever,
                                 Serve, Sleep, WaitEvent, WaitHead, WaitRequest)
from sluicetest.strict import parse_responses

SMUGGLED = b"HTTP/1.1 200 OK\r\nX-Smuggled: yes\r\nContent-Length: 8\r\n\r\nsmuggled"
MiB = 1 << 20


def ok(body, extra=b""):
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (extra, len(body), body)


def get(c, path, host="h1.hostile.test", method="GET"):
    """Send a GET (or HEAD) on c; return its Sent."""
    raw, sent = request(method, f"http://{host}{path}")
    c.send(raw)
    return sent


def own_response(c, path, method="GET", host="h1.hostile.test"):
    """The next response on c is the scripted origin's answer to path."""
    r = c.read_final(method, timeout=5.0)
    assert r.status == 200 and r.header("X-Smuggled") is None, \
        f"the request for {path} got someone else's response: {r!r}"
    assert r.header("X-Path") == path and r.header("X-Host") == host, \
        f"the request for {path} got the response to another request: {r!r}"
    return r


def expect_502(data, what):
    """data is interim heads (possibly), then a 502 with Connection: close,
    and nothing else: no other response was relayed."""
    resps, tail, err = parse_responses(data, ["GET"], eof=True)
    assert err is None and tail is None and len(resps) >= 1, \
        f"{what}: expected a 502 reply, got {data[:400]!r}"
    r = resps[-1]
    assert r.status == 502 and r.conn_close, f"{what}: expected 502 with Connection: close, got {r!r}"
    assert all(x.interim for x in resps[:-1]), f"{what}: a response was relayed before the 502: {resps!r}"
    return r


# --- E1/E2: nothing after a response reaches the client ------------------------
@pytest.mark.parametrize("extra", [SMUGGLED, b"x" * 3], ids=["second-response", "junk"])
def test_two_responses_to_one_request_deliver_only_the_first(sluice, scripted, extra):
    """The origin answers one request with its response and more bytes in
    the same write. The client gets the first response only; its next
    request gets its own response from a new origin connection (E1: bytes
    pending on the socket forbid reuse; E2)."""
    s = gate(sluice)
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(ok(b"first") + extra)))
    with Conn(s.port) as c:
        sent = [get(c, "/first")]
        r1 = c.read_final()
        assert r1.status == 200 and r1.body == b"first", r1
        sent.append(get(c, "/second"))
        own_response(c, "/second")
        port = c.local_port
    conn1 = scripted.wait_conn(m, 1)
    assert len(conn1.requests()[0]) == 1, f"the origin connection that sent extra bytes was reused: {conn1!r}"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("after", ["response", "byte", "eof", "reset"])
def test_bytes_from_an_idle_origin_close_it_and_are_never_delivered(sluice, scripted, after):
    """After a complete response the origin connection is idle. Then the
    origin sends a whole fake response, one byte, a FIN or a reset. E1: sluice
    closes that origin connection (for bytes and FIN: it must notice while
    idle), never delivers anything of it, and the client's next request
    gets its own response from a new connection."""
    s = gate(sluice)
    m = scripted.mark()
    go = threading.Event()
    action = {"response": Send(SMUGGLED), "byte": Send(b"H"), "eof": HalfClose(), "reset": Reset()}[after]
    scripted.play(Script(WaitRequest(), Send(ok(b"first")), WaitEvent(go), action))
    with Conn(s.port) as c:
        sent = [get(c, "/first")]
        r1 = c.read_final()
        assert r1.body == b"first", r1
        go.set()
        conn1 = scripted.wait_conn(m, 1)
        conn1.wait_script()
        if after != "reset":
            assert conn1.wait_closed(3.0), f"sluice kept an idle origin connection after it sent {after}"
        sent.append(get(c, "/second"))
        own_response(c, "/second")
        port = c.local_port
    assert len(conn1.requests()[0]) == 1, f"the idle origin connection was reused: {conn1!r}"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("end", ["eof", "reset"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_kept_origin_that_closes_as_the_next_request_arrives_is_retried(sluice, scripted, end, method):
    """The race every keep-alive proxy meets: the origin's idle timeout
    closes the kept connection just as sluice sends the next request on it.
    Nothing of a response came, so an idempotent request without a body is
    sent once more, on a new connection (RFC 9112 9.3.1), and the client
    gets its own response, with one decision line for it."""
    s = gate(sluice)
    m = scripted.mark()
    action = {"eof": Close(), "reset": Reset()}[end]
    scripted.play(Script(WaitRequest(), Send(ok(b"first")), WaitRequest(2), action), Script(Serve()))
    with Conn(s.port) as c:
        sent = [get(c, "/first")]
        assert c.read_final().body == b"first"
        sent.append(get(c, "/second", method=method))
        own_response(c, "/second", method=method)
        port = c.local_port
    conn1, conn2 = scripted.wait_conn(m, 1), scripted.wait_conn(m, 2)
    assert len(conn1.requests()[0]) == 2 and len(conn2.requests()[0]) == 1, \
        f"the second request was not sent once more on a new connection: {conn1!r} {conn2!r}"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])


@pytest.mark.parametrize("end", ["eof", "reset"])
def test_a_request_with_a_body_is_not_retried(sluice, scripted, end):
    """A POST may have had its effect at the origin before it closed: it is
    never sent twice, and the client gets sluice's 502."""
    s = gate(sluice)
    m = scripted.mark()
    action = {"eof": Close(), "reset": Reset()}[end]
    scripted.play(Script(WaitRequest(), Send(ok(b"first")), WaitRequest(2), action), Script(Serve()))
    with Conn(s.port) as c:
        get(c, "/first")
        assert c.read_final().body == b"first"
        c.send(b"POST http://h1.hostile.test/second HTTP/1.1\r\nHost: h1.hostile.test\r\n"
               b"Content-Length: 4\r\n\r\nbody")
        r = c.read_final("POST", timeout=5.0)
        assert r.status == 502, r
        port = c.local_port
    time.sleep(0.3)
    assert len(scripted.since(m)) == 1, "the POST went to a second origin connection"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", {"origin_eof", "origin_error"})])


@pytest.mark.parametrize("after", ["response", "eof", "reset"])
def test_bytes_from_the_idle_origin_while_the_next_request_is_resolving(sluice, scripted, slow_dns, after):
    """The next request (same host, so the idle origin connection would be
    reused) is held in DNS; meanwhile the idle origin connection sends a
    fake response, a FIN or a reset. The fake bytes are never delivered; the
    request, once resolved, gets its own response."""
    s = gate(sluice, slow_dns=True)
    m = scripted.mark()
    go = threading.Event()
    action = {"response": Send(SMUGGLED), "eof": HalfClose(), "reset": Reset()}[after]
    scripted.play(Script(WaitRequest(), Send(ok(b"first")), WaitEvent(go), action))
    with Conn(s.port) as c:
        sent = [get(c, "/first")]
        assert c.read_final().body == b"first"
        slow_dns.hold("h1.hostile.test")
        q = slow_dns.mark()
        sent.append(get(c, "/second"))
        slow_dns.wait_query("h1.hostile.test", q)
        go.set()
        conn1 = scripted.wait_conn(m, 1)
        conn1.wait_script()
        if after != "reset":
            assert conn1.wait_closed(3.0), f"sluice kept the idle origin connection after it sent {after}"
        else:
            # The reset takes effect once the origin's reader thread lets go
            # of the socket; sent later than sluice's check before reuse, a
            # real reset would race it the same way.
            wait_origin_side_ended(H1)
        slow_dns.release("h1.hostile.test")
        own_response(c, "/second")
        port = c.local_port
    assert len(conn1.requests()[0]) == 1, f"the origin connection was reused: {conn1!r}"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("after", ["response", "eof"])
def test_bytes_from_the_idle_origin_while_the_next_request_is_connecting(sluice, scripted, after):
    """The next request goes to stall.test:443, whose SYNs are dropped, so
    sluice is connecting until connect_ms; meanwhile the idle origin
    connection (h1) sends a fake response or a FIN. The client gets the
    504 connect_timeout refusal for its request, never the fake bytes."""
    s = gate(sluice, timeouts={"connect_ms": 600})
    m = scripted.mark()
    go = threading.Event()
    scripted.play(Script(WaitRequest(), Send(ok(b"first")), WaitEvent(go),
                         Send(SMUGGLED) if after == "response" else HalfClose()))
    with Conn(s.port) as c:
        sent = [get(c, "/first")]
        assert c.read_final().body == b"first"
        before = syn_sent_ports()
        raw, refused = request("GET", "http://stall.test:443/second", allowed=False)
        sent.append(refused)
        c.send(raw)
        wait_new_syn_sent(before)
        go.set()
        scripted.wait_conn(m, 1).wait_script()
        closed, data = c.drain_until_closed(5.0)
        assert closed, "the connection stayed open after a connect_timeout refusal"
        resps, tail, err = parse_responses(data, ["GET"], eof=True)
        assert err is None and tail is None and len(resps) == 1, f"expected one refusal, got {data[:400]!r}"
        assert_refused(resps[0], 504, "connect_timeout")
        port = c.local_port
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("deny", "connect_timeout")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("method,head", [
    ("GET", b"HTTP/1.1 204 No Content\r\n\r\n"),
    ("GET", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 8\r\n\r\n"),
    ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n"),
], ids=["204", "304", "HEAD"])
def test_a_body_on_a_bodiless_response_is_never_delivered(sluice, scripted, method, head):
    """204, 304 and responses to HEAD have no body; the origin sends one
    anyway (a complete fake response, in the same write). E2: it is never
    delivered, the origin connection is not reused, the next request gets
    its own response."""
    s = gate(sluice)
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(head + SMUGGLED)))
    with Conn(s.port) as c:
        sent = [get(c, "/first", method=method)]
        r1 = c.read_final(method)
        assert r1.status == int(head[9:12]) and r1.body == b"", r1
        sent.append(get(c, "/second"))
        own_response(c, "/second")
        port = c.local_port
    assert len(scripted.wait_conn(m, 1).requests()[0]) == 1, "the origin connection was reused"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


def test_a_body_on_a_1xx_response_is_never_delivered_and_is_a_bad_response(sluice, scripted):
    """A 100 head followed by body bytes: after an interim head comes the
    next head, so "smuggled..." is a malformed head: 502 (E5, interim heads
    may have been relayed before it), `end` bad_response; nothing of the
    fake body reaches the client."""
    s = gate(sluice)
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(b"HTTP/1.1 100 Continue\r\nContent-Length: 8\r\n\r\n" + SMUGGLED[-8:]
                                             + ok(b"final"))))
    with Conn(s.port) as c:
        sent = [get(c, "/first")]
        closed, data = c.drain_until_closed(5.0)
        port = c.local_port
    assert closed
    expect_502(data, "body after a 100 head")
    assert b"final" not in data
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_response")])
    assert_origin_traffic(scripted.since(m), sent)


# --- E4, E11: interim heads under backpressure -----------------------------------
RSS_BOUND = 32 * MiB


def _asan_small_quarantine():
    """ASan keeps freed memory in a quarantine (256 MiB by default), which
    RSS counts; bytes that flowed through before the stall would then look
    like growth. 4 MiB keeps use-after-free detection and a meaningful RSS."""
    return {"ASAN_OPTIONS": "quarantine_size_mb=4:thread_local_quarantine_size_kb=256"}


def _watch(s, rss0, progress, limit, stalled_for=1.0, timeout=60.0):
    """Poll until progress() stops moving for stalled_for seconds (returns
    (True, peak RSS growth)), passes limit, or RSS grows past RSS_BOUND
    (returns (False, growth))."""
    deadline = time.monotonic() + timeout
    last, last_t, peak = progress(), time.monotonic(), 0
    while time.monotonic() < deadline:
        time.sleep(0.05)
        peak = max(peak, s.rss() - rss0)
        if peak > RSS_BOUND:
            return False, peak
        now = progress()
        if now >= limit:
            return False, peak
        if now != last:
            last, last_t = now, time.monotonic()
        elif time.monotonic() - last_t >= stalled_for:
            return True, peak
    return False, peak


def test_endless_100_continue_to_a_client_that_does_not_read(sluice, scripted):
    """The origin sends `100 Continue` heads without end (it tries 512 MiB);
    the client never reads. E4/E11: interim heads are relayed under
    backpressure (no reading from the origin while 256 KiB are unsent), so
    the origin stalls after what the socket buffers hold, and sluice's RSS
    stays flat. Bound: +32 MiB over the idle gate. A correct engine holds
    under 1 MiB of buffers for this connection (64 KiB unread input, ~320
    KiB queued), plus allocator slack and a 4 MiB ASan quarantine; storing
    the stream costs its size. Then the exchange ends at idle_ms
    (`end` idle_timeout): nothing moved for that long."""
    s = gate(sluice, timeouts={"idle_ms": 2000}, env=_asan_small_quarantine())
    fresh_client_is_served(s, "/warm")
    rss0 = s.rss()
    m = scripted.mark()
    stop = threading.Event()
    limit = 512 * MiB
    scripted.play(Script(WaitRequest(), SendForever(b"HTTP/1.1 100 Continue\r\n\r\n" * 40000,
                                                     limit=limit, stop=stop)))
    c = small_rcvbuf_conn(s.port)
    try:
        sent = [get(c, "/endless")]
        conn = scripted.wait_conn(m, 1)
        stalled, growth = _watch(s, rss0, lambda: conn.sent, limit)
        stop.set()
        assert growth <= RSS_BOUND, \
            f"sluice's RSS grew by {growth / MiB:.1f} MiB while the origin sent {conn.sent / MiB:.0f} MiB of 100 heads"
        assert stalled, f"the origin was never stalled: it sent {conn.sent / MiB:.0f} MiB"
        assert conn.sent < 128 * MiB, f"the origin got {conn.sent / MiB:.0f} MiB out before it stalled"
        assert conn.wait_closed(2.0 + 3.0), "the stalled exchange did not end at idle_ms"
        port = c.local_port
    finally:
        c.close()
    s.stop()
    assert_exchanges(s, port, [("allow", "idle_timeout")])
    assert_origin_traffic(scripted.since(m), sent)


# --- E3: a final response before the request body ends ---------------------------
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_early_final_response_closes_the_client_connection_and_stops_the_body(sluice, scripted, chunked):
    """The origin answers 413 after the head and 1000 body bytes, of a body
    announced as 1 MB. E3: the client gets the 413 with `Connection:
    close`, then the connection closes; what the client sends after that
    never reaches the origin, whose connection is not reused (sluice closes
    it). `end`: done (the response was delivered whole)."""
    s = gate(sluice)
    m = scripted.mark()
    if chunked:
        head = (b"POST http://h1.hostile.test/upload HTTP/1.1\r\nHost: h1.hostile.test\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n")
        first, later = b"3e8\r\n" + b"A" * 1000 + b"\r\n", b"2710\r\n" + b"B" * 10000 + b"\r\n"
    else:
        head = (b"POST http://h1.hostile.test/upload HTTP/1.1\r\nHost: h1.hostile.test\r\n"
                b"Content-Length: 1000000\r\n\r\n")
        first, later = b"A" * 1000, b"B" * 10000
    sent = [Sent("POST", "/upload", "h1.hostile.test", first + later, complete=False)]
    too_big = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 7\r\n\r\ntoo big"

    def got_first(conn):
        conn.wait(lambda: bytes(conn.data).endswith(first), what="the first 1000 body bytes")

    scripted.play(Script(WaitHead(), Call(got_first), Send(too_big)))
    with Conn(s.port) as c:
        c.send(head + first)
        r = c.read_final()
        assert r.status == 413 and r.body == b"too big", r
        assert r.conn_close, f"an early response was relayed without Connection: close: {r!r}"
        c.send(later)
        closed, rest = c.drain_until_closed(5.0)
        assert closed and rest == b"", f"after the early response: closed={closed}, more bytes {rest[:200]!r}"
        port = c.local_port
    conn = scripted.wait_conn(m, 1)
    assert conn.wait_closed(3.0), "the origin connection was kept after an early response"
    assert b"B" not in conn.received, "body bytes sent after the early response reached the origin"
    assert scripted.mark() == m + 1
    s.stop()
    assert_exchanges(s, port, [("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


# --- chunked response bodies ----------------------------------------------------------
# chunked bodies with a malformed part, and bytes of that part that must never
# reach the client (a streaming gate may relay a chunk's data before it sees
# that the CRLF after it is missing)
BAD_CHUNKS = {
    "zz": (b"zz\r\nhello\r\n0\r\n\r\n", b"zz"),
    "minus-one": (b"-1\r\nhello\r\n0\r\n\r\n", b"-1"),
    "17-hex-digits": (b"00000000000000005\r\nhello\r\n0\r\n\r\n", b"00000000000000005"),
    "no-crlf-after-data": (b"5\r\nhelloXY0\r\n\r\n", b"XY"),
    "data-longer-than-size": (b"5\r\nhello world\r\n0\r\n\r\n", b" world"),
    "bad-extension": (b"5;a\x01b\r\nhello\r\n0\r\n\r\n", b"\x01"),
    "bare-lf": (b"5\nhello\r\n0\r\n\r\n", b"5\nhello"),
}
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("bad", BAD_CHUNKS, ids=list(BAD_CHUNKS))
def test_a_bad_first_chunk_arriving_with_the_head_is_502(sluice, scripted, bad):
    """Head and a malformed first chunk in one write: nothing of the final
    response counts as written (E5), so the client gets 502 with
    `Connection: close`; `end` bad_response_body."""
    s = gate(sluice)
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(CHUNKED_HEAD + BAD_CHUNKS[bad][0])))
    with Conn(s.port) as c:
        sent = [get(c, "/bad")]
        closed, data = c.drain_until_closed(5.0)
        port = c.local_port
    assert closed, "the client connection stayed open after a bad response"
    expect_502(data, f"bad first chunk {bad}")
    assert b"hello" not in data
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_response_body")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("bad", BAD_CHUNKS, ids=list(BAD_CHUNKS))
def test_a_bad_later_chunk_cuts_the_response(sluice, scripted, bad):
    """Head and a good chunk went to the client; then a malformed chunk.
    E5: the client connection is just closed; the client sees a truncated
    response (never a complete one, never the bad bytes)."""
    s = gate(sluice)
    m = scripted.mark()
    go = threading.Event()
    scripted.play(Script(WaitRequest(), Send(CHUNKED_HEAD + b"4\r\ngood\r\n"), WaitEvent(go),
                         Send(BAD_CHUNKS[bad][0])))
    with Conn(s.port) as c:
        sent = [get(c, "/bad")]
        read_until(c, b"good\r\n")
        go.set()
        closed, data = c.drain_until_closed(5.0)
        port = c.local_port
    assert closed, "the client connection stayed open after a bad chunk"
    resps, tail, err = parse_responses(data, ["GET"], eof=True)
    assert not resps and err is None and tail is not None and tail.head is not None \
        and tail.head.status == 200, f"expected a truncated 200, got {data[:400]!r}"
    assert BAD_CHUNKS[bad][1] not in data, f"bytes of the bad chunk reached the client: {data!r}"
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_response_body")])
    assert_origin_traffic(scripted.since(m), sent)


def test_valid_chunk_extensions_and_trailers_are_relayed_unchanged(sluice, scripted):
    """Chunk extensions (token and quoted values) and trailer fields are
    valid HTTP/1.1: the chunked body reaches the client byte for byte as
    the origin framed it, and the connection goes on."""
    s = gate(sluice)
    m = scripted.mark()
    body = (b"5;name=value\r\nhello\r\n6 ; q=\"a \\\" b\" ;flag\r\n world\r\n"
            b"0;last=1\r\nX-Trailer: yes\r\nX-Checksum: abc\r\n\r\n")
    scripted.play(Script(WaitRequest(), Send(CHUNKED_HEAD + body), Serve()))
    with Conn(s.port) as c:
        sent = [get(c, "/ext")]
        r = c.read_final()
        assert r.status == 200 and r.body == b"hello world", r
        assert r.raw_body == body, f"chunk framing changed on the way: {r.raw_body!r}"
        assert ("X-Trailer", "yes") in r.trailers
        sent.append(get(c, "/after"))
        own_response(c, "/after")
        port = c.local_port
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("trailer", [b"Bad Trailer\r\n\r\n", b"X-T: a\x01b\r\n\r\n", b"X-T: v\n\r\n",
                                     b" folded: x\r\n\r\n"],
                         ids=["space-in-name", "control-byte", "bare-lf", "obs-fold"])
def test_a_bad_trailer_cuts_the_response(sluice, scripted, trailer):
    """A malformed trailer after a good chunk was delivered: the response is
    cut (client connection closed, no complete response, the bad trailer
    never relayed); `end` bad_response_body."""
    s = gate(sluice)
    m = scripted.mark()
    go = threading.Event()
    scripted.play(Script(WaitRequest(), Send(CHUNKED_HEAD + b"5\r\nhello\r\n"), WaitEvent(go),
                         Send(b"0\r\n" + trailer)))
    with Conn(s.port) as c:
        sent = [get(c, "/trailer")]
        read_until(c, b"hello\r\n")
        go.set()
        closed, data = c.drain_until_closed(5.0)
        port = c.local_port
    assert closed
    resps, tail, err = parse_responses(data, ["GET"], eof=True)
    assert not resps and err is None and tail is not None and tail.head is not None, \
        f"expected a truncated response, got {data[:400]!r}"
    assert trailer.strip()[:5] not in data, f"the bad trailer reached the client: {data!r}"
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_response_body")])
    assert_origin_traffic(scripted.since(m), sent)


# --- framing of response heads ----------------------------------------------------
def test_content_length_and_chunked_is_relayed_as_chunked_and_not_reused(sluice, scripted):
    """E10: both Content-Length and Transfer-Encoding: chunked; the body is
    chunked, relayed chunked, without the Content-Length; the origin
    connection is not reused."""
    s = gate(sluice)
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"
                                             b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")))
    with Conn(s.port) as c:
        sent = [get(c, "/both")]
        r = c.read_final()
        assert r.status == 200 and r.body == b"hello" and r.chunked, r
        assert r.header("Content-Length") is None, f"Content-Length relayed with chunked: {r!r}"
        sent.append(get(c, "/second"))
        own_response(c, "/second")
        port = c.local_port
    conn1 = scripted.wait_conn(m, 1)
    assert len(conn1.requests()[0]) == 1, "the origin connection was reused"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("lengths", [b"Content-Length: 5\r\nContent-Length: 6\r\n",
                                     b"Content-Length: 5, 6\r\n"], ids=["two-fields", "list"])
def test_two_different_content_lengths_is_502(sluice, scripted, lengths):
    s = gate(sluice)
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(b"HTTP/1.1 200 OK\r\n" + lengths + b"\r\nhello!")))
    with Conn(s.port) as c:
        sent = [get(c, "/cl")]
        closed, data = c.drain_until_closed(5.0)
        port = c.local_port
    assert closed
    expect_502(data, "two Content-Lengths")
    assert b"hello" not in data
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_response")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n folded: x\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
    b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
    b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok",
    b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
], ids=["101", "bare-lf", "obs-fold", "space-before-colon", "status-2000", "negative-length",
        "not-http"])
def test_a_malformed_response_head_is_502(sluice, scripted, head):
    """E5: a malformed head (or 101) before anything was written: 502 with
    `Connection: close`, `end` bad_response."""
    s = gate(sluice)
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(head)))
    with Conn(s.port) as c:
        sent = [get(c, "/bad-head")]
        closed, data = c.drain_until_closed(5.0)
        port = c.local_port
    assert closed
    expect_502(data, "malformed head")
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_response")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("framing", [b"", b"Transfer-Encoding: gzip\r\n"], ids=["no-length", "te-gzip"])
def test_no_length_is_read_until_close(sluice, scripted, framing):
    """E10: neither Content-Length nor chunked: the body runs until the
    origin closes; the client's response says `Connection: close`, carries
    every byte, then the client connection closes; `end` done. The same for
    a Transfer-Encoding whose last coding is not chunked (RFC 9112 6.3: a
    response framed so runs until close; engine.md does not say, and a
    proxy that does otherwise loses the body)."""
    s = gate(sluice)
    m = scripted.mark()
    body = b"until close " * 1000
    scripted.play(Script(WaitRequest(), Send(b"HTTP/1.1 200 OK\r\nX-A: b\r\n" + framing + b"\r\n"),
                         Send(body, pieces=4000), Close()))
    with Conn(s.port) as c:
        sent = [get(c, "/noleng")]
        closed, data = c.drain_until_closed(5.0)
        port = c.local_port
    assert closed
    resps, tail, err = parse_responses(data, ["GET"], eof=True)
    assert err is None and tail is None and len(resps) == 1, data[:300]
    r = resps[0]
    assert r.status == 200 and r.body == body, r
    assert r.conn_close, f"a close-delimited response without Connection: close: {r!r}"
    s.stop()
    assert_exchanges(s, port, [("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


@pytest.mark.parametrize("pieces", [None, 1], ids=["one-write", "byte-by-byte"])
def test_100_and_103_before_the_final_response_are_relayed_in_order(sluice, scripted, pieces):
    """E4: interim heads are relayed in order (103's Link header kept), then
    the final response; the connection goes on."""
    s = gate(sluice)
    m = scripted.mark()
    interim = (b"HTTP/1.1 100 Continue\r\n\r\n"
               b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
    scripted.play(Script(WaitRequest(), Send(interim + ok(b"final"), pieces=pieces,
                                             delay=0.0005 if pieces else 0.0), Serve()))
    with Conn(s.port) as c:
        sent = [get(c, "/hints")]
        resps = c.read_strict(("GET",))
        assert [r.status for r in resps] == [100, 103, 200], resps
        assert resps[1].header("Link") == "</style.css>; rel=preload"
        assert resps[2].body == b"final"
        sent.append(get(c, "/after"))
        own_response(c, "/after")
        port = c.local_port
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), sent)


def test_a_head_over_32_kib_is_502(sluice, scripted):
    """A head that never ends, sent without pause: once it is over 32 KiB,
    502 (E5), `end` bad_response; the origin is stopped by the close."""
    s = gate(sluice)
    m = scripted.mark()
    stop = threading.Event()
    scripted.play(Script(WaitRequest(), SendForever(b"X-Pad: " + b"a" * 90 + b"\r\n", limit=4 * MiB,
                                                     stop=stop, prefix=b"HTTP/1.1 200 OK\r\n")))
    with Conn(s.port) as c:
        sent = [get(c, "/long-head")]
        closed, data = c.drain_until_closed(5.0)
        port = c.local_port
    stop.set()
    assert closed
    expect_502(data, "endless head")
    conn = scripted.wait_conn(m, 1)
    assert conn.sent < 4 * MiB, "sluice kept reading an endless head"
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_response")])
    assert_origin_traffic(scripted.since(m), sent)


def test_a_stalled_head_is_504_at_idle_ms(sluice, scripted):
    """Part of a head, then silence: 504 Gateway Timeout at idle_ms (E5),
    `Connection: close`, `end` idle_timeout."""
    idle = 800
    s = gate(sluice, timeouts={"idle_ms": idle})
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(b"HTTP/1.1 200 OK\r\nX-A: b")))
    with Conn(s.port) as c:
        sent = [get(c, "/stall")]
        scripted.wait_conn(m, 1).wait_script()
        t0 = time.monotonic()
        closed, data = c.drain_until_closed(idle / 1000 + 3.0)
        elapsed = time.monotonic() - t0
        port = c.local_port
    assert closed, "a stalled origin head was never cut"
    resps, tail, err = parse_responses(data, ["GET"], eof=True)
    assert err is None and tail is None and len(resps) == 1 and resps[0].status == 504, \
        f"expected 504 for a stalled origin head, got {data[:300]!r} after {elapsed:.2f}s"
    assert resps[0].conn_close
    assert idle / 1000 * 0.9 <= elapsed <= idle / 1000 + 1.5, f"504 after {elapsed:.2f}s, idle_ms = {idle}"
    s.stop()
    assert_exchanges(s, port, [("allow", "idle_timeout")])
    assert_origin_traffic(scripted.since(m), sent)


# --- E5: the origin goes away at every byte offset --------------------------------
RESPONSES = {
    "length": (b"HTTP/1.1 200 OK\r\nX-A: b\r\nContent-Length: 10\r\n\r\n", b"0123456789"),
    "chunked": (CHUNKED_HEAD, b"4\r\n0123\r\n6\r\n456789\r\n0\r\n\r\n"),
}


@pytest.mark.parametrize("framing", RESPONSES)
@pytest.mark.parametrize("how", ["reset", "eof"])
def test_origin_gone_at_every_byte_offset_of_a_response(sluice, scripted, framing, how):
    """For every k, the origin sends the first k bytes of a short response,
    then resets (or closes). While nothing of the final head can have been
    written (k < head length), the client gets 502 with `Connection:
    close`; after that it gets either the 502 or a truncated response
    (whether the head went out first is the engine's timing), never a
    complete one; at k = whole response it gets the response and the
    connection goes on. `end`: origin_error for a reset, origin_eof for a
    close (done for the whole response). After each, a new client is
    served."""
    head, body = RESPONSES[framing]
    resp = head + body
    s = gate(sluice)
    m = scripted.mark()
    sent, expect = [], []
    for k in range(len(resp) + 1):
        scripted.play(Script(WaitRequest(), Send(resp[:k]) if k else Sleep(0),
                             Reset() if how == "reset" else Close()))
        path = f"/cut{k}"
        with Conn(s.port) as c:
            sent.append(get(c, path))
            port = c.local_port
            if k == len(resp):
                r = c.read_final()
                assert r.status == 200 and r.body == b"0123456789", f"k={k}: {r!r}"
                # The origin ends the connection right after its response: a
                # request sent before that end reaches sluice would race it
                # (a real origin's idle close races the same way).
                wait_origin_side_ended(H1)
                sent.append(get(c, "/next"))
                own_response(c, "/next")
                expect.append((port, [("allow", "done"), ("allow", "done")]))
            else:
                closed, data = c.drain_until_closed(5.0)
                assert closed, f"k={k}: client connection left open"
                resps, tail, err = parse_responses(data, ["GET"], eof=True)
                assert err is None, f"k={k}: malformed bytes to the client: {err}; {data!r}"
                if k < len(head):
                    assert len(resps) == 1 and tail is None and resps[0].status == 502 and resps[0].conn_close, \
                        f"k={k} (inside the head): expected 502, got {data!r}"
                else:
                    is_502 = len(resps) == 1 and tail is None and resps[0].status == 502 and resps[0].conn_close
                    truncated = (not resps and tail is not None and tail.head is not None
                                 and tail.head.status == 200 and body.startswith(tail.head.raw_body))
                    assert is_502 or truncated, f"k={k}: expected 502 or a truncated response, got {data!r}"
                expect.append((port, [("allow", "origin_error" if how == "reset" else "origin_eof")]))
        sent.append(fresh_client_is_served(s, f"/fresh{k}"))
    s.stop()
    for port, e in expect:
        assert_exchanges(s, port, e)
    assert_origin_traffic(scripted.since(m), sent)


# --- E11: an origin that never reads ------------------------------------------------
def test_an_origin_that_never_reads_stalls_a_large_upload(sluice, scripted):
    """The origin accepts and never reads; the client uploads 256 MiB
    (Content-Length). E11: the upload stalls by backpressure after what
    the socket buffers hold, sluice's RSS stays flat (same bound and
    reasoning as the 100-continue test), and the exchange ends at idle_ms:
    the client, which got no response byte, gets 504 with `Connection:
    close`; `end` idle_timeout."""
    idle = 2000
    s = gate(sluice, timeouts={"idle_ms": idle}, env=_asan_small_quarantine())
    fresh_client_is_served(s, "/warm")
    rss0 = s.rss()
    m = scripted.mark()
    scripted.play(Script(NoRead()))
    total = 256 * MiB
    c = Conn(s.port)
    progress = [0]
    stop = threading.Event()

    def upload():
        c.sock.settimeout(0.05)
        c.sock.sendall(b"POST http://h1.hostile.test/upload HTTP/1.1\r\nHost: h1.hostile.test\r\n"
                       b"Content-Length: %d\r\n\r\n" % total)
        block = b"U" * MiB
        view = memoryview(block)
        while progress[0] < total and not stop.is_set():
            try:
                progress[0] += c.sock.send(view[:min(MiB, total - progress[0])])
            except socket_timeout:
                continue
            except OSError:
                return

    t = threading.Thread(target=upload, daemon=True)
    t.start()
    try:
        scripted.wait_conn(m, 1)        # the origin accepted: from here on it reads nothing
        stalled, growth = _watch(s, rss0, lambda: progress[0], total)
        stop.set()
        t.join(5)
        assert growth <= RSS_BOUND, f"sluice's RSS grew by {growth / MiB:.1f} MiB during the upload"
        assert stalled, f"the upload never stalled: {progress[0] / MiB:.0f} MiB sent"
        assert progress[0] < 128 * MiB, f"{progress[0] / MiB:.0f} MiB went out before the upload stalled"
        t0 = time.monotonic()
        closed, data = c.drain_until_closed(idle / 1000 + 3.0)
        elapsed = time.monotonic() - t0
        assert closed, "the stalled upload was never ended"
        resps, tail, err = parse_responses(data, ["POST"], eof=True)
        assert err is None and tail is None and len(resps) == 1 and resps[0].status == 504 \
            and resps[0].conn_close, f"expected 504 with Connection: close, got {data[:300]!r}"
        assert elapsed <= idle / 1000 + 1.5, f"ended {elapsed:.2f}s after the stall, idle_ms = {idle}"
        port = c.local_port
    finally:
        stop.set()
        c.close()
    s.stop()
    assert_exchanges(s, port, [("allow", "idle_timeout")])
