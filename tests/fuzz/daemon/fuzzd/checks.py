"""What must hold after every case, whatever the case did.

The oracle keeps counts over the life of one sluice process: the allow
lines by address and port and by host and port, the deny lines by client
connection. An origin connection that got a byte needs an allow line for
its address and port; a request an origin got needs an allow line for its
Host and port, on an address DNS gave for that name; a refusal a client got
(its Sluice-Decision header) needs a deny line with that reason for that
client connection. Names come with a fresh nonce in every case, so counts by
name never mix cases."""

import collections
import ipaddress
import re

from . import net
from .gen import POISON
from .http import parse_requests

REASONS = {"allowlisted", "not_allowlisted", "port_not_allowed", "bad_request", "non_public_address",
           "dns_error", "dns_timeout", "connect_failed", "connect_timeout", "sni_mismatch",
           "too_many_clients", "log_unavailable"}
# Whole header lines only: a client that stops reading may hold half of one.
_DENY_HDR = re.compile(rb"Sluice-Decision: deny; reason=([A-Za-z_]+)\r\n")
_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})")
LITERALS = {net.LITERAL_V4, net.LITERAL_V6, "10.0.1.1", "169.254.169.254", "127.0.0.1", "fd00:ec2::254"}


class Violation(Exception):
    def __init__(self, kind, detail):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def norm_host(h):
    h = str(h).strip().lower()
    if h.startswith("[") and "]" in h:
        return h[1:h.index("]")]
    return h.rstrip(".")


def split_host_header(v):
    """'h:8080' -> ('h', 8080); '[v6]:80' -> ('v6', 80); 'h' -> ('h', 80)."""
    v = v.strip()
    if v.startswith("["):
        end = v.find("]")
        host, rest = v[1:end], v[end + 1:]
        port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else 80
        return host.lower(), port
    host, sep, port = v.rpartition(":")
    if sep and port.isdigit():
        return host.lower().rstrip("."), int(port)
    return v.lower().rstrip("."), 80


def is_literal(h):
    try:
        ipaddress.ip_address(h)
        return True
    except ValueError:
        return False


def allowlisted(host, port, connect):
    """The fuzzer's model of daemon.ALLOWLIST."""
    h = norm_host(host)
    bare = port in (net.CONNECT_PORTS if connect else net.HTTP_PORTS)
    if h == "canary.fuzz.test":
        return bare
    if h.endswith(".ok.fuzz.test") and len(h) > len(".ok.fuzz.test"):
        return bare or port in (net.OWN_PUBLIC[1], net.STALL[1])
    if h.endswith(".port.fuzz.test") and len(h) > len(".port.fuzz.test"):
        return port == 8080
    if is_literal(h):
        a = str(ipaddress.ip_address(h))
        if a == net.OWN_PUBLIC[0]:
            return port == net.OWN_PUBLIC[1]
        return a in LITERALS and bare
    return False


def never_listed(name):
    """Names no entry covers on any port: DNS must never be asked about them."""
    return name.endswith(".no.fuzz.test")


