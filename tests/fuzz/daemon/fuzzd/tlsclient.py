"""A client of an inspected tunnel (gen_inspect.py's TLS CLIENT): CONNECT,
then TLS driven by the ssl module in memory, so that the plaintext stream
inside is split, truncated and ended like a plain client's, and the
ciphertext can be cut at any byte (mid-handshake, mid-record), reset or
half-closed.

The client trusts the gate's CA only and checks the leaf's name against
the CONNECT host: a handshake that ends with any other certificate fails,
and the checks hear of it (verify_error)."""

import asyncio
import socket
import ssl
import struct
import time

from .clients import ClientResult, _cancel
from .pki import client_context
from .tlsbits import refragment


_CONTEXTS = {}


def _context(key):
    """One client context per (gate CA, ALPN, name check): the ssl module
    resumes a session only with the context that made it."""
    if key not in _CONTEXTS:
        if len(_CONTEXTS) > 32:
            _CONTEXTS.clear()
        _CONTEXTS[key] = client_context(key[0], key[1], key[2])
    return _CONTEXTS[key]


def _flip(flight, offsets):
    """The ClientHello with a bit flipped at each offset counted back from
    its end (where the extensions are: a session ticket among them)."""
    b = bytearray(flight)
    for off in offsets:
        if 0 < int(off) <= len(b) - 9:
            b[len(b) - int(off)] ^= 1 << (int(off) % 8)
    return bytes(b)


def _names_match(cert, host):
    h = host.lower().rstrip(".")
    for kind, n in (cert or {}).get("subjectAltName", ()):
        n = n.lower()
        if kind == "DNS" and (n == h or (n.startswith("*.") and h.endswith(n[1:]) and "." not in h[:-len(n) + 1])):
            return True
    return False


class _Cut(Exception):
    """The ciphertext reached the case's cut offset."""


