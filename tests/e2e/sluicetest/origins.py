"""Origin servers on the test's public addresses, run by one asyncio loop in a
background thread:

  HTTP   11.0.0.1:80, 11.0.0.1:8080, 11.0.0.2:80, [2c0f:fff0::1]:80
  HTTPS  11.0.0.1:443 (certificate for origin.test, from the test CA)
  echo   11.0.0.1:9000, 11.0.0.2:9000, [2c0f:fff0::1]:9000   (raw TCP)
  record 11.0.0.3:443, 10.0.0.1:{80,443,9000}   (raw TCP: keep what arrives, send nothing)
  stall  11.0.0.4:443   (a listener whose accept queue is full: SYNs are dropped)

HTTP paths:
  /echo         the request body back (Content-Length or chunked request bodies)
  /bytes/N      N bytes of pattern(N), with Content-Length (HEAD: headers only)
  /chunked/N    the same bytes, chunked
  /close/N      the same bytes, delimited by closing the connection
  /headers      the request line and headers as JSON
"""

import asyncio
import json
import socket
import ssl
import threading
import time

from .pattern import pattern

HTTP_ADDRS = [("11.0.0.1", 80), ("11.0.0.1", 8080), ("11.0.0.2", 80), ("2c0f:fff0::1", 80)]
HTTPS_ADDRS = [("11.0.0.1", 443)]
ECHO_ADDRS = [("11.0.0.1", 9000), ("11.0.0.2", 9000), ("2c0f:fff0::1", 9000)]
RECORD_ADDRS = [("11.0.0.3", 443), ("10.0.0.1", 80), ("10.0.0.1", 443), ("10.0.0.1", 9000)]
STALL_ADDR = ("11.0.0.4", 443)
CLOSED_PORT = 81        # nothing listens on 11.0.0.1:81


class BadRequest(Exception):
    pass


class Recorder:
    """Keeps what each connection to a recording listener delivered."""

    def __init__(self):
        self.lock = threading.Lock()
        self.conns = []     # dicts: local, peer, data (bytearray), closed (bool)

    def mark(self):
        with self.lock:
            return len(self.conns)

    def since(self, mark, local=None):
        with self.lock:
            return [dict(c, data=bytes(c["data"])) for c in self.conns[mark:]
                    if local is None or c["local"] == local]

    def wait_all_closed(self, mark, timeout=5.0, local=None):
        """Wait until every connection since `mark` has been closed by its
        peer; return them."""
        deadline = time.monotonic() + timeout
        while True:
            conns = self.since(mark, local)
            if all(c["closed"] for c in conns):
                return conns
            if time.monotonic() > deadline:
                raise AssertionError(f"recorded connections still open after {timeout}s: {conns}")
            time.sleep(0.01)

    def wait_bytes(self, mark, n, timeout=5.0, local=None):
        deadline = time.monotonic() + timeout
        while True:
            conns = self.since(mark, local)
            if sum(len(c["data"]) for c in conns) >= n:
                return conns
            if time.monotonic() > deadline:
                raise AssertionError(f"recorder got {conns}, wanted {n} bytes")
            time.sleep(0.01)


