"""TLS ClientHello bytes, built and read by hand: for the hostile TLS client
tests (a hello split over many records, one larger than a record) and for
the inspecting origins, which read what a client offered (SNI, ALPN, cipher
suites) before Python's ssl takes the socket.

Only the framing is hand-made: a hello built here is a valid TLS 1.2
ClientHello (test_harness_inspect.py shows OpenSSL answering it)."""

import os
import struct

HANDSHAKE = 0x16
CLIENT_HELLO = 1
RECORD_MAX = 16384          # largest plaintext record (RFC 8446 5.1, RFC 5246 6.2.1)

# ECDHE with AEAD only: what SPEC says sluice speaks on both sides.
AEAD_ECDHE = [0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8]


class NeedMore(Exception):
    """A valid prefix of a ClientHello: more bytes are needed."""


class NotHello(Exception):
    """Not a TLS handshake record carrying a ClientHello."""


def _u16(n):
    return struct.pack("!H", n)


def _u24(n):
    return struct.pack("!I", n)[1:]


def _ext(kind, data):
    return _u16(kind) + _u16(len(data)) + data


def client_hello_message(server_name, alpn=("http/1.1",), padding=0, ciphers=AEAD_ECDHE):
    """The ClientHello handshake message (type, length, body), without any
    record framing. padding: bytes of a padding extension (RFC 7685)."""
    exts = b""
    if server_name is not None:
        name = server_name.encode("ascii")
        entry = b"\x00" + _u16(len(name)) + name
        exts += _ext(0x0000, _u16(len(entry)) + entry)
    groups = b"".join(_u16(g) for g in (0x0017, 0x001D, 0x0018))
    exts += _ext(0x000A, _u16(len(groups)) + groups)
    exts += _ext(0x000B, b"\x01\x00")
    sigs = b"".join(_u16(s) for s in (0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501))
    exts += _ext(0x000D, _u16(len(sigs)) + sigs)
    if alpn:
        protos = b"".join(bytes([len(p)]) + p.encode() for p in alpn)
        exts += _ext(0x0010, _u16(len(protos)) + protos)
    exts += _ext(0x0017, b"")                 # extended_master_secret
    exts += _ext(0xFF01, b"\x00")             # renegotiation_info, empty
    if padding:
        exts += _ext(0x0015, b"\x00" * padding)
    suites = b"".join(_u16(c) for c in ciphers)
    body = (b"\x03\x03" + os.urandom(32) + b"\x00" + _u16(len(suites)) + suites + b"\x01\x00"
            + _u16(len(exts)) + exts)
    return bytes([CLIENT_HELLO]) + _u24(len(body)) + body


def frame(message, fragment=RECORD_MAX, version=b"\x03\x01"):
    """Handshake bytes framed as TLS records of at most `fragment` bytes each."""
    out = bytearray()
    for off in range(0, len(message), fragment):
        piece = message[off:off + fragment]
        out += bytes([HANDSHAKE]) + version + _u16(len(piece)) + piece
    return bytes(out)


def records(data):
    """[(type, version, payload)] of the complete records at the start of
    data, and the bytes left after them."""
    out, off = [], 0
    while len(data) - off >= 5:
        n = struct.unpack("!H", data[off + 3:off + 5])[0]
        if len(data) - off - 5 < n:
            break
        out.append((data[off], bytes(data[off + 1:off + 3]), bytes(data[off + 5:off + 5 + n])))
        off += 5 + n
    return out, bytes(data[off:])


def reframe(flight, fragment):
    """A client's first flight (its ClientHello record(s)) with the same
    handshake bytes split into records of `fragment` bytes: the handshake
    transcript is unchanged, so the handshake still completes."""
    recs, rest = records(flight)
    if rest or not recs or any(t != HANDSHAKE for t, _, _ in recs):
        raise NotHello(f"not a flight of handshake records: {flight[:20]!r}")
    return frame(b"".join(p for _, _, p in recs), fragment, recs[0][1])


def parse(data):
    """What a ClientHello at the start of data offers: {'sni', 'alpn',
    'ciphers', 'extensions', 'length' (handshake message bytes), 'records'
    (payload sizes), 'consumed' (bytes of data it took)}. Raises NeedMore
    or NotHello."""
    msg = bytearray()
    sizes = []
    off = 0
    need = None
    while need is None or len(msg) < need:
        if len(data) - off < 5:
            if len(data) - off > 0 and data[off] != HANDSHAKE:
                raise NotHello(f"record type {data[off]}")
            raise NeedMore()
        if data[off] != HANDSHAKE or data[off + 1] != 3:
            raise NotHello(f"record header {bytes(data[off:off + 5])!r}")
        n = struct.unpack("!H", data[off + 3:off + 5])[0]
        if n == 0 or n > RECORD_MAX + 2048:
            raise NotHello(f"record length {n}")
        if len(data) - off - 5 < n:
            raise NeedMore()
        msg += data[off + 5:off + 5 + n]
        sizes.append(n)
        off += 5 + n
        if need is None and len(msg) >= 4:
            if msg[0] != CLIENT_HELLO:
                raise NotHello(f"handshake type {msg[0]}")
            need = 4 + struct.unpack("!I", b"\x00" + bytes(msg[1:4]))[0]
    info = _parse_body(bytes(msg[4:need]))
    info.update(length=need, records=sizes, consumed=off)
    return info


def _parse_body(b):
    p = 2 + 32
    sid = b[p]
    p += 1 + sid
    n = struct.unpack("!H", b[p:p + 2])[0]
    ciphers = [struct.unpack("!H", b[p + 2 + i:p + 4 + i])[0] for i in range(0, n, 2)]
    p += 2 + n
    p += 1 + b[p]
    info = {"sni": None, "alpn": None, "ciphers": ciphers, "extensions": []}
    if p >= len(b):
        return info
    end = p + 2 + struct.unpack("!H", b[p:p + 2])[0]
    p += 2
    while p + 4 <= end:
        kind, n = struct.unpack("!HH", b[p:p + 4])
        data = b[p + 4:p + 4 + n]
        info["extensions"].append(kind)
        if kind == 0x0000 and len(data) >= 5 and data[2] == 0:
            ln = struct.unpack("!H", data[3:5])[0]
            info["sni"] = data[5:5 + ln].decode("ascii", "replace")
        elif kind == 0x0010 and len(data) >= 2:
            protos, q = [], 2
            while q < len(data):
                ln = data[q]
                protos.append(data[q + 1:q + 1 + ln].decode("ascii", "replace"))
                q += 1 + ln
            info["alpn"] = protos
        p += 4 + n
    return info
