"""A hostile client against sluice's plain-HTTP exchange engine.

Malformed request bodies, resets and half-closes at every byte offset and
in every phase of an exchange, pipelining past a refusal, Expect:
100-continue, several hosts on one connection. Every test ends with the
differential check (sluicetest/differential.py): what each origin
connection received, parsed strictly, is a prefix of what the client sent
and was allowed, never more, never twice, never after a malformed part.
Origins are the scriptable ones (sluicetest/scripted.py): by default each
connection answers every request with its own path, host and body.

The behaviour asserted is the new engine's (engine.md E1-E12); where that
leaves something open, the docstring says what is expected and why."""

import time

import pytest

from sluicetest.checks import assert_refused
from sluicetest.client import Conn
from sluicetest.differential import Sent, assert_origin_traffic, request
from sluicetest.hostile import (assert_exchanges, crash_summary, exchanges, fresh_client_is_served,
                                gate, read_until, syn_sent_ports, unique_port_conn, wait_new_syn_sent,
                                wait_no_syn_sent)
from sluicetest.scripted import (H2, Call, Script, Send, Serve, Sleep, WaitHead,
                                 WaitRequest)
from sluicetest.strict import parse_responses


def expect_400_and_close(c, what):
    closed, data = c.drain_until_closed(5.0)
    assert closed, f"{what}: the client connection stayed open"
    resps, tail, err = parse_responses(data, ["POST"], eof=True)
    assert err is None and tail is None and len(resps) == 1, f"{what}: expected one 400, got {data[:400]!r}"
    r = resps[0]
    assert r.status == 400 and r.conn_close, f"{what}: expected 400 with Connection: close, got {r!r}"
    return r


# --- E6: malformed chunked request bodies -------------------------------------------
# body bytes, and how many of them come before the first malformed byte
BAD_BODIES = {
    "zz": (b"zz\r\n", 0),
    "no-crlf-after-data": (b"5\r\nhello0\r\n\r\n", 8),
    "17-hex-digits": (b"00000000000000005\r\nhello\r\n0\r\n\r\n", 16),
    "minus-one": (b"-1\r\nhello\r\n0\r\n\r\n", 0),
    "bad-extension-byte": (b"5;a\x01b\r\nhello\r\n0\r\n\r\n", 3),
    "bad-trailer": (b"5\r\nhello\r\n0\r\nBad Trailer: x\r\n\r\n", 16),
    "bare-lf": (b"5\nhello\r\n0\r\n\r\n", 1),
    "data-longer-than-size": (b"5\r\nhello world\r\n0\r\n\r\n", 8),
}


