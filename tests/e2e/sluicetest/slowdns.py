"""A DNS server on 127.0.0.55:53 (UDP and TCP) whose answers a test delays or
holds, so that the test can act "while sluice is resolving".

It answers A queries for the names in dns.RECORDS (and for any name under
.slow.hostile.test, with 11.0.0.5) and AAAA queries with their AAAA records
(or an empty NOERROR answer); everything else is NXDOMAIN. Answers are built
here by hand (RFC 1035 section 4), with TTL 0. Use it with
`[dns] server = 127.0.0.55:53`, `min_ttl_s = 0`, `max_ttl_s = 0`, so that
every request is resolved anew.

    slow.hold(name)        queries for name (or a suffix ".x.test") wait ...
    slow.wait_query(name)  ... the test sees one arrive: sluice is resolving
    slow.release(name)     ... and then the held queries are answered
    slow.delay(name, s)    answer after s seconds instead
"""

import ipaddress
import socket
import struct
import threading
import time

from .dns import RECORDS

ADDR = ("127.0.0.55", 53)
SLOW_SUFFIX = ".slow.hostile.test"
SLOW_TARGET = "11.0.0.5"


def _decode_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n == 0:
            return ".".join(labels), off + 1
        if n & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n


def parse_query(msg):
    """(id, flags, qname, qtype, question bytes) of a one-question query."""
    qid, flags, qd = struct.unpack(">HHH", msg[:6])
    if qd != 1:
        raise ValueError(f"{qd} questions")
    name, off = _decode_name(msg, 12)
    qtype, _ = struct.unpack(">HH", msg[off:off + 4])
    return qid, flags, name, qtype, msg[12:off + 4]


def addresses(name):
    name = name.lower().rstrip(".")
    if name.endswith(SLOW_SUFFIX):
        return [SLOW_TARGET]
    return RECORDS.get(name)


def build_answer(msg):
    """The response to query msg, per RFC 1035: same id and question, QR and
    AA set, RD copied, RA set; A/AAAA records with a pointer to the question
    name (0xC00C)."""
    qid, flags, name, qtype, question = parse_query(msg)
    addrs = addresses(name)
    rcode = 0 if addrs is not None else 3
    answers = b""
    count = 0
    for a in addrs or []:
        ip = ipaddress.ip_address(a)
        if (qtype == 1 and ip.version == 4) or (qtype == 28 and ip.version == 6):
            answers += struct.pack(">HHHIH", 0xC00C, qtype, 1, 0, len(ip.packed)) + ip.packed
            count += 1
    rflags = 0x8000 | (flags & 0x7800) | 0x0400 | (flags & 0x0100) | 0x0080 | rcode
    return struct.pack(">HHHHHH", qid, rflags, 1, count, 0, 0) + question + answers


class SlowDNS:
    def __init__(self, addr=ADDR):
        self.addr = addr
        self.lock = threading.Condition()
        self.queries = []       # (monotonic time, name, qtype, transport)
        self.rules = {}         # name or ".suffix" -> "hold" or delay seconds
        self.held = []          # (name, send function, message)
        self._stop = False
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(addr)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(addr)
        self.tcp.listen(64)
        threading.Thread(target=self._udp_loop, name="slowdns-udp", daemon=True).start()
        threading.Thread(target=self._tcp_loop, name="slowdns-tcp", daemon=True).start()

    # --- what the test controls -------------------------------------------
    def reset(self):
        with self.lock:
            self.rules.clear()
        self.release_all()

    def hold(self, name):
        with self.lock:
            self.rules[name.lower()] = "hold"

    def delay(self, name, seconds):
        with self.lock:
            self.rules[name.lower()] = seconds

    def clear(self, name):
        with self.lock:
            self.rules.pop(name.lower(), None)

    def mark(self):
        with self.lock:
            return len(self.queries)

    def wait_query(self, name, mark=0, timeout=5.0):
        """Wait until a query for name arrived (at index >= mark)."""
        name = name.lower().rstrip(".")
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                if any(q[1] == name for q in self.queries[mark:]):
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no DNS query for {name} within {timeout}s; "
                                         f"queries since: {self.queries[mark:][-10:]}; the last before: "
                                         f"{self.queries[:mark][-4:]}")
                self.lock.wait(left)

    def release(self, name):
        """Stop holding name and answer its held queries now."""
        name = name.lower()
        with self.lock:
            self.rules.pop(name, None)
            mine = [h for h in self.held if self._matches(h[0], name)]
            self.held = [h for h in self.held if not self._matches(h[0], name)]
        for _, send, msg in mine:
            self._answer(send, msg)

    def release_all(self):
        with self.lock:
            held, self.held = self.held, []
        for _, send, msg in held:
            self._answer(send, msg)

    # --- serving ---------------------------------------------------------------
    @staticmethod
    def _matches(qname, key):
        return qname == key or (key.startswith(".") and qname.endswith(key))

    def _rule(self, qname):
        if qname in self.rules:
            return self.rules[qname]
        for key, rule in self.rules.items():
            if key.startswith(".") and qname.endswith(key):
                return rule
        return 0

    def _handle(self, msg, send, transport):
        try:
            _, _, name, qtype, _ = parse_query(msg)
        except (ValueError, struct.error, IndexError):
            return
        name = name.lower().rstrip(".")
        with self.lock:
            self.queries.append((time.monotonic(), name, qtype, transport))
            rule = self._rule(name)
            if rule == "hold":
                self.held.append((name, send, msg))
            self.lock.notify_all()
        if rule == "hold":
            return
        if rule:
            t = threading.Timer(rule, self._answer, (send, msg))
            t.daemon = True
            t.start()
        else:
            self._answer(send, msg)

    @staticmethod
    def _answer(send, msg):
        try:
            send(build_answer(msg))
        except (OSError, ValueError, struct.error, IndexError):
            pass

    def _udp_loop(self):
        while not self._stop:
            try:
                msg, peer = self.udp.recvfrom(4096)
            except OSError:
                return
            self._handle(msg, lambda data, peer=peer: self.udp.sendto(data, peer), "udp")

    def _tcp_loop(self):
        while not self._stop:
            try:
                c, _ = self.tcp.accept()
            except OSError:
                return
            threading.Thread(target=self._tcp_conn, args=(c,), daemon=True).start()

    def _tcp_conn(self, c):
        lock = threading.Lock()

        def send(data):
            with lock:
                c.sendall(struct.pack(">H", len(data)) + data)

        buf = b""
        try:
            while True:
                data = c.recv(4096)
                if not data:
                    break
                buf += data
                while len(buf) >= 2 and len(buf) >= 2 + struct.unpack(">H", buf[:2])[0]:
                    n = struct.unpack(">H", buf[:2])[0]
                    self._handle(buf[2:2 + n], send, "tcp")
                    buf = buf[2 + n:]
        except OSError:
            pass

    def close(self):
        self._stop = True
        for s in (self.udp, self.tcp):
            try:
                s.close()
            except OSError:
                pass
