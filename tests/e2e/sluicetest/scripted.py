"""A scriptable origin: raw TCP listeners on 11.0.0.5:80 (h1.hostile.test)
and 11.0.0.6:80 (h2.hostile.test) where a test says, per accepted
connection, exactly what happens ("playbook" style).

    origin.play(Script(WaitRequest(), Send(RESPONSE), WaitEOF()))   # next connection to h1
    origin.play(Script(Serve()), at=H2)
    conn = origin.wait_conn(mark)      # the first connection accepted since mark

A script is a list of steps run in order on the connection's own thread.
Steps wait on events (bytes received, a complete request, EOF from sluice, an
Event the test sets), never on fixed sleeps, except Sleep, which tests use
only to check that something does not happen. Meanwhile a reader thread
records every byte received and how and when sluice's side ended (unless
the script starts with NoRead: then the connection never reads at all).
A connection without a script queued gets Serve(): it answers every request,
strictly parsed, with its own path, host and body (see respond_echo).

After its script the connection stays open (as it is: reading, or not)
until sluice closes it or the test ends."""

import select
import socket
import struct
import threading
import time

from .strict import parse_requests

H1 = ("11.0.0.5", 80)
H2 = ("11.0.0.6", 80)
LISTEN = [H1, H2]
STEP_TIMEOUT = 10.0


class PeerClosed(Exception):
    """sluice closed its side before the step's condition held."""


class StepTimeout(AssertionError):
    pass


class BadStream(AssertionError):
    """What arrived is not a well-formed request stream."""


class OriginConn:
    def __init__(self, origin, index, sock, local, peer, script):
        self.origin = origin
        self.index = index
        self.sock = sock
        self.local = local
        self.peer = peer
        self.script = script
        self.accepted_at = time.monotonic()
        self.cond = threading.Condition()
        self.data = bytearray()
        self.ended = None           # how sluice's side ended: "eof" or "reset"
        self.ended_at = None
        self.sent = 0               # bytes handed to the kernel
        self.last_send = self.accepted_at
        self.served = 0             # requests answered by Serve/Respond
        self.closed = False         # we closed the socket
        self.script_done = False
        self.outcome = None         # None: script ran to its end; else why it stopped
        self.error = None           # an exception in the test's own code
        self.reading = not (script.steps and isinstance(script.steps[0], NoRead))

    # --- what tests look at -------------------------------------------------
    @property
    def received(self):
        with self.cond:
            return bytes(self.data)

    def requests(self):
        """parse_requests() of everything received so far."""
        return parse_requests(self.received)

    def peer_closed(self):
        """sluice closed its side (EOF/reset seen by the reader, or, for a
        connection that does not read, the socket's TCP state)."""
        with self.cond:
            if self.ended is not None:
                return True
        if self.reading or self.closed:
            return False
        try:
            info = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
        except OSError:
            return True
        # TCP_CLOSE_WAIT = 8 (FIN received), TCP_CLOSE = 7 (reset)
        return info[0] in (7, 8)

    def wait(self, pred, timeout=STEP_TIMEOUT, what="condition", peer_gone_ok=False):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if pred():
                    return
                if self.ended is not None and not peer_gone_ok:
                    raise PeerClosed(f"sluice closed ({self.ended}) before {what}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StepTimeout(f"origin conn {self.index}: no {what} within {timeout}s; "
                                      f"received {bytes(self.data)[:300]!r}")
                self.cond.wait(min(left, 0.05))

    def wait_closed(self, timeout=5.0):
        """Wait until sluice has closed this connection; False on timeout."""
        deadline = time.monotonic() + timeout
        while not self.peer_closed():
            if time.monotonic() > deadline:
                return False
            with self.cond:
                self.cond.wait(0.02)
        return True

    def wait_script(self, timeout=STEP_TIMEOUT):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.script_done:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"origin conn {self.index}: script still running "
                                         f"after {timeout}s")
                self.cond.wait(left)
        return self.outcome

    def __repr__(self):
        return (f"<OriginConn {self.index} {self.local} ended={self.ended} sent={self.sent} "
                f"outcome={self.outcome} received={bytes(self.data)[:200]!r}>")

    # --- socket work ---------------------------------------------------------
    def send(self, data):
        view = memoryview(data)
        while view:
            n = self.sock.send(view)
            view = view[n:]
            with self.cond:
                self.sent += n
                self.last_send = time.monotonic()

    def close(self):
        """FIN, then release. shutdown() first: a close() alone would not
        take effect while the reader thread is blocked in recv()."""
        with self.cond:
            if self.closed:
                return
            self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def reset(self):
        """A TCP reset: SO_LINGER 0, wake the reader (SHUT_RD sends nothing),
        release the socket."""
        with self.cond:
            if self.closed:
                return
            self.closed = True
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def _reader(self):
        while True:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                if not self.closed:
                    self._ended("reset")
                return
            except OSError:
                if not self.closed:
                    self._ended("error")
                return
            if not data:
                if not self.closed:
                    self._ended("eof")
                return
            with self.cond:
                self.data += data
                self.cond.notify_all()

    def _ended(self, how):
        with self.cond:
            if self.ended is None:
                self.ended = how
                self.ended_at = time.monotonic()
            self.cond.notify_all()

    def _run(self):
        try:
            for step in self.script.steps:
                step.run(self)
        except PeerClosed as e:
            self.outcome = f"peer closed: {e}"
        except (StepTimeout, BadStream) as e:
            self.outcome = f"failed: {e}"
        except OSError as e:
            self.outcome = f"socket error: {e!r}"
        except Exception as e:              # the test's own bug
            self.outcome = f"error: {e!r}"
            self.error = e
        with self.cond:
            self.script_done = True
            self.cond.notify_all()


