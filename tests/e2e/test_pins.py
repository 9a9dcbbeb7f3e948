"""The held-back end of a pinned body, byte for byte (issue 12, SPEC part 2
"Pinned artifacts"), with a scripted HTTPS origin behind the inspecting
gate (sluicetest/tlsorigin.py, h2.hostile.test) and pinned rules written
here.

What must hold whatever the origin does: the client never has a complete
body (Content-Length bytes, or a chunked body through its last chunk)
whose digest differs from the rule's; bytes before the end are relayed as
they arrive; a right body arrives whole and the tunnel stays usable.
Range requests, coded and unframed 2xx bodies are refused
(integrity_unverifiable); other statuses pass unchanged.

The origin sends a response in parts and waits, between parts, until the
test has seen the client receive what the gate may relay of the first: so
each part is a read of its own at the gate, without fixed sleeps.

These tests run the gate with `[tls] pin_hold_kib = 0`, the streaming SPEC
describes (bodies this small would otherwise be held whole: see the tests
at the end, which run with the default)."""

import queue
import socket
import ssl
import threading
import time

import pytest

from sluicetest import tlsorigin
from sluicetest.checks import assert_refused
from sluicetest.inspectlog import tunnel_line, wait_requests
from sluicetest.pattern import pattern
from sluicetest.pins import show, sri
from sluicetest.strict import parse_responses
from sluicetest.tlsclient import tls_through

H2 = tlsorigin.HOST
BODY = pattern(3000)
CHUNKS = [1000, 1500, 500]              # BODY in chunks of these sizes
TERMINATOR = b"0\r\n\r\n"
STREAM = {"tls": {"pin_hold_kib": 0}}   # SPEC's streaming: only the end is held back
RULES = [
    f"GET {H2}/one {sri(BODY)}",                                   # sha512
    f"GET {H2}/two {sri(BODY, 'sha256')} {sri(BODY, 'sha384')}",   # two algorithms
    f"GET {H2}/*",                                                 # unpinned
]
PINNED = {"/one": RULES[0].split()[2:], "/two": RULES[1].split()[2:]}
WAIT = 5.0


def _head(length=None, chunked=False, extra=b""):
    h = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n" + extra
    if chunked:
        h += b"Transfer-Encoding: chunked\r\n"
    elif length is not None:
        h += b"Content-Length: %d\r\n" % length
    return h + b"\r\n"


def _chunked(body, sizes=CHUNKS, terminator=TERMINATOR):
    out, off = b"", 0
    for n in sizes:
        part = body[off:off + n]
        off += n
        if part:
            out += b"%x\r\n%s\r\n" % (len(part), part)
    assert off >= len(body)
    return out + terminator


def _flip_last(body):
    return body[:-1] + bytes([body[-1] ^ 0xFF])


def cl_response(body=BODY, length=None, extra=b""):
    return _head(len(body) if length is None else length, extra=extra) + body


def chunked_response(body=BODY):
    return _head(chunked=True) + _chunked(body)


# --- the origin ----------------------------------------------------------------

class Answer:
    """What the origin does for one request: send `parts` in order, the
    k-th only after `go[k-1]` is set by the test; then keep the connection
    for the next request, or "fin", "reset", "stall" (send nothing more
    and wait for sluice to close)."""

    def __init__(self, *parts, then="keep"):
        self.parts = list(parts)
        self.then = then
        self.go = [threading.Event() for _ in self.parts[1:]]
        self.head = None            # the request head the origin read
        self.ended = None           # for "stall": how sluice's side ended

    def release(self):
        for e in self.go:
            e.set()


def serve(answers):
    """A tlsorigin handler answering each request with the next Answer
    from the queue `answers`; with none queued the connection is dropped."""
    def handler(conn):
        t = conn.handshake()
        while True:
            head = conn.read_request(t)
            if head is None:
                return
            try:
                a = answers.get(timeout=WAIT)
            except queue.Empty:
                conn.reset()
                return
            a.head = head
            for i, part in enumerate(a.parts):
                if i and not a.go[i - 1].wait(WAIT):
                    conn.reset()
                    return
                if part:
                    t.send_app(part)
            if a.then == "keep":
                continue
            if a.then == "fin":
                conn.sock.shutdown(socket.SHUT_WR)
                conn.wait_end()
            elif a.then == "reset":
                time.sleep(0.05)    # the bytes before the reset reach sluice first
                conn.reset()
            elif a.then == "stall":
                a.ended = conn.wait_end(timeout=WAIT * 2)
            return
    return handler


