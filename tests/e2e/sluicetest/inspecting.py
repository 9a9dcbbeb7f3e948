"""The inspecting origins: HTTPS servers (Python ssl, a thread per
connection, HTTP/1.1 keep-alive) on the addresses of ORIGINS, each with its
own certificate (sluicetest/tlsmaterial.py: make_inspect), and
registry.inspect.test also in plain HTTP on port 80.

Every TCP connection is recorded (Connection): what the client offered in
its ClientHello (read with MSG_PEEK before ssl takes the socket), how the
handshake ended, and every request it carried (method, target, headers,
body), so that a test can say "the origin saw exactly this" and "no request
byte reached it".

Paths, on every origin:
  /echo, /echo/...   method, target, headers, body (latin-1) as JSON, with
                     the origin's connection index and the request's number on it
  /bytes/N           N bytes of pattern(N) (HEAD: the head only)
  /drop              a 200 with Connection: close, then the origin closes
  /hangup            a 200 that announces nothing, then the origin closes (as
                     an origin's keep-alive timeout does between requests)
  /git/...           git http-backend (CGI), GIT_PROJECT_ROOT = the session's
                     git root (sluicetest/gitbackend.py)
  anything else      on pypi.inspect.test the simple index (sluicetest/pyindex.py),
                     on index.crates.io and static.crates.io the sparse registry
                     (sluicetest/crates.py),
                     elsewhere the npm registry stand-in (sluicetest/registry.py)
"""

import copy
import json
import socket
import ssl
import threading
import time

from . import gitbackend, tlshello
from .dns import RECORDS
from .pattern import pattern
from .registry import NpmRegistry
from .crates import CratesRegistry
from .pyindex import SimpleIndex

# name -> (address, certificate, key type). The certificate kinds are made by
# tlsmaterial.make_inspect; only "good" ones chain to upstream_ca and name
# their host.
ORIGINS = {
    "registry.inspect.test": ("11.0.1.1", "good", "rsa"),
    "git.inspect.test": ("11.0.1.2", "good", "ec"),
    "api.inspect.test": ("11.0.1.3", "good", "ec"),
    "opaque.inspect.test": ("11.0.1.4", "good", "ec"),
    "pypi.inspect.test": ("11.0.1.5", "good", "ec"),       # a PEP 503 simple index (pyindex.py)
    # crates.io's sparse index and download host, inside the namespace only
    # (dns.py): `allow-from-lockfile --pins` pins crates.io packages by these
    # names, and another registry's download URL is unknown offline
    "index.crates.io": ("11.0.1.6", "good", "ec"),         # a cargo sparse index (crates.py)
    "static.crates.io": ("11.0.1.7", "good", "ec"),        # its .crate files
    "expired.inspect.test": ("11.0.1.10", "expired", "ec"),
    "notyet.inspect.test": ("11.0.1.11", "not_yet_valid", "ec"),
    "selfsigned.inspect.test": ("11.0.1.12", "self_signed", "ec"),
    "wrongname.inspect.test": ("11.0.1.13", "wrong_name", "ec"),
    "untrusted.inspect.test": ("11.0.1.14", "untrusted_ca", "ec"),
}
PLAIN = {"registry.inspect.test": 80}     # plain HTTP listeners, same paths
for _name, (_addr, _, _) in ORIGINS.items():
    assert RECORDS.get(_name) == [_addr], f"dns.py RECORDS and ORIGINS disagree on {_name}"

HEAD_MAX = 1 << 16
BODY_MAX = 256 << 20
IDLE_S = 60


class BadRequest(Exception):
    pass


class Request:
    def __init__(self, method, target, version, headers, body):
        self.method, self.target, self.version = method, target, version
        self.headers = headers      # [(name, value)] as received
        self.body = body
        self.conn = None            # index of the Connection that carried it
        self.n = None               # its number on that connection, from 1

    @property
    def path(self):
        return self.target.partition("?")[0]

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def header(self, name, default=None):
        v = self.header_all(name)
        return v[0] if v else default

    @property
    def keep_alive(self):
        conn = ",".join(self.header_all("Connection")).lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn

    def __repr__(self):
        return f"<{self.method} {self.target} conn={self.conn} n={self.n} headers={self.headers} body={self.body[:80]!r}>"


class Connection:
    """One TCP connection an origin accepted."""

    def __init__(self, index, origin, local, peer, tls):
        self.index, self.origin, self.local, self.peer, self.tls = index, origin, local, peer, tls
        self.first_bytes = b""      # the first bytes the client sent (up to 64)
        self.hello = None           # tlshello.parse() of its ClientHello, when it sent one
        self.handshake = None       # None (not finished), "ok", or "failed: ..."
        self.version = self.cipher = self.alpn = None
        self.requests = []
        self.closed = False

    def __repr__(self):
        return (f"<conn {self.index} {self.origin} tls={self.tls} handshake={self.handshake!r} "
                f"sni={self.hello and self.hello['sni']!r} requests={[f'{r.method} {r.target}' for r in self.requests]} "
                f"closed={self.closed}>")