def test_the_zz_body_exactly_as_written_gets_400(sluice, scripted):
    """The brief's case byte for byte: a chunked POST whose first chunk size
    is `zz`. E6: 400 with `Connection: close`, closed, `end`
    bad_request_body; the origin gets at most the head."""
    s = gate(sluice)
    m = scripted.mark()
    raw = (b"POST http://h1.hostile.test/ HTTP/1.1\r\nHost: h1.hostile.test\r\n"
           b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
    with Conn(s.port) as c:
        c.send(raw)
        expect_400_and_close(c, "zz")
        port = c.local_port
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_request_body")])
    assert_origin_traffic(scripted.since(m), [Sent("POST", "/", "h1.hostile.test", b"zz\r\n", valid=0,
                                                   complete=False)])


@pytest.mark.parametrize("when", ["with-head", "while-forwarding"])
@pytest.mark.parametrize("bad", BAD_BODIES, ids=list(BAD_BODIES))
def test_a_malformed_chunked_request_body_gets_400(sluice, scripted, bad, when):
    """E6: no response byte went out yet, so sluice answers 400 with
    `Connection: close` and closes both connections; `end`
    bad_request_body. The origin got the head and at most the body bytes
    before the malformed one. Sent with the head, or after the origin has
    the head (sluice is forwarding)."""
    body, valid = BAD_BODIES[bad]
    s = gate(sluice)
    m = scripted.mark()
    raw, sent = request("POST", "http://h1.hostile.test/bad", chunked=True, raw_body=body, valid=valid)
    sent.complete = False
    head = raw[:raw.index(b"\r\n\r\n") + 4]
    with Conn(s.port) as c:
        if when == "with-head":
            c.send(raw)
        else:
            c.send(head)
            scripted.wait_conn(m, 1).wait(lambda: b"\r\n\r\n" in scripted.wait_conn(m, 1).data,
                                          what="the head")
            c.send(body)
        expect_400_and_close(c, bad)
        port = c.local_port
    for oc in scripted.since(m):
        assert oc.wait_closed(3.0), "the origin connection was kept after a malformed request body"
    s.stop()
    assert_exchanges(s, port, [("allow", "bad_request_body")])
    assert_origin_traffic(scripted.since(m), [sent])


@pytest.mark.parametrize("after", ["next-request", "junk"])
def test_bytes_after_a_content_length_body_are_the_next_request(sluice, scripted, after):
    """Content-Length: 5, and more bytes in the same write: they are the
    next request. A real one gets its own response; junk gets a 400
    refusal (bad_request) and the connection closes, the origin never
    seeing it."""
    s = gate(sluice)
    m = scripted.mark()
    raw1, sent1 = request("POST", "http://h1.hostile.test/a", body=b"hello")
    raw2, sent2 = request("GET", "http://h1.hostile.test/b")
    sent = [sent1]
    with Conn(s.port) as c:
        if after == "next-request":
            c.send(raw1 + raw2)
            sent.append(sent2)
            r1, r2 = [r for r in c.read_strict(("POST", "GET")) if not r.interim]
            assert r1.header("X-Path") == "/a" and r1.body == b"hello", r1
            assert r2.header("X-Path") == "/b" and r2.body == b"", r2
            expect = [("allow", "done"), ("allow", "done")]
        else:
            c.send(raw1 + b"XYZZY\r\n\r\n")
            r1 = c.read_final("POST")
            assert r1.header("X-Path") == "/a" and r1.body == b"hello", r1
            closed, data = c.drain_until_closed(5.0)
            assert closed
            resps, tail, err = parse_responses(data, ["GET"], eof=True)
            assert err is None and tail is None and len(resps) == 1, data[:300]
            assert_refused(resps[0], 400, "bad_request")
            expect = [("allow", "done"), ("deny", "bad_request")]
        port = c.local_port
    s.stop()
    assert_exchanges(s, port, expect)
    assert_origin_traffic(scripted.since(m), sent)
    assert all(b"XYZZY" not in oc.received for oc in scripted.since(m))


# --- a reset and a half-close at every byte offset, in every phase -------------------
def _make(framing, host, path):
    if framing == "length":
        return request("POST", f"http://{host}{path}", body=b"hello")
    return request("POST", f"http://{host}{path}", body=b"hello", chunked=True)


def _wait_origin_has(scripted, mark, marker, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        for oc in scripted.since(mark):
            if marker in oc.received:
                return oc
        if time.monotonic() > deadline:
            raise AssertionError(f"no origin connection received {marker!r} within {timeout}s")
        time.sleep(0.002)


@pytest.mark.parametrize("framing", ["length", "chunked"])
@pytest.mark.parametrize("action", ["reset", "half-close"])
def test_a_client_that_goes_away_at_every_byte_offset(sluice, scripted, slow_dns, framing, action):
    """For every byte offset k of a short POST (Content-Length or chunked
    body), the client sends k bytes, then resets or half-closes, in each
    phase: reading the head (k inside the head); resolving (DNS held),
    connecting (stall.test:443 drops SYNs) and forwarding (the origin has
    the head) for k from the end of the head to the whole request. After
    each: the gate is alive and serves a fresh client.

    What each client gets (checked at the end, so slow phases overlap):
    after a reset, nothing to check; after a half-close inside the head,
    nothing or a 400 (engine.md is silent; squid just closes, a 400 is
    also honest); inside the body, nothing (E6); after the whole request,
    the response (E7), or 504 connect_timeout when connecting.

    The log: no decision line for an incomplete head (or one deny
    bad_request), exactly one for every complete head (E12): allow while
    resolving or forwarding, with a close line `end` client_error for a
    reset (E6; done also accepted when the whole request had been sent and
    the response may have gone out first), client_eof for a half-close
    mid-body, done for a half-close after the whole request (E7); deny
    connect_timeout (or connect_failed) when connecting."""
    s = gate(sluice, slow_dns=True, timeouts={"connect_ms": 300})
    m = scripted.mark()
    tag = f"{framing[0]}{action[0]}"
    runs = []       # (conn or None, phase, k, len, head_len, sent, port)
    connecting = set()  # sluice's local ports connecting to the stall address
    sent_all = []

    def one(phase, k, host, path):
        try:
            attempt(phase, k, host, path)
        except Exception as e:
            time.sleep(0.2)
            died = crash_summary(s)
            raise AssertionError(f"{phase} k={k}: {e}" + ("" if died in str(e) else f" {died}")) from None

    def attempt(phase, k, host, path):
        raw, sent = _make(framing, host, path)
        head_len = raw.index(b"\r\n\r\n") + 4
        sent.complete = k == len(raw)
        sent.allowed = phase != "connecting"
        if phase == "resolving":
            slow_dns.hold(host)
            q = slow_dns.mark()
        elif phase == "connecting":
            before = syn_sent_ports()
        om = scripted.mark()
        c = unique_port_conn(s.port)
        port = c.local_port
        if k:
            c.send(raw[:k])
        if phase == "resolving":
            slow_dns.wait_query(host, q)
        elif phase == "connecting":
            connecting.update(wait_new_syn_sent(before))
        elif phase == "forwarding":
            _wait_origin_has(scripted, om, f"POST {path} ".encode())
        if action == "reset":
            c.reset()
            c = None
        else:
            c.half_close()
        if phase == "resolving":
            slow_dns.release(host)
        runs.append((c, phase, k, len(raw), head_len, sent, port))
        sent_all.append(sent)
        sent_all.append(fresh_client_is_served(s, f"/fresh-{phase}-{k:03d}"))

    # fixed-width names, so that every request of a phase has the same length
    raw, _ = _make(framing, "h1.hostile.test", "/h000")
    for k in range(raw.index(b"\r\n\r\n") + 4):
        one("head", k, "h1.hostile.test", f"/h{k:03d}")
    for phase in ("resolving", "connecting", "forwarding"):
        fixed = {"connecting": "stall.test:443", "forwarding": "h2.hostile.test"}.get(phase)
        probe, _ = _make(framing, fixed or f"r000-{tag}.slow.hostile.test", "/x000")
        head_len = probe.index(b"\r\n\r\n") + 4
        for k in range(head_len, len(probe) + 1):
            one(phase, k, fixed or f"r{k:03d}-{tag}.slow.hostile.test", f"/{phase[0]}{k:03d}")

    ports = [r[6] for r in runs]
    assert len(set(ports)) == len(ports), "a client port was reused; the log cannot be matched"

    problems = []
    for c, phase, k, n, head_len, sent, port in runs:
        if c is None:
            continue
        closed, data = c.drain_until_closed(3.0)
        c.close()
        where = f"{phase} k={k}/{n}"
        if not closed:
            problems.append(f"{where}: half-closed client left open")
            continue
        resps, tail, err = parse_responses(data, ["POST"], eof=True)
        if err is not None or tail is not None:
            problems.append(f"{where}: malformed or partial reply {data[:300]!r}")
            continue
        statuses = [r.status for r in resps]
        if phase == "head":
            if statuses not in ([], [400]):
                problems.append(f"{where}: half-close inside the head got {statuses}")
        elif k < n:
            if statuses != [] and not (phase == "connecting" and statuses == [504]):
                problems.append(f"{where}: half-close mid-body got a reply {statuses} (E6: none)")
        elif phase == "connecting":
            if statuses != [504] or resps[0].decision != ("deny", "connect_timeout"):
                problems.append(f"{where}: expected 504 connect_timeout, got {resps}")
        elif statuses != [200] or resps[0].header("X-Path") != sent.path or resps[0].body != b"hello":
            problems.append(f"{where}: half-close after the whole request: expected its response (E7), "
                            f"got {resps}")

    wait_no_syn_sent(connecting)    # every connecting-phase request has had its decision
    s.stop()
    for c, phase, k, n, head_len, sent, port in runs:
        where = f"{phase} k={k}/{n} (client :{port})"
        ex = exchanges(s, port)
        if k < head_len:
            if not (ex == [] or (len(ex) == 1 and ex[0][0]["decision"] == "deny"
                                 and ex[0][0]["reason"] == "bad_request")):
                problems.append(f"{where}: incomplete head logged {[d for d, _ in ex]}")
            continue
        if len(ex) != 1:
            problems.append(f"{where}: {len(ex)} decision lines for one complete head (E12): "
                            f"{[d for d, _ in ex]}")
            continue
        d, closes = ex[0]
        if phase == "connecting":
            if (d["decision"], d["reason"]) not in (("deny", "connect_timeout"), ("deny", "connect_failed")):
                problems.append(f"{where}: decision {d}")
            continue
        if d["decision"] != "allow" or len(closes) != 1:
            problems.append(f"{where}: expected allow with one close line: {d}, {closes}")
            continue
        end = closes[0]["end"]
        if action == "reset":
            want = {"client_error", "done"} if k == n else {"client_error"}
        else:
            want = {"done"} if k == n else {"client_eof"}
        if end not in want:
            problems.append(f"{where}: close end {end!r}, expected {sorted(want)}")
    assert not problems, f"{len(problems)} problem(s):\n  " + "\n  ".join(problems[:60])
    assert_origin_traffic(scripted.since(m), sent_all)


# --- E8, E9: pipelining ---------------------------------------------------------------
def test_a_pipelined_request_waits_for_the_current_exchange(sluice, scripted):
    """E8: two requests in one write; the second is not forwarded before the
    first exchange is complete (the origin sees only the first while it
    holds its response back), then each gets its own response."""
    s = gate(sluice)
    m = scripted.mark()
    raw1, sent1 = request("POST", "http://h1.hostile.test/one", body=b"first body")
    raw2, sent2 = request("GET", "http://h1.hostile.test/two")
    seen = {}

    def snapshot(conn):
        seen["data"] = conn.received

    scripted.play(Script(WaitRequest(), Sleep(0.3), Call(snapshot),
                         Send(lambda conn: b"HTTP/1.1 200 OK\r\nX-Path: /one\r\nX-Host: h1.hostile.test\r\n"
                                           b"Content-Length: 3\r\n\r\none"), Serve()))
    with Conn(s.port) as c:
        c.send(raw1 + raw2)
        r1, r2 = [r for r in c.read_strict(("POST", "GET")) if not r.interim]
        port = c.local_port
    assert r1.body == b"one" and r2.header("X-Path") == "/two", (r1, r2)
    assert b"/two" not in seen["data"], \
        f"the pipelined request reached the origin before the first response: {seen['data']!r}"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), [sent1, sent2])


