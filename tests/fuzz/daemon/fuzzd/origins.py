"""The fuzzer's origins: wildcard listeners on the origin ports, so that a
connection to any local address lands here (a connection to a non-public
one is then seen, not refused), and a stall listener whose SYNs are
dropped. Each accepted connection runs the next script the running case
has for its address and port (gen.py's SCRIPT), or a default, and keeps
every byte it receives."""

import asyncio
import ipaddress
import socket
import struct
import time

from . import net, rules
from .http import parse_requests
from .tlsbits import ALERT_RECORD, ServerTls, bad_record, sni_of

RECORD_CAP = 4 << 20


class OriginConn:
    def __init__(self, sock, local, port, peer, exec_id):
        self.sock = sock
        self.local = local
        self.port = port
        self.peer = peer
        self.exec_id = exec_id
        self.t_accept = time.monotonic()
        self.data = bytearray()
        self.sent = bytearray()  # what the script sent (plaintext, inside TLS): the bodies a pin was checked on
        self.aborted = False     # it ended with a reset, an alert or a bad record: what it sent may never have
                                 # reached the gate (a reset drops the unread data), so the gate may retry
        self.parsed = 0         # requests consumed by "req" ops
        self.eof = False
        self.closed = False
        self.task = None
        self.tls = None         # an inspected origin's TLS record (ServerTls.rec); data is then plaintext
        self.side = None        # its ServerTls

    def key(self):
        return (self.local, self.port)


def _bulk(n):
    block = (b"0123456789abcdefghijklmnopqrstuvwxyz" * 2000)[:65536]
    while n > 0:
        k = min(n, len(block))
        yield block[:k]
        n -= k