# --- steps ---------------------------------------------------------------------
class Step:
    def run(self, conn):
        raise NotImplementedError


class NoRead(Step):
    """As the first step: this connection never reads a byte."""

    def run(self, conn):
        pass


def _requests_or_raise(conn):
    reqs, tail, err = parse_requests(conn.data)
    if err is not None:
        raise BadStream(f"origin conn {conn.index}: malformed request stream: {err}")
    return reqs, tail


class WaitHead(Step):
    """Until n request heads are complete (the n-th's body may not be)."""

    def __init__(self, n=1):
        self.n = n

    def run(self, conn):
        def ok():
            reqs, tail = _requests_or_raise(conn)
            return len(reqs) + (1 if tail is not None and tail.head is not None else 0) >= self.n
        conn.wait(ok, what=f"{self.n} request head(s)")


class WaitRequest(Step):
    """Until n complete requests (head and body) have arrived. They count as
    answered (by the steps that follow): a later Serve starts after them."""

    def __init__(self, n=1):
        self.n = n

    def run(self, conn):
        conn.wait(lambda: len(_requests_or_raise(conn)[0]) >= self.n,
                  what=f"{self.n} complete request(s)")
        conn.served = max(conn.served, self.n)


class WaitBytes(Step):
    def __init__(self, n):
        self.n = n

    def run(self, conn):
        conn.wait(lambda: len(conn.data) >= self.n, what=f"{self.n} bytes")


class WaitEOF(Step):
    """Until sluice closes its side (reading on)."""

    def __init__(self, timeout=STEP_TIMEOUT):
        self.timeout = timeout

    def run(self, conn):
        conn.wait(lambda: conn.ended is not None, timeout=self.timeout, what="EOF",
                  peer_gone_ok=True)


class WaitEvent(Step):
    """Until the test sets a threading.Event (or sluice closes)."""

    def __init__(self, event, timeout=STEP_TIMEOUT):
        self.event = event
        self.timeout = timeout

    def run(self, conn):
        deadline = time.monotonic() + self.timeout
        while not self.event.wait(0.02):
            if conn.peer_closed():
                raise PeerClosed("sluice closed while the origin waited for the test")
            if time.monotonic() > deadline:
                raise StepTimeout(f"origin conn {conn.index}: the test did not set its event")


class Send(Step):
    """Send bytes: at once, or in pieces (a size, or a list of sizes) with
    `delay` seconds between them."""

    def __init__(self, data, pieces=None, delay=0.0):
        self.data = data
        self.pieces = pieces
        self.delay = delay

    def run(self, conn):
        data = self.data(conn) if callable(self.data) else self.data
        if self.pieces is None:
            conn.send(data)
            return
        sizes = self.pieces if isinstance(self.pieces, (list, tuple)) else None
        off, i = 0, 0
        while off < len(data):
            n = sizes[i % len(sizes)] if sizes else self.pieces
            conn.send(data[off:off + n])
            off += n
            i += 1
            if self.delay and off < len(data):
                time.sleep(self.delay)