@pytest.fixture(scope="module")
def _tls_origin(tls, session_dir, network):
    cert, key = tlsorigin.make_cert(session_dir, tls)
    o = tlsorigin.TLSOrigin(cert, key)
    yield o
    o.close()


@pytest.fixture
def origin(_tls_origin):
    _tls_origin.reset_script()
    yield _tls_origin
    _tls_origin.reset_script()


# --- the client ----------------------------------------------------------------

class Client:
    """One tunnel through the gate to H2 with TLS inside; reads what
    arrives and how the connection ended."""

    def __init__(self, s):
        self.tsock, _, self.raw = tls_through(s.port, H2, s.ca)
        self.data = bytearray()
        self.ended = None           # None, "eof" or "reset"

    def get(self, path, headers=b""):
        self.tsock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nAccept-Encoding: gzip, br\r\n%s\r\n"
                           % (path.encode(), H2.encode(), headers))

    def read_until(self, pred, timeout=WAIT):
        """Read until pred(data) or the connection ends; True if pred held."""
        deadline = time.monotonic() + timeout
        while not pred(bytes(self.data)):
            if self.ended:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.tsock.settimeout(left)
            try:
                got = self.tsock.recv(1 << 16)
            except (socket.timeout, TimeoutError):
                continue
            except ConnectionResetError:
                self.ended = "reset"
                continue
            except (ssl.SSLError, OSError):
                self.ended = "eof"      # closed without close_notify
                continue
            if not got:
                self.ended = "eof"
            self.data += got
        return True

    def body_received(self):
        """Body bytes (as framed) after the first response head."""
        i = self.data.find(b"\r\n\r\n")
        return 0 if i < 0 else len(self.data) - i - 4

    def wait_body(self, n, timeout=WAIT):
        return self.read_until(lambda d: self.body_received() >= n, timeout)

    def wait_end(self, timeout=WAIT):
        self.read_until(lambda d: False, timeout)
        return self.ended

    def responses(self, methods=("GET",)):
        """The complete responses received so far (strict parser)."""
        resps, _, err = parse_responses(bytes(self.data), list(methods))
        assert err is None, f"malformed bytes from the gate: {err}; {bytes(self.data)[:300]!r}"
        return [r for r in resps if not r.interim]

    def take(self, method="GET"):
        """The next complete response, removed from the buffer."""
        assert self.read_until(lambda d: self.responses((method,)), WAIT), \
            f"no complete response (ended: {self.ended}); have {bytes(self.data)[:300]!r}"
        r = self.responses((method,))[0]
        del self.data[:len(r.raw)]
        return r

    def close(self):
        try:
            self.tsock.close()
        except OSError:
            pass


def _never_a_wrong_whole_body(client, path):
    """The invariant: no complete response to the pinned path whose body
    hashes to none of its rule's digests."""
    for r in client.responses():
        if 200 <= r.status < 300:
            got = {d.split("-", 1)[0]: d for d in PINNED[path]}
            assert any(sri(r.body, alg) == d for alg, d in got.items()), \
                f"the client has a whole body of {len(r.body)} bytes that does not match {path}'s rule"


def _mismatch_lines(s, clients, path, sent_body):
    """Each tunnel's one request line: deny integrity_mismatch, expected
    the rule's digests, actual the body's in the same algorithms."""
    ports = {f":{c.raw.local_port}" for c in clients}
    deadline = time.monotonic() + WAIT
    while True:
        lines = s.log_lines()
        ids = {l["id"] for l in lines if l.get("event") == "decision"
               and str(l.get("client", ""))[str(l.get("client", "")).rfind(":"):] in ports}
        done = {l["id"] for l in lines if l.get("event") == "request" and l.get("id") in ids}
        if len(done) == len(clients) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    want = {"method": "GET", "path": path, "decision": "deny", "reason": "integrity_mismatch",
            "expected": " ".join(PINNED[path]),
            "actual": " ".join(sri(sent_body, x.split("-", 1)[0]) for x in PINNED[path])}
    for c in clients:
        [d] = [l for l in lines if l.get("event") == "decision"
               and str(l.get("client", "")).endswith(f":{c.raw.local_port}")]
        [line] = [l for l in lines if l.get("event") == "request" and l.get("id") == d["id"]]
        wrong = {k: (line.get(k), v) for k, v in want.items() if line.get(k) != v}
        assert not wrong, f"(got, expected) {wrong}:\n{show([line])}"


