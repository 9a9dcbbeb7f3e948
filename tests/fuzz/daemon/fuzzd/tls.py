"""TLS ClientHellos built by hand from a seed, so that a case replays to the
same bytes (Python's ssl module would put fresh randoms in every time)."""

import struct


def _u16(n):
    return struct.pack(">H", n & 0xFFFF)


def _ext(etype, data):
    return _u16(etype) + _u16(len(data)) + data


def client_hello(rng, sni, records=1, padding=0, alpn=True, version=0x0303):
    """A ClientHello with server name `sni` (None: no SNI extension), cut
    into `records` handshake records."""
    rand = bytes(rng.getrandbits(8) for _ in range(32))
    sid = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 32])))
    suites = [0x1301, 0x1302, 0x1303, 0xC02B, 0xC02F, 0x009E]
    rng.shuffle(suites)
    exts = b""
    if sni is not None:
        name = sni.encode("latin-1") if isinstance(sni, str) else sni
        entry = b"\x00" + _u16(len(name)) + name
        exts += _ext(0, _u16(len(entry)) + entry)
    exts += _ext(10, _u16(4) + _u16(0x001D) + _u16(0x0017))
    exts += _ext(13, _u16(4) + _u16(0x0403) + _u16(0x0804))
    exts += _ext(43, b"\x04" + _u16(0x0304) + _u16(0x0303))
    key = bytes(rng.getrandbits(8) for _ in range(32))
    exts += _ext(51, _u16(36) + _u16(0x001D) + _u16(32) + key)
    if alpn:
        protos = b"\x08http/1.1"
        exts += _ext(16, _u16(len(protos)) + protos)
    if padding:
        exts += _ext(21, b"\x00" * padding)
    body = _u16(version) + rand + bytes([len(sid)]) + sid
    body += _u16(2 * len(suites)) + b"".join(_u16(s) for s in suites)
    body += b"\x01\x00" + _u16(len(exts)) + exts
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    out = b""
    records = max(1, min(records, len(hs)))
    step = -(-len(hs) // records)
    for i in range(0, len(hs), step):
        frag = hs[i:i + step]
        out += b"\x16\x03\x01" + _u16(len(frag)) + frag
    return out