class InspectOrigins:
    def __init__(self, material, workdir):
        self.certs = material["certs"]
        self.git_root = workdir / "git"
        self.git_root.mkdir(exist_ok=True)
        self.npm = NpmRegistry("https://registry.inspect.test")
        self.pypi = SimpleIndex("https://pypi.inspect.test")
        self.crates = CratesRegistry("https://index.crates.io/", "https://static.crates.io/crates")
        # origin name -> the stand-in that answers its other paths
        self.stand_ins = {"pypi.inspect.test": self.pypi, "index.crates.io": self.crates.index,
                          "static.crates.io": self.crates.files}
        self._cond = threading.Condition()
        self.conns = []
        self._listeners = []
        self._open = set()
        self._stopping = False
        self.contexts = {}

    # --- lifecycle ------------------------------------------------------
    def start(self):
        for name, (addr, _, _) in ORIGINS.items():
            cert, key, _ = self.certs[name]
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(cert), str(key))
            ctx.set_alpn_protocols(["http/1.1"])
            self.contexts[name] = ctx
            self._listen(name, addr, 443, True)
        for name, port in PLAIN.items():
            self._listen(name, ORIGINS[name][0], port, False)
        return self

    def _listen(self, name, addr, port, tls):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, port))
        ls.listen(512)
        self._listeners.append(ls)
        threading.Thread(target=self._accept, args=(ls, name, tls), daemon=True,
                         name=f"origin {name}:{port}").start()

    def stop(self):
        self._stopping = True
        for ls in self._listeners:
            try:
                ls.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            ls.close()
        with self._cond:
            socks = list(self._open)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self, ls, name, tls):
        while not self._stopping:
            try:
                sock, peer = ls.accept()
            except OSError:
                return
            with self._cond:
                rec = Connection(len(self.conns), name, sock.getsockname()[:2], peer[:2], tls)
                self.conns.append(rec)
                self._open.add(sock)
                self._cond.notify_all()
            threading.Thread(target=self._serve, args=(sock, rec), daemon=True).start()

    # --- what the tests read --------------------------------------------
    def mark(self):
        with self._cond:
            return len(self.conns)

    def conns_since(self, mark, origin=None):
        """Snapshots of the connections accepted since mark (to origin)."""
        with self._cond:
            out = []
            for c in self.conns[mark:]:
                if origin is None or c.origin == origin:
                    snap = copy.copy(c)
                    snap.requests = list(c.requests)
                    out.append(snap)
            return out

    def requests_since(self, mark, origin=None):
        return [r for c in self.conns_since(mark, origin) for r in c.requests]

    def _wait(self, pred, timeout, what, mark, origin):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                conns = self.conns_since(mark, origin)
                if pred(conns):
                    return conns
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"origin: {what} within {timeout}s; connections since the mark: {conns}")
                self._cond.wait(left)

    def wait_closed(self, mark, origin=None, timeout=5.0):
        """Wait until every connection since mark has ended; return them."""
        return self._wait(lambda cs: all(c.closed for c in cs), timeout,
                          "connections still open", mark, origin)

    def wait_requests(self, mark, n, origin=None, timeout=5.0):
        """Wait until connections since mark carried at least n requests."""
        return self._wait(lambda cs: sum(len(c.requests) for c in cs) >= n, timeout,
                          f"fewer than {n} requests", mark, origin)

    def wait_conns(self, mark, n, origin=None, timeout=5.0):
        return self._wait(lambda cs: len(cs) >= n, timeout, f"fewer than {n} connections", mark, origin)

    def _update(self, fn):
        with self._cond:
            fn()
            self._cond.notify_all()

    # --- one connection ---------------------------------------------------
    def _serve(self, sock, rec):
        stream = sock
        try:
            sock.settimeout(IDLE_S)
            if rec.tls:
                first, hello = _peek_hello(sock)
                self._update(lambda: (setattr(rec, "first_bytes", first), setattr(rec, "hello", hello)))
                stream = self.contexts[rec.origin].wrap_socket(sock, server_side=True,
                                                              do_handshake_on_connect=False)
                try:
                    stream.do_handshake()
                except (ssl.SSLError, OSError) as e:
                    why = f"failed: {e}"
                    self._update(lambda: setattr(rec, "handshake", why))
                    return
                self._update(lambda: (setattr(rec, "handshake", "ok"), setattr(rec, "version", stream.version()),
                                      setattr(rec, "cipher", stream.cipher()[0]),
                                      setattr(rec, "alpn", stream.selected_alpn_protocol())))
            else:
                try:
                    rec.first_bytes = sock.recv(64, socket.MSG_PEEK)
                except OSError:
                    pass
            rfile = stream.makefile("rb")
            while True:
                try:
                    req = _read_request(rfile)
                except BadRequest as e:
                    msg = f"origin: bad request: {e}\n".encode()
                    stream.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                                   % (len(msg), msg))
                    return
                if req is None:
                    return
                req.conn = rec.index
                req.n = len(rec.requests) + 1
                self._update(lambda: rec.requests.append(req))
                status, headers, body, close = self._handle(req, rec)
                keep = req.keep_alive and not close
                head = f"HTTP/1.1 {status}\r\n"
                for k, v in headers:
                    head += f"{k}: {v}\r\n"
                head += f"Content-Length: {len(body)}\r\n"
                if not keep and close != "silently":
                    head += "Connection: close\r\n"
                stream.sendall(head.encode("latin-1") + b"\r\n" + (b"" if req.method == "HEAD" else body))
                if not keep:
                    return
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            # The makefile holds a reference to the socket: until it is
            # closed too, stream.close() leaves the descriptor open, and a
            # test told "closed" would race the FIN.
            for f in (locals().get("rfile"), stream):
                try:
                    if f is not None:
                        f.close()
                except OSError:
                    pass
            with self._cond:
                self._open.discard(sock)
                rec.closed = True
                self._cond.notify_all()

    def _handle(self, req, rec):
        """(status line rest, headers, body, close after: False, True, or
        "silently" for a close the response does not announce)."""
        path = req.path
        if path == "/echo" or path.startswith("/echo/"):
            doc = {"origin": rec.origin, "tls": rec.tls, "conn": rec.index, "n": req.n,
                   "method": req.method, "target": req.target, "path": path,
                   "headers": [[k, v] for k, v in req.headers], "body": req.body.decode("latin-1")}
            return "200 OK", [("Content-Type", "application/json")], json.dumps(doc).encode(), False
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "bytes" and parts[1].isdigit() and int(parts[1]) <= BODY_MAX:
            return "200 OK", [("Content-Type", "application/octet-stream")], pattern(int(parts[1])), False
        if path == "/drop":
            return "200 OK", [("Content-Type", "text/plain")], b"dropped\n", True
        if path == "/hangup":
            return "200 OK", [("Content-Type", "text/plain")], b"hanging up\n", "silently"
        if path.startswith("/git/"):
            return gitbackend.cgi(self.git_root, req, path[len("/git"):], rec.peer[0])
        return self.stand_ins.get(rec.origin, self.npm).handle(req)


