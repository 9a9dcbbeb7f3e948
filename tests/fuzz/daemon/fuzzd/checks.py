"""What must hold after every case, whatever the case did.

The oracle keeps counts over the life of one sluice process: the allow
lines by address and port and by host and port, the deny lines by client
connection. An origin connection that got a byte needs an allow line for
its address and port; a request an origin got needs an allow line for its
Host and port, on an address DNS gave for that name; a refusal a client got
(its Sluice-Decision header) needs a deny line with that reason for that
client connection. Names come with a fresh nonce in every case, so counts by
name never mix cases.

Inspected tunnels (rules.py is the model of their rules): every request
line belongs to a tunnel's decision line and agrees with the model; every
request a TLS origin got is one a client sent in a tunnel (no more copies
than were sent), that the rules allow, with an allow request line for its
host, and the credential where it belongs and nowhere else; an origin
whose certificate sluice must refuse completes no handshake and gets no
plaintext; the secret appears in no log line, reply or plain connection.

Pinned artifacts (rules.py PINS): a client never gets a whole 2xx body
for a pinned path that does not hash to one of its digests (nor one that
cannot be checked: coded, or to the close); no Range request for a pinned
path reaches an origin, and every request for one that does carries
Accept-Encoding: identity and no other; every integrity_mismatch line has
the rule's digests as expected (those that fit, and expected_more) and, as
actual, the digests of a body an origin sent; a pinned refusal names its
rule; and what part of a pinned body a client got begins a body that
matches (the gate holds them whole, up to pin_hold_kib)."""

import base64
import collections
import datetime
import hashlib
import ipaddress
import re

from . import net, rules, sess
from .gen import POISON
from .http import count_responses, parse_requests, parse_responses
from .pki import BAD_CERTS
from .tlsbits import params_problem, sni_of

REASONS = {"allowlisted", "not_allowlisted", "port_not_allowed", "bad_request", "non_public_address",
           "dns_error", "dns_timeout", "connect_failed", "connect_timeout", "sni_mismatch",
           "too_many_clients", "log_unavailable",
           "inspected", "rule", "rule_not_matched", "upstream_tls_failed",
           "integrity_mismatch", "integrity_unverifiable", "auth_required", "auth_failed",
           "session_revoked"}   # (a request still being decided when its session is revoked is refused for it)
AUTH_REASONS = ("auth_required", "auth_failed")
CANARY_NAMES = {"canary.fuzz.test", "canary.no.fuzz.test", rules.CANARY_NAME}
_407 = re.compile(rb"HTTP/1\.1 407 [^\r\n]*\r\n((?:[^\r\n]+\r\n)*)\r\n")
_NAMES = re.compile(rb"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.fuzz\.test")
_PA_LINE = re.compile(rb"(?im)^proxy-authorization:[^\n]*\n?")
PIN_REASONS = ("integrity_mismatch", "integrity_unverifiable")
_ABSOLUTE = re.compile(r"http://([^/?#\[\]:@]+|\[[^\]]*\])(?::(\d*))?([/?][^#]*)?$", re.I)
PATH_LOG_MAX = 1024
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


def allowlisted(host, port, connect, session=None, cfg=None, any_session=False):
    """The fuzzer's model of daemon.ALLOWLIST, and of a session's own list
    (sess.py); any_session: whether some session's list allows it."""
    h = norm_host(host)
    bare = port in (net.CONNECT_PORTS if connect else net.HTTP_PORTS)
    z = sess.zone_of(h)
    if z is not None:
        owner = cfg.owner.get(z) if cfg else None
        return bare and owner is not None and (any_session or session == owner)
    if h == "canary.fuzz.test":
        return bare
    if rules.zone_of(h):
        return rules.ON and bare
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


def _held(a):
    """Whether the gate holds this pinned body whole until it matched:
    a Content-Length one up to pin_hold_kib; a chunked one (its size
    unknown until its end) while the limit is far above anything the
    harness sends (4 MiB: a chunked answer here is at most about 1.5 MB)."""
    if a.framing == "cl":
        cl = (a.header("content-length") or ["x"])[0].split(",")[0].strip()
        return cl.isdigit() and int(cl) <= rules.PIN_HOLD_KIB << 10
    return rules.PIN_HOLD_KIB >= 4096


def never_listed(name):
    """Names no entry covers on any port: DNS must never be asked about them."""
    return name.endswith(".no.fuzz.test")