class Origins:
    def __init__(self, cert_file, key_file):
        self.cert_file = cert_file
        self.key_file = key_file
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="origins", daemon=True)
        self.servers = []
        self.recorder = Recorder()
        self.http_requests = 0
        self.echo_connections = 0
        self.stall_sockets = []
        self.progress = {}      # tag -> bytes of a /bytes/N?tag=... body handed to the kernel

    # --- lifecycle ------------------------------------------------------
    def start(self):
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        self._start_stall()
        return self

    async def _start(self):
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(self.cert_file, self.key_file)
        for host, port in HTTP_ADDRS:
            self.servers.append(await asyncio.start_server(
                self._http, host, port, backlog=4096, limit=1 << 20))
        for host, port in HTTPS_ADDRS:
            self.servers.append(await asyncio.start_server(
                self._http, host, port, ssl=tls, backlog=4096, limit=1 << 20))
        for host, port in ECHO_ADDRS:
            self.servers.append(await asyncio.start_server(self._echo, host, port, backlog=4096))
        for host, port in RECORD_ADDRS:
            self.servers.append(await asyncio.start_server(self._record, host, port, backlog=4096))

    def _start_stall(self):
        """A listener with backlog 0 that never accepts, its queue filled by
        our own connections: the kernel then drops further SYNs, so a connect
        to it times out."""
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.bind(STALL_ADDR)
        ls.listen(0)
        self.stall_sockets.append(ls)
        for _ in range(8):
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.setblocking(False)
            c.connect_ex(STALL_ADDR)
            self.stall_sockets.append(c)
            import select
            _, w, _ = select.select([], [c], [], 0.5)
            if not w:
                break   # this SYN was dropped: the queue is full
        else:
            raise RuntimeError("could not fill the stall listener's accept queue")

    def stop(self):
        async def _stop():
            for s in self.servers:
                s.close()
        asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        for s in self.stall_sockets:
            s.close()

    # --- raw TCP --------------------------------------------------------
    async def _echo(self, reader, writer):
        self.echo_connections += 1
        try:
            while True:
                data = await reader.read(1 << 18)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _record(self, reader, writer):
        sock = writer.get_extra_info("socket")
        rec = {"local": sock.getsockname()[:2], "peer": sock.getpeername()[:2],
               "data": bytearray(), "closed": False}
        with self.recorder.lock:
            self.recorder.conns.append(rec)
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                with self.recorder.lock:
                    rec["data"] += data
        except (ConnectionError, OSError):
            pass
        finally:
            rec["closed"] = True
            writer.close()

    # --- HTTP -----------------------------------------------------------
    async def _http(self, reader, writer):
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    break
                self.http_requests += 1
                keep = await self._one(head, reader, writer)
                await writer.drain()
                if not keep:
                    break
        except (BadRequest, asyncio.LimitOverrunError) as e:
            msg = f"origin: bad request: {e}\n".encode()
            writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(msg), msg))
        except (ConnectionError, OSError, ssl.SSLError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _one(self, head, reader, writer):
        lines = head[:-4].split(b"\r\n")
        try:
            method, target, version = lines[0].decode("latin-1").split(" ")
        except ValueError:
            raise BadRequest(f"request line {lines[0]!r}")
        headers = []
        for line in lines[1:]:
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise BadRequest(f"header line {line!r}")
            headers.append((name, value.strip()))
        hmap = {}
        for k, v in headers:
            hmap.setdefault(k.lower(), []).append(v)
        te = ",".join(hmap.get("transfer-encoding", [])).lower()
        body = b""
        if "chunked" in te:
            body = await _read_chunked(reader)
        elif "content-length" in hmap:
            body = await reader.readexactly(int(hmap["content-length"][0]))
        conn = ",".join(hmap.get("connection", [])).lower()
        keep = version == "HTTP/1.1" and "close" not in conn or "keep-alive" in conn
        ka = b"" if keep else b"Connection: close\r\n"
        path, _, query = target.partition("?")
        tag = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("tag")
        parts = path.strip("/").split("/")

        if path == "/echo":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n%s"
                         b"Content-Length: %d\r\nX-Request-Framing: %s\r\n\r\n"
                         % (ka, len(body), b"chunked" if "chunked" in te else b"length"))
            if method != "HEAD":
                writer.write(body)
        elif path == "/headers":
            doc = json.dumps({"method": method, "target": target, "version": version,
                              "headers": headers, "body_len": len(body)}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%s"
                         b"Content-Length: %d\r\n\r\n" % (ka, len(doc)))
            if method != "HEAD":
                writer.write(doc)
        elif len(parts) == 2 and parts[0] in ("bytes", "chunked", "close") and parts[1].isdigit():
            n = int(parts[1])
            data = pattern(n)
            if parts[0] == "bytes":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n%s"
                             b"Content-Length: %d\r\n\r\n" % (ka, n))
                if method != "HEAD":
                    await _write_big(writer, data, self.progress, tag)
            elif parts[0] == "chunked":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n%s"
                             b"Transfer-Encoding: chunked\r\n\r\n" % ka)
                if method != "HEAD":
                    await _write_chunked(writer, data)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Connection: close\r\n\r\n")
                if method != "HEAD":
                    await _write_big(writer, data)
                keep = False
        else:
            msg = b"no such path\n"
            writer.write(b"HTTP/1.1 404 Not Found\r\n%sContent-Length: %d\r\n\r\n%s"
                         % (ka, len(msg), msg if method != "HEAD" else b""))
        return keep


async def _read_chunked(reader):
    out = bytearray()
    while True:
        line = await reader.readuntil(b"\r\n")
        size = int(line.split(b";")[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return bytes(out)
        out += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise BadRequest("chunk not followed by CRLF")


async def _write_big(writer, data, progress=None, tag=None):
    view = memoryview(data)
    for off in range(0, len(data), 1 << 20):
        writer.write(view[off:off + (1 << 20)])
        await writer.drain()
        if tag is not None:
            progress[tag] = off + len(view[off:off + (1 << 20)]) - writer.transport.get_write_buffer_size()


async def _write_chunked(writer, data):
    # chunk sizes vary, so chunk boundaries fall everywhere
    sizes = [1, 17, 4096, 65536, 100000, 3, 1 << 20]
    off, i = 0, 0
    view = memoryview(data)
    while off < len(data):
        n = min(sizes[i % len(sizes)], len(data) - off)
        writer.write(b"%x\r\n" % n)
        writer.write(view[off:off + n])
        writer.write(b"\r\n")
        off += n
        i += 1
        if i % 16 == 0:
            await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
