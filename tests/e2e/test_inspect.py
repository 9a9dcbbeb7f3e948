"""Inspection (SPEC part 2: Request rules, Inspection): a CONNECT to a host
that request rules cover is answered by sluice with a leaf of its own CA,
each request inside is parsed, matched and either refused in the tunnel or
forwarded on one kept-alive upstream TLS connection; an upstream whose
certificate fails is never spoken to; plain HTTP to an inspected host is
matched by the same rules; hosts without rules stay opaque tunnels.

The origins are sluicetest/inspecting.py's: each records what it received,
so "nothing reached the origin" is checked on the origin's side."""

import json
import re
import socket
import ssl
import subprocess

import pytest

from sluicetest.checks import assert_refused, shows_line
from sluicetest.client import Conn
from sluicetest.inspectlog import (check_inspected, check_request, requests_of, rule_is, rule_ref, show,
                                   tunnel_line, wait_requests)
from sluicetest.pattern import pattern
from sluicetest.tlsclient import context, tls_through, tunnel

REG = "registry.inspect.test"
READS = f"GET,HEAD {REG}/*"
ANY = f"* {REG}/*"
# OpenSSL's names of the ECDHE suites with AEAD ciphers
ECDHE_AEAD_RE = re.compile(r"^ECDHE-(ECDSA|RSA)-.*(GCM|CHACHA20|CCM)")
# IANA codes of ECDHE AEAD suites (GCM, CCM, ChaCha20-Poly1305, ARIA-GCM,
# Camellia-GCM), and the renegotiation SCSV a client may add
ECDHE_AEAD_CODES = {0xC02B, 0xC02C, 0xC02F, 0xC030, 0xCCA8, 0xCCA9, 0xC0AC, 0xC0AD, 0xC0AE, 0xC0AF,
                    0xC05C, 0xC05D, 0xC060, 0xC061, 0xC086, 0xC087, 0xC08A, 0xC08B}
SCSV = {0x00FF}


def closes(conn, timeout=5.0):
    """Whether the peer ends the (TLS) connection within timeout, with no
    further bytes."""
    conn.sock.settimeout(timeout)
    try:
        data = conn.recv_some()
    except socket.timeout:
        return False
    except (ssl.SSLError, OSError):
        return True
    assert data == b"", f"expected the tunnel to close, got {data[:200]!r}"
    return True


def test_inspected_connect_gets_a_leaf_of_the_gates_ca_and_tls_12_ecdhe_aead_alpn_http11_both_ways(
        sluice_inspecting, inspect_origins):
    o = inspect_origins
    allow = [READS]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca, alpn=("h2", "http/1.1"))
    cert = tsock.getpeercert()      # verified against sluice's CA alone, name checked
    assert ("DNS", REG) in cert.get("subjectAltName", ()), cert
    assert tsock.version() == "TLSv1.2", tsock.version()
    assert ECDHE_AEAD_RE.match(tsock.cipher()[0]), tsock.cipher()
    assert tsock.selected_alpn_protocol() == "http/1.1", "sluice must pick http/1.1 over h2"
    r = conn.request("GET", "/echo?x=1", host=REG)
    assert r.status == 200, r
    doc = json.loads(r.body)
    assert (doc["method"], doc["target"], doc["tls"]) == ("GET", "/echo?x=1", True), doc
    tsock.close()

    d = tunnel_line(s, raw.local_port)
    check_inspected(d, allow, READS, REG)
    [line] = wait_requests(s, d["id"], 1)
    check_request(line, allow, n=1, method="GET", path="/echo", decision="allow", reason="rule",
                  status=200, rule=READS, host=REG)
    s.close_for(d["id"])

    conns = o.wait_closed(mark)
    assert len(conns) == 1, f"one tunnel, one request: the origin saw {conns}"
    c = conns[0]
    assert c.origin == REG and c.handshake == "ok", c
    assert c.hello["sni"] == REG, c.hello
    assert c.hello["alpn"] == ["http/1.1"], f"sluice offered ALPN {c.hello['alpn']} upstream"
    assert set(c.hello["ciphers"]) - SCSV <= ECDHE_AEAD_CODES, \
        f"sluice offered suites other than ECDHE AEAD upstream: {[hex(x) for x in c.hello['ciphers']]}"
    assert c.version == "TLSv1.2" and c.alpn == "http/1.1" and ECDHE_AEAD_RE.match(c.cipher), \
        (c.version, c.alpn, c.cipher)
    assert [(q.method, q.target) for q in c.requests] == [("GET", "/echo?x=1")]


