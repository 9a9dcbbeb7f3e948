"""The checks can fail: each scenario runs sluice with a policy or an origin
that breaks one property on purpose and requires the checks to say so.
(A check that passes everything would make a clean fuzzing run mean
nothing.) run.py --self-test runs them all."""

import copy
import subprocess
from pathlib import Path

from . import checks, plumbing, rules, sess
from . import daemon as daemon_mod
from .gen import NONCE, POISON
from .harness import Runner, case_id
from .http import parse_requests
from .rules import BODIES, PINS
from .origins import OriginConn

OK_NAME = f"h0-{NONCE}.ok.fuzz.test"
NO_NAME = f"h0-{NONCE}.no.fuzz.test"
I1_NAME = f"h0-{NONCE}.i1.fuzz.test"
I2_NAME = f"h0-{NONCE}.i2.fuzz.test"


def _get(name, extra=""):
    return {"start_ms": 0, "data": f"GET http://{name}/st HTTP/1.1\r\nHost: {name}\r\n{extra}\r\n",
            "bulk": 0, "writes": [], "end": {"kind": "hold", "at": None, "ms": 0}, "stop_read": -1,
            "rcvbuf": 0, "wait_ms": 600}


def _dns(name, addr):
    return {name: {"A": [{"rcode": 0, "an": [{"t": "A", "name": "@", "addr": addr, "ttl": 0}]}],
                   "AAAA": [{"rcode": 0, "an": []}]}}


def _tunnel(name, plain):
    return {"start_ms": 0, "data": f"CONNECT {name}:443 HTTP/1.1\r\nHost: {name}:443\r\n\r\n", "bulk": 0,
            "writes": [], "end": {"kind": "hold", "at": None, "ms": 0}, "stop_read": -1, "rcvbuf": 0,
            "wait_ms": 600, "tls": {"host": name, "sni": "@", "alpn": ["http/1.1"], "records": 1, "raw": None,
                                    "data": plain, "writes": [], "cut": None, "notify": False}}


def _tls_origin(ops, cert="good"):
    return [{"tls": {"cert": cert}, "ops": ops}]


def _case(clients, dns, origins=None):
    c = {"v": 1, "seed": 0, "origin": "selftest", "k": 0, "clients": clients, "dns": dns,
         "origins": origins or {}}
    c["id"] = case_id(c)
    return c


# The gate's rules with /pin/a.tgz not pinned: the model still pins it.
UNPINNED_A = rules.ALLOWLIST.replace(f"/pin/a.tgz {PINS[0][2][0]}", "/pin/a.tgz")


# Sessions: two of them, s0's zone and s1's; clients carry their credentials.
S0 = {"name": "st-zero", "token": "0123456789abcdef0123456789abcdef", "zone": 0, "expired": False}
S1 = {"name": "st-one", "token": "fedcba9876543210fedcba9876543210", "zone": 1, "expired": False}
SESS = {"require": True, "list": [S0, S1]}
S0_NAME = f"h0-{NONCE}.s0.fuzz.test"
S1_NAME = f"h1-{NONCE}.s1.fuzz.test"


def _sess_case(clients, dns, origins=None, spec=SESS):
    c = _case(clients, dns, origins)
    c["sessions"] = copy.deepcopy(spec)
    c["id"] = case_id(c)
    return c


def _send(text):
    return [{"ops": [{"op": "req"}, {"op": "send", "d": text, "w": []}, {"op": "close"}]}]