def _mismatch_line(s, client, path, sent_body):
    _mismatch_lines(s, [client], path, sent_body)


def _upstream_asked_identity(answer):
    head = answer.head.lower()
    assert head.count(b"accept-encoding:") == 1 and b"\r\naccept-encoding: identity\r\n" in head, \
        f"the origin was not asked for the identity coding only: {answer.head!r}"


# --- a right body ------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/one", "/two"])
def test_a_right_body_arrives_whole_and_the_tunnel_stays_usable(sluice_inspecting, origin, path):
    """Content-Length and chunked, one after the other in one tunnel on one
    origin connection, then an unpinned request: each arrives whole."""
    s = sluice_inspecting(allow=RULES, config=STREAM)
    answers = queue.Queue()
    mark = origin.mark()
    origin.play(serve(answers))
    c = Client(s)
    plans = [Answer(cl_response()), Answer(chunked_response()), Answer(cl_response(b"next"))]
    for a, p in zip(plans, [path, path, "/other"]):
        answers.put(a)
        c.get(p)
        r = c.take()
        assert (r.status, r.body) == (200, a.parts[0].split(b"\r\n\r\n", 1)[1] if p == "/other" else BODY), r
    _upstream_asked_identity(plans[0])
    _upstream_asked_identity(plans[1])
    assert b"accept-encoding: gzip, br" in plans[2].head.lower(), "an unpinned request's coding was changed"
    c.close()
    d = tunnel_line(s, c.raw.local_port)
    lines = wait_requests(s, d["id"], 3)
    assert [(l["path"], l["decision"], l["reason"], l["status"]) for l in lines] == \
        [(path, "allow", "rule", 200), (path, "allow", "rule", 200), ("/other", "allow", "rule", 200)], show(lines)
    assert all("expected" not in l and "actual" not in l for l in lines), show(lines)
    [conn] = origin.conns[mark:]
    assert len(conn.requests) == 3, conn.requests


# --- one byte short, one byte long, a wrong last byte ---------------------------------

def test_a_wrong_last_byte_is_never_delivered(sluice_inspecting, origin):
    """Content-Length and chunked: the client gets the body without its
    end (all but the last byte of a Content-Length body, the data but not
    the last chunk of a chunked one), then a reset; the line has both
    digests."""
    s = sluice_inspecting(allow=RULES, config=STREAM)
    bad = _flip_last(BODY)
    for path in ("/one", "/two"):
        for resp, relayed in ((cl_response(bad), len(bad) - 1), (chunked_response(bad), None)):
            answers = queue.Queue()
            a = Answer(resp)
            answers.put(a)
            origin.play(serve(answers))
            c = Client(s)
            c.get(path)
            assert c.wait_end() in ("reset", "eof"), f"{path}: the tunnel stayed open after a mismatch"
            assert not c.responses(), f"{path}: a complete response with a wrong body: {c.responses()}"
            if relayed is not None:
                # everything before the end came through before the verdict
                assert c.body_received() <= relayed, c.body_received()
            c.close()
            _mismatch_line(s, c, path, bad)
            _upstream_asked_identity(a)


def test_one_byte_long_never_delivers_a_whole_body_and_a_byte_after_the_body_is_not_relayed(sluice_inspecting,
                                                                                           origin):
    """Content-Length one more than the pinned body (and one more byte):
    the digest is over all of it, so it fails. A right body with one byte
    after it: the body arrives whole, the stray byte never reaches the
    client, and the next request gets its own answer."""
    s = sluice_inspecting(allow=RULES, config=STREAM)
    longer = BODY + b"X"
    answers = queue.Queue()
    a = Answer(cl_response(longer))
    answers.put(a)
    origin.play(serve(answers))
    c = Client(s)
    c.get("/one")
    assert c.wait_end() in ("reset", "eof")
    assert not c.responses(), c.responses()
    assert c.body_received() <= len(BODY), c.body_received()
    c.close()
    _mismatch_line(s, c, "/one", longer)

    answers = queue.Queue()
    stray = Answer(cl_response() + b"X")
    answers.put(stray)
    answers.put(Answer(cl_response(b"second")))
    mark = origin.mark()
    origin.play(serve(answers))
    origin.play(serve(answers))     # sluice may drop the connection that spoke out of turn
    c = Client(s)
    c.get("/one")
    r = c.take()
    assert (r.status, r.body) == (200, BODY), r
    c.get("/other")
    r = c.take()
    assert (r.status, r.body) == (200, b"second"), f"the byte after the body was relayed: {r!r}"
    assert not c.data, f"bytes after the second response: {bytes(c.data)!r}"
    c.close()
    assert origin.mark() - mark in (1, 2)


