"""TLS pieces both sides of the harness share: a server name read out of a
ClientHello, a first flight cut into more records, the parameters SPEC
requires, and an origin's side of TLS over a non-blocking socket (the
ssl module working in memory, so that the fuzzer controls every byte on
the wire)."""

import asyncio
import os
import ssl
import time

# TLS records, by hand: an alert where a ServerHello or a record is due,
# and an application-data record that cannot decrypt.
ALERT_RECORD = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50])   # fatal internal_error, in the clear


def bad_record(n=32):
    return bytes([0x17, 0x03, 0x03]) + n.to_bytes(2, "big") + os.urandom(n)


def sni_of(data):
    """The host_name in the ClientHello at the start of data, or None."""
    try:
        if len(data) < 9 or data[0] != 0x16 or data[5] != 0x01:
            return None
        p = 9 + 2 + 32
        p += 1 + data[p]                                   # session id
        p += 2 + int.from_bytes(data[p:p + 2], "big")      # cipher suites
        p += 1 + data[p]                                   # compression
        end = p + 2 + int.from_bytes(data[p:p + 2], "big")
        p += 2
        while p + 4 <= min(end, len(data)):
            et, el = int.from_bytes(data[p:p + 2], "big"), int.from_bytes(data[p + 2:p + 4], "big")
            if et == 0:
                q = p + 4 + 2
                if data[q] == 0:
                    n = int.from_bytes(data[q + 1:q + 3], "big")
                    return data[q + 3:q + 3 + n].decode("latin-1")
                return None
            p += 4 + el
    except IndexError:
        return None
    return None


def refragment(flight, n):
    """The same handshake bytes in n records (a ClientHello in several)."""
    recs, pos = [], 0
    while pos + 5 <= len(flight):
        ln = int.from_bytes(flight[pos + 3:pos + 5], "big")
        recs.append((flight[pos], flight[pos + 1:pos + 3], flight[pos + 5:pos + 5 + ln]))
        pos += 5 + ln
    if n <= 1 or not recs or pos != len(flight) or any(ct != 0x16 for ct, _, _ in recs):
        return flight
    body = b"".join(f for _, _, f in recs)
    step = max(1, -(-len(body) // n))
    return b"".join(b"\x16" + recs[0][1] + len(body[i:i + step]).to_bytes(2, "big") + body[i:i + step]
                    for i in range(0, len(body), step))


def params_problem(version, cipher, alpn):
    """Why a finished handshake breaks SPEC (TLS 1.2, ECDHE, AEAD, ALPN
    http/1.1 only), or None."""
    name = cipher[0] if cipher else ""
    if version != "TLSv1.2":
        return f"version {version}"
    if not name.startswith("ECDHE-") or not any(a in name for a in ("GCM", "CHACHA20", "CCM")):
        return f"cipher {name}"
    if alpn not in (None, "http/1.1"):
        return f"ALPN {alpn}"
    return None


class ServerTls:
    """An origin's TLS over its connection's socket. rec is the dict the
    checks read: cert, hs_done, sni, alpn, version, cipher, error."""

    def __init__(self, loop, sock, ctx, rec, pre=b""):
        self.loop, self.sock, self.rec = loop, sock, rec
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_side=True)
        if pre:
            self.inc.write(pre)
        self.eof = False      # no more plaintext will come
        self.raw_eof = False

    async def flush(self, cut=None):
        """Send what the session wrote; with cut, only that many bytes of it
        (then True: the caller ends the connection)."""
        data = self.out.read()
        if cut is not None and len(data) >= cut:
            if cut:
                await self.loop.sock_sendall(self.sock, data[:cut])
            return True
        if data:
            await self.loop.sock_sendall(self.sock, data)
        return False

    async def _more(self, timeout):
        try:
            b = await asyncio.wait_for(self.loop.sock_recv(self.sock, 65536), timeout)
        except asyncio.TimeoutError:
            return None
        except OSError:
            b = b""
        if not b:
            self.raw_eof = True
            self.inc.write_eof()
            return False
        self.rec["cipher_in"] = self.rec.get("cipher_in", 0) + len(b)
        self.rec.setdefault("t_in", time.monotonic())
        self.inc.write(b)
        return True

    async def handshake(self, timeout, cut=None):
        """'done', 'cut' (its flight cut short), or 'failed'."""
        deadline = self.loop.time() + timeout
        if self.inc.pending:
            self.rec.setdefault("t_in", time.monotonic())
        while True:
            try:
                self.obj.do_handshake()
                await self.flush()
                self.rec.update(hs_done=True, t_done=time.monotonic(), sni=getattr(self.obj, "sni_seen", None),
                                alpn=self.obj.selected_alpn_protocol(), version=self.obj.version(),
                                cipher=self.obj.cipher())
                return "done"
            except ssl.SSLWantReadError:
                if self.out.pending and "t_in" in self.rec:
                    self.rec.setdefault("t_flight", time.monotonic())
                if await self.flush(cut):
                    return "cut"
            except (ssl.SSLError, ValueError) as e:
                self.rec["error"] = f"{type(e).__name__}: {e}"[:200]
                try:
                    await self.flush()   # the alert, if any
                except OSError:
                    pass
                return "failed"
            left = deadline - self.loop.time()
            if left <= 0:
                self.rec["error"] = "handshake timed out"
                return "failed"
            got = await self._more(left)
            if not got:
                self.rec["error"] = self.rec.get("error") or ("peer closed in the handshake" if got is False
                                                              else "handshake timed out")
                if got is False:
                    # what the peer sent last may still finish or fail it
                    try:
                        self.obj.do_handshake()
                    except (ssl.SSLError, ValueError):
                        pass
                return "failed"

    def _drain_plain(self, into):
        n = 0
        while True:
            try:
                b = self.obj.read(65536)
            except ssl.SSLWantReadError:
                return n
            except ssl.SSLZeroReturnError:
                self.rec["notify_in"] = True
                self.eof = True
                return n
            except (ssl.SSLError, ValueError) as e:
                self.rec["error"] = self.rec.get("error") or f"{type(e).__name__}: {e}"[:200]
                self.eof = True
                return n
            if not b:
                self.eof = True
                return n
            into += b
            n += len(b)

    async def recv(self, into, timeout, cap):
        """Read once (ciphertext), decrypt into `into`. False at the end
        (EOF, close_notify, an error) or on timeout."""
        if self.eof:
            return False
        if self._drain_plain(into) and not self.eof:
            return True
        if self.eof or self.raw_eof:
            return False
        got = await self._more(timeout)
        if got is None:
            return False
        self._drain_plain(into if len(into) < cap else bytearray())
        await self.flush()
        return not self.eof and got

    async def send(self, data):
        try:
            self.obj.write(data)
        except (ssl.SSLError, ValueError):
            return
        await self.flush()

    async def notify(self):
        try:
            self.obj.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        await self.flush()