class Origins:
    def __init__(self, loop):
        self.loop = loop
        self.listeners = []
        self.stall = []
        self.conns = []         # every OriginConn this daemon instance saw
        self.table = {}         # (addr, port) -> [script...] for the running case
        self.counts = {}        # (addr, port) -> connections taken from table
        self.exec_id = 0
        self.tasks = set()
        self.pki = None         # pki.Pki: the TLS origins' certificates (None: no inspection)
        self.raw = False        # self-test: ops that only a broken origin would run

    async def start(self):
        for port in net.ORIGIN_PORTS:
            for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
                s = socket.socket(fam, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if fam == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s.bind((addr, port))
                s.listen(1024)
                s.setblocking(False)
                self.listeners.append(s)
                t = self.loop.create_task(self._accept(s, port))
                self.tasks.add(t)
        self._start_stall()
        return self

    def _start_stall(self):
        import select
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.bind(net.STALL)
        ls.listen(0)
        self.stall.append(ls)
        for _ in range(8):
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.setblocking(False)
            c.connect_ex(net.STALL)
            self.stall.append(c)
            _, w, _ = select.select([], [c], [], 0.5)
            if not w:
                return
        raise RuntimeError("could not fill the stall listener's accept queue")

    async def close(self):
        for t in self.tasks:
            t.cancel()
        await asyncio.wait(self.tasks, timeout=3)
        for s in self.listeners + self.stall:
            s.close()
        await self.teardown(all_conns=True)

    # --- per case ---------------------------------------------------------
    def install(self, exec_id, table):
        """table: {(addr, port): [script...]}"""
        self.exec_id = exec_id
        self.table = table
        self.counts = {}

    def case_conns(self, exec_id):
        return [c for c in self.conns if c.exec_id == exec_id]

    def all_closed(self, exec_id):
        return all(c.closed or c.eof for c in self.case_conns(exec_id))

    async def teardown(self, all_conns=False):
        """End every connection of the finished case: keep what is still
        pending on its socket, then close it."""
        todo = [c for c in self.conns if not c.closed and (all_conns or c.exec_id != -1)]
        tasks = [c.task for c in todo if c.task and not c.task.done()]
        for t in tasks:
            t.cancel()
        if tasks:   # bounded: see harness._stop_canaries
            await asyncio.wait(tasks, timeout=3)
        for c in todo:
            self._drain_now(c)
            self._close(c)

    def _drain_now(self, c):
        """What is already on the socket, without waiting (for TLS, what of
        it decrypts)."""
        raw = bytearray()
        try:
            while len(raw) + len(c.data) < RECORD_CAP:
                b = c.sock.recv(65536, socket.MSG_DONTWAIT)
                if not b:
                    c.eof = True
                    break
                raw += b
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            c.eof = True
        if c.side is None:
            c.data += raw
        elif raw and not c.side.eof:
            c.side.inc.write(bytes(raw))
            c.side._drain_plain(c.data)

    def _close(self, c, rst=False):
        if c.closed:
            return
        c.closed = True
        try:
            if rst:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.sock.close()
        except OSError:
            pass

    # --- connections ------------------------------------------------------
    async def _accept(self, ls, port):
        while True:
            try:
                s, peer = await self.loop.sock_accept(ls)
            except asyncio.CancelledError:
                raise
            except OSError:
                await asyncio.sleep(0.01)
                continue
            s.setblocking(False)
            local = s.getsockname()[0]
            try:
                local = str(ipaddress.ip_address(local.split("%")[0]))
            except ValueError:
                pass
            c = OriginConn(s, local, port, peer, self.exec_id)
            self.conns.append(c)
            if local in (net.CANARY, net.CANARY_TLS):
                c.exec_id = -1
                c.task = self.loop.create_task(self._canary(c))
            else:
                scripts = self.table.get((local, port))
                i = self.counts.get((local, port), 0)
                self.counts[(local, port)] = i + 1
                if scripts and i < len(scripts):
                    script = scripts[i]
                elif port in net.HTTP_PORTS:
                    script = {"ops": [{"op": "req"}, {"op": "send", "d": _OK, "w": []}] * 4}
                else:
                    # an inspected tunnel's origin speaks TLS; any other echoes
                    script = {"sniff": True, "ops": [{"op": "echo", "ms": 1500}]}
                c.task = self.loop.create_task(self._run(c, script))

    async def _recv(self, c, timeout):
        """Read once into c.data (plaintext on a TLS connection). False on
        EOF, error or timeout."""
        if c.eof or c.closed:
            return False
        if c.side is not None:
            ok = await c.side.recv(c.data, timeout, RECORD_CAP)
            if c.side.raw_eof:
                c.eof = True
            return ok
        try:
            b = await asyncio.wait_for(self.loop.sock_recv(c.sock, 65536), timeout)
        except asyncio.TimeoutError:
            return False
        except OSError:
            c.eof = True
            return False
        if not b:
            c.eof = True
            return False
        if len(c.data) < RECORD_CAP:
            c.data += b
        return True

    async def _read_request(self, c, timeout):
        deadline = time.monotonic() + timeout
        while True:
            reqs, _, _ = parse_requests(c.data)
            done = [r for r in reqs if r.complete]
            if len(done) > c.parsed:
                c.parsed += 1
                return True
            left = deadline - time.monotonic()
            if left <= 0 or not await self._recv(c, left):
                return False

    async def _send(self, c, data, writes):
        pos = 0
        for n, delay in writes:
            if delay:
                await asyncio.sleep(delay / 1000.0)
            piece = data[pos:pos + max(0, int(n))]
            pos += len(piece)
            if piece:
                await self._put(c, piece)
        if pos < len(data):
            await self._put(c, data[pos:])

    async def _put(self, c, data):
        """Plaintext out: as it is, or one TLS record (or a few) per call."""
        if len(c.sent) < RECORD_CAP:
            c.sent += data
        if c.side is None:
            await self.loop.sock_sendall(c.sock, data)
        else:
            await c.side.send(data)

    async def _start_tls(self, c, script, pre=b""):
        """The TLS origin's handshake, with the script's certificate and
        handshake hostility. True when requests may follow."""
        t = script["tls"] if isinstance(script.get("tls"), dict) else {}
        kind = t.get("cert", "good")
        if self.pki is None or kind not in self.pki.files:
            kind = "good" if self.pki else None
        c.tls = {"cert": kind, "hs_done": False}
        if kind is None:
            return False
        if t.get("hs") == "alert":
            await self.loop.sock_sendall(c.sock, ALERT_RECORD)
            return False
        if t.get("hs") == "garbage":
            await self.loop.sock_sendall(c.sock, b"\x16\x03\x03\x00\x30" + bytes(48))
            return False
        c.side = ServerTls(self.loop, c.sock, self.pki.server_context(kind), c.tls, pre)
        cut = t.get("cut")
        res = await c.side.handshake(2.0, cut=int(cut) if isinstance(cut, int) else None)
        if res == "cut":
            c.tls["error"] = "we cut our handshake"
            then = t.get("then", "close")
            if then == "stall":
                await asyncio.sleep(3600)
            self._drain_now(c)
            self._close(c, rst=then == "rst")
            return False
        return res == "done"

    async def _run(self, c, script):
        try:
            if script.get("rcvbuf"):
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(script["rcvbuf"]))
            pre = b""
            if script.get("sniff"):
                # No script: TLS if this is sluice inspecting (its ClientHello
                # names an inspected host), else the echo.
                try:
                    pre = await asyncio.wait_for(self.loop.sock_recv(c.sock, 65536), 1.5)
                except asyncio.TimeoutError:
                    pre = b""
                if not pre:
                    c.eof = True
                    return
                if self.pki and rules.zone_of(sni_of(pre) or ""):
                    script = {"tls": {"cert": "good"}, "ops": [{"op": "req"}, {"op": "send", "d": _OK, "w": []}] * 4}
                else:
                    c.data += pre
                    await self.loop.sock_sendall(c.sock, pre)
                    pre = b""
            if script.get("tls") and not await self._start_tls(c, script, pre):
                return
            for op in script.get("ops", []):
                k = op.get("op")
                if k == "req":
                    await self._read_request(c, op.get("ms", 1500) / 1000.0)
                elif k == "send":
                    await self._send(c, op.get("d", "").encode("latin-1"), op.get("w", []))
                elif k == "bulk":
                    for block in _bulk(int(op.get("n", 0))):
                        await self._put(c, block)
                elif k == "sleep":
                    await asyncio.sleep(op.get("ms", 0) / 1000.0)
                elif k == "shut":
                    c.sock.shutdown(socket.SHUT_WR)
                elif k == "rst":
                    c.aborted = True
                    self._drain_now(c)
                    self._close(c, rst=True)
                    return
                elif k == "close":
                    self._drain_now(c)
                    self._close(c)
                    return
                elif k == "stall":
                    await asyncio.sleep(3600)
                elif k == "notify" and c.side:       # close_notify, then go on reading
                    await c.side.notify()
                elif k == "alert" and c.side:        # an alert in the clear where records are encrypted
                    c.aborted = True
                    await self.loop.sock_sendall(c.sock, ALERT_RECORD)
                elif k == "badrec" and c.side:       # a record that cannot decrypt
                    c.aborted = True
                    await self.loop.sock_sendall(c.sock, bad_record(int(op.get("n", 32))))
                elif k == "reflect" and c.side and self.raw:
                    # self-test only: the request as the origin got it, sent back
                    body = bytes(c.data)
                    await self._put(c, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                elif k == "echo":
                    deadline = time.monotonic() + op.get("ms", 1000) / 1000.0
                    sent = len(c.data)
                    while time.monotonic() < deadline:
                        ok = await self._recv(c, deadline - time.monotonic())
                        # Inside TLS nothing is echoed: the request sluice
                        # sends carries the credential, which the client
                        # must never see (only an origin could show it).
                        if len(c.data) > sent and c.side is None:
                            await self.loop.sock_sendall(c.sock, bytes(c.data[sent:]))
                            sent = len(c.data)
                        if not ok:
                            break
            # After the script: read until the peer closes.
            while await self._recv(c, 5.0):
                pass
        except (OSError, ValueError):
            pass
        finally:
            if not c.closed:
                self._drain_now(c)
                self._close(c)

    async def _canary(self, c):
        """The canaries' origin: HTTP on the HTTP ports (the path back in
        the body), an echo on the others; HTTP inside TLS for the inspected
        canary."""
        try:
            if c.local == net.CANARY_TLS:
                if not await self._start_tls(c, {"tls": {"cert": "good"}}):
                    return
            if c.port in net.HTTP_PORTS or c.side is not None:
                while True:
                    reqs, _, _ = parse_requests(c.data)
                    done = [r for r in reqs if r.complete]
                    while c.parsed < len(done):
                        r = done[c.parsed]
                        c.parsed += 1
                        body = f"canary {r.target}\n".encode()
                        await self._put(c, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                    if not await self._recv(c, 10.0):
                        break
            else:
                sent = 0
                while await self._recv(c, 10.0):
                    await self.loop.sock_sendall(c.sock, bytes(c.data[sent:]))
                    sent = len(c.data)
        except OSError:
            pass
        finally:
            self._close(c)


_OK = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
