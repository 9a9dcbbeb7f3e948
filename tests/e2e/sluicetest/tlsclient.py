"""TLS clients for inspected tunnels: Python ssl over a CONNECT tunnel, and
MemTLS, a client driven through memory BIOs so that a test controls every
record it sends (a ClientHello re-framed into many records, a handshake
stopped half-way)."""

import socket
import ssl
import time

from . import tlshello
from .client import Conn, connect


def context(ca, alpn=("http/1.1",)):
    """A client context that trusts only `ca` (sluice's CA, or the test's
    upstream CA for an opaque tunnel)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def tunnel(port, host, tport=443, timeout=15.0):
    """CONNECT host:tport through the gate; the 200 is required."""
    resp, conn = connect(port, f"{host}:{tport}", timeout=timeout)
    assert resp.status == 200, f"CONNECT {host}:{tport} got {resp!r}"
    return conn


def tls_through(port, host, ca, alpn=("http/1.1",), timeout=15.0):
    """(TLS socket, Conn over it, the raw tunnel Conn): a handshake with
    whatever answers inside CONNECT host:443, trusting only ca."""
    raw = tunnel(port, host, timeout=timeout)
    tsock = context(ca, alpn).wrap_socket(raw.sock, server_hostname=host)
    return tsock, Conn.wrap(tsock), raw


class MemTLS:
    """A TLS client over a socket, through ssl.MemoryBIO: the test sees and
    may rewrite each flight before it is sent. Socket-like enough for
    client.Conn (sendall, recv, recv_into, settimeout, gettimeout, close)."""

    def __init__(self, sock, ctx, server_hostname):
        self.sock = sock
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname=server_hostname)
        self.flights = 0

    # --- the handshake, step by step -------------------------------------
    def first_flight(self):
        """The ClientHello record(s) the ssl module would send now."""
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self.out.read()

    def send_raw(self, data):
        self.sock.sendall(data)

    def read_server_flight(self, timeout=10.0):
        """Feed what the server sends until the ssl module wants to send or
        is done; returns the ciphertext it produced (not yet sent)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.obj.do_handshake()
                return self.out.read()
            except ssl.SSLWantReadError:
                pending = self.out.read()
                if pending:
                    return pending
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no server flight")
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the peer closed during the handshake")
            self.inc.write(data)

    def handshake(self, first_flight_transform=None, timeout=10.0):
        """A whole handshake; the first flight is passed through
        first_flight_transform (bytes -> bytes) before it is sent."""
        flight = self.first_flight()
        if first_flight_transform:
            flight = first_flight_transform(flight)
        self.send_raw(flight)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.obj.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("handshake did not finish")
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the peer closed during the handshake")
            self.inc.write(data)

    def _flush(self):
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    # --- socket-like, after the handshake ---------------------------------
    def selected_alpn_protocol(self):
        return self.obj.selected_alpn_protocol()

    def getpeercert(self, binary_form=False):
        return self.obj.getpeercert(binary_form)

    def sendall(self, data):
        view = memoryview(data)
        for off in range(0, len(view), 1 << 14):
            self.obj.write(view[off:off + (1 << 14)])
            self._flush()

    def recv(self, n):
        while True:
            try:
                return self.obj.read(n)
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                return b""
            data = self.sock.recv(1 << 16)
            if not data:
                return b""
            self.inc.write(data)

    def recv_into(self, buf, n=0):
        data = self.recv(n or len(buf))
        buf[:len(data)] = data
        return len(data)

    def settimeout(self, t):
        self.sock.settimeout(t)

    def gettimeout(self):
        return self.sock.gettimeout()

    def getsockname(self):
        return self.sock.getsockname()

    def setsockopt(self, *a):
        self.sock.setsockopt(*a)

    def close(self):
        self.sock.close()


def reframer(fragment):
    """A first_flight_transform: the ClientHello split into records of
    `fragment` bytes."""
    return lambda flight: tlshello.reframe(flight, fragment)
