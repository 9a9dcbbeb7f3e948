"""The differential check: what each origin connection received, parsed with
the strict parser, against what the client sent.

A test describes every request its clients sent with Sent (request()
builds the bytes and the Sent together). check_origin_traffic() then
requires of every origin connection: a well-formed request stream of zero
or more complete requests, each equal (method, path, Host, body) to one the
client sent in full and was allowed, possibly followed by one incomplete
request that is a prefix of one the client sent (its body bytes a prefix of
the client's body *before any malformed part*); requests for one host only;
and over all connections, no request delivered twice."""

import re
import time

from .strict import parse_requests


class Sent:
    """One request as a client sent it.

    path, host: what the origin should see (origin-form target, the Host
    sluice writes). raw_body: the body bytes as the client framed them;
    valid: how many of them come before the first malformed byte (all, for
    a well-formed body); body: the decoded body. complete: the client sent
    all of it. allowed: the gate's decision let it through."""

    def __init__(self, method, path, host, raw_body=b"", body=None, valid=None,
                 complete=True, allowed=True, raw=b""):
        self.method = method
        self.path = path
        self.host = host.lower()
        self.raw_body = raw_body
        self.body = raw_body if body is None else body
        self.valid = len(raw_body) if valid is None else valid
        self.complete = complete
        self.allowed = allowed
        self.raw = raw

    def key(self):
        return (self.method, self.path, self.host, self.body)

    def __repr__(self):
        flags = ("" if self.allowed else " refused") + ("" if self.complete else " incomplete")
        return f"<Sent {self.method} {self.host}{self.path} body={self.body[:60]!r}{flags}>"


def _chunk(body, sizes=(3, 5, 1000)):
    out, off, i = b"", 0, 0
    while off < len(body):
        n = sizes[i % len(sizes)]
        out += b"%x\r\n" % len(body[off:off + n]) + body[off:off + n] + b"\r\n"
        off += n
        i += 1
    return out + b"0\r\n\r\n"


def request(method, url, body=None, chunked=False, headers=(), raw_body=None, valid=None,
            allowed=True, host_header=None):
    """(bytes, Sent) for an absolute-form request. raw_body: body bytes as
    given (framing included; malformed ones too), with `valid` bytes before
    the malformed part; else body is framed by Content-Length, or chunked."""
    m = re.match(r"^http://([^/]+)(/.*)?$", url)
    authority, path = m.group(1), m.group(2) or "/"
    host = authority[:-3] if authority.endswith(":80") else authority
    head = f"{method} {url} HTTP/1.1\r\nHost: {host_header or authority}\r\n"
    for k, v in headers:
        head += f"{k}: {v}\r\n"
    decoded = body
    if raw_body is None and body is not None:
        raw_body = _chunk(body) if chunked else body
    if raw_body is not None:
        head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {len(raw_body)}\r\n"
    raw = head.encode("latin-1") + b"\r\n" + (raw_body or b"")
    return raw, Sent(method, path, host, raw_body or b"", body=decoded if decoded is not None else None,
                     valid=valid, allowed=allowed, raw=raw)


def settle(conns, timeout=5.0):
    """Wait until every origin connection has been closed by one side."""
    deadline = time.monotonic() + timeout
    for c in conns:
        while not (c.closed or c.peer_closed()):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
    return True


def origin_problems(conns, sent):
    """A list of problems (strings); empty when the traffic is consistent."""
    problems = []
    pool = [s for s in sent if s.allowed and s.complete]
    used = []
    refused = [s for s in sent if not s.allowed]

    def name(c):
        return f"origin conn {c.index} ({c.local[0]})"

    def describe(r):
        return f"{r.method} {r.target} Host={r.host!r} body={r.body[:80]!r}"

    for c in conns:
        data = c.received
        reqs, tail, err = parse_requests(data)
        if err is not None:
            problems.append(f"{name(c)} received a malformed request stream: {err}; bytes around it: "
                            f"{data[max(0, err.offset - 80):err.offset + 80]!r}")
        heads = reqs + ([tail.head] if tail is not None and tail.head is not None else [])
        hosts = {(r.host or "").lower() for r in heads}
        if len(hosts) > 1:
            problems.append(f"{name(c)} carried requests for several hosts: {sorted(hosts)}")
        for r in reqs:
            key = (r.method, r.target, (r.host or "").lower(), r.body)
            match = next((s for s in pool if s.key() == key), None)
            if match is not None:
                pool.remove(match)
                used.append(match)
                continue
            same = lambda s: (s.method, s.path, s.host) == key[:3]
            if any(same(s) for s in refused):
                problems.append(f"{name(c)} got a request the gate refused: {describe(r)}")
            elif any(s.key() == key for s in used):
                problems.append(f"{name(c)} got a request a second time (the client sent it once): "
                                f"{describe(r)}")
            elif any(same(s) and not s.complete for s in sent):
                problems.append(f"{name(c)} got a complete request the client never completed: "
                                f"{describe(r)} (client sent {[s for s in sent if same(s)]})")
            elif any(same(s) for s in sent):
                problems.append(f"{name(c)} got {describe(r)}, whose body differs from what the "
                                f"client sent: {[s for s in sent if same(s)]}")
            else:
                problems.append(f"{name(c)} got a request no client sent: {describe(r)}")
        if tail is None:
            continue
        if tail.head is None:
            # a cut head: at least its start must be one of the client's
            first = tail.raw.split(b"\r\n", 1)[0].decode("latin-1", "replace")
            if not any(f"{s.method} {s.path} HTTP/1.1".startswith(first) or first.startswith(f"{s.method} {s.path} ")
                       for s in sent if s.allowed):
                problems.append(f"{name(c)} ends in a partial head no allowed request starts with: "
                                f"{tail.raw[:200]!r}")
            continue
        h = tail.head
        key3 = (h.method, h.target, (h.host or "").lower())
        cands = [s for s in sent if (s.method, s.path, s.host) == key3]
        if not cands:
            problems.append(f"{name(c)} ends in a request no client sent: {describe(h)}")
            continue
        if not any(s.allowed for s in cands):
            problems.append(f"{name(c)} got (part of) a request the gate refused: {describe(h)}")
            continue
        ok = [s for s in cands if s.allowed and s.raw_body[:s.valid].startswith(h.raw_body)]
        if not ok:
            problems.append(f"{name(c)} got body bytes the client did not send before its body ended "
                            f"or turned malformed: origin has {h.raw_body[:200]!r}, client's valid "
                            f"prefixes {[s.raw_body[:s.valid][:200] for s in cands]}")
            continue
        match = next((s for s in ok if s in pool), None) or next((s for s in ok if not s.complete), None)
        if match is not None and match in pool:
            pool.remove(match)
            used.append(match)
    return problems


def assert_origin_traffic(conns, sent, timeout=5.0):
    """Run the differential check over conns (after they settled)."""
    settle(conns, timeout)
    problems = origin_problems(conns, sent)
    assert not problems, "differential check failed:\n  " + "\n  ".join(problems)
