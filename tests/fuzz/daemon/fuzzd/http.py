"""What an origin of ours makes of the bytes sluice sends it: a sequence of
HTTP/1.x requests, framed by Content-Length or chunked coding exactly as
sluice frames them. Lenient about what a head contains (sluice rewrites
heads; their contents are not under test here), strict about where each
message ends, so a desync between sluice and its origin shows up as bytes
that are not a request."""

import re

MAX_HEAD = 64 * 1024
_REQ_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/(\d)\.(\d)")
_HEX = re.compile(rb"[0-9A-Fa-f]+")


class Request:
    __slots__ = ("method", "target", "version", "headers", "host", "complete", "body_len", "body", "span")

    def __init__(self, method, target, version, headers):
        self.method, self.target, self.version, self.headers = method, target, version, headers
        self.host = None
        for k, v in headers:
            if k == "host":
                self.host = v
        self.complete = False
        self.body_len = 0
        self.body = b""         # the body's bytes (dechunked), once complete
        self.span = (0, 0)      # where its head starts and ends in the stream

    def __repr__(self):
        return f"<{self.method} {self.target} host={self.host} complete={self.complete}>"


def _parse_chunked(buf, pos, parts=None):
    """Returns (end offset, body length) of a chunked body starting at pos,
    None if incomplete, or raises ValueError. parts, if given, gets the
    chunks' data."""
    total = 0
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            if len(buf) - pos > 4096:
                raise ValueError("chunk size line too long")
            return None
        line = bytes(buf[pos:eol])
        m = _HEX.match(line)
        if not m:
            raise ValueError(f"bad chunk size line {line[:40]!r}")
        size = int(m.group(0), 16)
        pos = eol + 2
        if size == 0:
            # trailers, then an empty line
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                if eol == pos:
                    return eol + 2, total
                pos = eol + 2
        if len(buf) < pos + size + 2:
            return None
        if buf[pos + size:pos + size + 2] != b"\r\n":
            raise ValueError("chunk data not followed by CRLF")
        if parts is not None:
            parts.append(bytes(buf[pos:pos + size]))
        pos += size + 2
        total += size


_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})(?: [^\r\n]*)?")


def count_responses(buf, methods):
    """How many final responses (their whole heads) a client got, paired in
    order with the methods of the requests it sent; counting stops where
    the framing is not certain (a body to the close, a bad head)."""
    pos, n, i = 0, 0, 0
    while True:
        he = buf.find(b"\r\n\r\n", pos)
        if he < 0:
            return n
        lines = bytes(buf[pos:he]).split(b"\r\n")
        m = _STATUS_LINE.fullmatch(lines[0])
        if not m:
            return n
        code = int(m.group(1))
        hdrs = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if not sep:
                return n
            hdrs.setdefault(k.strip().lower(), []).append(v.strip().lower())
        pos = he + 4
        if code == 101:
            return n
        if code < 200:
            continue
        n += 1
        if i >= len(methods):
            return n
        method = methods[i]
        i += 1
        if method == "HEAD" or code in (204, 304):
            continue
        if b"transfer-encoding" in hdrs:
            if hdrs[b"transfer-encoding"][-1] != b"chunked":
                return n
            try:
                r = _parse_chunked(buf, pos)
            except ValueError:
                return n
            if r is None:
                return n
            pos = r[0]
        elif b"content-length" in hdrs and len(set(hdrs[b"content-length"])) == 1 and \
                hdrs[b"content-length"][0].isdigit():
            pos += int(hdrs[b"content-length"][0])
            if pos > len(buf):
                return n
        else:
            return n


def parse_requests(buf):
    """(requests, status, end): status is 'ok' (ends at a message boundary),
    'partial' (ends inside a message) or 'bad: ...' (bytes that are not a
    request where one must start); end is where parsing stopped."""
    out = []
    pos = 0
    n = len(buf)
    while pos < n:
        he = buf.find(b"\r\n\r\n", pos)
        if he < 0:
            tail = bytes(buf[pos:pos + 64])
            if n - pos > MAX_HEAD:
                return out, "bad: head over 64 KiB", pos
            # A partial head must at least start like a request line.
            probe = tail.split(b"\r\n", 1)[0]
            if not re.match(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]*( |$)", probe):
                return out, f"bad: not a request line: {tail!r}", pos
            return out, "partial", pos
        head = bytes(buf[pos:he])
        lines = head.split(b"\r\n")
        m = _REQ_LINE.fullmatch(lines[0])
        if not m:
            return out, f"bad: not a request line: {lines[0][:80]!r}", pos
        headers = []
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if not sep:
                return out, f"bad: header line without a colon: {ln[:80]!r}", pos
            headers.append((k.strip().lower().decode("latin-1"), v.strip().decode("latin-1")))
        req = Request(m.group(1).decode("latin-1"), m.group(2).decode("latin-1"),
                      f"{m.group(3).decode()}.{m.group(4).decode()}", headers)
        req.span = (pos, he + 4)
        out.append(req)
        pos = he + 4
        te = [v for k, v in headers if k == "transfer-encoding"]
        cl = [v for k, v in headers if k == "content-length"]
        if te:
            codings = [c.strip().lower() for c in ",".join(te).split(",") if c.strip()]
            if not codings or codings[-1] != "chunked":
                return out, f"bad: forwarded Transfer-Encoding {te!r} not ending in chunked", pos
            parts = []
            try:
                r = _parse_chunked(buf, pos, parts)
            except ValueError as e:
                return out, f"bad: chunked body: {e}", pos
            if r is None:
                return out, "partial", pos
            pos, req.body_len = r
            req.body = b"".join(parts)
        elif cl:
            vals = {v.strip() for v in ",".join(cl).split(",")}
            if len(vals) != 1 or not next(iter(vals)).isdigit():
                return out, f"bad: forwarded Content-Length {cl!r}", pos
            size = int(next(iter(vals)))
            if n - pos < size:
                req.body_len = n - pos
                return out, "partial", n
            req.body = bytes(buf[pos:pos + size])
            pos += size
            req.body_len = size
        req.complete = True
    return out, "ok", pos


