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

from . import net
from .http import parse_requests

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
        self.parsed = 0         # requests consumed by "req" ops
        self.eof = False
        self.closed = False
        self.task = None

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
        try:
            while len(c.data) < RECORD_CAP:
                b = c.sock.recv(65536, socket.MSG_DONTWAIT)
                if not b:
                    c.eof = True
                    break
                c.data += b
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            c.eof = True

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
            if local == net.CANARY:
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
                    script = {"ops": [{"op": "echo", "ms": 1500}]}
                c.task = self.loop.create_task(self._run(c, script))

    async def _recv(self, c, timeout):
        """Read once into c.data. False on EOF, error or timeout."""
        if c.eof or c.closed:
            return False
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
                await self.loop.sock_sendall(c.sock, piece)
        if pos < len(data):
            await self.loop.sock_sendall(c.sock, data[pos:])

    async def _run(self, c, script):
        try:
            if script.get("rcvbuf"):
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(script["rcvbuf"]))
            for op in script.get("ops", []):
                k = op.get("op")
                if k == "req":
                    await self._read_request(c, op.get("ms", 1500) / 1000.0)
                elif k == "send":
                    await self._send(c, op.get("d", "").encode("latin-1"), op.get("w", []))
                elif k == "bulk":
                    for block in _bulk(int(op.get("n", 0))):
                        await self.loop.sock_sendall(c.sock, block)
                elif k == "sleep":
                    await asyncio.sleep(op.get("ms", 0) / 1000.0)
                elif k == "shut":
                    c.sock.shutdown(socket.SHUT_WR)
                elif k == "rst":
                    self._drain_now(c)
                    self._close(c, rst=True)
                    return
                elif k == "close":
                    self._drain_now(c)
                    self._close(c)
                    return
                elif k == "stall":
                    await asyncio.sleep(3600)
                elif k == "echo":
                    deadline = time.monotonic() + op.get("ms", 1000) / 1000.0
                    sent = len(c.data)
                    while time.monotonic() < deadline:
                        ok = await self._recv(c, deadline - time.monotonic())
                        if len(c.data) > sent:
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
        the body), an echo on the others."""
        try:
            if c.port in net.HTTP_PORTS:
                while True:
                    reqs, _, _ = parse_requests(c.data)
                    done = [r for r in reqs if r.complete]
                    while c.parsed < len(done):
                        r = done[c.parsed]
                        c.parsed += 1
                        body = f"canary {r.target}\n".encode()
                        await self.loop.sock_sendall(
                            c.sock, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
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
