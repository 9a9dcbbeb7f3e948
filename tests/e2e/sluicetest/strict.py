"""Strict HTTP/1.1 message parsing (RFC 9112), written for the tests and
independent of sluice's C parser.

parse_requests(data) splits the bytes an origin connection received into
complete requests, at most one incomplete request after them, or the first
point where the bytes stop being a well-formed request stream.
parse_responses(data, methods, eof) does the same for what a client received,
interim (1xx) heads included.

Strict means: CRLF line ends only (a bare CR or LF is an error), no obs-fold,
no whitespace before a colon, token field names, no control bytes in values,
at most one Content-Length, not both Content-Length and Transfer-Encoding,
chunk sizes of at most 16 hex digits, chunk extensions and trailers per the
grammar. A gate that forwards something this parser refuses forwarded
something a real origin could read differently."""

import re

TCHAR = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
HEXDIG = b"0123456789abcdefABCDEF"
MAX_HEAD = 64 * 1024      # the test's own bound; sluice's is 32 KiB
MAX_CHUNK_LINE = 4096


class ParseError(Exception):
    def __init__(self, msg, offset):
        super().__init__(f"{msg} (at byte {offset})")
        self.msg = msg
        self.offset = offset


class Message:
    """A parsed request or response. For requests: method, target, version;
    for responses: version, status, reason. body is the decoded body; raw
    the message's bytes as received; raw_body its body bytes as framed."""

    def __init__(self):
        self.method = self.target = self.reason = None
        self.status = None
        self.version = None
        self.headers = []
        self.trailers = []
        self.chunked = False
        self.length = None
        self.until_close = False
        self.body = b""
        self.raw = b""
        self.raw_head = b""
        self.raw_body = b""
        self.complete = False       # the whole message (head and body) is there

    def header(self, name, default=None):
        vals = self.header_all(name)
        return vals[0] if vals else default

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @property
    def host(self):
        return self.header("Host")

    @property
    def path(self):
        return self.target

    @property
    def conn_close(self):
        return any("close" in [t.strip().lower() for t in v.split(",")]
                   for v in self.header_all("Connection"))

    @property
    def decision(self):
        """('deny', reason) from Sluice-Decision, or None."""
        v = self.header("Sluice-Decision")
        if v is None:
            return None
        m = re.match(r"^\s*(\w+)\s*;\s*reason=([\w-]+)", v)
        return (m.group(1), m.group(2)) if m else (v, None)

    @property
    def interim(self):
        return self.status is not None and 100 <= self.status < 200

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        first = (f"{self.method} {self.target}" if self.method else f"{self.status} {self.reason}")
        state = "" if self.complete else " INCOMPLETE"
        return f"<{first} {self.headers} body={self.body[:200]!r}{state}>"


class Partial:
    """The incomplete message at the end of a stream: `head` is the parsed
    Message if its head was complete (its body so far in .body/.raw_body),
    else None; raw is every byte of it."""

    def __init__(self, raw, head=None):
        self.raw = raw
        self.head = head

    def __repr__(self):
        return f"<Partial head={self.head!r} raw={self.raw[:200]!r}>"


def _line_end(data, pos, limit):
    """Offset of the CRLF ending the line at pos, None if incomplete; a bare
    CR or LF before it is a ParseError."""
    i = pos
    end = min(len(data), pos + limit)
    while i < end:
        b = data[i]
        if b == 0x0A:
            raise ParseError("bare LF", i)
        if b == 0x0D:
            if i + 1 >= len(data):
                return None
            if data[i + 1] != 0x0A:
                raise ParseError("bare CR", i)
            return i
        i += 1
    if end - pos >= limit:
        raise ParseError(f"line longer than {limit} bytes", pos)
    return None


def _field(line, offset, what):
    name, sep, value = line.partition(b":")
    if not sep:
        raise ParseError(f"{what} line without a colon: {line[:80]!r}", offset)
    if not TCHAR.match(name):
        raise ParseError(f"{what} name is not a token: {name[:80]!r}", offset)
    value = value.strip(b" \t")
    for b in value:
        if (b < 0x20 and b != 0x09) or b == 0x7F:
            raise ParseError(f"control byte {b:#x} in {what} {name!r}", offset)
    return name.decode("latin-1"), value.decode("latin-1")