def _peek_hello(sock, timeout=10.0):
    """(first bytes, parsed ClientHello or None) without taking bytes from
    the socket: the ssl handshake then reads them as sent."""
    deadline = time.monotonic() + timeout
    seen = -1
    while True:
        try:
            data = sock.recv(1 << 16, socket.MSG_PEEK)
        except (OSError, socket.timeout):
            return b"", None
        if not data:
            return b"", None
        try:
            return data[:64], tlshello.parse(data)
        except tlshello.NotHello:
            return data[:64], None
        except tlshello.NeedMore:
            pass
        if len(data) >= 1 << 16 or time.monotonic() > deadline:
            return data[:64], None
        if len(data) == seen:
            time.sleep(0.005)   # MSG_PEEK returns at once while bytes wait: poll for more
        seen = len(data)


def _read_request(rfile):
    line = rfile.readline(HEAD_MAX + 1)
    if not line:
        return None
    if len(line) > HEAD_MAX or not line.endswith(b"\r\n"):
        raise BadRequest(f"request line {line[:100]!r}")
    try:
        method, target, version = line[:-2].decode("latin-1").split(" ")
    except ValueError:
        raise BadRequest(f"request line {line[:100]!r}")
    headers, total = [], len(line)
    while True:
        h = rfile.readline(HEAD_MAX + 1)
        total += len(h)
        if not h:
            raise BadRequest("the connection ended inside a request head")
        if total > HEAD_MAX or not h.endswith(b"\r\n"):
            raise BadRequest("request head too long or a bare LF")
        if h == b"\r\n":
            break
        name, sep, value = h[:-2].decode("latin-1").partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest(f"header line {h[:100]!r}")
        headers.append((name, value.strip()))
    req = Request(method, target, version, headers, b"")
    te = ",".join(req.header_all("Transfer-Encoding")).lower()
    cl = req.header_all("Content-Length")
    if te and cl:
        raise BadRequest("both Content-Length and Transfer-Encoding")
    if "chunked" in te:
        body = bytearray()
        while True:
            size_line = rfile.readline(1024)
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while rfile.readline(HEAD_MAX) not in (b"\r\n", b""):
                    pass
                break
            if len(body) + size > BODY_MAX:
                raise BadRequest("body too large")
            body += _read_exact(rfile, size)
            if _read_exact(rfile, 2) != b"\r\n":
                raise BadRequest("chunk not followed by CRLF")
        req.body = bytes(body)
    elif cl:
        if len(set(cl)) != 1 or not cl[0].isdigit() or int(cl[0]) > BODY_MAX:
            raise BadRequest(f"Content-Length {cl}")
        req.body = _read_exact(rfile, int(cl[0]))
    return req


def _read_exact(rfile, n):
    data = rfile.read(n)
    if data is None or len(data) != n:
        raise BadRequest(f"the connection ended inside a body ({0 if data is None else len(data)} of {n} bytes)")
    return data
