"""A hostile HTTPS origin for inspected tunnels: a TLS listener at
11.0.0.6:443 (h2.hostile.test, whose plain-HTTP side is the scripted
origin) with a certificate from the test CA, where a test says, per
accepted connection, what happens (a handler run on the connection's own
thread). Handlers get an OriginConn: the raw socket, and helpers for a
normal handshake (tlsrecords.RawTLS, so the handler writes its records
itself afterwards), reading a request and answering one. A connection
without a handler queued is served normally: each request is answered
200 with a body naming the connection and the request's path."""

import datetime
import queue
import socket
import struct
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from . import tlsmaterial
from .tlsrecords import RawTLS

HOST = "h2.hostile.test"
ADDR = ("11.0.0.6", 443)


def make_cert(workdir, base):
    """A certificate for HOST from the test CA (base: tlsmaterial.make())."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    ca_cert = x509.load_pem_x509_certificate(base["ca"].read_bytes())
    ca_key = serialization.load_pem_private_key(base["ca_key"].read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = tlsmaterial._leaf(HOST, HOST, key, ca_cert, ca_key, now - tlsmaterial.DAY, now + 2 * tlsmaterial.DAY)
    cp, kp = workdir / "tlsorigin.pem", workdir / "tlsorigin.key"
    cp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    kp.write_bytes(tlsmaterial._pem_key(key))
    return cp, kp


class OriginConn:
    def __init__(self, origin, index, sock):
        self.origin, self.index, self.sock = origin, index, sock
        self.requests = []          # request heads (bytes) this connection read
        self.ended = None           # how the handler saw sluice's side end: "eof", "reset" or None
        self.error = None

    def handshake(self):
        return RawTLS.server(self.sock, self.origin.cert, self.origin.key).handshake()

    def read_request(self, t, timeout=10.0):
        """One request head (no body), or None when sluice closed first."""
        data, closed, _ = t.recv_app_until(lambda d: b"\r\n\r\n" in d, timeout)
        if b"\r\n\r\n" not in data:
            self.ended = "eof" if closed else None
            return None
        head = data[:data.index(b"\r\n\r\n") + 4]
        assert data == head, f"bytes after a request head: {data!r}"
        self.requests.append(head)
        return head

    @staticmethod
    def response(body, extra=b""):
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)

    def body_for(self, head):
        path = head.split(b" ")[1]
        return b"conn %d %s" % (self.index, path)

    def serve(self, t):
        while True:
            head = self.read_request(t)
            if head is None:
                return
            t.send_app(self.response(self.body_for(head)))

    def wait_end(self, timeout=10.0):
        """Wait until sluice closes this connection ("eof" or "reset")."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(1 << 16):
                pass
            self.ended = "eof"
        except ConnectionResetError:
            self.ended = "reset"
        return self.ended

    def reset(self):
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


class TLSOrigin:
    def __init__(self, cert, key):
        self.cert, self.key = cert, key
        self.handlers = queue.Queue()
        self.conns = []
        self.cond = threading.Condition()
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(ADDR)
        self.ls.listen(64)
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True, name="tls origin").start()

    def play(self, handler):
        """handler(OriginConn) for the next connection accepted."""
        self.handlers.put(handler)

    def reset_script(self):
        while not self.handlers.empty():
            self.handlers.get_nowait()

    def mark(self):
        with self.cond:
            return len(self.conns)

    def wait_conns(self, mark, n, timeout=10.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.conns) - mark < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"tls origin: fewer than {n} connections since the mark")
                self.cond.wait(left)
            return self.conns[mark:]

    def wait_done(self, conn, timeout=10.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not conn.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"tls origin: connection {conn.index}'s handler still runs")
                self.cond.wait(left)
        if conn.error:
            raise conn.error

    def _accept(self):
        while not self.stopping:
            try:
                sock, _ = self.ls.accept()
            except OSError:
                return
            with self.cond:
                conn = OriginConn(self, len(self.conns), sock)
                conn.done = False
                self.conns.append(conn)
                self.cond.notify_all()
            try:
                handler = self.handlers.get_nowait()
            except queue.Empty:
                handler = None
            threading.Thread(target=self._run, args=(conn, handler), daemon=True).start()

    def _run(self, conn, handler):
        try:
            if handler is None:
                conn.serve(conn.handshake())
            else:
                handler(conn)
        except Exception as e:      # noqa: BLE001 - kept for the test to raise
            conn.error = e
        finally:
            try:
                conn.sock.close()
            except OSError:
                pass
            with self.cond:
                conn.done = True
                self.cond.notify_all()

    def close(self):
        self.stopping = True
        # shutdown wakes the accept thread: a close alone leaves the socket
        # listening (and 11.0.0.6:443 bound) while accept() still holds it
        try:
            self.ls.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.ls.close()