def test_two_requests_in_one_tunnel_share_one_upstream_tls_connection(sluice_inspecting, inspect_origins):
    o = inspect_origins
    allow = [READS]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    r1 = conn.request("GET", "/echo/one", host=REG)
    r2 = conn.request("GET", "/bytes/70000", host=REG)
    assert r1.status == 200 and json.loads(r1.body)["n"] == 1, r1
    assert r2.status == 200 and r2.body == pattern(70000), r2
    tsock.close()
    conns = o.wait_closed(mark)
    assert len(conns) == 1, f"two requests in one tunnel took {len(conns)} upstream connections: {conns}"
    assert [q.target for q in conns[0].requests] == ["/echo/one", "/bytes/70000"]
    d = tunnel_line(s, raw.local_port)
    lines = wait_requests(s, d["id"], 2)
    check_request(lines[0], allow, n=1, method="GET", path="/echo/one", decision="allow", reason="rule",
                  status=200, rule=READS)
    check_request(lines[1], allow, n=2, method="GET", path="/bytes/70000", decision="allow", reason="rule",
                  status=200, rule=READS)
    assert lines[1]["bytes_down"] >= 70000, show(lines)


def test_upstream_that_hung_up_between_requests_is_reconnected_for_the_next(sluice_inspecting,
                                                                           inspect_origins):
    o = inspect_origins
    allow = [READS]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    r1 = conn.request("GET", "/hangup", host=REG)
    assert r1.status == 200 and r1.body == b"hanging up\n", r1
    o.wait_closed(mark)                 # the origin has closed its side
    r2 = conn.request("GET", "/echo/after", host=REG)
    assert r2.status == 200, r2
    tsock.close()
    conns = o.wait_closed(mark)
    assert [[q.target for q in c.requests] for c in conns] == [["/hangup"], ["/echo/after"]], conns
    assert all(c.handshake == "ok" and c.hello["sni"] == REG for c in conns), conns
    d = tunnel_line(s, raw.local_port)
    lines = wait_requests(s, d["id"], 2)
    assert [(l["n"], l["path"], l["status"]) for l in lines] == [(1, "/hangup", 200), (2, "/echo/after", 200)], \
        show(lines)


def test_request_no_rule_allows_is_refused_in_the_tunnel_naming_the_rule_that_would_allow_it(
        sluice_inspecting, inspect_origins):
    o = inspect_origins
    allow = [READS]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    r = conn.request("PUT", "/echo/new", host=REG, body=b"what an agent would upload")
    assert_refused(r, 403, "rule_not_matched")
    assert shows_line(r.text, f"PUT {REG}/echo/new"), f"the body does not show the rule line: {r.text!r}"
    assert closes(conn), "the tunnel stayed open after a refusal"
    d = tunnel_line(s, raw.local_port)
    check_inspected(d, allow, READS, REG)
    [line] = wait_requests(s, d["id"], 1)
    check_request(line, allow, n=1, method="PUT", path="/echo/new", decision="deny",
                  reason="rule_not_matched", status=403, suggest=f"PUT {REG}/echo/new")
    o.wait_closed(mark)
    assert o.requests_since(mark) == [], "a refused request reached the origin"

    # the next tunnel still works
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    r = conn.request("GET", "/echo", host=REG)
    assert r.status == 200, r
    tsock.close()
    assert [q.method for q in o.requests_since(mark)] == ["GET"]


def test_requests_pipelined_after_a_refused_one_never_reach_the_origin(sluice_inspecting, inspect_origins):
    o = inspect_origins
    s = sluice_inspecting(allow=[READS])
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    conn.send(f"DELETE /echo/x HTTP/1.1\r\nHost: {REG}\r\n\r\n"
              f"GET /echo/after HTTP/1.1\r\nHost: {REG}\r\n\r\n".encode())
    r = conn.read_response("DELETE")
    assert_refused(r, 403, "rule_not_matched")
    assert closes(conn), "the tunnel stayed open after a refusal"
    o.wait_closed(mark)
    assert o.requests_since(mark) == [], "a request after the refused one reached the origin"
    d = tunnel_line(s, raw.local_port)
    wait_requests(s, d["id"], 1)
    assert [l["method"] for l in requests_of(s, d["id"])] == ["DELETE"], show(requests_of(s, d["id"]))


