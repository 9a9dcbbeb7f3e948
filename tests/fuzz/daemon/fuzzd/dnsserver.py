"""The fuzzer's DNS server (UDP and TCP on 127.0.0.60-61:53): answers names
under fuzz.test from the running case's table (gen.py's ANSWER objects), and
keeps what it sent, so that the checks know which addresses sluice was
given for each name."""

import asyncio
import ipaddress
import re
import socket
import struct

from . import net, rules
from .gen import NONCE

QTYPES = {1: "A", 28: "AAAA", 5: "CNAME", 16: "TXT"}
TYPE_CODES = {"A": 1, "AAAA": 28, "CNAME": 5, "TXT": 16}
CANARY_NAMES = {"canary.fuzz.test": net.CANARY, rules.CANARY_NAME: net.CANARY_TLS}
_NONCE_RE = re.compile(r"-([0-9a-f]{6})\.")


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode("latin-1")[:63]
        out += bytes([len(raw)]) + raw
    return out + b"\x00"


def parse_query(msg):
    """(id, flags, qname, qtype, question bytes) or None."""
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack(">HHH", msg[:6])
    if qd < 1:
        return None
    off = 12
    labels = []
    while True:
        if off >= len(msg):
            return None
        n = msg[off]
        if n == 0:
            off += 1
            break
        if n & 0xC0:
            return None
        labels.append(msg[off + 1:off + 1 + n].decode("latin-1"))
        off += 1 + n
    if off + 4 > len(msg):
        return None
    qtype, _qclass = struct.unpack(">HH", msg[off:off + 4])
    return qid, flags, ".".join(labels), qtype, msg[12:off + 4]


def _rdata(rr):
    t = rr.get("t")
    if t == "CNAME":
        return encode_name(rr["target"])
    if t == "TXT":
        txt = str(rr.get("addr", "x")).encode("latin-1")[:255]
        return bytes([len(txt)]) + txt
    try:
        a = ipaddress.ip_address(net.slot_addr(rr.get("addr", "0.0.0.0")))
    except ValueError:
        return b"\x00\x00\x00\x00"
    if t == "A":
        return a.packed[-4:] if a.version == 6 else a.packed
    return a.packed if a.version == 6 else ipaddress.IPv6Address("::ffff:" + str(a)).packed


