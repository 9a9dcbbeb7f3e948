"""Raw clients of the proxy: CONNECT, absolute-form HTTP, curl, and TLS
ClientHello bytes."""

import re
import socket
import ssl
import struct
import subprocess
import threading
import time

from .proc import clean_env

DECISION_RE = re.compile(r"^\s*(\w+)\s*;\s*reason=([\w-]+)")


class Closed(Exception):
    """The peer closed (or reset) before a complete message arrived."""


class Response:
    def __init__(self, version, status, reason, headers, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers          # [(name, value)]
        self.raw_head = raw_head
        self.body = b""

    def header(self, name, default=None):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @property
    def decision(self):
        """('deny', reason) from Sluice-Decision, or None."""
        v = self.header("Sluice-Decision")
        if v is None:
            return None
        m = DECISION_RE.match(v)
        return (m.group(1), m.group(2)) if m else (v, None)

    @property
    def conn_close(self):
        return "close" in (self.header("Connection") or "").lower()

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        return f"<Response {self.status} {self.reason} {self.headers} body={self.body[:300]!r}>"


class Conn:
    """One client connection to the proxy, with a read buffer."""

    def __init__(self, port, host="127.0.0.1", timeout=15.0, sock=None):
        if sock is None:
            sock = socket.create_connection((host, port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.local_port = self.sock.getsockname()[1]
        self.buf = bytearray()

    @classmethod
    def wrap(cls, sock):
        """A Conn over an existing socket (e.g. TLS inside a tunnel)."""
        return cls(None, sock=sock)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def settimeout(self, t):
        self.sock.settimeout(t)

    # --- byte-exact hostile sends -------------------------------------------
    def send_pieces(self, data, pieces, delay=0.0):
        """Send data in pieces (a size or a list of sizes), `delay` seconds
        apart. Returns the exception if the peer closed, else None."""
        sizes = pieces if isinstance(pieces, (list, tuple)) else None
        off, i = 0, 0
        while off < len(data):
            n = sizes[i % len(sizes)] if sizes else pieces
            err = self.send(data[off:off + n])
            if err:
                return err
            off += n
            i += 1
            if delay and off < len(data):
                time.sleep(delay)
        return None

    def half_close(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def reset(self):
        """Close with SO_LINGER 0: the peer gets a TCP reset."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def read_strict(self, methods=("GET",), timeout=10.0):
        """Read until len(methods) final responses are complete, parsed with
        the strict parser (sluicetest.strict); interim 1xx heads are
        returned too, in order. Bytes after them stay buffered. Raises
        AssertionError on malformed bytes or on EOF/timeout first."""
        from .strict import parse_responses
        deadline = time.monotonic() + timeout
        old = self.sock.gettimeout()
        try:
            while True:
                resps, tail, err = parse_responses(self.buf, list(methods))
                if err is not None:
                    raise AssertionError(f"malformed response bytes: {err}; got {bytes(self.buf)[:500]!r}")
                finals = [r for r in resps if not r.interim]
                if len(finals) >= len(methods):
                    used = 0
                    out = []
                    for r in resps:
                        out.append(r)
                        used += len(r.raw)
                        if not r.interim and sum(1 for x in out if not x.interim) == len(methods):
                            break
                    del self.buf[:used]
                    return out
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no complete response within {timeout}s; have {bytes(self.buf)[:500]!r}")
                self.sock.settimeout(left)
                try:
                    data = self.sock.recv(1 << 18)
                except socket.timeout:
                    continue
                except ConnectionResetError:
                    data = b""
                if not data:
                    resps, tail, err = parse_responses(self.buf, list(methods), eof=True)
                    finals = [r for r in resps if not r.interim]
                    if err is None and tail is None and len(finals) == len(methods):
                        self.buf.clear()
                        return resps
                    raise Closed(f"connection closed before {len(methods)} complete response(s); "
                                 f"got {bytes(self.buf)[:500]!r}")
                self.buf += data
        finally:
            self.sock.settimeout(old)

    def read_final(self, method="GET", timeout=10.0):
        """The next final response (interim heads before it are dropped)."""
        return [r for r in self.read_strict((method,), timeout) if not r.interim][-1]

    def send(self, data):
        """Send; a peer that closed early is not an error here (its reply is
        read afterwards). Returns the exception, or None."""
        try:
            self.sock.sendall(data)
            return None
        except (BrokenPipeError, ConnectionResetError) as e:
            return e

    def _fill(self, n=1 << 18):
        try:
            data = self.sock.recv(n)
        except ConnectionResetError:
            data = b""
        if not data:
            return False
        self.buf += data
        return True

    def recv_some(self, n=1 << 18):
        """Whatever is buffered, or one recv (b'' at EOF)."""
        if self.buf:
            out = bytes(self.buf[:n])
            del self.buf[:n]
            return out
        try:
            return self.sock.recv(n)
        except ConnectionResetError:
            return b""

    def read_exact(self, n):
        out = bytearray(n)
        have = min(n, len(self.buf))
        out[:have] = self.buf[:have]
        del self.buf[:have]
        view = memoryview(out)
        while have < n:
            try:
                got = self.sock.recv_into(view[have:], min(n - have, 1 << 20))
            except ConnectionResetError:
                got = 0
            if not got:
                raise Closed(f"connection closed after {have} of {n} bytes")
            have += got
        return bytes(out)

    def read_line(self, limit=1 << 16):
        while b"\r\n" not in self.buf:
            if len(self.buf) > limit or not self._fill():
                raise Closed(f"no line; have {bytes(self.buf[:200])!r}")
        i = self.buf.index(b"\r\n") + 2
        line = bytes(self.buf[:i])
        del self.buf[:i]
        return line

    def read_until_eof(self):
        chunks = [bytes(self.buf)]
        self.buf.clear()
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except ConnectionResetError:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)

    def at_eof(self, timeout=5.0):
        """True if the peer closes (EOF or reset) within timeout with no
        further bytes; raises if bytes arrive."""
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            data = self.recv_some()
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(old)
        if data:
            raise AssertionError(f"expected the connection to close, got {data[:200]!r}")
        return True

    def drain_until_closed(self, timeout=5.0):
        """Read until the peer closes. Returns (closed, bytes read): closed is
        False if it was still open after timeout."""
        import time
        old = self.sock.gettimeout()
        deadline = time.monotonic() + timeout
        got = bytearray(self.buf)
        self.buf.clear()
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False, bytes(got)
                self.sock.settimeout(left)
                try:
                    data = self.sock.recv(65536)
                except socket.timeout:
                    return False, bytes(got)
                except ConnectionResetError:
                    return True, bytes(got)
                if not data:
                    return True, bytes(got)
                got += data
        finally:
            self.sock.settimeout(old)

    def read_head(self):
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > 1 << 20 or not self._fill():
                raise Closed(f"connection closed before a complete response head; "
                             f"got {bytes(self.buf[:300])!r}")
        i = self.buf.index(b"\r\n\r\n") + 4
        raw = bytes(self.buf[:i])
        del self.buf[:i]
        lines = raw[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        version, status = parts[0], int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        headers = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers.append((k.strip(), v.strip()))
        return Response(version, status, reason, headers, raw)

    def read_body(self, resp, method):
        if method == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200:
            return b""
        if method == "CONNECT" and 200 <= resp.status < 300:
            return b""
        te = (resp.header("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            return self.read_chunked()
        cl = resp.header("Content-Length")
        if cl is not None:
            return self.read_exact(int(cl))
        return self.read_until_eof()

    def read_chunked(self):
        parts = []
        while True:
            line = self.read_line()
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while self.read_line() != b"\r\n":
                    pass
                return b"".join(parts)
            parts.append(self.read_exact(size))
            if self.read_exact(2) != b"\r\n":
                raise AssertionError("chunk data not followed by CRLF")

    def read_response(self, method="GET"):
        resp = self.read_head()
        resp.body = self.read_body(resp, method)
        return resp

    def request(self, method, url, headers=None, body=None, chunked=False, host=None,
                version="HTTP/1.1", send_only=False):
        """An absolute-form request (or any request-target given as url).
        `host` defaults to the URL's authority; headers is a list of pairs."""
        if host is None:
            m = re.match(r"^[a-zA-Z]+://([^/?#]*)", url)
            host = m.group(1) if m else None
        head = f"{method} {url} {version}\r\n"
        if host is not None:
            head += f"Host: {host}\r\n"
        for k, v in headers or []:
            head += f"{k}: {v}\r\n"
        if body is not None and not chunked:
            head += f"Content-Length: {len(body)}\r\n"
        if body is not None and chunked:
            head += "Transfer-Encoding: chunked\r\n"
        head += "\r\n"
        self.send(head.encode("latin-1"))
        if body is not None:
            if chunked:
                send_chunked(self.sock, body)
            else:
                self.send(body)
        if send_only:
            return None
        return self.read_response(method)


def send_chunked(sock, body):
    sizes = [1, 1000, 65536, 7, 1 << 20, 333333]
    off, i = 0, 0
    view = memoryview(body)
    while off < len(body):
        n = min(sizes[i % len(sizes)], len(body) - off)
        sock.sendall(b"%x\r\n" % n)
        sock.sendall(view[off:off + n])
        sock.sendall(b"\r\n")
        off += n
        i += 1
    sock.sendall(b"0\r\n\r\n")


def connect(port, target, host_header=None, timeout=15.0, extra_headers=()):
    """Open a client connection, send CONNECT target, read the reply head (and
    for a refusal its body). Returns (Response, Conn); the Conn carries the
    tunnel when the status is 2xx."""
    conn = Conn(port, timeout=timeout)
    host_header = target if host_header is None else host_header
    head = f"CONNECT {target} HTTP/1.1\r\n"
    if host_header is not False:
        head += f"Host: {host_header}\r\n"
    for k, v in extra_headers:
        head += f"{k}: {v}\r\n"
    conn.send((head + "\r\n").encode("latin-1"))
    resp = conn.read_response("CONNECT")
    return resp, conn


def raw_exchange(port, data, timeout=15.0, method="GET"):
    """Send raw bytes as a request and read one response (status line on)."""
    conn = Conn(port, timeout=timeout)
    conn.send(data)
    resp = conn.read_response(method)
    return resp, conn


def get(port, url, **kw):
    with Conn(port) as c:
        return c.request("GET", url, **kw)


def echo_both_ways(sock, payload, chunk=1 << 20):
    """Send payload into a stream that echoes it while reading the echo back
    concurrently; return what came back (len(payload) bytes, or fewer on EOF)."""
    err = []

    def writer():
        try:
            view = memoryview(payload)
            for off in range(0, len(payload), chunk):
                sock.sendall(view[off:off + chunk])
        except OSError as e:
            err.append(e)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    out = bytearray(len(payload))
    view = memoryview(out)
    have = 0
    while have < len(payload):
        n = sock.recv_into(view[have:], min(len(payload) - have, 1 << 20))
        if not n:
            break
        have += n
    t.join(60)
    if err:
        raise err[0]
    return bytes(out[:have])


def client_hello(server_name):
    """The bytes of a TLS ClientHello naming server_name (None: no SNI)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=server_name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def curl(port, *args, timeout=120):
    """curl through the proxy at 127.0.0.1:port, ignoring any proxy from the
    environment."""
    cmd = ["curl", "-sS", "--noproxy", "", "-x", f"http://127.0.0.1:{port}",
           "--max-time", str(timeout), *args]
    return subprocess.run(cmd, capture_output=True, env=clean_env(), timeout=timeout + 10)