class Oracle:
    def __init__(self, dns):
        self.dns = dns
        self.decisions = {}                          # id -> line
        self.closes = collections.Counter()          # id -> close lines
        self.allow_by_addr = collections.Counter()   # (addr, port) -> allow lines
        self.allow_by_host = collections.Counter()   # (host, port) -> non-CONNECT allow lines
        self.deny_by_client = collections.Counter()  # (client port, reason) -> deny lines
        self.ids_by_client = collections.defaultdict(list)
        self.used_conns = collections.Counter()      # (addr, port) -> origin conns that got bytes
        self.used_reqs = collections.Counter()       # (host, port) -> requests origins got
        self.seen_deny = collections.Counter()       # (client port, reason) -> replies clients got
        self.dns_seen = 0
        self.cname_targets = set()

    # --- the log ------------------------------------------------------------
    def add_lines(self, lines):
        """Check each new log line on its own; count it."""
        out = []
        for l in lines:
            ev = l.get("event")
            if ev == "decision":
                lid = l.get("id")
                if lid in self.decisions:
                    out.append(Violation("two_decisions_one_id", f"{l} after {self.decisions[lid]}"))
                self.decisions[lid] = l
                client = str(l.get("client", ""))
                if not client.startswith("127.0.0.1:"):
                    out.append(Violation("gate_reached_itself", f"a decision for client {client}: {l}"))
                cport = int(client.rsplit(":", 1)[1]) if client.rsplit(":", 1)[-1].isdigit() else -1
                self.ids_by_client[cport].append(lid)
                reason = l.get("reason")
                if reason not in REASONS:
                    out.append(Violation("unknown_reason", str(l)))
                if l.get("decision") == "allow":
                    out += self._check_allow(l)
                    addr = str(l.get("addr", ""))
                    try:
                        addr = str(ipaddress.ip_address(addr))
                    except ValueError:
                        pass
                    self.allow_by_addr[(addr, l.get("port"))] += 1
                    if l.get("method") != "CONNECT":
                        self.allow_by_host[(norm_host(l.get("host", "")), l.get("port"))] += 1
                elif l.get("decision") == "deny":
                    self.deny_by_client[(cport, reason)] += 1
                else:
                    out.append(Violation("bad_decision_line", str(l)))
            elif ev == "close":
                lid = l.get("id")
                d = self.decisions.get(lid)
                if d is None or d.get("decision") != "allow":
                    out.append(Violation("close_without_allow", f"{l}; decision: {d}"))
                self.closes[lid] += 1
                if self.closes[lid] > 1:
                    out.append(Violation("two_closes_one_id", str(l)))
        return out

    def _check_allow(self, l):
        out = []
        host = norm_host(l.get("host", ""))
        port = l.get("port")
        connect = l.get("method") == "CONNECT"
        addr = str(l.get("addr", ""))
        if not allowlisted(host, port, connect):
            out.append(Violation("allowed_unlisted", f"the allowlist does not cover {host}:{port}: {l}"))
        if not net.is_public(addr) or (addr == net.OWN_PUBLIC[0] and port == net.OWN_PUBLIC[1]):
            out.append(Violation("allowed_non_public", f"allowed with address {addr}: {l}"))
        if is_literal(host):
            if str(ipaddress.ip_address(host)) != str(ipaddress.ip_address(addr or "0.0.0.0")):
                out.append(Violation("allowed_other_address", f"literal {host} connected to {addr}: {l}"))
        else:
            given = self._given(host)
            try:
                a = str(ipaddress.ip_address(addr))
            except ValueError:
                a = addr
            if host != "canary.fuzz.test" and a not in given:
                out.append(Violation("allowed_unresolved_address",
                                     f"{host} was never answered with {addr} (answers: {sorted(given)}): {l}"))
            if self._tainted(host, port):
                out.append(Violation("allowed_tainted_name",
                                     f"{host}'s answer had {sorted(self._taint(host, port))}: {l}"))
        return out

    def _given(self, host):
        """Every address DNS sent for this name or any name of its case."""
        m = re.search(r"-([0-9a-f]{6})\.", host)
        out = set(self.dns.given.get(host, ()))
        if m:
            for n, addrs in self.dns.given.items():
                if f"-{m.group(1)}." in n:
                    out |= addrs
        if host == "canary.fuzz.test":
            out.add(net.CANARY)
        return out

    def _taint(self, host, port):
        return self.dns.taint(host, port)

    def _tainted(self, host, port):
        return bool(self._taint(host, port))

    # --- what clients got -----------------------------------------------------
    def check_client(self, r):
        out = []
        if r.local_port is None:
            return out
        if POISON.encode() in r.received:
            i = r.received.find(POISON.encode())
            out.append(Violation("poison_delivered",
                                 f"client :{r.local_port} got origin bytes that followed a finished "
                                 f"response: ...{bytes(r.received[max(0, i - 300):i + 40])!r}"))
        for m in _DENY_HDR.finditer(r.received):
            reason = m.group(1).decode()
            self.seen_deny[(r.local_port, reason)] += 1
            if self.seen_deny[(r.local_port, reason)] > self.deny_by_client[(r.local_port, reason)]:
                out.append(Violation("deny_reply_without_line",
                                     f"client :{r.local_port} got 'deny; reason={reason}' but the log has "
                                     f"{self.deny_by_client[(r.local_port, reason)]} such lines for it"))
        return out

    def missing_closes(self, ports):
        """Allow lines of these client connections without their close line."""
        out = []
        for p in ports:
            for lid in self.ids_by_client.get(p, ()):
                d = self.decisions[lid]
                if d.get("decision") == "allow" and self.closes[lid] == 0:
                    out.append(d)
        return out

    # --- what origins got -------------------------------------------------------
    def check_origin(self, c):
        out = []
        if not net.is_public(c.local):
            out.append(Violation("origin_connect_non_public",
                                 f"sluice connected to {c.local}:{c.port} (got {bytes(c.data[:200])!r})"))
        if not c.data:
            return out
        key = (c.local, c.port)
        self.used_conns[key] += 1
        if self.used_conns[key] > self.allow_by_addr[key]:
            out.append(Violation("origin_conn_without_allow",
                                 f"{self.used_conns[key]} connections to {c.local}:{c.port} carried bytes, "
                                 f"{self.allow_by_addr[key]} allow lines name it; got {bytes(c.data[:300])!r}"))
        if c.port not in net.HTTP_PORTS:
            return out
        reqs, status, end = parse_requests(c.data)
        if status.startswith("bad"):
            out.append(Violation("origin_desync",
                                 f"{c.local}:{c.port} got bytes that are not a request ({status}) after "
                                 f"{len(reqs)} request(s): {bytes(c.data[max(0, end - 200):end + 300])!r}"))
        for r in reqs:
            if r.host is None:
                out.append(Violation("origin_request_without_host", f"{r} at {c.local}:{c.port}"))
                continue
            host, hport = split_host_header(r.host)
            host = norm_host(host)
            if hport != c.port:
                out.append(Violation("origin_request_wrong_port",
                                     f"Host {r.host} arrived at {c.local}:{c.port}"))
            self.used_reqs[(host, c.port)] += 1
            if self.used_reqs[(host, c.port)] > self.allow_by_host[(host, c.port)]:
                out.append(Violation("origin_request_without_allow",
                                     f"request {self.used_reqs[(host, c.port)]} for {host}:{c.port} reached "
                                     f"{c.local}, {self.allow_by_host[(host, c.port)]} allow lines"))
            if not allowlisted(host, c.port, False):
                out.append(Violation("origin_request_unlisted", f"{r} reached {c.local}:{c.port}"))
            if is_literal(host):
                if str(ipaddress.ip_address(host)) != c.local:
                    out.append(Violation("origin_request_wrong_address", f"{r} reached {c.local}"))
            else:
                if self._tainted(host, c.port):
                    out.append(Violation("origin_request_tainted_name",
                                         f"{r} reached {c.local}:{c.port} though {host}'s answer had "
                                         f"{sorted(self._taint(host, c.port))}"))
                if c.local not in self._given(host):
                    out.append(Violation("origin_request_wrong_address",
                                         f"{r} reached {c.local}:{c.port}, not an address of {host} "
                                         f"({sorted(self._given(host))})"))
        return out

    # --- what DNS was asked ------------------------------------------------------
    def check_dns(self):
        out = []
        qs = self.dns.queries[self.dns_seen:]
        self.dns_seen = len(self.dns.queries)
        for name, qtype in qs:
            if never_listed(name) and name not in self.cname_targets:
                out.append(Violation("dns_asked_for_unlisted_name", f"{qtype} {name}"))
        return out


def signature(lines, results, origin_conns, stderr_text):
    """A case's behaviour, coarsely: for runs without coverage, and stats."""
    sig = set()
    for l in lines:
        if l.get("event") == "decision":
            sig.add(("d", l.get("decision"), l.get("reason"), l.get("method") == "CONNECT"))
        elif l.get("event") == "close":
            sig.add(("c", l.get("end")))
    for r in results:
        sig.add(("o", r.outcome))
        for code in _STATUS.findall(bytes(r.received[:65536]))[:4]:
            sig.add(("s", code.decode()))
    for c in origin_conns:
        sig.add(("u", c.port in net.HTTP_PORTS, bool(c.data), c.eof))
    for line in stderr_text.splitlines():
        if line.startswith("sluice:"):
            sig.add(("e", re.sub(r"[0-9a-f]{6,}|\d+", "N", line)[:100]))
    return sig