def test_one_byte_short_then_the_origin_closes_or_stalls(sluice_inspecting, origin):
    """The body's bytes so far are relayed; its last never came, so the
    client has no complete body, and once the origin closes (or, stalled,
    the tunnel idles out: idle_ms) both connections end."""
    s = sluice_inspecting(allow=RULES, config={"timeouts": {"idle_ms": 1500}, **STREAM})
    for then in ("fin", "stall"):
        for resp, short in ((cl_response()[:-1], len(BODY) - 1), (chunked_response()[:-len(TERMINATOR)], None)):
            answers = queue.Queue()
            a = Answer(resp, then=then)
            answers.put(a)
            origin.play(serve(answers))
            c = Client(s)
            c.get("/one")
            if short is not None:
                # relayed as it arrives: all but the byte that never came
                assert c.wait_body(short), f"{then}: only {c.body_received()} of {short} body bytes arrived"
            else:
                assert c.read_until(lambda d: d.endswith(BODY[-CHUNKS[-1]:] + b"\r\n")), bytes(c.data[-100:])
            if then == "stall":
                # nothing more while the origin sends nothing, then the idle timeout
                have = len(c.data)
                assert not c.read_until(lambda d: len(d) > have, 0.5), bytes(c.data[have:])
                assert c.ended is None, "the gate closed a stalled download before its idle timeout"
                assert c.wait_end() in ("eof", "reset"), "the stalled tunnel did not idle out"
                assert len(c.data) == have, bytes(c.data[have:])
                c.close()
                origin.wait_done(origin.conns[-1])
                assert a.ended in ("eof", "reset"), "the origin's connection outlived the client's"
            else:
                assert c.wait_end() in ("eof", "reset"), "the client's connection outlived the origin's"
                c.close()
            assert not c.responses(), c.responses()
            d = tunnel_line(s, c.raw.local_port)
            [line] = wait_requests(s, d["id"], 1)
            assert line.get("reason") != "integrity_mismatch" and "actual" not in line, show([line])


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_reset_before_the_end_never_leaves_a_whole_body(sluice_inspecting, origin, framing):
    s = sluice_inspecting(allow=RULES, config=STREAM)
    resp = cl_response() if framing == "length" else chunked_response()
    for cut in (1, 2, len(TERMINATOR), 64, 1500):
        answers = queue.Queue()
        answers.put(Answer(resp[:-cut], then="reset"))
        origin.play(serve(answers))
        c = Client(s)
        c.get("/two")
        assert c.wait_end() in ("reset", "eof"), f"cut {cut}: the tunnel stayed open"
        assert not c.responses(), f"cut {cut}: {c.responses()}"
        c.close()


# --- split at every offset of the end ----------------------------------------------

def _split_points(resp, framing):
    """Offsets into the response: each of its last 64 bytes (for chunked,
    these include each byte of the terminator)."""
    return list(range(len(resp) - 64, len(resp)))