def _parse_head(data, pos, request):
    """(Message, offset after the head) or None if the head is incomplete."""
    m = Message()
    start = pos
    eol = _line_end(data, pos, MAX_HEAD)
    if eol is None:
        return None
    first = data[pos:eol]
    if request:
        parts = first.split(b" ")
        if len(parts) != 3:
            raise ParseError(f"request line is not METHOD SP TARGET SP VERSION: {first[:120]!r}", pos)
        method, target, version = parts
        if not TCHAR.match(method):
            raise ParseError(f"method is not a token: {method[:40]!r}", pos)
        if not target or any(b <= 0x20 or b >= 0x7F for b in target):
            raise ParseError(f"bad request target {target[:120]!r}", pos)
        m.method, m.target = method.decode(), target.decode("latin-1")
    else:
        mm = re.match(rb"^(HTTP/\d\.\d) (\d{3}) ([\t\x20-\x7e\x80-\xff]*)$", first)
        if not mm:
            raise ParseError(f"bad status line {first[:120]!r}", pos)
        version = mm.group(1)
        m.status = int(mm.group(2))
        m.reason = mm.group(3).decode("latin-1")
    if version not in (b"HTTP/1.0", b"HTTP/1.1"):
        raise ParseError(f"HTTP version {version[:20]!r}", pos)
    m.version = version.decode()
    pos = eol + 2
    while True:
        if pos - start > MAX_HEAD:
            raise ParseError(f"head longer than {MAX_HEAD} bytes", start)
        eol = _line_end(data, pos, MAX_HEAD)
        if eol is None:
            return None
        line = data[pos:eol]
        if not line:
            pos = eol + 2
            break
        if line[:1] in (b" ", b"\t"):
            raise ParseError("obs-fold (a header line starting with whitespace)", pos)
        m.headers.append(_field(line, pos, "header"))
        pos = eol + 2
    m.raw_head = bytes(data[start:pos])
    return m, pos


def _framing(m, request, method, offset):
    """Set m.chunked / m.length / m.until_close from the head."""
    cls = m.header_all("Content-Length")
    tes = m.header_all("Transfer-Encoding")
    if cls and tes:
        raise ParseError("both Content-Length and Transfer-Encoding", offset)
    if tes:
        codings = [c.strip().lower() for v in tes for c in v.split(",")]
        if request and codings != ["chunked"]:
            raise ParseError(f"Transfer-Encoding {tes!r} is not exactly chunked", offset)
        if "chunked" in codings[:-1] or not all(TCHAR.match(c.encode()) for c in codings):
            raise ParseError(f"Transfer-Encoding {tes!r}: chunked not last, or not a token", offset)
        # a response whose last coding is not chunked runs until close (RFC 9112 6.3)
        m.chunked = codings[-1] == "chunked"
    if len(cls) > 1:
        raise ParseError(f"{len(cls)} Content-Length fields", offset)
    if cls:
        if not re.fullmatch(r"[0-9]{1,18}", cls[0]):
            raise ParseError(f"bad Content-Length {cls[0]!r}", offset)
        m.length = int(cls[0])
    if not request:
        if method == "HEAD" or m.status in (204, 304) or 100 <= m.status < 200:
            m.chunked, m.length = False, 0
        elif not m.chunked and m.length is None:
            m.until_close = True
    elif not m.chunked and m.length is None:
        m.length = 0
    if request and len(m.header_all("Host")) != 1:
        raise ParseError(f"{len(m.header_all('Host'))} Host fields", offset)


CHUNK_EXT = re.compile(
    rb'^(?:[ \t]*;[ \t]*[!#$%&\'*+\-.^_`|~0-9A-Za-z]+'
    rb'(?:[ \t]*=[ \t]*(?:[!#$%&\'*+\-.^_`|~0-9A-Za-z]+|"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"))?)*$')


