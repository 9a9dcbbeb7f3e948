"""A tiny DNS client (UDP, one question) to check the test resolver."""

import ipaddress
import random
import socket
import struct

QTYPES = {"A": 1, "AAAA": 28}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def _encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        out += bytes([len(raw)]) + raw
    return out + b"\x00"


def _skip_name(msg, off):
    while True:
        n = msg[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1 + n


def query(name, qtype="A", server=("127.0.0.53", 53), timeout=2.0):
    """Ask `server` one question. Returns (rcode_name, [(type, address, ttl)])."""
    qid = random.randrange(0x10000)
    packet = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    packet += _encode_name(name) + struct.pack(">HH", QTYPES[qtype], 1)
    family = socket.AF_INET6 if ":" in server[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(packet, server)
        while True:
            msg, _ = s.recvfrom(4096)
            if struct.unpack(">H", msg[:2])[0] == qid:
                break
    _, flags, qd, an, _, _ = struct.unpack(">HHHHHH", msg[:12])
    off = 12
    for _ in range(qd):
        off = _skip_name(msg, off) + 4
    answers = []
    for _ in range(an):
        off = _skip_name(msg, off)
        rtype, _, ttl, rdlen = struct.unpack(">HHIH", msg[off:off + 10])
        off += 10
        rdata = msg[off:off + rdlen]
        off += rdlen
        if rtype == 1:
            answers.append(("A", str(ipaddress.IPv4Address(rdata)), ttl))
        elif rtype == 28:
            answers.append(("AAAA", str(ipaddress.IPv6Address(rdata)), ttl))
    return RCODES.get(flags & 0xF, str(flags & 0xF)), answers