@pytest.mark.parametrize("order", ["allowed-refused-allowed", "refused-allowed", "bad-allowed"])
def test_requests_pipelined_behind_a_refusal_are_never_forwarded(sluice, scripted, order):
    """E9: a refusal closes the client connection after its reply; the
    requests pipelined behind it are never forwarded (nor decided: no line
    for them, E8 parses the next request only after the current one)."""
    s = gate(sluice)
    m = scripted.mark()
    a_raw, a = request("GET", "http://h1.hostile.test/a")
    d_raw, d = request("GET", "http://denied.hostile.test/d", allowed=False)
    c_raw, c_ = request("POST", "http://h2.hostile.test/c", body=b"never")
    c_.allowed = False      # must never reach the origin
    bad = b"GET http://h1.hostile.test/x HTTP/1.1\r\nHost: h1.hostile.test\r\nBad Header: 1\r\n\r\n"
    plan = {"allowed-refused-allowed": ([a_raw, d_raw, c_raw], ["GET", "GET"], [200, 403],
                                        [("allow", "done"), ("deny", "not_allowlisted")]),
            "refused-allowed": ([d_raw, a_raw, c_raw], ["GET"], [403], [("deny", "not_allowlisted")]),
            "bad-allowed": ([bad, a_raw, c_raw], ["GET"], [400], [("deny", "bad_request")])}[order]
    chunks, methods, statuses, log = plan
    with Conn(s.port) as conn:
        conn.send(b"".join(chunks))
        closed, data = conn.drain_until_closed(5.0)
        port = conn.local_port
    assert closed, "the client connection stayed open after a refusal"
    resps, tail, err = parse_responses(data, methods, eof=True)
    assert err is None and tail is None, data[:500]
    assert [r.status for r in resps] == statuses, resps
    assert resps[-1].conn_close
    assert not scripted.since(m, local=H2), "a request pipelined behind a refusal reached an origin"
    s.stop()
    assert_exchanges(s, port, log)
    sent = [a if order == "allowed-refused-allowed" else Sent("GET", "/a", "h1.hostile.test", allowed=False),
            d, c_]
    assert_origin_traffic(scripted.since(m), sent)


