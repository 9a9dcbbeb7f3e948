"""The inspection side's parts checked without sluice: the TLS client and
the TLS origins talk through a policy-free CONNECT relay (no inspection,
so the client is made to trust the origins' CA here). run.py --self-test
runs this first; each problem is a sentence."""

import asyncio
import socket

from . import net
from .origins import Origins
from .pki import Pki
from .tlsclient import run_tls_client

NAME = "h0-plumb.i1.fuzz.test"
ADDR = net.ORIGIN_V4[0]


async def _relay(reader, writer):
    """CONNECT host:port -> 200, then bytes both ways (every name is ADDR)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        port = int(head.split(b" ", 2)[1].rsplit(b":", 1)[1])
        ur, uw = await asyncio.open_connection(ADDR, port)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, ValueError, IndexError):
        writer.close()
        return
    writer.write(b"HTTP/1.1 200 OK\r\n\r\n")

    async def pipe(a, b):
        try:
            while True:
                d = await a.read(65536)
                if not d:
                    break
                b.write(d)
                await b.drain()
            if b.can_write_eof():
                b.write_eof()
        except OSError:
            pass

    await asyncio.gather(pipe(reader, uw), pipe(ur, writer))
    uw.close()
    writer.close()


def _client(plain, writes=None, **tls):
    t = {"sni": "@", "alpn": ["http/1.1"], "records": 1, "data": plain, "writes": writes or []}
    t.update(tls)
    return {"data": f"CONNECT {NAME}:443 HTTP/1.1\r\nHost: {NAME}:443\r\n\r\n", "writes": [],
            "end": {"kind": "hold", "at": None, "ms": 0}, "stop_read": -1, "rcvbuf": 0, "wait_ms": 400, "tls": t}


_GET = f"GET /a HTTP/1.1\r\nHost: {NAME}\r\n\r\n"
_OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


async def _one(loop, origins, port, pki, spec, script):
    origins.install(origins.exec_id + 1, {(ADDR, 443): [script]})
    r = await run_tls_client(loop, spec, port, spec["data"].encode(), spec["tls"]["data"].encode(), NAME,
                             pki.upstream_ca.read_text())
    await asyncio.sleep(0.1)
    conns = origins.case_conns(origins.exec_id)
    await origins.teardown()
    return r, conns


async def run(workdir):
    loop = asyncio.get_running_loop()
    pki = Pki(f"{workdir}/plumbing-pki")
    origins = await Origins(loop).start()
    origins.pki = pki
    server = await asyncio.start_server(_relay, "127.0.0.1", 0, family=socket.AF_INET)
    port = server.sockets[0].getsockname()[1]
    problems = []
    serve = {"tls": {"cert": "good"}, "ops": [{"op": "req"}, {"op": "send", "d": _OK, "w": [[3, 5]]},
                                              {"op": "req"}, {"op": "send", "d": _OK, "w": []}]}
    try:
        # Two pipelined requests, split, with close_notify.
        spec = _client(_GET + _GET, writes=[[5, 0], [40, 10]], notify=True)
        r, conns = await _one(loop, origins, port, pki, spec, serve)
        if r.tls.get("state") != "done" or bytes(r.plain) != (_OK * 2).encode():
            problems.append(f"plumbing: two requests through TLS: client {r.tls} got {bytes(r.plain)!r}")
        if len(conns) != 1 or bytes(conns[0].data) != (_GET * 2).encode() or not conns[0].tls.get("hs_done") \
                or conns[0].tls.get("sni") != NAME or conns[0].tls.get("alpn") != "http/1.1":
            problems.append(f"plumbing: the origin's record: {[(c.tls, bytes(c.data)) for c in conns]}")
        # A ClientHello in three records.
        r, conns = await _one(loop, origins, port, pki, _client(_GET, records=3), serve)
        if r.tls.get("state") != "done" or not bytes(r.plain).startswith(_OK.encode()):
            problems.append(f"plumbing: a ClientHello in 3 records: {r.tls}")
        # Each certificate the gate must refuse is refused by this client too.
        for kind in ("expired", "wrong_name", "untrusted", "not_yet"):
            r, conns = await _one(loop, origins, port, pki, _client(_GET), dict(serve, tls={"cert": kind}))
            if not r.tls.get("verify_error") or any(c.data for c in conns):
                problems.append(f"plumbing: a {kind} certificate: client {r.tls}, origin got "
                                f"{[bytes(c.data) for c in conns]}")
        # The ciphertext cut mid-handshake: the origin gets no plaintext.
        r, conns = await _one(loop, origins, port, pki, _client(_GET, cut={"at": 100, "kind": "rst"}), serve)
        if r.tls.get("cut") != 100 or any(c.data for c in conns) or any(c.tls.get("hs_done") for c in conns):
            problems.append(f"plumbing: a cut at ciphertext byte 100: client {r.tls}, origin "
                            f"{[(c.tls, bytes(c.data)) for c in conns]}")
        # A record that cannot decrypt, after a response: the client sees both.
        bad = {"tls": {"cert": "good"}, "ops": [{"op": "req"}, {"op": "send", "d": _OK, "w": []}, {"op": "badrec"}]}
        r, conns = await _one(loop, origins, port, pki, _client(_GET), bad)
        if bytes(r.plain) != _OK.encode() or "read_error" not in r.tls:
            problems.append(f"plumbing: a bad record after a response: client {r.tls} got {bytes(r.plain)!r}")
        # The origin's handshake cut short.
        cutso = {"tls": {"cert": "good", "cut": 60, "then": "rst"}, "ops": [{"op": "req"}]}
        r, conns = await _one(loop, origins, port, pki, _client(_GET), cutso)
        if r.tls.get("state") != "failed" or any(c.data for c in conns):
            problems.append(f"plumbing: the origin's handshake cut at 60 bytes: client {r.tls}")
    finally:
        server.close()
        await origins.close()
    return problems