def test_first_rule_matching_method_and_path_decides_and_is_logged(sluice_inspecting, inspect_origins):
    allow = [f"GET {REG}/echo/a/*", f"* {REG}/echo/*", READS]
    s = sluice_inspecting(allow=allow)
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    cases = [("GET", "/echo/a/1", allow[0]), ("POST", "/echo/a/1", allow[1]), ("GET", "/echo/b", allow[1]),
             ("HEAD", "/echo/a/1", allow[1]), ("GET", "/bytes/3", allow[2]), ("HEAD", "/bytes/3", allow[2])]
    for method, path, _ in cases:
        r = conn.request(method, path, host=REG, body=b"x" if method == "POST" else None)
        assert r.status == 200, (method, path, r)
    tsock.close()
    d = tunnel_line(s, raw.local_port)
    check_inspected(d, allow, allow[0], REG)        # the first rule covering the host
    lines = wait_requests(s, d["id"], len(cases))
    for i, (line, (method, path, rule)) in enumerate(zip(lines, cases), 1):
        check_request(line, allow, n=i, method=method, path=path, decision="allow", reason="rule",
                      status=200, rule=rule)


def test_plain_entry_for_an_inspected_host_allows_nothing_more_and_check_warns(sluice_inspecting,
                                                                              inspect_origins, sluice_bin):
    o = inspect_origins
    allow = [REG, f"GET {REG}/bytes/*"]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    assert conn.request("GET", "/bytes/5", host=REG).body == pattern(5)
    r = conn.request("GET", "/echo", host=REG)
    assert_refused(r, 403, "rule_not_matched")
    o.wait_closed(mark)
    assert [q.target for q in o.requests_since(mark)] == ["/bytes/5"]
    d = tunnel_line(s, raw.local_port)
    check_inspected(d, allow, allow[1], REG)
    c = subprocess.run([str(sluice_bin), "check", "-c", str(s.config_path)], capture_output=True, text=True,
                       timeout=30)
    out = c.stdout + c.stderr
    assert c.returncode == 0, out
    assert re.search(r"allowlist\.txt:1: warning: .*shadow", out), \
        f"`sluice check` does not warn that allowlist.txt:1 is shadowed:\n{out}"


def test_query_is_neither_matched_nor_logged_and_a_long_path_is_logged_cut_at_1024_bytes(
        sluice_inspecting, inspect_origins):
    o = inspect_origins
    allow = [f"GET {REG}/echo", f"GET {REG}/echo/long/*"]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    long_path = "/echo/long/" + "a" * 3000
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    r = conn.request("GET", "/echo?token=q-7f3a9", host=REG)
    assert r.status == 200 and json.loads(r.body)["target"] == "/echo?token=q-7f3a9", r
    r = conn.request("GET", long_path + "?z=1", host=REG)
    assert r.status == 200, r
    tsock.close()
    assert [q.target for q in o.wait_closed(mark)[0].requests] == ["/echo?token=q-7f3a9", long_path + "?z=1"]
    d = tunnel_line(s, raw.local_port)
    lines = wait_requests(s, d["id"], 2)
    check_request(lines[0], allow, n=1, method="GET", path="/echo", decision="allow", reason="rule",
                  status=200, rule=allow[0])
    assert "q-7f3a9" not in json.dumps(lines[0]), f"the query reached the log: {json.dumps(lines[0])}"
    logged = lines[1]["path"]
    assert 0 < len(logged.encode()) <= 1024 and long_path.startswith(logged), \
        f"logged path of {len(logged)} bytes: {logged[:80]!r}..."
    assert rule_is(lines[1], allow, allow[1]), show(lines)


# Refused before any rule is tried (SPEC: Request rules). Paths are compared
# as sent: every one of these could name another path to some origin.
AMBIGUOUS = [
    "/a/../b", "/a/./b", "/a/%2e%2e/b", "/a/%2E%2e/b", "/a/.%2e/b", "/a/%2e/b", "/a/..%2fb", "/a/..%2Fb",
    "/a/%2F", "/a/%2f/b", "/a/%5c", "/a/%5C", "/a\\b", "/a/%00", "/a/%zz", "/a/%2", "/a/%g0", "/a//b",
]