def _line_time(l):
    try:
        return datetime.datetime.strptime(l.get("ts", ""), "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return 0.0


def _claimed(value):
    """The name a Proxy-Authorization value claims, as the gate logs it on
    a refusal (proxy_auth.c keeps it when the base64 decodes to 1-64 bytes
    before a colon), or None."""
    v = value
    if len(v) > sess.VALUE_MAX or v[:6].lower() != "basic ":
        return None
    try:
        dec = base64.b64decode(v[6:].encode("latin-1"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    if base64.b64encode(dec).decode("latin-1") != v[6:] or b":" not in dec:
        return None
    name = dec.split(b":", 1)[0]
    return name.decode("latin-1") if 1 <= len(name) <= sess.USER_MAX else None


def _body_key(body):
    return hashlib.sha1(body).hexdigest()[:16]


class Oracle:
    def __init__(self, dns, secret=None, rule_lines=()):
        self.allow_retries(())   # none until the harness says which connections went unanswered
        self.dns = dns
        self.secret = secret.encode() if secret else None
        self.rule_lines = list(rule_lines)           # allowlist line of each of rules.RULES
        self.tunnels = {}                            # id -> an inspected CONNECT's decision line
        self.req_n = {}                              # id -> the last request line's n
        self.req_lines = collections.Counter()       # id -> request lines
        self.allow_req_by_host = collections.Counter()   # (host, port) -> allowed request lines
        self.inspected_by_host = collections.Counter()   # (host, port) -> inspected allow lines
        self.sent_reqs = collections.Counter()       # (host, method, target, body) -> sent in tunnels
        self.got_reqs = collections.Counter()        # the same, as TLS origins got them
        self.used_tls_reqs = collections.Counter()   # (host, port) -> requests TLS origins got
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
        self.pin_stats = collections.Counter()       # what the pin checks saw (run.py's summary)
        self.pin_lines = []                          # integrity_* lines waiting for the bodies origins sent
        self.pin_bodies = collections.OrderedDict()  # SRI of a body an origin sent (every algorithm) -> None
        # Sessions (sess.py): the case's config as the model sees it (None:
        # the gate has no [sessions]), and what the checks keep of it.
        self.sess = None
        self.allow_by_host_owner = collections.Counter()   # (host, port) -> allow lines of its zone's session
        self.mentions = collections.OrderedDict()   # name -> how clients asked for it ("?", "bad", "anon", "S:NAME")
        self.sess_stats = collections.Counter()     # what the session checks saw (run.py's summary)

    # What checking clients and origins counts: a second look (harness.py,
    # check_after) starts again from a snapshot.
    _CHECK_COUNTS = ("used_conns", "used_reqs", "seen_deny", "sent_reqs", "got_reqs", "used_tls_reqs")

    def snapshot(self):
        return {k: getattr(self, k).copy() for k in self._CHECK_COUNTS}

    def restore(self, snap):
        for k, v in snap.items():
            setattr(self, k, v.copy())

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
                out += self._check_rules(l)
                out += self._check_session_line(l)
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
                        z = sess.zone_of(norm_host(l.get("host", "")))
                        if z is not None and self.sess and l.get("session") == self.sess.owner.get(z):
                            self.allow_by_host_owner[(norm_host(l.get("host", "")), l.get("port"))] += 1
                elif l.get("decision") == "deny":
                    self.deny_by_client[(cport, reason)] += 1
                else:
                    out.append(Violation("bad_decision_line", str(l)))
            elif ev == "request":
                out += self._check_request(l)
            elif ev == "close":
                lid = l.get("id")
                d = self.decisions.get(lid)
                if d is None or d.get("decision") != "allow":
                    out.append(Violation("close_without_allow", f"{l}; decision: {d}"))
                self.closes[lid] += 1
                if d is not None and d.get("session") != l.get("session"):
                    out.append(Violation("session_field", f"a close line's session is not its decision's "
                                         f"({d.get('session')!r}): {l}"))
                if self.closes[lid] > 1:
                    out.append(Violation("two_closes_one_id", str(l)))
                if l.get("reason") is not None:
                    # plain HTTP: a pinned body refused after its allow line
                    if l.get("reason") not in PIN_REASONS or d is None:
                        out.append(Violation("close_line_reason", f"a close line with reason {l.get('reason')}: "
                                             f"{l}; decision: {d}"))
                    else:
                        client = str(d.get("client", "")).rsplit(":", 1)[-1]
                        self.deny_by_client[(int(client) if client.isdigit() else -1, l["reason"])] += 1
                        self.pin_lines.append((l, d))
        return out

    def _expected_rule(self, host, method, path):
        """(the model's verdict, why not) for a request to an inspected host."""
        amb = rules.path_ambiguous(path)
        if amb:
            return None, f"ambiguous path ({amb})"
        i = rules.rule_allows(host, method, path)
        return i, None if i is not None else "no rule of the model allows it"

    def _rule_field_ok(self, l, i):
        if i is None or i >= len(self.rule_lines):
            return True
        return str(l.get("rule", "")).endswith(f":{self.rule_lines[i]}")

    def _check_rules(self, l):
        """A decision line that the request rules made (inspected hosts)."""
        out = []
        host = norm_host(l.get("host", ""))
        if not rules.zone_of(host):
            return out
        port = l.get("port")
        connect = l.get("method") == "CONNECT"
        reason, allow = l.get("reason"), l.get("decision") == "allow"
        if not rules.ON:
            return out
        if allow and reason == "allowlisted":
            out.append(Violation("inspected_host_allowlisted",
                                 f"a plain entry allowed an inspected host (rules narrow): {l}"))
        if connect:
            if (allow and reason == "inspected") or reason == "upstream_tls_failed":
                self.tunnels[l.get("id")] = l
                if allow:
                    self.inspected_by_host[(host, port)] += 1
            elif allow:
                out.append(Violation("inspected_connect_reason", f"an inspected CONNECT allowed as {reason}: {l}"))
            return out
        if "credential" in l:
            out.append(Violation("credential_in_clear", f"a plain-HTTP request was given a credential: {l}"))
        if reason in PIN_REASONS:
            self.pin_lines.append((l, l))
        path = l.get("path")
        if not isinstance(path, str) or len(path) >= PATH_LOG_MAX or (reason not in ("rule", "rule_not_matched")):
            return out
        i, why = self._expected_rule(host, l.get("method"), path)
        if allow:
            if i is None:
                out.append(Violation("allowed_against_rules", f"{why}, but: {l}"))
            elif not self._rule_field_ok(l, i):
                out.append(Violation("wrong_rule", f"the first rule that allows it is line {self.rule_lines[i]}: {l}"))
        elif reason == "rule_not_matched" and i is not None:
            out.append(Violation("refused_against_rules", f"rule line {self.rule_lines[i:i + 1]} allows it: {l}"))
        return out

    def _check_request(self, l):
        """One request line of an inspected tunnel."""
        out = []
        lid = l.get("id")
        d = self.tunnels.get(lid)
        if d is None:
            return [Violation("request_without_tunnel", f"no inspected CONNECT has id {lid}: {l}")]
        self.req_lines[lid] += 1
        if d.get("session") != l.get("session"):
            out.append(Violation("session_field", f"a request line's session is not its tunnel's "
                                 f"({d.get('session')!r}): {l}"))
        n = l.get("n")
        if not isinstance(n, int) or n <= self.req_n.get(lid, 0):
            out.append(Violation("request_n_order", f"n={n} after n={self.req_n.get(lid, 0)}: {l}"))
        else:
            self.req_n[lid] = n
        host, port = norm_host(d.get("host", "")), d.get("port")
        if l.get("host") is not None and norm_host(l.get("host")) != host:
            out.append(Violation("request_host_field", f"the tunnel is to {host}: {l}"))
        path = l.get("path")
        if isinstance(path, str) and ("?" in path or len(path.encode("utf-8", "surrogatepass")) > PATH_LOG_MAX):
            out.append(Violation("request_path_field", f"a logged path has its query or is over 1,024 bytes: {l}"))
        cport = str(d.get("client", "")).rsplit(":", 1)[-1]
        cport = int(cport) if cport.isdigit() else -1
        reason = l.get("reason")
        if reason not in REASONS:
            out.append(Violation("unknown_reason", str(l)))
        if l.get("decision") == "allow":
            if d.get("decision") != "allow":
                out.append(Violation("request_allowed_in_failed_tunnel", f"{l} in {d}"))
            # (no status when no response came: the line then has an end)
            if reason != "rule" or "rule" not in l or not isinstance(l.get("status", 0), int) or \
                    ("status" not in l and "end" not in l):
                out.append(Violation("request_line_fields", f"an allowed request without reason rule, its rule, "
                                     f"or its status or end: {l}"))
            if isinstance(path, str) and len(path) < PATH_LOG_MAX:
                i, why = self._expected_rule(host, l.get("method"), path)
                if i is None:
                    out.append(Violation("allowed_against_rules", f"{why}, but: {l}"))
                elif not self._rule_field_ok(l, i):
                    out.append(Violation("wrong_rule", f"the first rule that allows it is line "
                                                       f"{self.rule_lines[i]}: {l}"))
            want = rules.has_credential(host, port, True)
            if want and l.get("credential") != rules.CRED_NAME:
                out.append(Violation("credential_field", f"the request got credential "
                                                         f"{rules.CRED_NAME} on {host}; its line says: {l}"))
            elif not want and "credential" in l:
                out.append(Violation("credential_field", f"no credential is set on {host}: {l}"))
            self.allow_req_by_host[(host, port)] += 1
        elif l.get("decision") == "deny":
            # A pinned body refused once the request went upstream (its
            # line is written at the end, with one) names the credential
            # the request carried, and counts as a request origins may get.
            went = reason in PIN_REASONS and "end" in l
            if went:
                self.allow_req_by_host[(host, port)] += 1
            # A pinned refusal names the rule that pins the path (checked
            # with the other pinned lines).
            if ("rule" in l and reason not in PIN_REASONS) or \
                    ("credential" in l and not (went and rules.has_credential(host, port, True) and
                                                l["credential"] == rules.CRED_NAME)):
                out.append(Violation("request_line_fields", f"a refusal with a rule or a credential: {l}"))
            if reason in PIN_REASONS:
                self.pin_lines.append((l, l))
            if reason == "rule_not_matched":
                if "suggest" not in l:
                    out.append(Violation("request_line_fields", f"rule_not_matched without suggest: {l}"))
                if isinstance(path, str) and len(path) < PATH_LOG_MAX:
                    i, _ = self._expected_rule(host, l.get("method"), path)
                    if i is not None:
                        out.append(Violation("refused_against_rules",
                                             f"rule line {self.rule_lines[i:i + 1]} allows it: {l}"))
            self.deny_by_client[(cport, reason)] += 1
        else:
            out.append(Violation("bad_decision_line", str(l)))
        return out

    def _check_allow(self, l):
        out = []
        host = norm_host(l.get("host", ""))
        port = l.get("port")
        connect = l.get("method") == "CONNECT"
        addr = str(l.get("addr", ""))
        if not allowlisted(host, port, connect, l.get("session"), self.sess):
            kind = "session_cross_host" if sess.zone_of(host) is not None and "session" in l else "allowed_unlisted"
            out.append(Violation(kind, f"the allowlist does not cover {host}:{port}"
                                 f"{' for session ' + repr(l.get('session')) if 'session' in l else ''}: {l}"))
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
            if host not in ("canary.fuzz.test", rules.CANARY_NAME) and a not in given:
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
        if host == rules.CANARY_NAME:
            out.add(net.CANARY_TLS)
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
        plain = getattr(r, "plain", None)
        streams = [r.received] + ([plain] if plain is not None else [])
        for got in streams:
            if POISON.encode() in got:
                i = got.find(POISON.encode())
                out.append(Violation("poison_delivered",
                                     f"client :{r.local_port} got origin bytes that followed a finished "
                                     f"response: ...{bytes(got[max(0, i - 300):i + 40])!r}"))
            if self.secret and self.secret in got:
                i = got.find(self.secret)
                out.append(Violation("secret_leaked", f"client :{r.local_port} got the credential's secret: "
                                     f"...{bytes(got[max(0, i - 300):i])!r}"))
        if getattr(r, "tls", None) is not None:
            out += self._check_tls_client(r)
        out += self._check_pins_client(r)
        if not getattr(r, "canary", False):
            mine = [lid for lid in self.ids_by_client.get(r.local_port, ())
                    if _line_time(self.decisions[lid]) >= getattr(r, "wall_start", 0) - 0.05]
            for lid in mine:
                out += self._check_session_config(self.decisions[lid])
            if self.sess is not None:
                out += self._check_session_client(r, mine)
        for m in (m for got in streams for m in _DENY_HDR.finditer(got)):
            reason = m.group(1).decode()
            self.seen_deny[(r.local_port, reason)] += 1
            if self.seen_deny[(r.local_port, reason)] > self.deny_by_client[(r.local_port, reason)]:
                out.append(Violation("deny_reply_without_line",
                                     f"client :{r.local_port} got 'deny; reason={reason}' but the log has "
                                     f"{self.deny_by_client[(r.local_port, reason)]} such lines for it"))
        return out

    def _check_tls_client(self, r):
        out = []
        t = r.tls
        if t.get("verify_error"):
            out.append(Violation("client_leaf_rejected", f"client :{r.local_port} to {r.tunnel_host}: the "
                                 f"gate's certificate did not verify: {t['verify_error']}"))
        if t.get("state") == "done":
            bad = params_problem(t.get("version"), t.get("cipher"), t.get("alpn"))
            if bad:
                out.append(Violation("client_tls_params", f"client :{r.local_port}: the gate agreed to {bad}"))
            # RFC 6066 3: no resumption of a session made under another server name.
            if t.get("resumed") and norm_host(t.get("offered_session_of") or "") != norm_host(r.tunnel_host):
                out.append(Violation("resumed_across_hosts", f"client :{r.local_port}'s tunnel to {r.tunnel_host} "
                                     f"resumed the session of a tunnel to {t.get('offered_session_of')}: it got "
                                     f"no certificate for {r.tunnel_host}"))
        # This connection's lines: its port may have served an earlier client.
        mine = [lid for lid in self.ids_by_client.get(r.local_port, ())
                if _line_time(self.decisions[lid]) >= getattr(r, "wall_start", 0) - 0.05]
        # An origin sluice could not verify: the first answer inside is its
        # 502 (or the parser's refusal of a head that is no request).
        failed = [self.decisions[lid] for lid in mine if self.decisions[lid].get("reason") == "upstream_tls_failed"]
        head = bytes(r.plain.split(b"\r\n\r\n")[0]) + b"\r\n"
        refused = _DENY_HDR.search(head)
        reason = refused.group(1) if refused else None
        if failed and b"\r\n\r\n" in r.plain and not (
                (head.startswith(b"HTTP/1.1 502 ") and reason == b"upstream_tls_failed") or
                (head.startswith(b"HTTP/1.1 4") and reason == b"bad_request")):
            out.append(Violation("upstream_tls_failed_not_502",
                                 f"client :{r.local_port}'s tunnel failed with the origin ({failed[0].get('detail')}); "
                                 f"its first answer inside: {bytes(r.plain[:200])!r}"))
        # What the client sent inside, for the differential check at the origins.
        if r.plain_sent:
            host = norm_host(r.tunnel_host)
            reqs, _, _ = parse_requests(bytes(r.plain_sent))
            for q in reqs:
                if q.complete:
                    self.sent_reqs[(host, q.method, q.target, _body_key(q.body))] += 1
            # At most one request line per head the client sent, and at
            # least one per answer it got inside.
            heads = r.plain_sent.count(b"\r\n\r\n") + r.plain_sent.count(b"\n\n") + 1
            answers = count_responses(r.plain, [q.method for q in reqs])
            for lid in mine:
                if lid not in self.tunnels:
                    continue
                if self.req_lines[lid] > heads:
                    out.append(Violation("request_lines_over_sent", f"tunnel {lid} has {self.req_lines[lid]} "
                                         f"request lines for at most {heads} heads"))
                # An allowed request's line is written when it ends: all of
                # them are in once the tunnel's close line is (a refusal's
                # line goes out before its reply).
                done = self.closes[lid] > 0 or self.decisions[lid].get("decision") != "allow"
                if done and answers > self.req_lines[lid]:
                    out.append(Violation("answer_without_request_line",
                                         f"client :{r.local_port} got {answers} answers in tunnel {lid}, which "
                                         f"has {self.req_lines[lid]} request lines: {bytes(r.plain[:300])!r}"))
        return out

    def _client_exchanges(self, r):
        """(host or None, method, path) of each request a client sent, in
        order, and its answers: host None where the request is none the
        rules see (a CONNECT, another port, a target that is not http://)."""
        if getattr(r, "tls", None) is not None:
            host = norm_host(r.tunnel_host)
            reqs, _, _ = parse_requests(bytes(r.plain_sent))
            asked = [(host if q.target.startswith("/") else None, q.method, rules.split_target(q.target))
                     for q in reqs]
            got = bytes(r.plain)
        else:
            reqs, _, _ = parse_requests(bytes(getattr(r, "sent", b"")))
            asked = []
            for q in reqs:
                m = _ABSOLUTE.match(q.target)
                port = int(m.group(2)) if m and m.group(2) and m.group(2).isdigit() else 80
                if q.method == "CONNECT" or not m or port not in net.HTTP_PORTS:
                    asked.append((None, q.method, q.target))
                else:
                    asked.append((norm_host(m.group(1)), q.method, rules.split_target(m.group(3) or "/")))
            got = bytes(r.received)
        return asked, parse_responses(got, [a[1] for a in asked])

    def _check_pins_client(self, r):
        """No whole 2xx body for a pinned path that is not a pinned one,
        none that could not be checked, and no part of one that does not
        begin a pinned one (the gate holds them until they matched)."""
        out = []
        if not rules.ON:
            return out
        asked, answers = self._client_exchanges(r)
        for (host, method, path), a in zip(asked, answers):
            digests = rules.pin_of(host, method, path) if host else None
            if not digests or not 200 <= a.status < 300 or a.framing == "none":
                continue
            self.pin_stats["client_2xx"] += 1
            self.pin_stats["client_whole_ok"] += a.complete and a.framing in ("cl", "chunked") and \
                rules.pin_matches(digests, a.body)
            coded = [v for v in a.header("content-encoding") if v.lower() != "identity"]
            if a.framing == "close" or coded:
                out.append(Violation("pin_unverifiable_delivered",
                                     f"client :{r.local_port} got a {a.status} for pinned {host}{path} "
                                     f"{'with Content-Encoding ' + repr(coded) if coded else 'without framing'}"))
            elif a.complete and not rules.pin_matches(digests, a.body):
                out.append(Violation("pin_mismatch_delivered",
                                     f"client :{r.local_port} got a whole {a.status} body ({a.framing}, "
                                     f"{len(a.body)} bytes, {rules.actual_of(digests, a.body)}) for pinned "
                                     f"{host}{path}, which pins {' '.join(digests)}: {a.body[:120]!r}"))
            elif a.body and _held(a) and not any(b.startswith(a.body) for b in rules.pin_bodies(host, method, path)):
                # held until it matched: what came is the start of a body that does
                out.append(Violation("pin_held_body_leaked",
                                     f"client :{r.local_port} got {len(a.body)} bytes ({a.framing}, "
                                     f"{'whole' if a.complete else 'cut'}) of a {a.status} for pinned {host}{path} "
                                     f"that begin no body its digests match, though the gate holds pinned "
                                     f"bodies up to pin_hold_kib whole: {a.body[:120]!r}"))
        return out

    # --- pinned artifacts: what origins got, and the lines ------------------------
    def _check_pins_origin(self, c, r, host, where):
        """A request an origin got for a pinned path: no Range, and
        Accept-Encoding identity only."""
        out = []
        if not rules.ON or rules.pin_of(host, r.method, rules.split_target(r.target)) is None:
            return out
        self.pin_stats["origin_requests"] += 1
        if any(k == "range" for k, _ in r.headers):
            out.append(Violation("pin_range_reached_origin", f"{r} for a pinned path reached {where} with "
                                 f"Range {[v for k, v in r.headers if k == 'range']}"))
        ae = [v for k, v in r.headers if k == "accept-encoding"]
        if ae != ["identity"]:
            out.append(Violation("pin_accept_encoding", f"{r} for a pinned path reached {where} with "
                                 f"Accept-Encoding {ae}, not identity alone"))
        return out

    def _note_bodies(self, c):
        """The digests of every body (as far as it went) an origin sent on
        this connection: what an integrity_mismatch line's actual may be."""
        if not c.sent:
            return
        reqs, _, _ = parse_requests(c.data)
        for a in parse_responses(bytes(c.sent), [q.method for q in reqs]):
            for alg in ("sha256", "sha384", "sha512"):
                self.pin_bodies[rules.sri(alg, a.body)] = None
        while len(self.pin_bodies) > 30000:
            self.pin_bodies.popitem(last=False)

    def check_pin_lines(self, final=False):
        """The integrity_* lines so far, once this case's origins are in:
        a pinned request (the model's), the rule's digests as expected, and
        as actual the digests, in the rule's algorithms, of a body an origin
        sent that is none of them. A line whose body is not (yet) known
        waits for the next case's origins, once."""
        out, keep = [], []
        for item in self.pin_lines:
            l, d = item[0], item[1]
            tries = item[2] if len(item) > 2 else 0
            host, path = norm_host(d.get("host", "")), d.get("path")
            if not isinstance(path, str) or len(path) >= PATH_LOG_MAX:
                continue    # the logged path is cut: the model cannot tell
            digests = rules.pin_of(host, d.get("method"), path)
            if digests is None:
                out.append(Violation("pin_line_unpinned", f"{l.get('reason')} for a request no pinned rule "
                                     f"allows ({host} {d.get('method')} {path}): {l}"))
                continue
            self.pin_stats["lines_" + str(l.get("reason"))] += 1
            i = rules.rule_allows(host, d.get("method"), path)
            # (a Range refusal in a tunnel comes before any rule is named)
            if ("end" in l or "rule" in l) and not self._rule_field_ok(l, i):
                out.append(Violation("pin_line_rule", f"a pinned refusal must name the rule that pins it, "
                                     f"line {self.rule_lines[i] if i < len(self.rule_lines) else '?'}: {l}"))
            if l.get("reason") != "integrity_mismatch":
                continue
            want = " ".join(digests)
            actual = str(l.get("actual", "")).split()
            algs = [a.split("-", 1)[0] for a in actual]
            got = str(l.get("expected", "")).split()
            more = l.get("expected_more", 0)
            if got and got == digests[:len(got)] and len(got) < len(digests):
                # what does not fit the line is counted (its rule has them all)
                if more != len(digests) - len(got) or len(want) <= 3000:
                    out.append(Violation("pin_line_expected_cut", f"expected names {len(got)} of the rule's "
                                         f"{len(digests)} digests ({len(l['expected'])} bytes), expected_more "
                                         f"says {more}: {l}"))
            elif l.get("expected") != want or more:
                out.append(Violation("pin_line_expected", f"expected should be {want!r}: {l}"))
            if algs != rules.algs_of(digests):
                out.append(Violation("pin_line_actual", f"actual should name {rules.algs_of(digests)}: {l}"))
                continue
            if any(a in digests for a in actual):
                out.append(Violation("pin_false_mismatch", f"the body matched the pin: {l}"))
            elif not all(a in self.pin_bodies for a in actual):
                if tries == 0 and not final:
                    keep.append((l, d, 1))
                else:
                    out.append(Violation("pin_line_actual", f"actual is the digest of no body an origin sent: {l}"))
        self.pin_lines = keep
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
    def allow_retries(self, conns):
        """The gate sends an idempotent request without a body once more, on
        a new connection, when the kept origin connection it went on ended
        before any byte of a response (RFC 9112 9.3.1; exchange.c). So each
        origin connection whose last complete request is such a one, and
        got no response (or ended with a reset or a TLS error, which can
        destroy a response before the gate reads it), allows that request
        one more arrival (and one more connection to its address).
        Recomputed before each look."""
        self.retry_plain = collections.Counter()   # (host, port) -> extra arrivals in the clear
        self.retry_tls = collections.Counter()     # (host, port) -> extra arrivals in TLS
        self.retry_keys = collections.Counter()    # request key -> extra arrivals in TLS
        self.retry_addr = collections.Counter()    # (addr, port) -> extra connections
        for c in conns:
            if not c.data:
                continue
            reqs, _, _ = parse_requests(c.data)
            done = [r for r in reqs if r.complete]
            if not done or done[-1].method not in ("GET", "HEAD", "OPTIONS") or done[-1].body_len:
                continue
            answered = count_responses(bytes(c.sent), [r.method for r in done]) >= len(done)
            if (answered and not getattr(c, "aborted", False)) or (c.tls is None and len(done) < 2):
                continue   # answered; or in the clear on a connection that was not kept (a retry's own)
            last = done[-1]
            host, _ = split_host_header(last.host or "")
            host = norm_host(host)
            if c.tls is not None:
                self.retry_tls[(host, c.port)] += 1
                self.retry_keys[(host, last.method, last.target, _body_key(last.body))] += 1
            else:
                self.retry_plain[(host, c.port)] += 1
                self.retry_addr[(c.local, c.port)] += 1

    def check_origin(self, c):
        out = []
        self._note_bodies(c)
        if not net.is_public(c.local):
            out.append(Violation("origin_connect_non_public",
                                 f"sluice connected to {c.local}:{c.port} (got {bytes(c.data[:200])!r})"))
        if c.tls is not None:
            return out + self._check_tls_origin(c)
        if self.secret and self.secret in c.data:
            out.append(Violation("credential_in_clear", f"{c.local}:{c.port} got the secret outside TLS: "
                                 f"{bytes(c.data[:300])!r}"))
        if not c.data:
            return out
        sni = norm_host(sni_of(bytes(c.data[:2048])) or "")
        if rules.zone_of(sni) and c.port in net.CONNECT_PORTS:
            # sluice's own handshake for an inspected tunnel, at an origin
            # that does not speak TLS: it comes before the allow line, and
            # fails (upstream_tls_failed); the tunnel must have its line.
            if not any(norm_host(d.get("host", "")) == sni for d in self.tunnels.values()) or \
                    c.local not in self._given(sni):
                out.append(Violation("origin_conn_without_allow", f"{c.local}:{c.port} got sluice's ClientHello "
                                     f"for {sni}, and no inspected CONNECT to it on an address it has was logged"))
            return out
        key = (c.local, c.port)
        self.used_conns[key] += 1
        if self.used_conns[key] > self.allow_by_addr[key] + self.retry_addr[key]:
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
            out += self._check_no_proxy_auth(r, f"{c.local}:{c.port}")
            if r.host is None:
                out.append(Violation("origin_request_without_host", f"{r} at {c.local}:{c.port}"))
                continue
            host, hport = split_host_header(r.host)
            host = norm_host(host)
            if hport != c.port:
                out.append(Violation("origin_request_wrong_port",
                                     f"Host {r.host} arrived at {c.local}:{c.port}"))
            self.used_reqs[(host, c.port)] += 1
            if self.used_reqs[(host, c.port)] > self.allow_by_host[(host, c.port)] + self.retry_plain[(host, c.port)]:
                out.append(Violation("origin_request_without_allow",
                                     f"request {self.used_reqs[(host, c.port)]} for {host}:{c.port} reached "
                                     f"{c.local}, {self.allow_by_host[(host, c.port)]} allow lines"))
            if sess.zone_of(host) is not None and self.used_reqs[(host, c.port)] > \
                    self.allow_by_host_owner[(host, c.port)]:
                out.append(Violation("session_cross_origin",
                                     f"request {self.used_reqs[(host, c.port)]} for {host}:{c.port} reached "
                                     f"{c.local}; {self.allow_by_host_owner[(host, c.port)]} allow lines of the "
                                     f"session whose list has it ({self.sess.owner.get(sess.zone_of(host)) if self.sess else None!r})"))
            if not allowlisted(host, c.port, False, cfg=self.sess, any_session=True):
                out.append(Violation("origin_request_unlisted", f"{r} reached {c.local}:{c.port}"))
            elif rules.zone_of(host):
                out += self._check_pins_origin(c, r, host, f"{c.local}:{c.port}")
                i, why = self._expected_rule(host, r.method, rules.split_target(r.target))
                if i is None:
                    out.append(Violation("origin_request_unlisted", f"{r} reached {c.local}:{c.port}: {why}"))
                if rules.zone_of(host) == rules.CRED_ZONE and \
                        any(k == rules.CRED_HEADER.lower() for k, _ in r.headers):
                    out.append(Violation("credential_header_in_clear",
                                         f"{r} reached {c.local}:{c.port} with an {rules.CRED_HEADER} header: "
                                         "on plain HTTP sluice drops the client's own and sets none"))
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

    def _check_tls_origin(self, c):
        """A TLS origin's connection: what sluice accepted of its handshake
        and what it sent inside."""
        out = []
        t = c.tls
        where = f"{c.local}:{c.port}"
        if t.get("hs_done"):
            if t.get("cert") in BAD_CERTS:
                out.append(Violation("upstream_cert_accepted", f"sluice finished TLS with {where}, whose "
                                     f"certificate is {t['cert']}"))
            sni = norm_host(t.get("sni") or "")
            if not rules.zone_of(sni) or c.local not in self._given(sni):
                out.append(Violation("upstream_sni_wrong", f"{where} got SNI {t.get('sni')!r}"))
            bad = params_problem(t.get("version"), t.get("cipher"), t.get("alpn"))
            if bad:
                out.append(Violation("upstream_tls_params", f"sluice agreed to {bad} with {where}"))
        if not c.data:
            return out
        if t.get("cert") in BAD_CERTS or not t.get("hs_done"):
            out.append(Violation("request_to_unverified_origin", f"{where} (certificate {t.get('cert')}) got "
                                 f"plaintext: {bytes(c.data[:300])!r}"))
        reqs, status, end = parse_requests(c.data)
        if status.startswith("bad"):
            out.append(Violation("origin_desync",
                                 f"{where} got bytes inside TLS that are not a request ({status}) after "
                                 f"{len(reqs)} request(s): {bytes(c.data[max(0, end - 200):end + 300])!r}"))
        sni = norm_host(t.get("sni") or "")
        for i, r in enumerate(reqs):
            out += self._check_no_proxy_auth(r, f"{where} in TLS")
            host, hport = split_host_header(r.host or "")
            host = norm_host(host)
            if r.host and ":" not in r.host.rsplit("]", 1)[-1]:
                hport = 443
            if host != sni or hport != c.port:
                out.append(Violation("origin_request_wrong_host", f"{r} arrived at {where} in TLS for {sni}"))
            if i == 0 and self.inspected_by_host[(host, c.port)] == 0:
                out.append(Violation("origin_conn_without_allow", f"{where} got requests for {host} in TLS; "
                                     f"no inspected allow line names {host}:{c.port}"))
            out += self._check_pins_origin(c, r, host, f"{where} in TLS")
            rule, why = self._expected_rule(host, r.method, rules.split_target(r.target))
            if not r.target.startswith("/") or rule is None:
                out.append(Violation("origin_request_unlisted",
                                     f"{r} reached {where} in TLS: {why or 'not origin-form'}"))
            self.used_tls_reqs[(host, c.port)] += 1
            if self.used_tls_reqs[(host, c.port)] > self.allow_req_by_host[(host, c.port)] + \
                    self.retry_tls[(host, c.port)]:
                out.append(Violation("origin_request_without_allow",
                                     f"request {self.used_tls_reqs[(host, c.port)]} for {host}:{c.port} reached "
                                     f"{where} in TLS, {self.allow_req_by_host[(host, c.port)]} allow request lines"))
            if c.local not in self._given(host):
                out.append(Violation("origin_request_wrong_address", f"{r} reached {where}, not an address of {host}"))
            creds = [v for k, v in r.headers if k == rules.CRED_HEADER.lower()]
            if rules.has_credential(host, c.port, True):
                if self.secret and creds != [f"Bearer {self.secret.decode()}"]:
                    out.append(Violation("credential_wrong", f"{r} reached {where} with {rules.CRED_HEADER} "
                                         f"{['<the secret>' if self.secret.decode() in v else v for v in creds]}"))
            elif self.secret and self.secret in c.data:
                out.append(Violation("secret_leaked", f"{where} ({host}) got the secret of another host"))
            if r.complete:
                key = (host, r.method, r.target, _body_key(r.body))
                self.got_reqs[key] += 1
                if self.got_reqs[key] > self.sent_reqs[key] + self.retry_keys[key]:
                    out.append(Violation("origin_request_not_sent",
                                         f"{r} reached {where} {self.got_reqs[key]} time(s); clients sent it "
                                         f"{self.sent_reqs[key]} time(s) in tunnels"))
        return out

    # --- sessions (sess.py is the model) ---------------------------------------
    def _check_session_line(self, l):
        """A decision line on its own: an auth refusal is a refusal."""
        if l.get("reason") in AUTH_REASONS and l.get("decision") != "deny":
            return [Violation("auth_not_refused", str(l))]
        return []

    def _check_session_config(self, l):
        """A client's decision line against the case's sessions: a session
        only the config has (and not expired), none on a gate without
        sessions, none on an allowed anonymous request where credentials are
        required. (Judged per client: a canary's line may have been decided
        under the config before the case's.)"""
        out = []
        name = l.get("session")
        if self.sess is None:
            if name is not None or l.get("reason") in AUTH_REASONS:
                out.append(Violation("session_field", f"a gate without [sessions] wrote: {l}"))
            return out
        s = self.sess.by_name.get(name) if name is not None else None
        if name is not None and (s is None or s.get("expired")):
            out.append(Violation("session_unknown", f"a line names a session the gate has not (or expired): {l}"))
        if l.get("decision") == "allow" and name is None and self.sess.require:
            out.append(Violation("auth_bypassed", f"an anonymous request was allowed, though [sessions] "
                                 f"require = yes: {l}"))
        return out

    def _check_no_proxy_auth(self, r, where):
        pa = [v for k, v in r.headers if k == "proxy-authorization"]
        if pa:
            return [Violation("proxy_auth_forwarded", f"{r} reached {where} with Proxy-Authorization "
                              f"{[v[:40] for v in pa]}")]
        return []

    def _mention(self, data, start, end, label):
        for m in _NAMES.finditer(data, start, end):
            n = m.group(0).decode("latin-1").lower()
            # with the session whose zone it is now: its DNS query may come after the next case's reload
            z = sess.zone_of(n)
            self.mentions.setdefault(n, {"owner:" + str(self.sess.owner.get(z) or "") if z is not None else "owner:"})
            self.mentions[n].add(label)
            self.mentions.move_to_end(n)
        while len(self.mentions) > 20000:
            self.mentions.popitem(last=False)

    def _session_model(self, sent):
        """What each request of a client's stream comes to, in order, up to
        the first refusal (after it the gate reads nothing more): [(request,
        expected, bound session before it)]; and the names it mentions
        noted by how they were asked for."""
        reqs, status, end = parse_requests(sent)
        model, bound, failed_at = [], None, None
        pos = 0
        for q in reqs:
            a, b = q.span
            self._mention(sent, pos, a, "?")      # a body: nothing the gate resolves
            exp = sess.expected(self.sess, [v for k, v in q.headers if k == "proxy-authorization"], bound)
            model.append((q, exp, bound))
            if exp[0] == "fail":
                failed_at = a
                break
            self._mention(sent, a, b, "anon" if exp[0] == "anon" else "S:" + exp[1])
            bound = exp[1] if exp[0] == "ok" else bound
            pos = b
            if q.method == "CONNECT":
                return model      # what follows is the tunnel's
        if failed_at is not None:
            self._mention(sent, failed_at, len(sent), "bad")
        else:
            self._mention(sent, pos, len(sent), "?")
        return model

    def _check_session_client(self, r, mine):
        """A client's lines against the model of its credentials: each
        request the one the model says (a refusal 407 with its reason, as
        the connection's session, naming what it claimed), every line of a
        session's with credentials the client sent for it, the 407 replies
        with Proxy-Authenticate, and nothing decided after a refusal."""
        out = []
        sent = bytes(getattr(r, "sent", b"") or b"")
        model = self._session_model(sent)
        lines = sorted((self.decisions[lid] for lid in mine), key=lambda l: l.get("seq", 0))
        valid = self.sess.valid_creds()
        for l in lines:
            name = l.get("session")
            if name is not None and name in valid and valid[name].split(" ", 1)[1].encode() not in sent:
                out.append(Violation("session_without_credential", f"client :{r.local_port} never sent "
                                     f"{name}'s credentials: {l}"))
        refused = [i for i, l in enumerate(lines) if l.get("reason") in AUTH_REASONS]
        if refused and refused[0] < len(lines) - 1:
            out.append(Violation("after_refusal", f"client :{r.local_port}: decided after its 407: "
                                 f"{lines[refused[0] + 1:refused[0] + 3]}"))
        for (q, exp, bound), l in zip(model, lines):
            if l.get("reason") == "bad_request":
                break     # the gate's parser refused what ours read
            m = _ABSOLUTE.match(q.target)
            host = norm_host(m.group(1)) if m else norm_host(split_host_header(q.target)[0])
            if l.get("method") != q.method or norm_host(l.get("host", "")) != host:
                break     # not the request we think it is
            self.sess_stats["paired_" + exp[0]] += 1
            if exp[0] == "fail":
                if l.get("decision") == "allow":
                    out.append(Violation("auth_not_refused", f"client :{r.local_port}: a request whose "
                                         f"credentials come to {exp[1]} was allowed: {l}"))
                elif l.get("reason") != exp[1]:
                    out.append(Violation("auth_reason", f"client :{r.local_port}: the request should be "
                                         f"refused {exp[1]} (first in the decision): {l}"))
                if l.get("session") != bound:
                    out.append(Violation("session_wrong", f"client :{r.local_port}: the refusal's line should be "
                                         f"the connection's ({bound!r}): {l}"))
                if exp[1] == "auth_failed":
                    vals = [v for k, v in q.headers if k == "proxy-authorization"]
                    claimed = _claimed(vals[0]) if len(vals) == 1 else None
                    want = claimed if claimed is not None and claimed != bound else None
                    printable = want is None or all(0x20 <= ord(ch) < 0x7F for ch in want)
                    if printable and l.get("session_claimed") != want:
                        out.append(Violation("session_claimed", f"client :{r.local_port}: session_claimed "
                                             f"should be {want!r}: {l}"))
            else:
                want = exp[1] if exp[0] == "ok" else None
                if l.get("session") != want or l.get("reason") in AUTH_REASONS:
                    out.append(Violation("session_wrong", f"client :{r.local_port}: the request's credentials "
                                         f"come to {exp}: {l}"))
            if l.get("decision") != "allow":
                break
        # Every 407 with its challenge; every refusal's 407 reached a client that read to the end.
        got = bytes(r.received)
        for m in _407.finditer(got):
            head = m.group(0)
            if sess.REALM not in head or not re.search(rb"\r\nSluice-Decision: deny; reason=auth_(required|failed)\r\n",
                                                       head):
                out.append(Violation("auth_reply", f"client :{r.local_port} got a 407 without "
                                     f"Proxy-Authenticate: Basic realm=\"sluice\" or its reason: {head[:300]!r}"))
        if refused and r.outcome == "eof" and getattr(r, "tls", None) is None and \
                int(getattr(r, "stop_read", -1)) < 0 and not _407.search(got):
            out.append(Violation("auth_reply", f"client :{r.local_port} read to the end and got no 407 for "
                                 f"{lines[refused[0]]}: {got[:300]!r}"))
        return out

    def check_tokens(self, results, conns, hits, tokens):
        """No log line and no byte a client got has a token or credential
        (unless a client put it where it is no credential, or an origin got
        it: a tunnel's payload comes back from an echo)."""
        out = []
        exposed = set()
        for r in results:
            for sent in (getattr(r, "sent", b""), getattr(r, "plain_sent", b"")):
                bare = _PA_LINE.sub(b"", bytes(sent or b""))
                exposed |= {t for t in tokens if t in bare}
        echoed = {t for t in tokens for c in conns if t in c.data}
        for n, t, raw in hits:
            if t not in exposed:
                out.append(Violation("token_leaked", f"decisions.log:{n} has a token or credential "
                                     f"({t[:6]!r}...): {raw.replace(t, b'<TOKEN>')[:400]!r}"))
        for r in results:
            for got in (r.received, getattr(r, "plain", None) or b""):
                for t in tokens:
                    if t in got and t not in exposed and t not in echoed:
                        i = got.find(t)
                        out.append(Violation("token_leaked", f"client :{r.local_port} got a token or credential: "
                                             f"...{bytes(got[max(0, i - 200):i])!r}<TOKEN>"))
        return out

    def check_session_dns(self, qs):
        """A name DNS was asked: not one only refused requests named (an
        auth refusal is first in the decision), and a session zone's only
        on its session's behalf."""
        out = []
        for name, qtype in qs:
            labels = set(self.mentions.get(name.lower().rstrip("."), ()))
            owner = [x[6:] for x in labels if x.startswith("owner:")]
            labels -= {"owner:" + o for o in owner}
            if not labels or "?" in labels or name in self.cname_targets or name in CANARY_NAMES:
                continue     # (the canaries ask for theirs all the time)
            if labels == {"bad"}:
                out.append(Violation("dns_for_refused", f"{qtype} {name}: only requests the gate must refuse "
                                     f"(credentials) named it"))
                continue
            if sess.zone_of(name) is not None and "S:" + owner[0] not in labels:
                out.append(Violation("dns_cross_session", f"{qtype} {name}: asked for by {sorted(labels)}; "
                                     f"only {owner[0] or None!r} has its zone"))
        return out

    # --- what DNS was asked ------------------------------------------------------
    def check_dns(self):
        out = []
        qs = self.dns.queries[self.dns_seen:]
        self.dns_seen = len(self.dns.queries)
        for name, qtype in qs:
            if never_listed(name) and name not in self.cname_targets:
                out.append(Violation("dns_asked_for_unlisted_name", f"{qtype} {name}"))
        return out + self.check_session_dns(qs)


def signature(lines, results, origin_conns, stderr_text):
    """A case's behaviour, coarsely: for runs without coverage, and stats."""
    sig = set()
    for l in lines:
        if l.get("event") == "decision":
            sig.add(("d", l.get("decision"), l.get("reason"), l.get("method") == "CONNECT"))
        elif l.get("event") == "close":
            sig.add(("c", l.get("end")))
        elif l.get("event") == "request":
            sig.add(("r", l.get("decision"), l.get("reason"), l.get("status")))
    for r in results:
        sig.add(("o", r.outcome))
        if getattr(r, "tls", None) is not None:
            sig.add(("t", r.tls.get("state"), bool(r.tls.get("read_error")), bool(r.tls.get("cut"))))
        for code in _STATUS.findall(bytes(r.received[:65536]))[:4]:
            sig.add(("s", code.decode()))
    for c in origin_conns:
        sig.add(("u", c.port in net.HTTP_PORTS, bool(c.data), c.eof,
                 None if c.tls is None else (c.tls.get("cert"), c.tls.get("hs_done"))))
    for line in stderr_text.splitlines():
        if line.startswith("sluice:"):
            sig.add(("e", re.sub(r"[0-9a-f]{6,}|\d+", "N", line)[:100]))
    return sig