class DnsServer:
    def __init__(self, loop):
        self.loop = loop
        self.tables = {}        # nonce -> (dns table of templates)
        self.counts = {}        # (qname, qtype, transport) -> queries so far
        self.queries = []       # (qname, qtype) in order
        self.given = {}         # qname -> set of addresses sent in any answer
        self.takes = {}         # qname -> [(qtype, addresses c-ares takes, had a CNAME)] per answer
        self.transports = []
        self.tcp_servers = []

    async def start(self):
        for addr in net.DNS_SERVERS:
            t, _ = await self.loop.create_datagram_endpoint(lambda: _Udp(self), local_addr=addr)
            self.transports.append(t)
            s = await asyncio.start_server(self._tcp, addr[0], addr[1])
            self.tcp_servers.append(s)
        return self

    async def close(self):
        for t in self.transports:
            t.close()
        for s in self.tcp_servers:
            s.close()
            await s.wait_closed()
        await asyncio.sleep(0)   # the transports' sockets close on the next pass

    # --- the case table ---------------------------------------------------
    def install(self, nonce, table):
        self.tables[nonce] = table

    def lookup(self, qname):
        """(template, nonce, entry) for a name, or None."""
        m = _NONCE_RE.search(qname)
        if not m or m.group(1) not in self.tables:
            return None
        tmpl = qname[:m.start(1)] + NONCE + qname[m.end(1):]
        entry = self.tables[m.group(1)].get(tmpl)
        return (tmpl, m.group(1), entry) if entry is not None else None

    def fill(self, text, nonce):
        return text.replace(NONCE, nonce)

    # --- answering ----------------------------------------------------------
    def answer(self, msg, transport):
        """[(delay_s, bytes)] to send, or "close" (TCP)."""
        q = parse_query(msg)
        if q is None:
            return []
        qid, flags, qname, qtype, question = q
        name = qname.lower().rstrip(".")
        tname = QTYPES.get(qtype, str(qtype))
        self.queries.append((name, tname))
        if name in CANARY_NAMES:
            rrs = [{"t": "A", "name": "@", "addr": CANARY_NAMES[name], "ttl": 300}] if tname == "A" else []
            return [(0, self._packet(qid, question, qname, {"rcode": 0, "an": rrs}, "", record=False))]
        found = self.lookup(name)
        if found is None:
            return [(0, self._packet(qid, question, qname, {"rcode": 3, "an": []}, "", record=False))]
        tmpl, nonce, entry = found
        answers = entry.get(tname) or [{"rcode": 0, "an": []}]
        key = (name, tname, transport)
        i = self.counts.get(key, 0)
        self.counts[key] = i + 1
        a = answers[min(i, len(answers) - 1)]
        if transport == "tcp":
            # the retry of a truncated answer: what "tcp" says, else in full
            t = a.get("tcp") if a.get("tc") else None
            if t == "close":
                return "close"
            if isinstance(t, dict):
                a = t
            else:
                a = {k: v for k, v in a.items() if k not in ("tc", "cut", "drop", "delay_ms")}
        if a.get("drop"):
            return []
        pkt = self._packet(qid, question, qname, a, nonce, qtype=tname, transport=transport)
        return [(a.get("delay_ms", 0) / 1000.0, pkt)] * max(1, min(int(a.get("dup", 1)), 8))

    def _packet(self, qid, question, qname, a, nonce, record=True, qtype="A", transport="udp"):
        if "raw" in a:
            raw = a["raw"].encode("latin-1")
            return struct.pack(">H", qid) + raw[2:] if len(raw) >= 2 else raw
        rid = qid ^ 0x5A5A if a.get("wrong_id") else qid
        flags = 0x8180 | (0x0200 if a.get("tc") else 0) | (int(a.get("rcode", 0)) & 0xF)
        qd = question
        if a.get("qd") == "none":
            qd = b""
        elif a.get("qd") == "other":
            qd = encode_name("other.fuzz.test") + question[-4:]
        body = b""
        count = 0
        order = []         # (type, owner, address or CNAME target), as sent
        for rr in a.get("an", []):
            owner = rr.get("name", "@")
            owner = qname if owner == "@" else self.fill(owner, nonce)
            t = rr.get("t", "A")
            rr = dict(rr)
            if "target" in rr:
                rr["target"] = self.fill(rr["target"], nonce)
            oname = b"\xc0\x0c" if owner == qname and qd == question else encode_name(owner)
            rdata = _rdata(rr)
            body += oname + struct.pack(">HHIH", TYPE_CODES.get(t, 1), 1, int(rr.get("ttl", 5)) & 0xFFFFFFFF,
                                        len(rdata)) + rdata
            count += 1
            if t in ("A", "AAAA"):
                order.append((t, owner.lower().rstrip("."), _norm(rdata)))
            elif t == "CNAME":
                order.append((t, owner.lower().rstrip("."), rr["target"].lower().rstrip(".")))
        full = pkt = struct.pack(">HHHHHH", rid, flags, 1 if qd else 0, count, 0, 0) + qd + body
        if "cut" in a:
            pkt = pkt[:int(a["cut"])]
        if record:
            self._record(qname.lower().rstrip("."), qtype, a, order, len(full), transport)
        return pkt

    def _record(self, name, qtype, a, order, pkt_len, transport):
        """Keep what an answer hands the resolver, for the checks (taint()).
        Which records c-ares takes (ares__parse_into_addrinfo): an A or AAAA
        record whose owner is the current name, which starts as the
        question and becomes the target of each CNAME record in turn,
        whatever that record's owner. An answer it cannot take at all
        (wrong id or question, cut short, truncated over UDP, an error
        rcode) gives it nothing."""
        self.given.setdefault(name, set()).update(v for t, _, v in order if t != "CNAME")
        cut = "cut" in a and int(a["cut"]) < pkt_len
        if (int(a.get("rcode", 0)) != 0 or a.get("wrong_id") or a.get("qd") is not None or cut
                or (a.get("tc") and transport == "udp")):
            return
        current = name
        taken = []
        cname = False
        for t, owner, v in order:
            if t == "CNAME":
                current = v
                cname = True
            elif owner == current and v not in taken:
                taken.append(v)
        self.takes.setdefault(name, []).append((qtype, taken, cname))

    def taint(self, name, port):
        """The addresses that make every answer sluice can have built for
        this name refused: non-empty only if each answer that gave
        addresses has one of them among the first 16 sluice keeps (with room
        for the other family's), and no answer was a bare CNAME (which
        c-ares may follow with a lookup of its own)."""
        takes = self.takes.get(name, [])
        if not any(t for _, t, _ in takes) or any(c and not t for _, t, c in takes):
            return set()

        def bad(x):
            return not net.is_public(x) or (port == net.OWN_PUBLIC[1] and x == net.OWN_PUBLIC[0])

        widest = {}
        for q, t, _ in takes:
            widest[q] = max(widest.get(q, 0), len(t))
        out = set()
        for q, t, _ in takes:
            if not t:
                continue
            other = max((n for f, n in widest.items() if f != q), default=0)
            hits = [x for i, x in enumerate(t) if bad(x) and i + other < 16]
            if not hits:
                return set()
            out |= set(hits)
        return out

    async def _tcp(self, reader, writer):
        try:
            while True:
                hdr = await reader.readexactly(2)
                msg = await reader.readexactly(struct.unpack(">H", hdr)[0])
                out = self.answer(msg, "tcp")
                if out == "close":
                    break
                for delay, pkt in out:
                    if delay:
                        await asyncio.sleep(delay)
                    writer.write(struct.pack(">H", len(pkt)) + pkt)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()


def _norm(rdata):
    if len(rdata) == 4:
        return socket.inet_ntop(socket.AF_INET, rdata)
    if len(rdata) == 16:
        return str(ipaddress.IPv6Address(rdata))
    return "0.0.0.0"


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server):
        self.server = server

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        out = self.server.answer(data, "udp")
        if out == "close":
            return
        for delay, pkt in out:
            if delay:
                self.server.loop.call_later(delay, self._send, pkt, addr)
            else:
                self._send(pkt, addr)

    def _send(self, pkt, addr):
        try:
            self.transport.sendto(pkt, addr)
        except OSError:
            pass