class SendForever(Step):
    """Send `block` again and again until `limit` bytes went out, `stop` is
    set, or sluice closes. Progress is in conn.sent / conn.last_send, so a
    test sees when backpressure stalled it."""

    def __init__(self, block, limit=1 << 40, stop=None, prefix=b""):
        self.block = block
        self.limit = limit
        self.stop = stop or threading.Event()
        self.prefix = prefix

    def run(self, conn):
        if self.prefix:
            conn.send(self.prefix)
        # no socket timeout: the reader thread shares the socket; wait for
        # writability with select and send without blocking instead
        try:
            while conn.sent < self.limit and not self.stop.is_set():
                _, w, _ = select.select([], [conn.sock], [], 0.05)
                if not w:
                    if conn.peer_closed():
                        raise PeerClosed("sluice closed while the origin was sending")
                    continue
                try:
                    n = conn.sock.send(self.block, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    continue
                with conn.cond:
                    conn.sent += n
                    conn.last_send = time.monotonic()
        except (BrokenPipeError, ConnectionResetError):
            raise PeerClosed("sluice closed while the origin was sending")


class HalfClose(Step):
    def run(self, conn):
        conn.sock.shutdown(socket.SHUT_WR)


class Reset(Step):
    """Close with SO_LINGER 0: a TCP reset."""

    def run(self, conn):
        conn.reset()


class Close(Step):
    def run(self, conn):
        conn.close()


class Sleep(Step):
    """A fixed pause: only to let something that must not happen have the
    chance to happen."""

    def __init__(self, seconds):
        self.seconds = seconds

    def run(self, conn):
        time.sleep(self.seconds)


class Call(Step):
    def __init__(self, fn):
        self.fn = fn

    def run(self, conn):
        self.fn(conn)


def respond_echo(req, conn):
    """200 naming the request (X-Path, X-Host, X-Method, X-Origin-Conn), its
    body echoed, Content-Length framed; Connection: close if it asked."""
    body = b"" if req.method == "HEAD" else req.body
    close = req.conn_close or req.version == "HTTP/1.0"
    return (b"HTTP/1.1 200 OK\r\nX-Path: %s\r\nX-Host: %s\r\nX-Method: %s\r\n"
            b"X-Origin-Conn: %d\r\n%sContent-Length: %d\r\n\r\n%s"
            % (req.target.encode(), (req.host or "").encode(), req.method.encode(),
               conn.index, b"Connection: close\r\n" if close else b"", len(req.body), body))


class Respond(Step):
    """Wait for the next complete request and answer it with fn(req, conn)
    (bytes). A request that asked to close is answered, then closed."""

    def __init__(self, fn=respond_echo, timeout=STEP_TIMEOUT):
        self.fn = fn
        self.timeout = timeout

    def run(self, conn):
        conn.wait(lambda: len(_requests_or_raise(conn)[0]) > conn.served,
                  timeout=self.timeout, what=f"request {conn.served + 1}")
        req = _requests_or_raise(conn)[0][conn.served]
        conn.send(self.fn(req, conn))
        conn.served += 1
        if req.conn_close or req.version == "HTTP/1.0":
            conn.close()


class Serve(Step):
    """Answer requests as they come (Respond in a loop) until sluice closes,
    or `count` were answered."""

    def __init__(self, fn=respond_echo, count=None):
        self.fn = fn
        self.count = count

    def run(self, conn):
        n = 0
        while (self.count is None or n < self.count) and not conn.closed:
            Respond(self.fn, timeout=STEP_TIMEOUT if self.count else 3600).run(conn)
            n += 1


class Script:
    def __init__(self, *steps):
        self.steps = list(steps)

    def __repr__(self):
        return f"Script({', '.join(type(s).__name__ for s in self.steps)})"


def SERVE():
    return Script(Serve())


# --- the listeners ---------------------------------------------------------------
class ScriptedOrigin:
    def __init__(self, addrs=LISTEN):
        self.lock = threading.Condition()
        self.conns = []
        self.queues = {a: [] for a in addrs}
        self.listeners = []
        self._stop = False
        for a in addrs:
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind(a)
            ls.listen(512)
            self.listeners.append(ls)
            threading.Thread(target=self._accept_loop, args=(ls, a), name=f"scripted-{a[0]}",
                             daemon=True).start()

    def play(self, *scripts, at=H1):
        """Queue scripts for the next connections accepted at `at`."""
        with self.lock:
            self.queues[at].extend(scripts)

    def mark(self):
        with self.lock:
            return len(self.conns)

    def since(self, mark=0, local=None):
        with self.lock:
            return [c for c in self.conns[mark:] if local is None or c.local == local]

    def wait_conn(self, mark=0, n=1, local=None, timeout=STEP_TIMEOUT):
        """The n-th connection accepted since mark (at local, if given)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                got = [c for c in self.conns[mark:] if local is None or c.local == local]
                if len(got) >= n:
                    return got[n - 1]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no origin connection #{n} (at {local}) within {timeout}s; "
                                         f"have {got}")
                self.lock.wait(left)

    def pending(self):
        with self.lock:
            return {a: list(q) for a, q in self.queues.items() if q}

    def reset(self):
        """Between tests: drop queued scripts, reset every open connection."""
        with self.lock:
            for q in self.queues.values():
                q.clear()
            conns = list(self.conns)
        for c in conns:
            c.reset()
        errors = [c for c in conns if c.error is not None]
        with self.lock:
            self.conns.clear()
        return errors

    def _accept_loop(self, ls, addr):
        while not self._stop:
            try:
                sock, peer = ls.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                q = self.queues[addr]
                script = q.pop(0) if q else SERVE()
                conn = OriginConn(self, len(self.conns), sock, addr, peer, script)
                self.conns.append(conn)
                self.lock.notify_all()
            if conn.reading:
                threading.Thread(target=conn._reader, daemon=True).start()
            threading.Thread(target=conn._run, daemon=True).start()

    def close(self):
        self._stop = True
        for ls in self.listeners:
            try:
                ls.close()
            except OSError:
                pass
        self.reset()