# --- E10: Expect: 100-continue -----------------------------------------------------------
def test_expect_100_continue_with_an_origin_that_sends_100(sluice, scripted):
    """The head carries `Expect: 100-continue` and no body yet; the origin
    sends 100 (E10: relayed), the client then sends the body and gets the
    echo; the connection goes on."""
    s = gate(sluice)
    m = scripted.mark()
    raw, sent = request("POST", "http://h1.hostile.test/expect", body=b"after 100",
                        headers=[("Expect", "100-continue")])
    head, body = raw[:raw.index(b"\r\n\r\n") + 4], raw[raw.index(b"\r\n\r\n") + 4:]
    scripted.play(Script(WaitHead(), Send(b"HTTP/1.1 100 Continue\r\n\r\n"), Serve()))
    with Conn(s.port) as c:
        c.send(head)
        read_until(c, b"\r\n\r\n")
        resps, tail, err = parse_responses(c.buf, ["POST"])
        assert resps and resps[0].status == 100, bytes(c.buf)
        del c.buf[:len(resps[0].raw)]
        c.send(body)
        r = c.read_final("POST")
        assert r.status == 200 and r.body == b"after 100" and r.header("X-Path") == "/expect", r
        raw2, sent2 = request("GET", "http://h1.hostile.test/after")
        c.send(raw2)
        r2 = c.read_final()
        assert r2.header("X-Path") == "/after", r2
        port = c.local_port
    oc = scripted.wait_conn(m, 1)
    assert oc.requests()[0][0].header("Expect") == "100-continue", "Expect was not forwarded"
    s.stop()
    assert_exchanges(s, port, [("allow", "done"), ("allow", "done")])
    assert_origin_traffic(scripted.since(m), [sent, sent2])