@pytest.mark.parametrize("path", AMBIGUOUS)
def test_ambiguous_path_in_the_tunnel_is_refused_400_and_reaches_no_origin(sluice_inspecting, inspect_origins,
                                                                         path):
    o = inspect_origins
    s = sluice_inspecting(allow=[ANY])
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    conn.send(f"GET {path} HTTP/1.1\r\nHost: {REG}\r\n\r\n".encode("latin-1"))
    r = conn.read_response()
    assert_refused(r, 400, "bad_request")
    tsock.close()
    o.wait_closed(mark)
    assert o.requests_since(mark) == [], f"{path!r} reached the origin"
    d = tunnel_line(s, raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    assert (line["n"], line["decision"], line["reason"], line["status"]) == (1, "deny", "bad_request", 400), \
        show([line])


@pytest.mark.parametrize("path", AMBIGUOUS)
def test_ambiguous_path_in_plain_http_to_an_inspected_host_is_refused_400(sluice_inspecting, inspect_origins,
                                                                        path):
    o = inspect_origins
    s = sluice_inspecting(allow=[ANY])
    mark = o.mark()
    with Conn(s.port) as c:
        c.send(f"GET http://{REG}{path} HTTP/1.1\r\nHost: {REG}\r\n\r\n".encode("latin-1"))
        r = c.read_response()
    assert_refused(r, 400, "bad_request")
    d = s.decision_for(c.local_port)
    assert (d["decision"], d["reason"]) == ("deny", "bad_request"), show([d])
    assert o.requests_since(mark) == [], f"{path!r} reached the origin"


def test_plain_http_to_an_inspected_host_is_matched_by_its_rules(sluice_inspecting, inspect_origins):
    o = inspect_origins
    allow = [READS]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    with Conn(s.port) as c:
        r = c.request("GET", f"http://{REG}/echo/plain?q=1")
    assert r.status == 200, r
    doc = json.loads(r.body)
    assert (doc["tls"], doc["method"], doc["target"]) == (False, "GET", "/echo/plain?q=1"), doc
    d = s.decision_for(c.local_port)
    assert (d["decision"], d["reason"], d["method"], d["host"], d.get("path")) == \
        ("allow", "rule", "GET", REG, "/echo/plain"), show([d])
    assert rule_is(d, allow, READS), show([d])

    with Conn(s.port) as c:
        r = c.request("PUT", f"http://{REG}/echo/plain", body=b"upload")
    assert_refused(r, 403, "rule_not_matched")
    assert shows_line(r.text, f"PUT {REG}/echo/plain"), r.text
    d = s.decision_for(c.local_port)
    assert (d["decision"], d["reason"], d.get("path"), d.get("suggest")) == \
        ("deny", "rule_not_matched", "/echo/plain", f"PUT {REG}/echo/plain"), show([d])
    assert "rule" not in d, show([d])
    assert [(q.method, q.target) for q in o.requests_since(mark)] == [("GET", "/echo/plain?q=1")]
    assert all(not c.tls for c in o.conns_since(mark)), "plain HTTP went to the TLS origin"


@pytest.mark.parametrize("raw_request", [
    f"POST /echo HTTP/1.1\r\nHost: {REG}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "GET /echo HTTP/1.1\r\nHost: api.inspect.test\r\n\r\n",
    "GET /echo HTTP/1.1\r\n\r\n",
    f"GET /echo HTTP/1.1\r\nHost: {REG}\r\nHost: {REG}\r\n\r\n",
    "GET https://api.inspect.test/echo HTTP/1.1\r\nHost: api.inspect.test\r\n\r\n",
], ids=["cl-and-te", "host-names-another-host", "no-host", "two-hosts", "absolute-form-another-host"])
def test_requests_in_the_tunnel_get_the_plain_http_parsers_refusals(sluice_inspecting, inspect_origins,
                                                                   raw_request):
    o = inspect_origins
    s = sluice_inspecting(allow=[ANY, "* api.inspect.test/*"])
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    conn.send(raw_request.encode())
    r = conn.read_response()
    assert_refused(r, 400, "bad_request")
    tsock.close()
    o.wait_closed(mark)
    assert o.requests_since(mark) == [], "the request reached an origin"


# --- the upstream's certificate --------------------------------------------

def _upstream_refused(sluice_inspecting, o, host, error_re):
    """CONNECT host: sluice completes the client's handshake, answers the
    first request 502 upstream_tls_failed naming the error, and the origin
    got no request byte (its handshake never completed)."""
    allow = [f"GET,HEAD {host}/*"]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, host, s.ca)
    r = conn.request("GET", "/echo", host=host)
    assert_refused(r, 502, "upstream_tls_failed")
    assert re.search(error_re, r.text, re.I), f"the 502's body does not name the error /{error_re}/: {r.text!r}"
    tsock.close()
    d = tunnel_line(s, raw.local_port)
    assert (d["method"], d["host"], d["decision"], d["reason"]) == ("CONNECT", host, "deny", "upstream_tls_failed"), \
        show([d])
    assert re.search(error_re, d.get("detail", ""), re.I), f"the decision line's detail does not name /{error_re}/:\n{show([d])}"
    [line] = wait_requests(s, d["id"], 1)
    assert (line["n"], line["decision"], line["reason"], line["status"]) == (1, "deny", "upstream_tls_failed", 502), \
        show([line])
    conns = o.wait_closed(mark, host)
    assert conns, f"sluice never connected to {host}"
    assert conns[0].hello and conns[0].hello["sni"] == host, \
        f"sluice did not start TLS with {host}: the failure must be the certificate's: {conns}"
    assert all(c.handshake != "ok" and not c.requests for c in conns), \
        f"the origin with a bad certificate completed a handshake or got a request: {conns}"