def _relayable(resp, head_len, p, framing):
    """Body bytes the gate may hold back at most, of the first p bytes of
    the response: none of a Content-Length body that is not whole yet; for
    chunked, the last chunk from its size line on."""
    if framing == "length":
        return p - head_len
    return min(p, len(resp) - len(TERMINATOR)) - head_len


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_right_body_split_at_every_offset_of_its_end_arrives_whole(sluice_inspecting, origin, framing):
    """One tunnel, one origin connection: for each offset of the last 64
    bytes, the response goes in two writes; before the second the client
    has had everything the gate may relay; after it, the whole body."""
    s = sluice_inspecting(allow=RULES, config=STREAM)
    resp = cl_response() if framing == "length" else chunked_response()
    head_len = resp.index(b"\r\n\r\n") + 4
    answers = queue.Queue()
    origin.play(serve(answers))
    c = Client(s)
    points = _split_points(resp, framing)
    for p in points:
        a = Answer(resp[:p], resp[p:])
        answers.put(a)
        c.get("/one")
        floor = _relayable(resp, head_len, p, framing)
        assert c.wait_body(floor), f"split at {p}: {c.body_received()} of {floor} body bytes before the end"
        assert not c.responses(), f"split at {p}: a whole response before the origin sent its end"
        a.release()
        r = c.take()
        assert (r.status, r.body) == (200, BODY), f"split at {p}: {r!r}"
    c.close()
    d = tunnel_line(s, c.raw.local_port)
    lines = wait_requests(s, d["id"], len(points))
    assert {(l["decision"], l["reason"], l["status"]) for l in lines} == {("allow", "rule", 200)}, show(lines)


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_wrong_last_byte_split_at_every_offset_of_the_end_is_never_delivered_whole(sluice_inspecting, origin,
                                                                                   framing):
    """The same splits with the body's last byte wrong: whatever the split,
    the client gets what the gate may relay and then a reset, never the
    whole body."""
    s = sluice_inspecting(allow=RULES, config=STREAM)
    bad = _flip_last(BODY)
    resp = cl_response(bad) if framing == "length" else chunked_response(bad)
    head_len = resp.index(b"\r\n\r\n") + 4
    clients = []
    for p in _split_points(resp, framing):
        answers = queue.Queue()
        a = Answer(resp[:p], resp[p:])
        answers.put(a)
        origin.play(serve(answers))
        c = Client(s)
        c.get("/two")
        floor = _relayable(resp, head_len, p, framing)
        relayed = c.wait_body(floor)
        if framing == "length" or p <= len(resp) - len(TERMINATOR) + 1:
            # the verdict needs the rest (at most the last chunk's "0" is
            # in): nothing was reset yet
            assert relayed, f"split at {p}: {c.body_received()} of {floor} body bytes before the end"
        a.release()
        assert c.wait_end() in ("reset", "eof"), f"split at {p}: the tunnel stayed open after a mismatch"
        assert not c.responses(), f"split at {p}: a whole response with the wrong body"
        assert c.body_received() <= len(resp) - head_len - 1
        c.close()
        clients.append(c)
    _mismatch_lines(s, clients, "/two", bad)


# --- what is refused, what passes ------------------------------------------------------

