"""Running one client stream of a case (gen.py's CLIENT) against sluice."""

import asyncio
import socket
import struct
import time

READ_CAP = 8 << 20


class ClientResult:
    def __init__(self):
        self.local_port = None
        self.received = bytearray()
        self.sent = b""           # the bytes it meant to send (up to its cut), for pairing answers with requests
        self.outcome = None       # how the connection ended, seen from here
        self.connect_error = None
        self.t_start = self.t_end = None
        self.wall_start = time.time()   # to tell its log lines from those of an earlier user of its port


def _filler(n):
    block = (b"abcdefghijklmnopqrstuvwxyz0123456789" * 2000)[:65536]
    while n > 0:
        k = min(n, len(block))
        yield block[:k]
        n -= k


async def _cancel(t):
    t.cancel()
    try:
        await t
    except asyncio.CancelledError:
        pass


async def run_client(loop, spec, port, data):
    r = ClientResult()
    r.t_start = time.monotonic()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    if spec.get("rcvbuf"):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(spec["rcvbuf"]))
    try:
        await asyncio.wait_for(loop.sock_connect(s, ("127.0.0.1", port)), 5)
    except (OSError, asyncio.TimeoutError) as e:
        r.connect_error = repr(e)
        r.outcome = "connect_failed"
        s.close()
        return r
    r.local_port = s.getsockname()[1]
    state = {"closed": False, "eof": False}
    stop_read = int(spec.get("stop_read", -1))

    async def reader():
        try:
            while True:
                if stop_read >= 0 and len(r.received) >= stop_read:
                    r.outcome = r.outcome or "stopped_reading"
                    await asyncio.sleep(3600)
                want = 65536 if stop_read < 0 else max(1, stop_read - len(r.received))
                b = await loop.sock_recv(s, min(want, 65536))
                if not b:
                    state["eof"] = True
                    r.outcome = r.outcome or "eof"
                    return
                if len(r.received) < READ_CAP:
                    r.received += b
        except ConnectionResetError:
            state["eof"] = True
            r.outcome = r.outcome or "reset"
        except OSError:
            state["eof"] = True
            r.outcome = r.outcome or "error"

    rt = loop.create_task(reader())
    end = spec.get("end") or {"kind": "hold"}
    at = end.get("at")
    limit = len(data) if at is None else max(0, min(int(at), len(data)))
    r.sent = data[:limit]
    wait = spec.get("wait_ms", 600) / 1000.0

    async def writer():
        pos = 0
        for n, delay in spec.get("writes", []):
            if pos >= limit:
                break
            if delay:
                await asyncio.sleep(delay / 1000.0)
            piece = data[pos:min(limit, pos + max(0, int(n)))]
            pos += len(piece)
            if piece:
                await loop.sock_sendall(s, piece)
        if pos < limit:
            await loop.sock_sendall(s, data[pos:limit])
        if at is None and spec.get("bulk"):
            for block in _filler(int(spec["bulk"])):
                await loop.sock_sendall(s, block)

    try:
        # A client sluice stops reading cannot write for ever.
        await asyncio.wait_for(writer(), wait + 3.0)
    except (OSError, asyncio.TimeoutError):
        pass
    kind = end.get("kind", "hold")
    try:
        if end.get("ms"):
            await asyncio.sleep(end["ms"] / 1000.0)
        if kind == "shut":
            s.shutdown(socket.SHUT_WR)
        elif kind == "rst":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            await _cancel(rt)
            s.close()
            state["closed"] = True
            r.outcome = r.outcome or "we_reset"
        elif kind == "close":
            await _cancel(rt)
            s.close()
            state["closed"] = True
            r.outcome = r.outcome or "we_closed"
    except OSError:
        pass
    if not state["closed"]:
        try:
            await asyncio.wait_for(asyncio.shield(rt), wait)
        except asyncio.TimeoutError:
            pass
        await _cancel(rt)
        r.outcome = r.outcome or "open"
        s.close()
    r.t_end = time.monotonic()
    return r