def test_expect_100_continue_with_an_origin_that_answers_at_once(sluice, scripted):
    """The origin answers the head with a final 417 and no 100: an early
    response (E3): relayed with `Connection: close`, then the client
    connection closes; the body the client had held back never goes."""
    s = gate(sluice)
    m = scripted.mark()
    raw, sent = request("POST", "http://h1.hostile.test/expect", body=b"held back",
                        headers=[("Expect", "100-continue")])
    sent.complete = False
    head = raw[:raw.index(b"\r\n\r\n") + 4]
    scripted.play(Script(WaitHead(), Send(b"HTTP/1.1 417 Expectation Failed\r\nContent-Length: 2\r\n\r\nno")))
    with Conn(s.port) as c:
        c.send(head)
        r = c.read_final("POST")
        assert r.status == 417 and r.body == b"no", r
        assert r.conn_close, f"early final response without Connection: close: {r!r}"
        c.send(b"held back")
        closed, rest = c.drain_until_closed(5.0)
        assert closed and rest == b""
        port = c.local_port
    assert scripted.wait_conn(m, 1).wait_closed(3.0)
    s.stop()
    assert_exchanges(s, port, [("allow", "done")])
    assert_origin_traffic(scripted.since(m), [sent])


def test_expect_100_continue_with_an_origin_that_ignores_it(sluice, scripted):
    """The origin waits for the body without sending 100; the client, as RFC
    9110 10.1.1 lets it, sends the body after waiting a moment. The
    exchange completes normally."""
    s = gate(sluice)
    m = scripted.mark()
    raw, sent = request("POST", "http://h1.hostile.test/expect", body=b"sent anyway",
                        headers=[("Expect", "100-continue")])
    cut = raw.index(b"\r\n\r\n") + 4
    with Conn(s.port) as c:
        c.send(raw[:cut])
        scripted.wait_conn(m, 1).wait(lambda: b"\r\n\r\n" in scripted.wait_conn(m, 1).data, what="head")
        c.send(raw[cut:])
        r = c.read_final("POST")
        assert r.status == 200 and r.body == b"sent anyway", r
        port = c.local_port
    s.stop()
    assert_exchanges(s, port, [("allow", "done")])
    assert_origin_traffic(scripted.since(m), [sent])


# --- several hosts on one client connection ------------------------------------------
def test_requests_to_different_hosts_on_one_client_connection(sluice, scripted):
    """h1, h2, h1 again, alias (h1's address under another name), two (both
    addresses), h2 with a body, h1: each request gets its own response, and
    an origin connection only ever carries requests for one host (E1: the
    host must be the same for reuse, not only the address)."""
    s = gate(sluice)
    m = scripted.mark()
    plan = [("GET", "h1.hostile.test", "/1", None), ("GET", "h2.hostile.test", "/2", None),
            ("GET", "h1.hostile.test", "/3", None), ("GET", "alias.hostile.test", "/4", None),
            ("GET", "two.hostile.test", "/5", None), ("POST", "h2.hostile.test", "/6", b"six"),
            ("GET", "h1.hostile.test", "/7", None)]
    sent = []
    with Conn(s.port) as c:
        for method, host, path, body in plan:
            raw, sn = request(method, f"http://{host}{path}", body=body)
            sent.append(sn)
            c.send(raw)
            r = c.read_final(method)
            assert r.status == 200 and r.header("X-Host") == host and r.header("X-Path") == path, \
                f"{host}{path} got {r!r}"
            assert r.body == (body or b"")
        port = c.local_port
    s.stop()
    assert_exchanges(s, port, [("allow", "done")] * len(plan))
    assert_origin_traffic(scripted.since(m), sent)