class Response:
    __slots__ = ("status", "headers", "body", "complete", "framing")

    def __init__(self, status, headers):
        self.status, self.headers = status, headers
        self.body = b""          # as far as it came (dechunked)
        self.complete = False    # the whole body: its Content-Length, or through the last chunk's size line
        self.framing = None      # "cl", "chunked", "close" or "none" (no body)

    def header(self, name):
        return [v for k, v in self.headers if k == name]

    def __repr__(self):
        return f"<{self.status} {self.framing} {len(self.body)} bytes complete={self.complete}>"


def _dechunk_prefix(buf, pos):
    """A chunked body from pos, as far as it came: (data, through the last
    chunk's size line, end offset of the whole body or None); raises
    ValueError where it is not chunked."""
    parts = []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            if len(buf) - pos > 4096:
                raise ValueError("chunk size line too long")
            return b"".join(parts), False, None
        m = _HEX.match(bytes(buf[pos:eol]))
        if not m:
            raise ValueError("bad chunk size line")
        size = int(m.group(0), 16)
        pos = eol + 2
        if size == 0:
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return b"".join(parts), True, None
                if eol == pos:
                    return b"".join(parts), True, eol + 2
                pos = eol + 2
        parts.append(bytes(buf[pos:pos + size]))
        if len(buf) < pos + size + 2:
            return b"".join(parts), False, None
        if buf[pos + size:pos + size + 2] != b"\r\n":
            raise ValueError("chunk data not followed by CRLF")
        pos += size + 2


def parse_responses(buf, methods):
    """The final responses in a stream (interim heads skipped), paired in
    order with the methods of the requests they answer, each with its body
    as far as it came. Stops where the framing is not certain (a bad head,
    a body to the close, a 101, a 2xx to CONNECT): a message after that
    could not be told from the body before it."""
    out = []
    pos, i = 0, 0
    while pos < len(buf):
        he = buf.find(b"\r\n\r\n", pos)
        if he < 0:
            return out
        lines = bytes(buf[pos:he]).split(b"\r\n")
        m = _STATUS_LINE.fullmatch(lines[0])
        if not m:
            return out
        headers = []
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if not sep:
                return out
            headers.append((k.strip().lower().decode("latin-1"), v.strip().decode("latin-1")))
        code = int(m.group(1))
        pos = he + 4
        if code == 101:
            return out
        if code < 200:
            continue
        method = methods[i] if i < len(methods) else "GET"
        i += 1
        r = Response(code, headers)
        out.append(r)
        if method == "CONNECT" and code < 300:
            return out
        if method == "HEAD" or code in (204, 304):
            r.framing, r.complete = "none", True
            continue
        te = [v.lower() for k, v in headers if k == "transfer-encoding"]
        cl = {x.strip() for k, v in headers if k == "content-length" for x in v.split(",")}   # repeats fold
        if te:
            codings = [c.strip() for c in ",".join(te).split(",") if c.strip()]
            if not codings or codings[-1] != "chunked":
                r.framing = "close"
                r.body = bytes(buf[pos:])
                return out
            r.framing = "chunked"
            try:
                r.body, r.complete, end = _dechunk_prefix(buf, pos)
            except ValueError:
                return out
            if end is None:
                return out
            pos = end
        elif len(cl) == 1 and next(iter(cl)).isdigit():
            n = int(next(iter(cl)))
            r.framing = "cl"
            r.body = bytes(buf[pos:pos + n])
            r.complete = len(buf) - pos >= n
            pos += n
        else:
            r.framing = "close"
            r.body = bytes(buf[pos:])
            return out
    return out