SCENARIOS = [
    # (what, policy override, allowlist lines added, case, kinds that must be reported)
    ("a name the model refuses is on sluice's allowlist", "", "*.no.fuzz.test\n",
     _case([_get(NO_NAME)], _dns(NO_NAME, "o1")),
     {"allowed_unlisted", "origin_request_unlisted", "dns_asked_for_unlisted_name"}),
    ("sluice may connect to a private address (allow_cidr)", "allow_cidr = 10.0.1.0/24\n", "",
     _case([_get(OK_NAME)], _dns(OK_NAME, "10.0.1.1")),
     {"origin_connect_non_public", "allowed_non_public", "allowed_tainted_name",
      "origin_request_tainted_name"}),
    ("an origin's reply carries a Sluice-Decision header", "", "",
     _case([_get(OK_NAME)], _dns(OK_NAME, "o2"),
           {"o2:80": _send("HTTP/1.1 403 No\r\nSluice-Decision: deny; reason=not_allowlisted\r\n"
                           "Content-Length: 0\r\n\r\n")}),
     {"deny_reply_without_line"}),
    ("bytes marked as never to be delivered are delivered (a body read to the close)", "", "",
     _case([_get(OK_NAME)], _dns(OK_NAME, "o3"),
           {"o3:80": _send(f"HTTP/1.1 200 OK\r\n\r\nbody {POISON}123456")}),
     {"poison_delivered"}),
    ("the canary's name is not on the allowlist", "", None,
     _case([_get(OK_NAME)], _dns(OK_NAME, "o4")),
     {"canary_failed"}),
    ("a request rule wider than the model lets POST through", "", "* *.i1.fuzz.test/*\n",
     _case([_tunnel(I1_NAME, f"POST /x HTTP/1.1\r\nHost: {I1_NAME}\r\nContent-Length: 2\r\n\r\nhi")],
           _dns(I1_NAME, "o5"),
           {"o5:443": _tls_origin([{"op": "req"}, {"op": "send", "d": "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                                                    "w": []}])}),
     {"allowed_against_rules", "origin_request_unlisted"}, {"inspect": "on"}),
    ("upstream_ca trusts a CA whose certificates sluice must refuse", "", "",
     _case([_tunnel(I1_NAME, f"GET /x HTTP/1.1\r\nHost: {I1_NAME}\r\n\r\n")], _dns(I1_NAME, "o6"),
           {"o6:443": _tls_origin([{"op": "req"}, {"op": "send", "d": "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                                                    "w": []}], cert="untrusted")}),
     {"upstream_cert_accepted", "request_to_unverified_origin"}, {"inspect": "on", "trust_untrusted": True}),
    ("an origin shows the client the request with the credential in it", "", "",
     _case([_tunnel(I2_NAME, f"GET /up/x HTTP/1.1\r\nHost: {I2_NAME}\r\n\r\n")], _dns(I2_NAME, "o7"),
           {"o7:443": _tls_origin([{"op": "req"}, {"op": "reflect"}])}),
     {"secret_leaked"}, {"inspect": "on"}),
    ("a gate that does not pin a pinned path lets a Range request, the client's Accept-Encoding and a wrong or "
     "unframed body through", "", "",
     _case([_tunnel(I1_NAME, f"GET /pin/a.tgz HTTP/1.1\r\nHost: {I1_NAME}\r\nRange: bytes=0-3\r\n"
                             f"Accept-Encoding: gzip\r\n\r\nGET /pin/a.tgz HTTP/1.1\r\nHost: {I1_NAME}\r\n\r\n")],
           _dns(I1_NAME, "o8"),
           {"o8:443": _tls_origin([{"op": "req"}, {"op": "send", "d": "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake",
                                                    "w": []},
                                   {"op": "req"}, {"op": "send", "d": "HTTP/1.1 200 OK\r\n\r\nto the close", "w": []},
                                   {"op": "close"}])}),
     {"pin_mismatch_delivered", "pin_range_reached_origin", "pin_accept_encoding", "pin_unverifiable_delivered"},
     {"inspect": "on", "rules_text": UNPINNED_A}),
    ("the same as plain HTTP", "", "",
     _case([dict(_get(I1_NAME, "Range: bytes=0-3\r\nAccept-Encoding: gzip\r\n"),
                 data=f"GET http://{I1_NAME}/pin/a.tgz HTTP/1.1\r\nHost: {I1_NAME}\r\nRange: bytes=0-3\r\n"
                      f"Accept-Encoding: gzip\r\n\r\n")],
           _dns(I1_NAME, "o9"), {"o9:80": _send("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake")}),
     {"pin_mismatch_delivered", "pin_range_reached_origin", "pin_accept_encoding"},
     {"inspect": "on", "rules_text": UNPINNED_A}),
    ("a gate that streams a pinned body (pin_hold_kib = 0) lets the start of a wrong one (its first byte) through", "", "",
     _case([_tunnel(I1_NAME, f"GET /pin/big HTTP/1.1\r\nHost: {I1_NAME}\r\n\r\n")], _dns(I1_NAME, "o10"),
           {"o10:443": _tls_origin([
               {"op": "req"},
               {"op": "send", "d": f"HTTP/1.1 200 OK\r\nContent-Length: {len(BODIES['big'])}\r\n\r\n"
                                   + "X" + BODIES["big"][1:-10].decode(), "w": []},
               {"op": "sleep", "ms": 200}, {"op": "send", "d": BODIES["big"][-10:].decode(), "w": []}])}),
     {"pin_held_body_leaked"}, {"inspect": "on", "pin_hold_kib": 0}),
    ("a gate that does not require credentials where the model does (require = no)", "", "",
     _sess_case([_get(OK_NAME)], _dns(OK_NAME, "o11"), {"o11:80": _send("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")}),
     {"auth_bypassed", "auth_not_refused", "dns_for_refused"}, {"sess_break": "require_no"}),
    ("a gate that takes a wrong token (its token_sha256 is of another)", "", "",
     _sess_case([_get(OK_NAME, f"Proxy-Authorization: {sess.cred(S0['name'], S0['token'] + '0')}\r\n")],
                _dns(OK_NAME, "o12"), {"o12:80": _send("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")}),
     {"session_without_credential", "auth_not_refused", "dns_for_refused"}, {"sess_break": "hash"}),
    ("a session's own list has another session's zone", "", "",
     _sess_case([dict(_get(S1_NAME, f"Proxy-Authorization: {sess.cred(S0['name'], S0['token'])}\r\n"),
                      data=f"GET http://{S1_NAME}/st HTTP/1.1\r\nHost: {S1_NAME}\r\n"
                           f"Proxy-Authorization: {sess.cred(S0['name'], S0['token'])}\r\n\r\n")],
                _dns(S1_NAME, "o13"), {"o13:80": _send("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")}),
     {"session_cross_host", "session_cross_origin", "dns_cross_session"}, {"sess_break": "cross"}),
    ("an origin's reply carries a session's token", "", "",
     _sess_case([dict(_get(S0_NAME), data=f"GET http://{S0_NAME}/st HTTP/1.1\r\nHost: {S0_NAME}\r\n"
                                         f"Proxy-Authorization: {sess.cred(S0['name'], S0['token'])}\r\n\r\n")],
                _dns(S0_NAME, "o14"),
                {"o14:80": _send(f"HTTP/1.1 200 OK\r\nContent-Length: 32\r\n\r\n{S1['token']}")}),
     {"token_leaked"}, {}),
]


class _Dns:
    """What the oracle asks of the DNS server, for the checks without sluice."""
    def __init__(self, given):
        self.given = given
        self.queries = []

    def taint(self, name, port):
        return set()


def _oracle_for(name, addr, secret):
    o = checks.Oracle(_Dns({name: {addr}}), secret, rules.rule_line_numbers(daemon_mod.ALLOWLIST + rules.ALLOWLIST))
    return o


def pure_inspect_checks():
    """The inspection checks on made-up log lines and connections: each
    breaks one property and must be reported."""
    fails = []
    secret = "fzS3cr3tSELFTEST"
    name, addr = "h0-abcdef.i2.fuzz.test", "11.0.1.10"
    tunnel = {"event": "decision", "id": "t1", "client": "127.0.0.1:40000", "method": "CONNECT", "host": name,
              "port": 443, "decision": "allow", "reason": "inspected", "addr": addr}
    line2 = rules.rule_line_numbers(daemon_mod.ALLOWLIST + rules.ALLOWLIST)[
        [i for i, r in enumerate(rules.RULES) if r[0] == "i2.fuzz.test" and r[2] == "/up/*"][0]]
    req = {"event": "request", "id": "t1", "n": 1, "method": "GET", "host": name, "path": "/up/x",
           "decision": "allow", "reason": "rule", "rule": f"allowlist.txt:{line2}", "credential": "fz", "status": 200}
    head = f"GET /up/x HTTP/1.1\r\nHost: {name}\r\nAuthorization: Bearer {secret}\r\n\r\n".encode()

    def conn(data, tls=True, port=443):
        c = OriginConn(None, addr, port, None, 1)
        c.data = bytearray(data)
        if tls:
            c.tls = {"cert": "good", "hs_done": True, "sni": name, "alpn": "http/1.1", "version": "TLSv1.2",
                     "cipher": ("ECDHE-ECDSA-AES128-GCM-SHA256", "TLSv1.2", 128)}
        return c

    def kinds(o, lines=(), conns=(), clients=()):
        o._note_bodies(fake)     # what an origin sent: the bodies integrity_mismatch lines may name
        got = {v.kind for v in o.add_lines(list(lines))}
        for r in clients:
            got |= {v.kind for v in o.check_client(r)}
        for c in conns:
            got |= {v.kind for v in o.check_origin(c)}
        got |= {v.kind for v in o.check_pin_lines(final=True)}
        return got

    class _Client:
        def __init__(self, sent):
            self.local_port, self.received, self.plain, self.plain_sent = 40000, bytearray(), bytearray(), sent
            self.tls = {"state": "done", "version": "TLSv1.2", "cipher": ("ECDHE-ECDSA-AES128-GCM-SHA256",),
                        "alpn": None}
            self.tunnel_host, self.outcome = name, "eof"

    sent = _Client(bytearray(f"GET /up/x HTTP/1.1\r\nHost: {name}\r\n\r\n".encode()))
    expired = conn(b"")
    expired.tls["cert"] = "expired"
    tls13 = _Client(bytearray())
    tls13.tls["version"] = "TLSv1.3"
    answered = _Client(bytearray())
    answered.plain = bytearray(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    failed = dict(tunnel, decision="deny", reason="upstream_tls_failed", detail="upstream TLS: expired")
    resumed = _Client(bytearray())
    resumed.tls.update(resumed=True, offered_session_of="h9-abcdef.i1.fuzz.test")
    two = _Client(bytearray(f"GET /up/x HTTP/1.1\r\nHost: {name}\r\n\r\n".encode() * 2))
    two.plain = bytearray(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" * 2)
    # A pinned body that failed its digest: the origin sent "fake" for /pin/b.tgz.
    pin_digests = PINS[1][2]
    lines = rules.rule_line_numbers(daemon_mod.ALLOWLIST + rules.ALLOWLIST)
    pin_req = dict(req, path="/pin/b.tgz", host=name.replace(".i2.", ".i1."), decision="deny",
                   reason="integrity_mismatch", status=200, end="integrity_mismatch", expected=" ".join(pin_digests),
                   actual=rules.actual_of(pin_digests, b"fake"), rule=f"allowlist.txt:{lines[1]}", credential=None)
    many = [p for p in PINS if p[1] == "/pin/many-cut"][0][2]
    fits = 0
    while len(" ".join(many[:fits + 1])) < 3000 - 2:
        fits += 1
    many_req = dict(pin_req, path="/pin/many-cut", rule=f"allowlist.txt:{lines[[p[1] for p in PINS].index('/pin/many-cut')]}",
                    expected=" ".join(many[:fits]), expected_more=len(many) - fits,
                    actual=rules.actual_of(many, b"fake"), id="t2")
    pin_tunnel = dict(tunnel, id="t2", host=name.replace(".i2.", ".i1."))
    pin_req["id"] = "t2"
    fake = conn(f"GET /pin/b.tgz HTTP/1.1\r\nHost: {pin_tunnel['host']}\r\nAccept-Encoding: identity\r\n\r\n".encode())
    fake.tls["sni"] = pin_tunnel["host"]
    fake.sent = bytearray(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfake")
    def pinned_client(body, whole=False):
        """A client of pin_tunnel that asked for /pin/b.tgz and got this much
        of a body of 1,500 bytes (or a whole one)."""
        c = _Client(bytearray(f"GET /pin/b.tgz HTTP/1.1\r\nHost: {pin_tunnel['host']}\r\n\r\n".encode()))
        c.tunnel_host = pin_tunnel["host"]
        c.plain = bytearray(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body) if whole else 1500, body))
        return c

    cases = [
        ("a clean tunnel", [tunnel, req], [conn(head)], [sent], set()),
        ("a clean integrity_mismatch line", [pin_tunnel, pin_req], [], [], set()),
        ("integrity_mismatch without the rule's digests as expected",
         [pin_tunnel, dict(pin_req, expected=" ".join(reversed(pin_digests)))], [], [], {"pin_line_expected"}),
        ("integrity_mismatch whose expected is cut short",
         [pin_tunnel, dict(pin_req, expected=pin_digests[0])], [], [], {"pin_line_expected_cut"}),
        ("integrity_mismatch for 40 digests, expected_more counting what does not fit", [pin_tunnel, many_req], [],
         [], set()),
        ("integrity_mismatch for 40 digests, cut without expected_more",
         [pin_tunnel, dict(many_req, expected_more=None)], [], [], {"pin_line_expected_cut"}),
        ("integrity_mismatch that does not name the pinning rule",
         [pin_tunnel, dict(pin_req, rule=f"allowlist.txt:{lines[-1]}")], [], [], {"pin_line_rule"}),
        ("a pinned body cut short, its start right", [pin_tunnel], [], [pinned_client(BODIES["b1"][:700])], set()),
        ("a pinned body cut short, its start wrong (it should have been held)", [pin_tunnel], [],
         [pinned_client(b"fake")], {"pin_held_body_leaked"}),
        ("a whole wrong body for a pinned path", [pin_tunnel], [], [pinned_client(b"fake", whole=True)],
         {"pin_mismatch_delivered"}),
        ("integrity_mismatch whose actual names other algorithms",
         [pin_tunnel, dict(pin_req, actual=rules.sri("sha256", b"fake"))], [], [], {"pin_line_actual"}),
        ("integrity_mismatch whose actual is no body an origin sent",
         [pin_tunnel, dict(pin_req, actual=rules.actual_of(pin_digests, b"never sent"))], [], [], {"pin_line_actual"}),
        ("integrity_mismatch for the pinned body itself",
         [pin_tunnel, dict(pin_req, actual=rules.actual_of(pin_digests, BODIES["b1"]))], [], [], {"pin_false_mismatch"}),
        ("integrity_unverifiable for a path no rule pins",
         [pin_tunnel, dict(pin_req, path="/pin/b.tgzx", reason="integrity_unverifiable")], [], [],
         {"pin_line_unpinned"}),
        ("a request sent once reaches the origin twice", [tunnel, req, dict(req, n=2)], [conn(head * 2)], [sent],
         {"origin_request_not_sent"}),
        ("a request line for no tunnel", [dict(req, id="t9")], [], [], {"request_without_tunnel"}),
        ("a request the rules refuse is logged as allowed", [tunnel, dict(req, path="/other")], [], [],
         {"allowed_against_rules"}),
        ("an ambiguous path allowed", [tunnel, dict(req, path="/up/%2e%2e/x")], [], [], {"allowed_against_rules"}),
        ("a request the rules allow is refused", [tunnel, dict(req, decision="deny", reason="rule_not_matched",
                                                               suggest="", rule=None, credential=None)],
         [], [], {"refused_against_rules"}),
        ("the credential is missing at the origin", [tunnel, req],
         [conn(head.replace(f"Authorization: Bearer {secret}\r\n".encode(), b""))], [sent], {"credential_wrong"}),
        ("the secret on a plain connection", [], [conn(head, tls=False, port=8443)], [], {"credential_in_clear"}),
        ("a plain-HTTP request to i2 carries an Authorization header", [],
         [conn(f"GET /up/x HTTP/1.1\r\nHost: {name}\r\nAuthorization: x\r\n\r\n".encode(), tls=False, port=80)],
         [], {"credential_header_in_clear"}),
        ("an origin with a bad certificate finished the handshake", [tunnel], [expired], [],
         {"upstream_cert_accepted"}),
        ("the gate agreed to TLS 1.3 with a client", [], [], [tls13], {"client_tls_params"}),
        ("a tunnel whose origin failed TLS answers 200 inside", [failed], [], [answered],
         {"upstream_tls_failed_not_502"}),
        ("a tunnel resumed another host's session", [], [], [resumed], {"resumed_across_hosts"}),
        ("two answers in a tunnel with one request line",
         [tunnel, req, {"event": "close", "id": "t1", "end": "client_eof"}], [], [two],
         {"answer_without_request_line"}),
    ]
    for what, lines, conns, clients, want in cases:
        lines = [{k: v for k, v in l.items() if v is not None} for l in lines]
        got = kinds(_oracle_for(name, addr, secret), lines, conns, clients)
        if (want and not want <= got) or (not want and got):
            fails.append(f"inspection check '{what}': wanted {sorted(want) or 'nothing'}, got {sorted(got)}")
        else:
            print(f"fuzz-daemon: self-test: {what}: reported {sorted(got)}: ok", flush=True)
    return fails


def pure_session_checks():
    """The session checks on made-up lines, replies and connections: each
    breaks one property and must be reported."""
    fails = []
    cfg = sess.Config(SESS)
    name = "h0-abcdef.s0.fuzz.test"
    c0 = sess.cred(S0["name"], S0["token"])
    c1 = sess.cred(S1["name"], S1["token"])

    def req(creds, host=name):
        return f"GET http://{host}/x HTTP/1.1\r\nHost: {host}\r\n{creds}\r\n"

    def line(i, **kw):
        l = {"event": "decision", "id": f"p{i}", "seq": i, "client": "127.0.0.1:41000", "method": "GET",
             "host": name, "port": 80, "decision": "allow", "reason": "allowlisted", "addr": "11.0.1.10"}
        l.update(kw)
        return {k: v for k, v in l.items() if v is not None}

    class _C:
        def __init__(self, sent, got=b"", outcome="eof"):
            self.local_port, self.sent, self.received, self.outcome = 41000, sent, bytearray(got), outcome

    r407 = (b"HTTP/1.1 407 Proxy Authentication Required\r\nSluice-Decision: deny; reason=auth_failed\r\n"
            b'Proxy-Authenticate: Basic realm="sluice"\r\nContent-Length: 0\r\n\r\n')
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    switched = (req(f"Proxy-Authorization: {c0}\r\n") + req(f"Proxy-Authorization: {c1}\r\n")).encode()
    good = [line(1, session=S0["name"]), {"event": "close", "id": "p1", "session": S0["name"], "end": "done"},
            line(2, session=S0["name"], decision="deny", reason="auth_failed", session_claimed=S1["name"])]

    def conn(data):
        c = OriginConn(None, "11.0.1.10", 80, None, 1)
        c.data = bytearray(data)
        return c

    cases = [
        ("a keep-alive connection that switched sessions, refused", good, [_C(switched, ok + r407)], [], [], set()),
        ("a close line without its connection's session",
         [good[0], dict(good[1], session=None)], [_C(switched[:len(switched) // 2], ok)], [], [], {"session_field"}),
        ("a switched keep-alive connection allowed on", [good[0], good[1], dict(good[2], decision="allow",
                                                                                reason="allowlisted")],
         [_C(switched, ok + ok)], [], [], {"auth_not_refused"}),
        ("a refusal naming no claimed session", [good[0], good[1], dict(good[2], session_claimed=None)],
         [_C(switched, ok + r407)], [], [], {"session_claimed"}),
        ("a request decided after the refusal", good + [line(3, session=S0["name"])],
         [_C(switched + req(f"Proxy-Authorization: {c0}\r\n").encode(), ok + r407)], [], [], {"after_refusal"}),
        ("a 407 without Proxy-Authenticate", good,
         [_C(switched, ok + r407.replace(b'Proxy-Authenticate: Basic realm="sluice"\r\n', b""))], [], [],
         {"auth_reply"}),
        ("an origin got Proxy-Authorization", [], [], [conn(req(f"Proxy-Authorization: {c0}\r\n").encode())], [],
         {"proxy_auth_forwarded"}),
        ("a log line with a token", [], [], [], [(1, S0["token"].encode(), b'{"x":"' + S0["token"].encode() + b'"}')],
         {"token_leaked"}),
        ("a line naming a session on a gate without sessions", [line(1, session=S0["name"])],
         [_C(req(f"Proxy-Authorization: {c0}\r\n").encode(), ok)], [], [],
         {"session_field"}),
    ]
    for what, lines, clients, conns, hits, want in cases:
        o = checks.Oracle(_Dns({name: {"11.0.1.10"}}))
        o.sess = None if "without sessions" in what else cfg
        got = {v.kind for v in o.add_lines(copy.deepcopy(lines))}
        for r in clients:
            got |= {v.kind for v in o.check_client(r)}
        for c in conns:
            got |= {v.kind for v in o.check_origin(c)}
        got |= {v.kind for v in o.check_tokens(clients, conns, hits, {t.encode() for t in cfg.secrets()})}
        got -= {"origin_conn_without_allow", "origin_request_without_allow", "origin_request_wrong_address",
                "session_cross_origin"} if conns else set()
        if (want and not want <= got) or (not want and got):
            fails.append(f"session check '{what}': wanted {sorted(want) or 'nothing'}, got {sorted(got)}")
        else:
            print(f"fuzz-daemon: self-test: {what}: reported {sorted(got)}: ok", flush=True)
    return fails


def pure_checks():
    """The parts that need no daemon: the origin-side parser finds a
    desync, the log reader finds a broken chain."""
    fails = []
    reqs, status, _ = parse_requests(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nokGARBAGE\r\n\r\n")
    if len(reqs) != 1 or not status.startswith("bad"):
        fails.append(f"parse_requests did not see the bytes after a request as a desync: {status}")
    reqs, status, _ = parse_requests(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                                     b"2\r\nok\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n")
    if [r.host for r in reqs] != ["a", "b"] or status != "ok":
        fails.append(f"parse_requests misread a chunked body and a second request: {reqs} {status}")
    return fails


def tampered_log_fails(path, binary):
    """A copy of a real log with one byte changed must fail the chain, in
    our reader and in `sluice audit --verify`."""
    data = Path(path).read_bytes()
    i = data.find(b'"event":"decision"')
    if i < 0:
        return ["no decision line to tamper with"]
    bad = data[:i + 10] + b"X" + data[i + 11:]
    t = Path(path).with_name("tampered.log")
    t.write_bytes(bad)
    r = daemon_mod.LogReader(t)
    r.poll()
    out = []
    if not r.errors:
        out.append("LogReader accepted a tampered log")
    res = subprocess.run([str(binary), "audit", "--verify", str(t)],
                         capture_output=True, text=True)
    if res.returncode == 0:
        out.append(f"sluice audit --verify accepted a tampered log: {res.stdout} {res.stderr}")
    return out


async def run(o):
    problems = pure_checks() + pure_inspect_checks() + pure_session_checks()
    problems += await plumbing.run(o.workdir)
    if not problems:
        print("fuzz-daemon: self-test: the TLS client and origins work through a plain relay", flush=True)
    base_o = o
    for what, policy, extra, case, want, *opts in SCENARIOS:
        o = copy.copy(base_o)
        o.keep_going = True
        o.raw = True
        for k, v in (opts[0] if opts else {}).items():
            setattr(o, k, v)
        o.policy_extra = policy
        base = daemon_mod.ALLOWLIST
        o.allowlist = base.replace("canary.fuzz.test\n", "") if extra is None else base + extra
        r = Runner(o)
        await r.setup()
        if getattr(o, "inspect", "auto") == "on" and not r.inspect:
            problems.append(f"{what}: this sluice does not inspect")
        try:
            v, _, _ = await r.run_case(copy.deepcopy(case))
            got = {x.kind for x in v}
            missing = want - got
            status = "ok" if not missing else f"MISSED {sorted(missing)}"
            print(f"fuzz-daemon: self-test: {what}: reported {sorted(got)}: {status}", flush=True)
            if missing:
                problems.append(f"{what}: the checks did not report {sorted(missing)} (got {sorted(got)})")
            log = r.daemon.workdir / "decisions.log"
        finally:
            await r.close()
    problems += tampered_log_fails(log, base_o.binary)
    for p in problems:
        print(f"fuzz-daemon: self-test FAILED: {p}", flush=True)
    if not problems:
        print("fuzz-daemon: self-test: every check failed where it had to", flush=True)
    return not problems