def test_a_range_request_to_a_pinned_path_is_refused_before_any_origin(sluice_inspecting, origin):
    s = sluice_inspecting(allow=RULES, config=STREAM)
    mark = origin.mark()
    c = Client(s)
    c.get("/one", b"Range: bytes=0-99\r\n")
    r = c.take()
    assert_refused(r, 403, "integrity_unverifiable")
    c.close()
    d = tunnel_line(s, c.raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    assert (line["decision"], line["reason"], line["status"]) == ("deny", "integrity_unverifiable", 403), \
        show([line])
    for conn in origin.conns[mark:]:
        origin.wait_done(conn)
        assert conn.requests == [], f"the Range request reached the origin: {conn.requests}"
    # the same Range to an unpinned path goes through
    answers = queue.Queue()
    answers.put(Answer(b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-1/3000\r\n"
                       b"Content-Length: 2\r\n\r\nab"))
    origin.play(serve(answers))
    c = Client(s)
    c.get("/other", b"Range: bytes=0-1\r\n")
    r = c.take()
    assert (r.status, r.body) == (206, b"ab"), r
    c.close()


@pytest.mark.parametrize("how", ["gzip", "unframed"])
def test_a_coded_or_unframed_pinned_body_is_refused(sluice_inspecting, origin, how):
    """A 200 with Content-Encoding: gzip, or with neither Content-Length
    nor chunked framing (its end is the close): 403 integrity_unverifiable
    in place of the response, not one byte of its body relayed, and the
    origin connection dropped."""
    s = sluice_inspecting(allow=RULES, config=STREAM)
    if how == "gzip":
        resp = cl_response(extra=b"Content-Encoding: gzip\r\n")
    else:
        resp = _head() + BODY
    answers = queue.Queue()
    a = Answer(resp, then="stall")
    answers.put(a)
    origin.play(serve(answers))
    c = Client(s)
    c.get("/one")
    r = c.take()
    assert_refused(r, 403, "integrity_unverifiable")
    assert BODY[:64] not in bytes(c.data) + r.body, "the body was relayed"
    c.close()
    origin.wait_done(origin.conns[-1])
    assert a.ended in ("eof", "reset"), "the origin connection was kept"
    d = tunnel_line(s, c.raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    assert (line["decision"], line["reason"], line["status"]) == ("deny", "integrity_unverifiable", 403), \
        show([line])


def test_content_encoding_identity_is_no_coding(sluice_inspecting, origin):
    s = sluice_inspecting(allow=RULES, config=STREAM)
    answers = queue.Queue()
    answers.put(Answer(cl_response(extra=b"Content-Encoding: identity\r\n")))
    origin.play(serve(answers))
    c = Client(s)
    c.get("/one")
    r = c.take()
    assert (r.status, r.body) == (200, BODY), r
    c.close()


def test_other_statuses_pass_unchanged(sluice_inspecting, origin):
    """A 404, a 304 to a conditional request and a 302 to a pinned path
    reach the client as the origin sent them (status, headers that matter,
    body); a 206 to a request without Range is a 2xx like any other and
    is hashed: not the artifact, so it fails. One tunnel for all of them."""
    s = sluice_inspecting(allow=RULES, config=STREAM)
    answers = queue.Queue()
    origin.play(serve(answers))
    c = Client(s)
    cases = [
        (b"", b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\nnot here\n",
         404, b"not here\n", [("Content-Type", "text/plain")]),
        (b'If-None-Match: "v1"\r\n', b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n', 304, b"",
         [("ETag", '"v1"')]),
        (b"", b"HTTP/1.1 302 Found\r\nLocation: https://h2.hostile.test/elsewhere\r\nContent-Length: 5\r\n\r\nmoved",
         302, b"moved", [("Location", "https://h2.hostile.test/elsewhere")]),
    ]
    for extra, resp, status, body, headers in cases:
        answers.put(Answer(resp))
        c.get("/one", extra)
        r = c.take()
        assert (r.status, r.body) == (status, body), r
        for k, v in headers:
            assert r.header(k) == v, r
    answers.put(Answer(b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-99/3000\r\n"
                       b"Content-Length: 100\r\n\r\n" + BODY[:100]))
    c.get("/one")
    assert c.wait_end() in ("reset", "eof")
    assert not c.responses(), c.responses()
    c.close()
    d = tunnel_line(s, c.raw.local_port)
    lines = wait_requests(s, d["id"], 4)
    assert [(l["decision"], l["reason"], l["status"]) for l in lines[:3]] == \
        [("allow", "rule", 404), ("allow", "rule", 304), ("allow", "rule", 302)], show(lines)
    assert (lines[3]["reason"], lines[3]["actual"]) == \
        ("integrity_mismatch", " ".join(sri(BODY[:100], x.split("-")[0]) for x in PINNED["/one"])), show(lines)


# --- the default: a small pinned body is held whole until its digest is known -------

def test_a_small_pinned_body_is_held_whole_so_no_byte_of_a_wrong_one_arrives(sluice_inspecting, origin):
    """With the default pin_hold_kib (8 MiB), a wrong body of either
    framing, sent in parts, reaches the client as nothing but the head,
    then the reset; a right one arrives whole and the tunnel goes on."""
    s = sluice_inspecting(allow=RULES)
    bad = _flip_last(BODY)
    for resp in (cl_response(bad), chunked_response(bad)):
        answers = queue.Queue()
        a = Answer(resp)
        answers.put(a)
        origin.play(serve(answers))
        c = Client(s)
        c.get("/one")
        assert c.wait_end() in ("reset", "eof"), "the tunnel stayed open after a mismatch"
        assert c.body_received() == 0, f"{c.body_received()} bytes of a wrong body reached the client"
        c.close()
        _mismatch_line(s, c, "/one", bad)
    answers = queue.Queue()
    origin.play(serve(answers))
    c = Client(s)
    for resp in (cl_response(), chunked_response()):
        answers.put(Answer(resp))
        c.get("/one")
        r = c.take()
        assert (r.status, r.body) == (200, BODY), r
    c.close()
