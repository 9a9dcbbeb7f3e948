#!/usr/bin/python3
"""A small executable model of engine.md (plain HTTP only), to check the
hostile suites themselves: a test that fails against this model is either a
bug in the test or a place where the model and the test read engine.md
differently. It is not sluice and is never shipped; see README.md here.

    SLUICE_BIN=tests/e2e/model/sluice-model pytest tests/e2e/test_hostile_*.py

It speaks enough of sluice's interface for those suites: `run -c FILE`, the
listening line, the INI keys they use, allowlist lines (host, *.suffix,
host:port), a UDP DNS client, refusals, decision and close lines, SIGTERM.
Addresses are not classified (the suites use public test addresses)."""

import asyncio
import configparser
import ipaddress
import json
import os
import random
import re
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sluicetest.strict import ParseError, _framing, _line_end, _parse_head  # noqa: E402

HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
       "te", "trailer", "upgrade", "host"}
MAX_HEAD = 32 * 1024
STATUS_TEXT = {400: "Bad Request", 403: "Forbidden", 408: "Request Timeout", 431: "Request Header Fields Too Large",
               502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


class Config:
    def __init__(self, path):
        cp = configparser.ConfigParser(strict=False, interpolation=None, inline_comment_prefixes=(" ;",))
        cp.read(path)
        g = lambda s, k, d: cp.get(s, k, fallback=d)
        self.listen = g("proxy", "listen", "127.0.0.1:3128")
        self.grace = int(g("proxy", "shutdown_grace_ms", "10000")) / 1000
        self.allowlist = []
        for f in [g("policy", "allowlist", "")]:
            if f:
                for n, line in enumerate(open(f), 1):
                    line = line.split("#")[0].strip()
                    if line:
                        self.allowlist.append((line, f"{f}:{n}"))
        server = g("dns", "server", "127.0.0.53:53")
        host, _, port = server.rpartition(":")
        self.dns = (host, int(port))
        self.dns_timeout = int(g("dns", "timeout_ms", "2000")) / 1000
        self.header = int(g("timeouts", "header_ms", "10000")) / 1000
        self.connect = int(g("timeouts", "connect_ms", "10000")) / 1000
        self.idle = int(g("timeouts", "idle_ms", "300000")) / 1000
        self.log = open(g("log", "path", "/dev/stdout"), "a")

    def match(self, host, port):
        seen_host = False
        for entry, where in self.allowlist:
            h, p = entry, None
            m = re.match(r"^(.*):(\d+)$", entry)
            if m:
                h, p = m.group(1), int(m.group(2))
            hit = host == h or (h.startswith("*.") and host.endswith(h[1:]))
            if hit:
                seen_host = True
                if (p or 80) == port:
                    return where, None
        return None, "port_not_allowed" if seen_host else "not_allowlisted"


def now_ts():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


class Log:
    def __init__(self, f):
        self.f = f

    def line(self, **fields):
        self.f.write(json.dumps({"ts": now_ts(), **fields}) + "\n")
        self.f.flush()


# --- DNS --------------------------------------------------------------------------
class _DNSProto(asyncio.DatagramProtocol):
    def __init__(self, fut, qid):
        self.fut, self.qid = fut, qid

    def datagram_received(self, data, addr):
        if len(data) >= 2 and struct.unpack(">H", data[:2])[0] == self.qid and not self.fut.done():
            self.fut.set_result(data)


def _qname(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"


async def resolve(name, server, timeout):
    loop = asyncio.get_running_loop()
    out = []
    for qtype in (1, 28):
        qid = random.randrange(65536)
        fut = loop.create_future()
        tr, _ = await loop.create_datagram_endpoint(lambda: _DNSProto(fut, qid), remote_addr=server)
        try:
            tr.sendto(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + _qname(name) + struct.pack(">HH", qtype, 1))
            msg = await asyncio.wait_for(fut, timeout)
        finally:
            tr.close()
        rcode = struct.unpack(">H", msg[2:4])[0] & 0xF
        if rcode:
            raise LookupError("dns_error")
        an = struct.unpack(">H", msg[6:8])[0]
        off = 12
        while msg[off]:
            off += 1 + msg[off]
        off += 5
        for _ in range(an):
            off += 2 if msg[off] & 0xC0 else 0
            rtype, _, _, rdlen = struct.unpack(">HHIH", msg[off:off + 10])
            off += 10
            if rtype in (1, 28):
                out.append(str(ipaddress.ip_address(msg[off:off + rdlen])))
            off += rdlen
    if not out:
        raise LookupError("dns_error")
    return out


async def happy_eyeballs(addrs, port, timeout):
    """First of the addresses to connect, a new attempt every 250 ms (at once
    after a failure); the others are closed."""
    loop = asyncio.get_running_loop()
    pending, winner = set(), None
    deadline = loop.time() + timeout
    i = 0
    try:
        while winner is None:
            if i < len(addrs):
                pending.add(asyncio.ensure_future(asyncio.open_connection(addrs[i], port)))
                i += 1
            if not pending:
                raise ConnectionError("connect_failed")
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError("connect_timeout")
            wait = min(left, 0.25) if i < len(addrs) else left
            done, pending = await asyncio.wait(pending, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                if t.exception() is None and winner is None:
                    winner = t.result()
                elif t.exception() is None:
                    t.result()[1].close()
        return winner, addrs[i - 1]
    finally:
        for t in pending:
            t.cancel()


# --- incremental chunked validation ---------------------------------------------------
class Chunked:
    """Feed bytes; returns how many of them are valid (to relay); .done when
    the body ended, .error when malformed (nothing after the valid prefix)."""

    def __init__(self):
        self.buf = b""
        self.state = "size"
        self.left = 0
        self.done = False
        self.error = None

    def feed(self, data):
        self.buf += data
        valid = 0
        b = self.buf
        pos = 0
        try:
            while pos < len(b) and not self.done:
                if self.state == "size":
                    eol = _line_end(b, pos, 4096)
                    if eol is None:
                        self._check_partial_size(b[pos:])
                        break
                    line = b[pos:eol]
                    n = len(line) - len(line.lstrip(b"0123456789abcdefABCDEF"))
                    from sluicetest.strict import CHUNK_EXT
                    if n == 0 or n > 16 or not CHUNK_EXT.match(line[n:]):
                        raise ParseError("bad chunk size line", pos)
                    self.left = int(line[:n], 16)
                    pos = eol + 2
                    self.state = "data" if self.left else "trailer"
                elif self.state == "data":
                    take = min(self.left, len(b) - pos)
                    pos += take
                    self.left -= take
                    if self.left == 0:
                        self.state = "crlf"
                elif self.state == "crlf":
                    if len(b) - pos < 2:
                        if b[pos:pos + 1] not in (b"", b"\r"):
                            raise ParseError("no CRLF after data", pos)
                        break
                    if b[pos:pos + 2] != b"\r\n":
                        raise ParseError("no CRLF after data", pos)
                    pos += 2
                    self.state = "size"
                elif self.state == "trailer":
                    eol = _line_end(b, pos, MAX_HEAD)
                    if eol is None:
                        self._check_partial_trailer(b[pos:])
                        break
                    line = b[pos:eol]
                    pos = eol + 2
                    if not line:
                        self.done = True
                        valid = pos
                        break
                    from sluicetest.strict import _field
                    if line[:1] in (b" ", b"\t"):
                        raise ParseError("obs-fold", pos)
                    _field(line, pos, "trailer")
                valid = pos
        except ParseError as e:
            self.error = str(e)
        valid = pos if self.error is None else valid
        out = self.buf[:valid]
        self.buf = self.buf[valid:]
        return out, self.buf if self.done else b""

    def _check_partial_size(self, part):
        n = len(part) - len(part.lstrip(b"0123456789abcdefABCDEF"))
        if n > 16 or (part and n == 0) or b"\n" in part:
            raise ParseError("bad chunk size", 0)
        rest = part[n:].rstrip(b"\r")
        if rest and not re.match(rb'^[ \t;=!#$%&\'*+\-.^_`|~0-9A-Za-z"\\\x80-\xff]*$', rest):
            raise ParseError("bad chunk extension", 0)

    def _check_partial_trailer(self, part):
        if b"\n" in part or part[:1] in (b" ", b"\t"):
            raise ParseError("bad trailer", 0)
        name = part.split(b":")[0].rstrip(b"\r")
        if b":" not in part and not re.match(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]*$", name):
            raise ParseError("bad trailer name", 0)
        if b":" in part and any((c < 0x20 and c not in (9, 13)) or c == 0x7f for c in part):
            raise ParseError("control byte", 0)


# --- one client connection -----------------------------------------------------------
async def sread(r, n=65536):
    """StreamReader.read, but bytes already buffered come before a pending
    error (a reset after data), as they do with recv(2)."""
    if r._buffer:
        data = bytes(r._buffer[:n])
        del r._buffer[:n]
        r._maybe_resume_transport()
        return data
    return await r.read(n)


class End(Exception):
    def __init__(self, end, reply=None):
        self.end, self.reply = end, reply


def refusal(status, reason, detail):
    body = f"sluice refused this request ({reason}).\n{detail}\n".encode()
    return (f"HTTP/1.1 {status} {STATUS_TEXT[status]}\r\nSluice-Decision: deny; reason={reason}\r\n"
            f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode() + body


def gateway(status, detail):
    body = f"sluice: {detail}\n".encode()
    return (f"HTTP/1.1 {status} {STATUS_TEXT[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


class Origin:
    def __init__(self, host, port, addr, r, w):
        self.host, self.port, self.addr, self.r, self.w = host, port, addr, r, w
        self.gone = False
        self.watch = None

    def close(self):
        self.gone = True
        if self.watch:
            self.watch.cancel()
        self.w.transport.abort()

    def idle(self):
        """E1: any byte or EOF while idle closes it."""
        async def watch():
            try:
                await self.r.read(1)
            except asyncio.CancelledError:
                return
            except OSError:
                pass
            if not self.gone:
                self.close()
        self.watch = asyncio.ensure_future(watch())

    def take(self):
        """E1: reusable only if nothing is pending on the socket: a peek at
        the kernel too, since a byte, EOF or reset may not be read yet."""
        if self.watch:
            self.watch.cancel()
            self.watch = None
        if self.gone or self.r._buffer or self.r.at_eof():
            return False
        # asyncio's TransportSocket has no recv(): peek through a dup of the fd
        peek = socket.socket(fileno=os.dup(self.w.get_extra_info("socket").fileno()))
        try:
            peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return False            # a byte, or b"" (EOF)
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            peek.close()


class Client:
    def __init__(self, gate, r, w):
        self.g, self.r, self.w = gate, r, w
        peer = w.get_extra_info("peername")
        self.client = f"{peer[0]}:{peer[1]}"
        self.buf = b""
        self.origin = None

    async def fill(self, timeout=None):
        try:
            data = await (asyncio.wait_for(sread(self.r), timeout) if timeout else sread(self.r))
        except ConnectionResetError:
            raise End("client_error")
        if not data:
            raise End("client_eof")
        self.buf += data

    def deny(self, method, host, port, status, reason, detail, **kw):
        self.g.log.line(event="decision", id=os.urandom(8).hex(), client=self.client, method=method,
                        host=host, port=port, decision="deny", reason=reason, detail=detail, **kw)
        self.w.write(refusal(status, reason, detail))

    async def run(self):
        try:
            while True:
                if not await self.one():
                    break
        except End:
            pass
        except Exception as e:      # the model's own bug: say so on stderr (the suite fails)
            print(f"model: internal error: {e!r}", file=sys.stderr)
            raise
        finally:
            if self.origin:
                self.origin.close()
            try:
                await asyncio.wait_for(self.w.drain(), 2)
            except Exception:
                pass
            self.w.close()

    async def one(self):
        t0 = time.monotonic()
        while True:
            try:
                got = _parse_head(self.buf, 0, True)
            except ParseError:
                self.deny("", "", 0, 400, "bad_request", "bad request head")
                return False
            if got:
                break
            if len(self.buf) > MAX_HEAD:
                self.deny("", "", 0, 431, "bad_request", "head too large")
                return False
            left = self.g.cfg.header - (time.monotonic() - t0)
            try:
                await self.fill(max(left, 0.001))
            except asyncio.TimeoutError:
                self.deny("", "", 0, 408, "bad_request", "head timeout")
                return False
            except End:
                return False
        req, hlen = got
        self.buf = self.buf[hlen:]
        m = re.match(r"^http://([^/:]+)(?::(\d+))?(/[^#]*)?$", req.target, re.I)
        if not m:
            self.deny(req.method, req.target, 0, 400, "bad_request", "bad target")
            return False
        host, port, path = m.group(1).lower(), int(m.group(2) or 80), m.group(3) or "/"
        try:
            _framing(req, True, None, 0)
        except ParseError as e:
            self.deny(req.method, host, port, 400, "bad_request", str(e))
            return False
        hh = (req.host or "").lower()
        if hh not in (host, f"{host}:{port}") and not (port == 80 and hh == f"{host}:80"):
            self.deny(req.method, host, port, 400, "bad_request", "Host disagrees")
            return False
        rule, why = self.g.cfg.match(host, port)
        if rule is None:
            self.deny(req.method, host, port, 403, why, f"{host} is not on the allowlist.\n\n    {host}\n")
            return False
        t1 = time.monotonic()
        try:
            addrs = await asyncio.wait_for(resolve(host, self.g.cfg.dns, self.g.cfg.dns_timeout),
                                           self.g.cfg.dns_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            self.deny(req.method, host, port, 504, "dns_timeout", "dns timeout", rule=rule)
            return False
        except (LookupError, OSError):
            self.deny(req.method, host, port, 502, "dns_error", "dns error", rule=rule)
            return False
        dns_ms = round((time.monotonic() - t1) * 1000, 1)
        o = self.origin
        if o and (o.host, o.port) == (host, port) and o.addr in addrs and o.take():
            pass
        else:
            if o:
                o.close()
            self.origin = None
            try:
                (r, w), addr = await happy_eyeballs(addrs, port, self.g.cfg.connect)
            except TimeoutError:
                self.deny(req.method, host, port, 504, "connect_timeout", "connect timeout", rule=rule)
                return False
            except OSError:
                self.deny(req.method, host, port, 502, "connect_failed", "connect failed", rule=rule)
                return False
            o = self.origin = Origin(host, port, addr, r, w)
        xid = os.urandom(8).hex()
        self.g.log.line(event="decision", id=xid, client=self.client, method=req.method, host=host, port=port,
                        decision="allow", reason="allowlisted", rule=rule, addr=o.addr, dns_ms=dns_ms)
        ex = Exchange(self, req, path, host, port, xid)
        self.g.active.add(ex)
        try:
            keep = await ex.run()
        finally:
            self.g.active.discard(ex)
        return keep


class Exchange:
    def __init__(self, client, req, path, host, port, xid):
        self.c, self.req, self.path, self.host, self.port, self.id = client, req, path, host, port, xid
        self.o = client.origin
        self.t0 = time.monotonic()
        self.last = time.monotonic()
        self.up = self.down = 0
        self.final_written = False      # a byte of the final head went to the client socket
        self.req_done = False
        self.stop_upload = False
        self.http10 = req.version == "HTTP/1.0"
        self.client_close = req.conn_close or self.http10 and "keep-alive" not in (req.header("Connection") or "").lower()

    def head_bytes(self):
        hops = set(HOP)
        for v in self.req.header_all("Connection"):
            hops |= {t.strip().lower() for t in v.split(",")}
        out = f"{self.req.method} {self.path} {self.req.version}\r\n"
        out += f"Host: {self.host if self.port == 80 else f'{self.host}:{self.port}'}\r\n"
        for k, v in self.req.headers:
            if k.lower() not in hops:
                out += f"{k}: {v}\r\n"
        return (out + "\r\n").encode("latin-1")

    def close_line(self, end):
        self.c.g.log.line(event="close", id=self.id, bytes_up=self.up, bytes_down=self.down,
                          duration_ms=round((time.monotonic() - self.t0) * 1000, 1), end=end)

    async def write_client(self, data):
        self.c.w.write(data)
        self.down += len(data)
        self.last = time.monotonic()
        try:
            await self.c.w.drain()
        except (ConnectionError, OSError):
            raise End("client_error")

    async def run(self):
        o = self.o
        head = self.head_bytes()
        o.w.write(head)
        self.up += len(head)
        up = asyncio.ensure_future(self.upload())
        down = asyncio.ensure_future(self.download())
        idle = asyncio.ensure_future(self.idle_watch())
        end = reply = None
        pending = {up, down, idle}
        try:
            while not down.done():
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    e = t.exception()
                    if isinstance(e, End):
                        raise e
                    if e is not None:
                        print(f"model: {e!r}", file=sys.stderr)
                        raise End("origin_error")
        except End as e:
            end, reply = e.end, e.reply
        finally:
            idle.cancel()
        if end is None:
            # the response is complete
            keep = down.result()
            if not self.req_done:
                up.cancel()
                keep = False
            else:
                await up
            self.close_line("done")
            if keep and not o.gone and not o.r._buffer:
                o.idle()
            else:
                o.close()
                self.c.origin = None
            return not self.client_close
        up.cancel()
        down.cancel()
        o.close()
        self.c.origin = None
        if reply is not None and not self.final_written and (end != "bad_request_body" or self.down == 0):
            self.c.w.write(reply)
            self.down += len(reply)
        self.close_line(end)
        raise End(end)

    async def idle_watch(self):
        while True:
            await asyncio.sleep(0.02)
            if time.monotonic() - self.last >= self.c.g.cfg.idle:
                raise End("idle_timeout", gateway(504, "the origin did not answer in time"))

    async def upload(self):
        req, c = self.req, self.c
        if req.chunked:
            ch = Chunked()
            while not ch.done:
                if not c.buf:
                    await c.fill()
                    self.last = time.monotonic()
                valid, rest = ch.feed(c.buf)
                c.buf = b""
                if self.stop_upload:
                    return
                if valid:
                    self.o.w.write(valid)
                    self.up += len(valid)
                    await self.o.w.drain()
                if ch.error:
                    raise End("bad_request_body", gateway(400, "malformed chunked request body")
                              .replace(b"502 Bad Gateway", b"400 Bad Request"))
                if ch.done:
                    c.buf = rest
        else:
            left = req.length
            while left:
                if not c.buf:
                    await c.fill()
                    self.last = time.monotonic()
                if self.stop_upload:
                    return
                take, c.buf = c.buf[:left], c.buf[left:]
                self.o.w.write(take)
                self.up += len(take)
                left -= len(take)
                await self.o.w.drain()
        self.req_done = True

    async def origin_fill(self, buf):
        try:
            data = await sread(self.o.r)
        except ConnectionResetError:
            raise End("origin_error", gateway(502, "the origin reset the connection"))
        if not data:
            return None
        self.last = time.monotonic()
        return buf + data

    async def download(self):
        buf = b""
        while True:
            try:
                got = _parse_head(buf, 0, False) if buf else None
            except ParseError as e:
                raise End("bad_response", gateway(502, f"malformed response head: {e}"))
            if got is None:
                if len(buf) > MAX_HEAD:
                    raise End("bad_response", gateway(502, "response head over 32 KiB"))
                nb = await self.origin_fill(buf)
                if nb is None:
                    raise End("origin_eof", gateway(502, "the origin closed before the response"))
                buf = nb
                continue
            resp, hlen = got
            if resp.status == 101:
                raise End("bad_response", gateway(502, "101"))
            both = resp.header("Content-Length") is not None and resp.header("Transfer-Encoding") is not None
            if both:    # E10: relayed as chunked without the Content-Length
                resp.headers = [(k, v) for k, v in resp.headers if k.lower() != "content-length"]
            try:
                _framing(resp, False, self.req.method, 0)
            except ParseError as e:
                raise End("bad_response", gateway(502, str(e)))
            buf = buf[hlen:]
            if resp.interim:
                await self.write_client(self.resp_head(resp, interim=True))
                continue
            break
        reuse = not resp.conn_close and not resp.until_close and not both
        close_client = resp.until_close or not self.req_done
        if close_client:
            self.stop_upload = True
            self.client_close = True
        head = self.resp_head(resp, close=close_client)
        if resp.chunked:
            ch = Chunked()
            valid, rest = ch.feed(buf)
            if ch.error:
                raise End("bad_response_body", gateway(502, "bad first chunk"))
            self.final_written = True
            await self.write_client(head + valid)
            while not ch.done:
                nb = await self.origin_fill(b"")
                if nb is None:
                    raise End("origin_eof", None)
                valid, rest = ch.feed(nb)
                if valid:
                    await self.write_client(valid)
                if ch.error:
                    raise End("bad_response_body", None)
            if rest:
                reuse = False
        elif resp.until_close:
            self.final_written = True
            await self.write_client(head + buf)
            while True:
                nb = await self.origin_fill(b"")
                if nb is None:
                    break
                await self.write_client(nb)
            reuse = False
        else:
            left = resp.length
            take, rest = buf[:left], buf[left:]
            self.final_written = True
            await self.write_client(head + take)
            left -= len(take)
            while left:
                nb = await self.origin_fill(b"")
                if nb is None:
                    raise End("origin_eof", None)
                take, rest = nb[:left], nb[left:]
                await self.write_client(take)
                left -= len(take)
            if rest:
                reuse = False
        return reuse

    def resp_head(self, resp, interim=False, drop_cl=False, close=False):
        hops = set(HOP)
        for v in resp.header_all("Connection"):
            hops |= {t.strip().lower() for t in v.split(",")}
        out = resp.raw_head.split(b"\r\n", 1)[0].decode("latin-1") + "\r\n"
        for k, v in resp.headers:
            if k.lower() in hops or (drop_cl and k.lower() == "content-length"):
                continue
            out += f"{k}: {v}\r\n"
        if not interim and (close or self.client_close):
            out += "Connection: close\r\n"
        elif not interim and self.http10:
            out += "Connection: keep-alive\r\n"
        return (out + "\r\n").encode("latin-1")


class Gate:
    def __init__(self, cfg):
        self.cfg = cfg
        self.log = Log(cfg.log)
        self.active = set()
        self.clients = set()

    async def serve(self):
        host, _, port = self.cfg.listen.rpartition(":")
        server = await asyncio.start_server(self.accept, host, int(port))
        sock = server.sockets[0].getsockname()
        print(f"sluice: listening on {sock[0]}:{sock[1]}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        server.close()
        deadline = time.monotonic() + self.cfg.grace
        while self.active and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for ex in list(self.active):
            ex.close_line("shutdown")
        self.log.f.flush()
        os._exit(0)

    async def accept(self, r, w):
        w.transport.set_write_buffer_limits(high=256 * 1024)
        sock = w.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await Client(self, r, w).run()


def main():
    if len(sys.argv) < 4 or sys.argv[1] != "run" or sys.argv[2] != "-c":
        print("usage: engine_model.py run -c FILE", file=sys.stderr)
        return 2
    asyncio.run(Gate(Config(sys.argv[3])).serve())


if __name__ == "__main__":
    sys.exit(main())
