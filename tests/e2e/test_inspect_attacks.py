"""Attacks on inspected tunnels from a reviewer's side: TLS peers that send
what no TLS library sends on request (sluicetest/tlsrecords.py writes their
records), the tunnel's state machine hit at awkward moments, the request
log, and the credential's header."""

import time

from sluicetest.inspectlog import check_request, show, tunnel_line, wait_requests
from sluicetest.pattern import pattern
from sluicetest.tlsclient import tunnel
from sluicetest.tlsrecords import ALERT, APPLICATION_DATA, CLIENT_HELLO_EMPTY, HANDSHAKE, RawTLS

REG = "registry.inspect.test"
READS = f"GET,HEAD {REG}/*"
MiB = 1 << 20


def _raw_client(s, host=REG):
    raw = tunnel(s.port, host)
    return raw, RawTLS.client(raw.sock, s.ca, host).handshake()


def _get(host, path, extra=""):
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()


def _ends_response(data):
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) >= int(v)
    return False


def test_hand_written_records_carry_a_request_through_the_tunnel(sluice_inspecting, inspect_origins):
    """The record writer itself: a request in records of our own, the
    response read out of sluice's records (so the attacks below mean what
    they say)."""
    s = sluice_inspecting(allow=[READS])
    raw, t = _raw_client(s)
    t.send_app(_get(REG, "/bytes/50"), record=7)    # a head in 7-byte records
    data, closed, _ = t.recv_app_until(_ends_response)
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(pattern(50)), data[:300]
    raw.close()
    d = tunnel_line(s, raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    check_request(line, [READS], n=1, method="GET", path="/bytes/50", decision="allow", reason="rule",
                  status=200, rule=READS)


def _push(sock, data, stall_s=2.0):
    """Send as much of data as the peer takes; stop when a send has waited
    stall_s. Returns the bytes sent."""
    sock.settimeout(stall_s)
    sent = 0
    view = memoryview(data)
    try:
        while sent < len(data):
            sent += sock.send(view[sent:sent + (1 << 16)])
    except (TimeoutError, BlockingIOError):
        pass
    return sent


def test_renegotiation_requests_from_a_client_that_does_not_read_are_bounded(sluice_inspecting,
                                                                            inspect_origins):
    """Renegotiation is off, so sluice answers each ClientHello after the
    handshake with a no_renegotiation warning alert (RFC 5746 / 5246
    7.2.2) and reads on. A record of 4,096 empty ClientHellos is 16 KiB;
    its 4,096 alerts are 124 KiB. A client that never reads must not make
    sluice queue those without a bound: its reading has to stop while its
    replies wait."""
    s = sluice_inspecting(allow=[READS])
    raw, t = _raw_client(s)
    # One record first: the alerts really come (this is what the flood repeats).
    t.send_record(HANDSHAKE, CLIENT_HELLO_EMPTY * 3)
    recs, _ = t.recv_records(5.0, until=lambda r: len(r) >= 3)
    assert [(ty, p) for ty, p in recs] == [(ALERT, b"\x01\x64")] * 3, recs
    rss0 = s.rss()
    seq0 = t.wseq
    record = t.seal(HANDSHAKE, CLIENT_HELLO_EMPTY * 4096)
    flood = b"".join([record] + [t.seal(HANDSHAKE, CLIENT_HELLO_EMPTY * 4096) for _ in range(511)])
    sent = _push(raw.sock, flood)                      # 8 MiB, never reading
    time.sleep(0.5)
    grown = s.rss() - rss0
    assert grown < 24 * MiB, \
        f"{sent / MiB:.1f} MiB of renegotiation requests (client not reading) grew sluice by {grown / MiB:.1f} MiB"
    cpu0 = _cpu_s(s)
    time.sleep(1.0)
    assert _cpu_s(s) - cpu0 < 0.3, "sluice spins while its answers wait for a client that does not read"
    # The client reads again: what was held back is answered, then requests go on.
    t.rseq += _discard_records(t, raw.sock, quiet_s=1.5)
    raw.sock.settimeout(10.0)
    raw.sock.sendall(flood[sent:sent + (-sent) % len(record)])   # the record cut by the stall, whole
    t.wseq = seq0 + -(-sent // len(record))                       # the records sent, not all sealed
    t.send_app(_get(REG, "/bytes/20"))
    data, closed, _ = t.recv_app_until(_ends_response)
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(pattern(20)), data[:300]
    raw.close()
    assert s.alive()


def _cpu_s(s):
    with open(f"/proc/{s.proc.pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / 100.0   # utime + stime, in clock ticks


def _discard_records(t, sock, quiet_s):
    """Read and count whole records (unopened) until none come for quiet_s."""
    buf, n = bytearray(t.rbuf), 0
    sock.settimeout(quiet_s)
    while True:
        off = 0
        while len(buf) - off >= 5:
            size = 5 + int.from_bytes(buf[off + 3:off + 5], "big")
            if len(buf) - off < size:
                break
            off += size
            n += 1
        del buf[:off]
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not data:
            break
        buf += data
    t.rbuf = bytes(buf)
    return n


# --- the log of a tunnel ---------------------------------------------------------

SPEC_REASONS = {"allowlisted", "not_allowlisted", "port_not_allowed", "bad_request", "non_public_address",
                "dns_error", "dns_timeout", "connect_failed", "connect_timeout", "sni_mismatch",
                "too_many_clients", "log_unavailable", "shutdown", "inspected", "rule", "rule_not_matched",
                "upstream_tls_failed"}


def test_an_inspected_connects_decision_line_names_the_sni_it_read(sluice_inspecting, inspect_origins):
    """SPEC's decision line has `sni` whenever a ClientHello with a server
    name was read; an inspected CONNECT reads one as every checked tunnel
    does (its allow line is written later, after the origin's handshake)."""
    s = sluice_inspecting(allow=[READS, "GET,HEAD expired.inspect.test/*"])
    for host in (REG, "expired.inspect.test"):
        raw, t = _raw_client(s, host)
        raw.close()
        d = tunnel_line(s, raw.local_port)
        assert d.get("sni") == host, f"the decision line of CONNECT {host} has no sni:\n{show([d])}"


def test_a_client_gone_during_the_origins_handshake_still_gets_a_decision_of_spec(sluice_inspecting, recorder):
    """The client sends its ClientHello and closes while sluice's handshake
    with the origin runs (the recorder never answers it). The CONNECT was
    made, so it is decided as any other: by what the origin does (here no
    handshake within connect_ms: upstream_tls_failed), with a reason SPEC
    lists; not deny `client_eof`."""
    from sluicetest.client import client_hello
    host = "recorder.test"
    s = sluice_inspecting(allow=[f"GET {host}/*"], config={"timeouts": {"connect_ms": 1500}})
    mark = recorder.mark()
    raw = tunnel(s.port, host)
    raw.send(client_hello(host))
    recorder.wait_bytes(mark, 5)                  # sluice's own ClientHello reached the origin
    raw.close()
    d = tunnel_line(s, raw.local_port)
    lines = [l for l in s.log_lines() if l.get("id") == d["id"]]
    assert d["reason"] in SPEC_REASONS, f"a reason SPEC does not list:\n{show(lines)}"
    assert (d["decision"], d["reason"]) == ("deny", "upstream_tls_failed"), show(lines)
    time.sleep(0.3)
    lines = [l for l in s.log_lines() if l.get("id") == d["id"]]
    assert [l["event"] for l in lines] == ["decision"], show(lines)


def test_a_request_head_cut_by_header_ms_in_a_tunnel_gets_a_line_with_its_own_n(sluice_inspecting,
                                                                               inspect_origins):
    """n counts the requests of a tunnel from 1; a head that never ends
    (refused 408 at header_ms) is a request with its own n, not the
    previous one's again (nor 0 when it is the first)."""
    s = sluice_inspecting(allow=[READS], config={"timeouts": {"header_ms": 800}})
    for before in (0, 1):
        raw, t = _raw_client(s)
        for i in range(before):
            t.send_app(_get(REG, "/bytes/3"))
            data, _, _ = t.recv_app_until(_ends_response)
            assert data.startswith(b"HTTP/1.1 200"), data[:200]
        t.send_app(b"GET /bytes/3 HTTP/1.1\r\nHost: ")
        data, closed, _ = t.recv_app_until(_ends_response, timeout=5.0)
        assert data.startswith(b"HTTP/1.1 408"), data[:200]
        raw.close()
        d = tunnel_line(s, raw.local_port)
        lines = wait_requests(s, d["id"], before + 1)
        assert [l["n"] for l in lines] == list(range(1, before + 2)), show(lines)


# --- a hostile HTTPS origin (sluicetest/tlsorigin.py) -----------------------------

import ssl  # noqa: E402
import struct  # noqa: E402

import pytest  # noqa: E402

from sluicetest import tlsorigin  # noqa: E402
from sluicetest.checks import assert_refused  # noqa: E402
from sluicetest.client import Closed, Conn  # noqa: E402
from sluicetest.tlsclient import tls_through  # noqa: E402
from sluicetest.tlsrecords import HELLO_REQUEST  # noqa: E402

H2 = tlsorigin.HOST
H2_RULES = [f"GET,HEAD {H2}/*"]


@pytest.fixture(scope="module")
def _tls_origin(tls, session_dir, network):
    cert, key = tlsorigin.make_cert(session_dir, tls)
    o = tlsorigin.TLSOrigin(cert, key)
    yield o
    o.close()


@pytest.fixture
def tls_origin(_tls_origin):
    _tls_origin.reset_script()
    yield _tls_origin
    _tls_origin.reset_script()


def _lines(s, conn_id):
    return [l for l in s.log_lines() if l.get("id") == conn_id]


def _one_tunnel_record(s, client_port, requests, allowed=True, settle=0.3):
    """The tunnel's lines once it is over: one decision, `requests` request
    lines numbered from 1, and a close line only for an allowed tunnel."""
    d = tunnel_line(s, client_port)
    if requests:
        wait_requests(s, d["id"], requests)
    if allowed:
        s.close_for(d["id"])
    time.sleep(settle)   # nothing more comes
    lines = _lines(s, d["id"])
    events = [l["event"] for l in lines]
    want = ["decision"] + ["request"] * requests + (["close"] if allowed else [])
    assert sorted(events) == sorted(want), f"expected {want}:\n{show(lines)}"
    assert [l["n"] for l in lines if l["event"] == "request"] == list(range(1, requests + 1)), show(lines)
    return d, lines


def _server_flights(o):
    """(first flight, second flight) an origin's ssl sends to sluice: its
    ServerHello...ServerHelloDone, then ChangeCipherSpec and Finished."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(o.cert), str(o.key))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _cut_handshake(second, cut, how):
    """A handler: a real handshake as far as `cut` bytes into the origin's
    first (second=False) or second flight, then a close (how="fin") or a
    reset."""
    def handler(conn):
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = _server_flights(conn.origin).wrap_bio(inc, out, server_side=True)
        conn.sock.settimeout(10)
        flights = 0
        while True:
            data = conn.sock.recv(1 << 16)
            if not data:
                return
            inc.write(data)
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            flight = out.read()
            if not flight:
                continue
            if flights == int(second):
                conn.sock.sendall(flight[:cut if cut >= 0 else len(flight) + cut])
                if how == "fin":
                    conn.sock.shutdown(socket.SHUT_WR)
                    conn.wait_end()
                else:
                    conn.reset()
                return
            conn.sock.sendall(flight)
            flights += 1
    return handler


import socket  # noqa: E402

CUTS = [(False, 0), (False, 1), (False, 5), (False, 6), (False, 9), (False, 60), (False, 400), (False, -9),
        (False, -4), (False, -1), (True, 0), (True, 1), (True, 6), (True, 20), (True, -1)]


@pytest.mark.parametrize("how", ["fin", "reset"])
def test_an_origin_that_ends_at_any_point_of_its_handshake_gets_no_request(sluice_inspecting, tls_origin, how):
    """At each cut the CONNECT is denied upstream_tls_failed (one decision
    line, no close line), the client still completes its own handshake and
    its request gets 502 inside the tunnel, and nothing of it reaches any
    origin."""
    o = tls_origin
    s = sluice_inspecting(allow=H2_RULES)
    for second, cut in CUTS:
        mark = o.mark()
        o.play(_cut_handshake(second, cut, how))
        tsock, conn, raw = tls_through(s.port, H2, s.ca)
        r = conn.request("GET", "/x", host=H2)
        assert_refused(r, 502, "upstream_tls_failed")
        tsock.close()
        d, lines = _one_tunnel_record(s, raw.local_port, 1, allowed=False)
        assert (d["decision"], d["reason"]) == ("deny", "upstream_tls_failed"), show(lines)
        [c] = o.wait_conns(mark, 1)
        o.wait_done(c)
        assert c.requests == [] and o.mark() == mark + 1, f"cut {second, cut}: a request reached an origin"
    assert s.alive()


def _answer_then(cut, how):
    """A handler: a handshake, one request read, `cut` bytes of a response
    (a 200 with a 10-byte body, as one record), then a close or a reset."""
    def handler(conn):
        t = conn.handshake()
        if conn.read_request(t) is None:
            return
        resp = conn.response(b"0123456789")
        part = resp[:cut if cut >= 0 else len(resp) + cut]
        if part:
            t.send_app(part)
        if how == "fin":
            conn.sock.shutdown(socket.SHUT_WR)
            conn.wait_end()
        else:
            time.sleep(0.05)   # the bytes before the reset reach sluice first
            conn.reset()
    return handler


@pytest.mark.parametrize("how", ["fin", "reset"])
def test_an_origin_that_ends_at_any_point_of_a_response_gets_one_line_per_request(sluice_inspecting, tls_origin,
                                                                                  how):
    """Cut before the head ends: the client gets sluice's 502; cut in the
    body: the client is cut off. Either way the request has one line, the
    tunnel one decision and one close line. With nothing of a response
    (cut 0) the GET went on the connection made for the tunnel, so it is
    sent once more on a new one (RFC 9112 9.3.1), which here is cut too:
    exactly two origin connections see it."""
    o = tls_origin
    s = sluice_inspecting(allow=H2_RULES)
    resp_len = len(tlsorigin.OriginConn.response(b"0123456789"))
    head_len = resp_len - 10
    for cut in (0, 1, 8, head_len - 2, head_len, head_len + 3, -1):
        o.reset_script()
        m = o.mark()
        o.play(_answer_then(cut, how))
        if cut == 0:
            o.play(_answer_then(cut, how))   # the retry's connection
        tsock, conn, raw = tls_through(s.port, H2, s.ca)
        try:
            r = conn.request("GET", "/x", host=H2)
            got = r.status
        except Closed:
            got = "cut"
        tsock.close()
        end = cut if cut >= 0 else resp_len + cut
        if end < head_len:
            assert got == 502, f"cut at {cut}: expected sluice's 502, got {got}"
        else:
            assert got == "cut", f"cut at {cut} in the body: expected the client cut off, got {got}"
        d, lines = _one_tunnel_record(s, raw.local_port, 1)
        [req] = [l for l in lines if l["event"] == "request"]
        assert req.get("end") in ("origin_eof", "origin_error"), show(lines)
        if cut == 0:
            assert len(o.wait_conns(m, 2)) == 2, "the GET was not sent once more on a new connection"
    assert s.alive()


@pytest.mark.parametrize("when", ["same_record", "next_record", "while_idle"])
def test_an_origin_that_answers_twice_is_not_believed_for_the_next_request(sluice_inspecting, tls_origin, when):
    """A second response from the origin (in the record of the first, in
    the next record, or sent while the connection is idle) belongs to no
    request: sluice drops that connection, and the client's next request
    gets its answer from a new one."""
    o = tls_origin
    s = sluice_inspecting(allow=H2_RULES)
    bogus = tlsorigin.OriginConn.response(b"BOGUS")
    spoke = threading.Event()

    def handler(conn):
        t = conn.handshake()
        head = conn.read_request(t)
        first = conn.response(conn.body_for(head))
        if when == "same_record":
            t.send_app(first + bogus)
        elif when == "next_record":
            t.send_record(APPLICATION_DATA, first)
            t.send_record(APPLICATION_DATA, bogus)
        else:
            t.send_app(first)
            time.sleep(0.3)
            t.send_app(bogus)
        spoke.set()
        conn.wait_end()

    mark = o.mark()
    o.play(handler)
    tsock, conn, raw = tls_through(s.port, H2, s.ca)
    r1 = conn.request("GET", "/one", host=H2)
    assert r1.status == 200 and r1.body == b"conn %d /one" % mark, r1
    assert spoke.wait(5)
    [c0] = o.wait_conns(mark, 1)
    o.wait_done(c0)                       # sluice dropped the connection that spoke out of turn
    r2 = conn.request("GET", "/two", host=H2)
    tsock.close()
    assert r2.status == 200 and r2.body == b"conn %d /two" % (mark + 1), \
        f"the second request was answered with {r2.body!r}"
    _one_tunnel_record(s, raw.local_port, 2)


import threading  # noqa: E402


@pytest.mark.parametrize("how", ["fin", "reset"])
def test_a_client_gone_while_its_request_waits_for_a_new_origin_connection(sluice_inspecting, tls_origin, how):
    """Request 1 is served and the origin hangs up; request 2 needs a new
    origin connection (CONNECTING -> TLS -> FORWARD), and the client leaves
    while that connection's handshake is held. The tunnel still ends with
    one line per request and one close line, and sluice stays up."""
    o = tls_origin
    s = sluice_inspecting(allow=H2_RULES)
    go = threading.Event()

    def hangup(conn):
        t = conn.handshake()
        head = conn.read_request(t)
        t.send_app(conn.response(conn.body_for(head)))
        conn.sock.close()

    def held(conn):
        assert go.wait(10)
        t = conn.handshake()
        conn.serve(t)

    mark = o.mark()
    o.play(hangup)
    o.play(held)
    tsock, conn, raw = tls_through(s.port, H2, s.ca)
    assert conn.request("GET", "/one", host=H2).status == 200
    o.wait_done(o.wait_conns(mark, 1)[0])
    time.sleep(0.2)                                  # the hang-up reached sluice
    conn.request("GET", "/two", host=H2, send_only=True)
    o.wait_conns(mark, 2)
    if how == "reset":
        tsock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    tsock.close()
    time.sleep(0.2)
    go.set()
    _one_tunnel_record(s, raw.local_port, 2)
    assert s.alive()


def test_hello_requests_from_an_origin_that_does_not_read_are_bounded(sluice_inspecting, tls_origin):
    """The origin's side of the renegotiation flood: HelloRequests while a
    response is awaited, never reading sluice's no_renegotiation alerts."""
    o = tls_origin
    s = sluice_inspecting(allow=H2_RULES)
    state = {}
    flooded = threading.Event()

    def handler(conn):
        t = conn.handshake()
        head = conn.read_request(t)
        rec = t.seal(HANDSHAKE, HELLO_REQUEST * 4096)
        seq0 = t.wseq - 1
        flood = rec + b"".join(t.seal(HANDSHAKE, HELLO_REQUEST * 4096) for _ in range(511))
        sent = _push(conn.sock, flood)
        state["sent"] = sent
        flooded.set()
        assert state_go.wait(20)
        _discard_records(t, conn.sock, quiet_s=1.5)
        conn.sock.settimeout(10)
        conn.sock.sendall(flood[sent:sent + (-sent) % len(rec)])
        t.wseq = seq0 + -(-sent // len(rec))
        t.send_app(conn.response(conn.body_for(head)))
        conn.wait_end()

    state_go = threading.Event()
    mark = o.mark()
    o.play(handler)
    tsock, conn, raw = tls_through(s.port, H2, s.ca)
    rss0 = s.rss()
    conn.request("GET", "/one", host=H2, send_only=True)
    assert flooded.wait(30)
    time.sleep(0.5)
    grown = s.rss() - rss0
    state_go.set()
    assert grown < 24 * MiB, \
        f"{state['sent'] / MiB:.1f} MiB of HelloRequests (origin not reading) grew sluice by {grown / MiB:.1f} MiB"
    conn.sock.settimeout(30)
    r = conn.read_response()
    assert r.status == 200 and r.body == b"conn %d /one" % mark, r
    tsock.close()
    o.wait_done(o.wait_conns(mark, 1)[0], timeout=30)


# --- the credential's header --------------------------------------------------------

def _request_complete(d):
    """A whole request: a head without a body, or a chunked one through
    its last chunk and trailer section."""
    head, sep, body = d.partition(b"\r\n\r\n")
    if not sep:
        return False
    if b"chunked" not in head.lower():
        return True
    return b"\r\n0\r\n" in b"\r\n" + body and body.endswith(b"\r\n\r\n")


def test_the_credential_header_reaches_the_origin_once_whatever_the_client_tries(sluice_inspecting, tls_origin):
    """With a credential for the host, the origin sees the gate's value
    exactly once; a client's attempts to add its own (odd casing, a
    header named twice, an obs-fold continuation, whitespace before the
    colon, the name in a chunked body's trailer) are dropped or refused."""
    import secrets as _secrets
    o = tls_origin
    secret = "sl-cred-" + _secrets.token_hex(16)
    s = sluice_inspecting(allow=[f"GET,HEAD,POST {H2}/*"],
                          credentials=[("h2", H2, "Authorization", "Bearer {secret}", secret)])
    seen = []

    def recorder(conn):
        t = conn.handshake()
        data, closed, _ = t.recv_app_until(_request_complete, timeout=5.0)
        if data:
            seen.append(data)
        if not closed:
            t.send_app(conn.response(b"ok"))
            conn.wait_end()

    attempts = {
        "casing": (b"GET /a HTTP/1.1\r\nHost: %s\r\naUtHoRiZaTiOn: Bearer mine\r\n\r\n", 200),
        "twice": (b"GET /a HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer a\r\nAUTHORIZATION: Bearer b\r\n\r\n", 200),
        "obs-fold": (b"GET /a HTTP/1.1\r\nHost: %s\r\nX-A: 1\r\n Authorization: Bearer mine\r\n\r\n", 400),
        "space-colon": (b"GET /a HTTP/1.1\r\nHost: %s\r\nAuthorization : Bearer mine\r\n\r\n", 400),
        "trailer": (b"POST /a HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"2\r\nhi\r\n0\r\nAuthorization: Bearer mine\r\n\r\n", 400),
    }
    problems = []
    for name, (req, status) in attempts.items():
        seen.clear()
        mark = o.mark()
        o.play(recorder)
        raw, t = _raw_client(s, H2)
        t.send_app(req % H2.encode())
        data, closed, _ = t.recv_app_until(_ends_response, timeout=5.0)
        raw.close()
        o.wait_done(o.wait_conns(mark, 1)[0])
        got = data.split(b" ", 2)[1] if data.startswith(b"HTTP/1.1 ") else None
        if status is not None and got != str(status).encode():
            problems.append(f"{name}: status {got!r}, expected {status}")
        for d in seen:
            auth = [l for l in d.split(b"\r\n") if l.lower().startswith(b"authorization")]
            if auth != [b"Authorization: Bearer " + secret.encode()]:
                problems.append(f"{name}: the origin read Authorization lines {auth!r}")
        if status == 400 and any(_request_complete(d) for d in seen):
            problems.append(f"{name}: a refused request reached the origin whole: {seen!r}")
    assert not problems, "\n".join(problems)


# --- requests inside the tunnel: pipelining, half-closes ---------------------------

def test_pipelined_requests_in_one_record_are_answered_in_order_one_line_each(sluice_inspecting, inspect_origins):
    o = inspect_origins
    s = sluice_inspecting(allow=[READS])
    mark = o.mark()
    raw, t = _raw_client(s)
    t.send_app(_get(REG, "/bytes/5") + _get(REG, "/bytes/6") + b"HEAD /bytes/7 HTTP/1.1\r\nHost: %s\r\n\r\n"
               % REG.encode() + _get(REG, "/bytes/8"))
    want = [pattern(5), pattern(6), b"", pattern(8)]
    data, closed, _ = t.recv_app_until(lambda d: d.count(b"HTTP/1.1 200") == 4 and d.endswith(pattern(8)))
    raw.close()
    parts = data.split(b"HTTP/1.1 200")[1:]
    assert [p.partition(b"\r\n\r\n")[2] for p in parts] == want, data
    d, lines = _one_tunnel_record(s, raw.local_port, 4)
    assert [l["path"] for l in lines if l["event"] == "request"] == ["/bytes/5", "/bytes/6", "/bytes/7", "/bytes/8"]
    assert [q.target for q in o.requests_since(mark)] == ["/bytes/5", "/bytes/6", "/bytes/7", "/bytes/8"]


def test_a_refused_request_pipelined_behind_allowed_ones_reaches_no_origin(sluice_inspecting, inspect_origins):
    o = inspect_origins
    s = sluice_inspecting(allow=[READS])
    mark = o.mark()
    raw, t = _raw_client(s)
    t.send_app(_get(REG, "/bytes/5") + b"PUT /x HTTP/1.1\r\nHost: %s\r\nContent-Length: 2\r\n\r\nhi" % REG.encode()
               + _get(REG, "/bytes/6"))
    data, closed, _ = t.recv_app_until(lambda d: b"HTTP/1.1 403" in d and _ends_response(d[d.index(b"HTTP/1.1 403"):]))
    closed = closed or t.recv_records(3.0)[1]
    raw.close()
    assert data.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 403" in data and data.count(b"HTTP/1.1") == 2, data
    assert closed, "the tunnel stayed open after a refusal"
    d, lines = _one_tunnel_record(s, raw.local_port, 2)
    reqs = [l for l in lines if l["event"] == "request"]
    assert [(l["method"], l["decision"]) for l in reqs] == [("GET", "allow"), ("PUT", "deny")], show(lines)
    assert [q.target for q in o.requests_since(mark)] == ["/bytes/5"]


REQ = f"GET /bytes/9 HTTP/1.1\r\nHost: {REG}\r\n\r\n".encode()


@pytest.mark.parametrize("how", ["close_notify", "fin", "reset"])
def test_a_client_that_ends_at_any_byte_of_its_request(sluice_inspecting, inspect_origins, how):
    """A head cut by the client's end is no request: no line, nothing at the
    origin. A whole request followed by close_notify or a FIN (a half-close)
    is still answered."""
    o = inspect_origins
    s = sluice_inspecting(allow=[READS])
    for cut in sorted({1, 3, 4, 5, 14, 15, 16, len(REQ) - 3, len(REQ) - 2, len(REQ) - 1, len(REQ)}):
        mark = o.mark()
        raw, t = _raw_client(s)
        t.send_app(REQ[:cut])
        if how == "close_notify":
            t.send_record(ALERT, b"\x01\x00")
        elif how == "fin":
            raw.sock.shutdown(socket.SHUT_WR)
        else:
            raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            raw.sock.close()
        if how != "reset":
            data, closed, _ = t.recv_app_until(lambda d: d.endswith(pattern(9)), timeout=5.0)
            if cut == len(REQ):
                assert data.startswith(b"HTTP/1.1 200") and data.endswith(pattern(9)), (how, cut, data)
            else:
                assert data == b"", (how, cut, data)
            raw.close()
        d = tunnel_line(s, raw.local_port)
        s.close_for(d["id"])
        time.sleep(0.1)
        reqs = [l for l in _lines(s, d["id"]) if l["event"] == "request"]
        if cut < len(REQ):
            assert reqs == [], f"{how} at {cut}: a cut head got a line: {show(reqs)}"
            assert o.requests_since(mark) == []
        elif how != "reset":
            assert [(l["n"], l["status"]) for l in reqs] == [(1, 200)], show(reqs)
    assert s.alive()


# --- a client that ends inside its handshake -------------------------------------

@pytest.mark.parametrize("how", ["fin", "reset"])
def test_a_client_that_ends_at_any_point_of_its_handshake(sluice_inspecting, inspect_origins, how):
    """Cut inside the ClientHello: the CONNECT is denied (sni_mismatch),
    nothing reaches the origin. Cut inside the client's second flight: the
    CONNECT was allowed (the origin's handshake is done), its close line
    says the client's handshake did not finish, and no request reaches the
    origin. One decision line either way; sluice stays up."""
    from sluicetest.tlsclient import MemTLS, context
    o = inspect_origins
    s = sluice_inspecting(allow=[READS])
    for second in (False, True):
        for frac in (0.0, 0.02, 0.05, 0.3, 0.6, 0.95, 1.0):
            mark = o.mark()
            raw = tunnel(s.port, REG)
            t = MemTLS(raw.sock, context(s.ca), REG)
            flight = t.first_flight()
            if second:
                raw.send(flight)
                flight = t.read_server_flight()
            cut = max(1, int(len(flight) * frac)) if not (second and frac == 0.0) else 0
            if cut:
                raw.send(flight[:cut])
            if how == "fin":
                raw.sock.shutdown(socket.SHUT_WR)
                raw.drain_until_closed(5.0)
            else:
                raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            raw.close()
            d = tunnel_line(s, raw.local_port)
            whole_hello = second or cut == len(flight)
            if not whole_hello:
                s.wait_log(lambda l: l.get("id") == d["id"])
                time.sleep(0.1)
                lines = _lines(s, d["id"])
                assert [l["event"] for l in lines] == ["decision"] and d["reason"] == "sni_mismatch", show(lines)
            else:
                # A whole ClientHello with nothing after it may still be a
                # handshake that the client gives up: allowed, then closed.
                close = s.close_for(d["id"])
                time.sleep(0.1)
                lines = _lines(s, d["id"])
                assert [l["event"] for l in lines] == ["decision", "close"], show(lines)
                assert (d["decision"], d["reason"]) == ("allow", "inspected"), show(lines)
                if second and cut == len(flight):   # the handshake is complete: a tunnel with no request
                    assert close["end"] in ("client_eof", "client_error"), show(lines)
                else:
                    assert close["end"] in ("client_tls_failed", "client_eof", "client_error") and \
                        close.get("detail"), show(lines)
            assert o.requests_since(mark) == [], f"a request reached the origin: {o.requests_since(mark)}"
    assert s.alive()


def test_a_trace_request_never_carries_the_credential(sluice_inspecting, tls_origin):
    """TRACE makes the origin send the request back (RFC 9110 9.3.8, which
    forbids putting credentials in one for that reason). With a rule that
    allows any method, a sandbox could TRACE and read the secret out of the
    response: sluice must not add the credential to a TRACE."""
    import secrets as _secrets
    o = tls_origin
    secret = "sl-cred-" + _secrets.token_hex(16)
    s = sluice_inspecting(allow=[f"* {H2}/*"],
                          credentials=[("h2", H2, "Authorization", "Bearer {secret}", secret)])

    def tracer(conn):
        t = conn.handshake()
        head = conn.read_request(t)
        if head is not None:   # the origin does what TRACE asks: the request back, as the body
            t.send_app(b"HTTP/1.1 200 OK\r\nContent-Type: message/http\r\nContent-Length: %d\r\n\r\n%s"
                       % (len(head), head))
        conn.wait_end()

    o.play(tracer)
    raw, t = _raw_client(s, H2)
    t.send_app(b"TRACE /x HTTP/1.1\r\nHost: %s\r\n\r\n" % H2.encode())
    data, closed, _ = t.recv_app_until(_ends_response, timeout=5.0)
    raw.close()
    assert secret.encode() not in data, "the secret came back to the client in a TRACE response"
    d = tunnel_line(s, raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    assert "credential" not in line, show([line])


# --- the last response of a tunnel, to a slow reader ---------------------------------

def _tcp_queues(local_port, remote_port):
    """(tx_queue, rx_queue) of the IPv4 TCP socket local_port -> remote_port."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if (int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)) == (local_port, remote_port):
            return tuple(int(x, 16) for x in f[4].split(":"))
    return (0, 0)


def _small_tunnel(port, host):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


@pytest.fixture
def small_tcp_send_buffers():
    """This test's namespace only (tcp_wmem is per network namespace): send
    buffers that autotune to 64 KiB at most, so "the kernel is full" is a
    size a test can reach."""
    path = "/proc/sys/net/ipv4/tcp_wmem"
    old = open(path).read()
    with open(path, "w") as f:
        f.write("4096 16384 65536")
    yield
    with open(path, "w") as f:
        f.write(old)


def test_the_last_response_of_a_tunnel_reaches_a_client_that_half_closed(sluice_inspecting, inspect_origins,
                                                                        small_tcp_send_buffers):
    """The client sends its request and its close_notify, and reads later.
    sluice answers, and closes once the client has the response. "Has it"
    must mean: handed to the kernel. Plaintext encrypted but still queued
    in sluice (the socket full) is not sent yet; freeing it cuts the
    response. Sizes around what the kernel holds (measured) make the end of
    the response fall in that queue."""
    s = sluice_inspecting(allow=[READS])
    sock = _small_tunnel(s.port, REG)
    t = RawTLS.client(sock, s.ca, REG).handshake()
    t.send_app(_get(REG, "/bytes/4000000"))
    time.sleep(1.0)
    tx, _ = _tcp_queues(s.port, sock.getsockname()[1])
    _, rx = _tcp_queues(sock.getsockname()[1], s.port)
    sock.close()
    held = tx + rx                                  # what the kernel holds for a client that does not read
    assert 16 << 10 < held < 1 << 20, held
    cut = []
    for n in range(held - (8 << 10), held + (28 << 10), 2 << 10):
        sock = _small_tunnel(s.port, REG)
        t = RawTLS.client(sock, s.ca, REG).handshake()
        t.send_app(_get(REG, f"/bytes/{n}"))
        t.send_record(ALERT, b"\x01\x00")           # close_notify: nothing more from this client
        time.sleep(0.5)                             # sluice answers, then closes, before we read
        data, closed, _ = t.recv_app_until(lambda d: d.endswith(pattern(n)), timeout=3.0)
        sock.close()
        if not data.endswith(pattern(n)):
            cut.append((n, len(data)))
    assert not cut, f"responses cut at the close (size, bytes the client got), the kernel holding {held}: {cut}"


def test_a_new_origin_connection_whose_handshake_never_ends_times_out_at_connect_ms(sluice_inspecting, tls_origin):
    """Request 2 needs a new origin connection (the first hung up), and the
    origin never answers its ClientHello: at connect_ms the request gets
    502 upstream_tls_failed inside the tunnel, its own deny line, and the
    tunnel its close line."""
    o = tls_origin
    s = sluice_inspecting(allow=H2_RULES, config={"timeouts": {"connect_ms": 1000}})

    def hangup(conn):
        t = conn.handshake()
        head = conn.read_request(t)
        t.send_app(conn.response(conn.body_for(head)))
        conn.sock.close()

    def silent(conn):
        conn.wait_end(timeout=15)

    mark = o.mark()
    o.play(hangup)
    o.play(silent)
    tsock, conn, raw = tls_through(s.port, H2, s.ca)
    assert conn.request("GET", "/one", host=H2).status == 200
    o.wait_done(o.wait_conns(mark, 1)[0])
    time.sleep(0.2)
    t0 = time.monotonic()
    r = conn.request("GET", "/two", host=H2)
    elapsed = time.monotonic() - t0
    tsock.close()
    assert_refused(r, 502, "upstream_tls_failed")
    assert 0.8 < elapsed < 3.0, f"the handshake's wait took {elapsed:.2f}s (connect_ms 1000)"
    d, lines = _one_tunnel_record(s, raw.local_port, 2)
    reqs = [l for l in lines if l["event"] == "request"]
    assert [(l["decision"], l["reason"]) for l in reqs] == [("allow", "rule"), ("deny", "upstream_tls_failed")], \
        show(lines)


@pytest.mark.parametrize("origin_close_notify", [True, False])
def test_a_body_that_ends_at_the_close_is_complete_only_with_the_origins_close_notify(sluice_inspecting, tls_origin,
                                                                                      origin_close_notify):
    """A response without Content-Length or chunked ends when the origin
    closes. In TLS, only a close_notify says that close is the origin's
    (RFC 5246 7.2.1, RFC 9112 9.8): without it, whoever cut the TCP
    connection cut the body. sluice must pass that on: its own close_notify
    to the client only when the origin sent one, so that a truncated body
    is never presented as complete."""
    o = tls_origin
    s = sluice_inspecting(allow=H2_RULES)

    def until_close(conn):
        t = conn.handshake()
        conn.read_request(t)
        t.send_app(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nthe first half of a body")
        if origin_close_notify:
            t.send_record(ALERT, b"\x01\x00")
        conn.sock.shutdown(socket.SHUT_WR)
        conn.wait_end()

    o.play(until_close)
    raw, t = _raw_client(s, H2)
    t.send_app(_get(H2, "/x"))
    recs, closed = t.recv_records(5.0)
    raw.close()
    data = b"".join(p for ty, p in recs if ty == APPLICATION_DATA)
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"the first half of a body"), data
    notified = (ALERT, b"\x01\x00") in recs
    assert notified == origin_close_notify, \
        f"origin close_notify {origin_close_notify}, but the client got one: {notified} ({recs[-2:]})"


def test_a_head_in_one_byte_records_and_empty_records_stay_cheap(sluice_inspecting, inspect_origins):
    """A head sent one byte per record (30 KiB of records of 1 byte), then
    a run of empty records: sluice holds about what the head is, the head
    still parses, and a run of empty records ends the tunnel (mbedtls
    allows 3 in a row) with a line, not a hang or a spin."""
    s = sluice_inspecting(allow=[READS])
    raw, t = _raw_client(s)
    head = _get(REG, "/bytes/4", "X-Pad: " + "p" * 30000 + "\r\n")
    rss0 = s.rss()
    t.send_app(head[:-1], record=1)
    time.sleep(0.3)
    grown = s.rss() - rss0
    assert grown < 4 * MiB, f"a {len(head)}-byte head in 1-byte records grew sluice by {grown / MiB:.1f} MiB"
    t.send_app(head[-1:])
    data, _, _ = t.recv_app_until(_ends_response)
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(pattern(4)), data[:200]
    try:
        for _ in range(10):
            t.send_record(APPLICATION_DATA, b"")
    except (ConnectionResetError, BrokenPipeError):
        pass   # sluice may end the tunnel (with a reset) before the tenth: what is checked next
    recs, closed = t.recv_records(5.0)
    assert closed, f"ten empty records in a row left the tunnel open: {recs}"
    raw.close()
    d, lines = _one_tunnel_record(s, raw.local_port, 1)