def _parse_chunked(data, pos, m):
    """Decode a chunked body at pos. Returns the offset after it, or None if
    incomplete (m.body / m.raw_body then hold what is there)."""
    start = pos
    body = bytearray()
    end = None
    try:
        while True:
            eol = _line_end(data, pos, MAX_CHUNK_LINE)
            if eol is None:
                return None
            line = data[pos:eol]
            n = 0
            while n < len(line) and line[n] in HEXDIG:
                n += 1
            if n == 0:
                raise ParseError(f"chunk size is not hexadecimal: {line[:40]!r}", pos)
            if n > 16:
                raise ParseError(f"chunk size with {n} hex digits", pos)
            if not CHUNK_EXT.match(line[n:]):
                raise ParseError(f"bad chunk extension {line[n:][:80]!r}", pos + n)
            size = int(line[:n], 16)
            pos = eol + 2
            if size == 0:
                break
            if len(data) < pos + size + 2:
                body += data[pos:pos + size]
                return None
            body += data[pos:pos + size]
            pos += size
            if data[pos:pos + 2] != b"\r\n":
                raise ParseError("chunk data not followed by CRLF", pos)
            pos += 2
        while True:
            eol = _line_end(data, pos, MAX_HEAD)
            if eol is None:
                return None
            line = data[pos:eol]
            if not line:
                end = eol + 2
                return end
            if line[:1] in (b" ", b"\t"):
                raise ParseError("obs-fold in a trailer", pos)
            m.trailers.append(_field(line, pos, "trailer"))
            pos = eol + 2
    finally:
        m.body = bytes(body)
        m.raw_body = bytes(data[start:end if end is not None else len(data)])


def _parse_stream(data, request, methods=None, eof=False):
    data = bytes(data)
    out = []
    pos = 0
    mi = 0
    while pos < len(data):
        start = pos
        got = _parse_head(data, pos, request)
        if got is None:
            return out, Partial(data[start:])
        m, pos = got
        method = None
        if not request:
            method = methods[mi] if methods is not None and mi < len(methods) else "GET"
        _framing(m, request, method, start)
        body_start = pos
        if m.chunked:
            end = _parse_chunked(data, pos, m)
            if end is None:
                m.raw = data[start:]
                return out, Partial(data[start:], m)
            pos = end
        elif m.until_close:
            m.body = m.raw_body = data[pos:]
            m.raw = data[start:]
            if not eof:
                return out, Partial(data[start:], m)
            pos = len(data)
        else:
            if len(data) < pos + m.length:
                m.body = m.raw_body = data[pos:]
                m.raw = data[start:]
                return out, Partial(data[start:], m)
            m.body = m.raw_body = data[pos:pos + m.length]
            pos += m.length
        m.raw = data[start:pos]
        m.complete = True
        assert body_start <= pos
        out.append(m)
        if not request and not m.interim:
            mi += 1
    return out, None


def parse_requests(data):
    """([complete requests], Partial or None, error or None) for the bytes one
    connection received. On a ParseError the requests before it are
    returned with the error (its .offset is into data)."""
    try:
        reqs, tail = _parse_stream(data, True)
        return reqs, tail, None
    except ParseError as e:
        return _prefix_before(data, e, True), None, e


def parse_responses(data, methods=None, eof=False):
    """([responses, 1xx heads included, in order], Partial or None, error or
    None) for what a client received. methods[i] is the method of the i-th
    request (HEAD responses have no body); eof=True: the stream ended there,
    which completes a close-delimited body."""
    try:
        resps, tail = _parse_stream(data, False, methods, eof)
        return resps, tail, None
    except ParseError as e:
        return _prefix_before(data, e, False, methods, eof), None, e


def _prefix_before(data, err, request, methods=None, eof=False):
    """The complete messages before the byte an error was found at."""
    try:
        msgs, _ = _parse_stream(bytes(data)[:err.offset], request, methods, eof=False)
    except ParseError:
        return []
    return msgs


def one_response(data, method="GET", eof=True):
    """Parse data as exactly one final response (1xx heads before it are
    returned too). Raises AssertionError if it is not that."""
    resps, tail, err = parse_responses(data, [method], eof=eof)
    if err:
        raise AssertionError(f"malformed response stream: {err}; bytes {bytes(data)[:400]!r}")
    if tail is not None:
        raise AssertionError(f"incomplete response: {tail!r}")
    finals = [r for r in resps if not r.interim]
    if len(finals) != 1:
        raise AssertionError(f"expected one response, got {resps!r}")
    return resps