def test_expired_upstream_certificate_gets_502_and_no_request_reaches_the_origin(sluice_inspecting,
                                                                               inspect_origins):
    _upstream_refused(sluice_inspecting, inspect_origins, "expired.inspect.test", r"expired")


def test_not_yet_valid_upstream_certificate_gets_502_and_no_request_reaches_the_origin(sluice_inspecting,
                                                                                     inspect_origins):
    _upstream_refused(sluice_inspecting, inspect_origins, "notyet.inspect.test",
                      r"future|not yet valid|not valid yet")


def test_self_signed_upstream_certificate_gets_502_and_no_request_reaches_the_origin(sluice_inspecting,
                                                                                   inspect_origins):
    _upstream_refused(sluice_inspecting, inspect_origins, "selfsigned.inspect.test",
                      r"not trusted|untrusted|self.signed|unknown ca")


def test_upstream_certificate_for_another_name_gets_502_and_no_request_reaches_the_origin(sluice_inspecting,
                                                                                        inspect_origins):
    _upstream_refused(sluice_inspecting, inspect_origins, "wrongname.inspect.test",
                      r"name mismatch|mismatch|does not match|other\.inspect\.test")


def test_upstream_certificate_from_an_untrusted_ca_gets_502_and_no_request_reaches_the_origin(
        sluice_inspecting, inspect_origins):
    _upstream_refused(sluice_inspecting, inspect_origins, "untrusted.inspect.test",
                      r"not trusted|untrusted|unknown ca|not correctly signed")


# --- hosts without rules -------------------------------------------------------

def test_host_without_rules_stays_an_opaque_tunnel_showing_the_origins_own_certificate(
        sluice_inspecting, inspect_origins, inspect_tls):
    o = inspect_origins
    host = "opaque.inspect.test"
    allow = [host, READS]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    raw = tunnel(s.port, host)
    with pytest.raises(ssl.SSLCertVerificationError):
        context(s.ca).wrap_socket(raw.sock, server_hostname=host)   # not a leaf of sluice's CA
    raw.close()
    tsock, conn, raw2 = tls_through(s.port, host, inspect_tls["upstream_ca"], alpn=("x-sluice-test", "http/1.1"))
    issuer = dict(x[0] for x in tsock.getpeercert()["issuer"])
    assert issuer.get("commonName") == "sluice test CA", issuer
    r = conn.request("GET", "/echo", host=host)
    assert r.status == 200, r
    tsock.close()
    conns = [c for c in o.wait_closed(mark, host) if c.handshake == "ok"]
    # the client's own ClientHello reached the origin, byte for byte
    assert len(conns) == 1 and conns[0].hello["alpn"] == ["x-sluice-test", "http/1.1"], conns
    for port in (raw.local_port, raw2.local_port):
        d = tunnel_line(s, port)
        assert (d["decision"], d["reason"]) == ("allow", "allowlisted") and d["rule"].endswith(rule_ref(allow, host)), \
            show([d])
        assert requests_of(s, d["id"]) == [], "request lines for an opaque tunnel"