async def run_tls_client(loop, spec, port, head, plain, host, gate_ca, until=None, sessions=None):
    """head: the CONNECT request (bytes); plain: the plaintext stream for
    inside the tunnel; host: the CONNECT host (for SNI '@'); until: stop
    waiting for the end once until(plaintext received) holds; sessions:
    host -> the last TLS session a tunnel to it got, for tls "resume"
    ("same": this host's, "other": another host's)."""
    t = spec.get("tls") or {}
    r = ClientResult()
    r.plain = bytearray()
    r.plain_sent = bytearray()
    r.tls = {"state": "connecting"}
    r.tunnel_host = host
    r.sent = head         # the CONNECT, its credentials with it (checks.py's session model)
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
    wait = spec.get("wait_ms", 600) / 1000.0
    stop_read = int(spec.get("stop_read", -1))
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    state = {"closed": False, "eof": False, "head_end": None, "hs": False}
    fresh = asyncio.Event()
    seq = [0]     # reads so far: a waiter compares it with what it saw
    send_lock = asyncio.Lock()
    cut = t.get("cut") if isinstance(t.get("cut"), dict) else None
    sent = [0]

    async def reader():
        try:
            while True:
                if state["hs"] and stop_read >= 0 and len(r.plain) >= stop_read:
                    r.outcome = r.outcome or "stopped_reading"
                    await asyncio.sleep(3600)
                b = await loop.sock_recv(s, 65536)
                if not b:
                    break
                if len(r.received) < (8 << 20):
                    r.received += b
                if state["head_end"] is None:
                    i = r.received.find(b"\r\n\r\n")
                    if i >= 0:
                        state["head_end"] = i + 4
                        rest = bytes(r.received[i + 4:])
                        if rest:
                            inc.write(rest)
                else:
                    inc.write(b)
                seq[0] += 1
                fresh.set()
            state["eof"] = True
            r.outcome = r.outcome or "eof"
        except ConnectionResetError:
            state["eof"] = True
            r.outcome = r.outcome or "reset"
        except OSError:
            state["eof"] = True
            r.outcome = r.outcome or "error"
        if not inc.eof:
            inc.write_eof()
        seq[0] += 1
        fresh.set()

    async def more(deadline, seen):
        """Wait for bytes from sluice after read number `seen`; False at
        its end or the deadline."""
        if seq[0] != seen:
            return True
        if state["eof"]:
            return False
        fresh.clear()
        try:
            await asyncio.wait_for(fresh.wait(), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            return False
        return True

    async def send(data):
        """Ciphertext (or raw bytes) out, honouring the cut offset."""
        async with send_lock:
            if cut is not None and sent[0] + len(data) >= int(cut.get("at", 0)):
                piece = data[:max(0, int(cut.get("at", 0)) - sent[0])]
                if piece:
                    await loop.sock_sendall(s, piece)
                sent[0] += len(piece)
                raise _Cut()
            if data:
                await loop.sock_sendall(s, data)
                sent[0] += len(data)

    rt = loop.create_task(reader())
    end = spec.get("end") or {"kind": "hold"}
    kind = end.get("kind", "hold")
    try:
        # The CONNECT, as the case splits it.
        pos = 0
        for n, delay in spec.get("writes", []):
            if delay:
                await asyncio.sleep(delay / 1000.0)
            piece = head[pos:pos + max(0, int(n))]
            pos += len(piece)
            if piece:
                await loop.sock_sendall(s, piece)
        if pos < len(head):
            await loop.sock_sendall(s, head[pos:])
        deadline = time.monotonic() + wait + 1.0
        while state["head_end"] is None and await more(deadline, seq[0]):
            pass
        if state["head_end"] is None or not r.received.startswith(b"HTTP/1.1 200"):
            r.tls["state"] = "no_200"
            raise _Done()
        if t.get("raw") is not None:
            r.tls["state"] = "raw"
            await send(t["raw"].encode("latin-1"))
            raise _Done()
        sni = t.get("sni", "@")
        name = host if sni == "@" else sni
        # OpenSSL's name check takes a trailing dot literally (real clients
        # drop it): for such an SNI the leaf's name is checked by hand below.
        check = bool(name) and name.lower() == host.lower()
        by_hand = bool(name) and not check and name.lower().rstrip(".") == host.lower().rstrip(".")
        key = (gate_ca, tuple(t["alpn"]) if t.get("alpn") else None, check)
        session = None
        if t.get("resume") and sessions:
            others = [h for h in sessions if h != host]
            pick = host if t["resume"] == "same" else (others[-1] if others else None)
            if pick in sessions:
                key, session = sessions[pick]   # a session goes with the context that made it
                r.tls["offered_session_of"] = pick
        try:
            obj = _context(key).wrap_bio(inc, out, server_hostname=name or None, session=session)
        except (ValueError, ssl.SSLError) as e:
            r.tls.update(state="bad_sni", error=str(e)[:200])
            raise _Done()
        r.tls["state"] = "handshake"
        first = True
        deadline = time.monotonic() + wait + 2.0
        while True:
            seen = seq[0]
            try:
                obj.do_handshake()
                await send(out.read())
                break
            except ssl.SSLWantReadError:
                flight = out.read()
                if first:
                    flight = _flip(flight, t.get("flip") or [])
                    flight = refragment(flight, int(t.get("records", 1)))
                    first = False
                await send(flight)
            except ssl.SSLCertVerificationError as e:
                r.tls.update(state="failed", verify_error=f"{e.verify_message} ({e.verify_code})")
                await send(out.read())
                raise _Done()
            except ssl.SSLError as e:
                r.tls.update(state="failed", error=f"{type(e).__name__}: {e}"[:200])
                await send(out.read())
                raise _Done()
            if not await more(deadline, seen):
                # sluice ended it (or said nothing in time): what came last decides
                try:
                    obj.do_handshake()
                except ssl.SSLCertVerificationError as e:
                    r.tls.update(state="failed", verify_error=f"{e.verify_message} ({e.verify_code})")
                    raise _Done()
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError as e:
                    r.tls.update(error=f"{type(e).__name__}: {e}"[:200])
                r.tls["state"] = "failed"
                r.tls.setdefault("error", "no handshake: " + ("closed" if state["eof"] else "timed out"))
                raise _Done()
        state["hs"] = True
        r.tls.update(state="done", version=obj.version(), cipher=obj.cipher(),
                     alpn=obj.selected_alpn_protocol(), resumed=obj.session_reused)
        if sessions is not None and obj.session is not None:
            sessions[host] = (key, obj.session)
            while len(sessions) > 64:
                sessions.pop(next(iter(sessions)))
        if by_hand and not _names_match(obj.getpeercert(), host):
            r.tls["verify_error"] = f"the leaf does not name {host}: {obj.getpeercert().get('subjectAltName')}"

        async def plain_reader():
            """Decrypt what arrives until the end (close_notify, EOF, an error)."""
            while True:
                seen = seq[0]
                while True:
                    try:
                        b = obj.read(65536)
                    except ssl.SSLWantReadError:
                        break
                    except ssl.SSLZeroReturnError:
                        r.tls["notify_in"] = True
                        return
                    except ssl.SSLError as e:
                        r.tls.setdefault("read_error", f"{type(e).__name__}: {e}"[:200])
                        return
                    if not b:
                        return
                    if len(r.plain) < (8 << 20):
                        r.plain += b
                try:
                    await send(out.read())
                except (_Cut, OSError):
                    pass
                if seq[0] != seen:
                    continue
                if state["eof"] or state.get("stop"):
                    return
                fresh.clear()
                await fresh.wait()

        pr = loop.create_task(plain_reader())
        try:
            at = end.get("at")
            limit = len(plain) if at is None else max(0, min(int(at), len(plain)))
            pos = 0
            writes = list(t.get("writes", []))
            t_end = time.monotonic() + wait + 3.0
            for n, delay in writes + [[limit, 0]]:
                if pos >= limit or time.monotonic() > t_end:
                    break
                if delay:
                    await asyncio.sleep(delay / 1000.0)
                piece = plain[pos:min(limit, pos + max(0, int(n)))]
                if not piece:
                    continue
                try:
                    obj.write(piece)
                except ssl.SSLError as e:
                    r.tls.setdefault("write_error", f"{type(e).__name__}: {e}"[:200])
                    break
                pos += len(piece)
                r.plain_sent += piece
                await asyncio.wait_for(send(out.read()), max(0.01, t_end - time.monotonic()))
            if t.get("notify"):
                try:
                    obj.unwrap()
                except (ssl.SSLError, ValueError):
                    pass
                await send(out.read())
            raise _Done()
        finally:
            r.tls["plain_task"] = pr
    except _Cut:
        r.tls["cut"] = sent[0]
        kind = cut.get("kind", "rst")
    except _Done:
        pass
    except (OSError, asyncio.TimeoutError):
        pass

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
        t_wait = time.monotonic() + wait
        while until and not rt.done() and not until(r.plain) and time.monotonic() < t_wait:
            await asyncio.sleep(0.01)
        try:
            await asyncio.wait_for(asyncio.shield(rt), 0 if until and until(r.plain) else
                                   max(0.0, t_wait - time.monotonic()))
        except asyncio.TimeoutError:
            pass
        await _cancel(rt)
        r.outcome = r.outcome or "open"
        s.close()
    pr = r.tls.pop("plain_task", None)
    if pr is not None:
        # what arrived before the end is decrypted before the checks look
        state["stop"] = True
        fresh.set()
        try:
            await asyncio.wait_for(asyncio.shield(pr), 0.2)
        except asyncio.TimeoutError:
            pass
        await _cancel(pr)
    r.t_end = time.monotonic()
    return r


class _Done(Exception):
    """The client's part is over: on to its end."""
