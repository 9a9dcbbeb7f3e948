"""Sessions (SPEC part 2, "Sessions: one gate, many sandboxes"; issue 13):
one gate, session files written here (sluicetest/sessions.py), clients
that authenticate with Proxy-Authorization: Basic NAME:TOKEN. Each test
checks what the client got, what the origin got, the log lines and
dnsmasq's query log.

The gate's global allowlist is GLOBAL (wild.test, 11.0.0.1); session A
has origin.test (11.0.0.1), session B origin2.test (11.0.0.2). Names a
session is refused are asked before anything resolved them on that gate,
so a gate that resolved them (and cached the answer) is seen in dnsmasq's
log."""

import base64
import json
import subprocess
import time

import pytest

from sluicetest.checks import assert_refused
from sluicetest.client import Conn, connect, echo_both_ways
from sluicetest.inspectlog import show
from sluicetest.proc import SANITIZER_MARKERS, sanitizer_env
from sluicetest.sessions import (assert_auth_refused, auth, basic, metrics, read_jsonl, remove_session,
                                 session_counts, start_gate, tls_through_as, token_sha256,
                                 write_session)

GLOBAL = ["wild.test", "wild.test:9000"]
A_ALLOW = ["origin.test", "origin.test:9000"]
B_ALLOW = ["origin2.test", "origin2.test:9000"]
ADMIN = {"admin": {"listen": "127.0.0.1:0"}}


def _gate(sluice, tmp_path, sessions=None, allow=GLOBAL, require=True, config=None, name="gate",
          factory=None):
    """start_gate with A and B by default and GLOBAL as the global list."""
    return start_gate(factory or sluice, tmp_path, sessions if sessions is not None else {"A": A_ALLOW, "B": B_ALLOW},
                      allow=allow, require=require, config=config, name=name)


def _lines_of(s, conn_id, lines=None):
    return [l for l in (lines if lines is not None else s.log_lines()) if l.get("id") == conn_id]


def _tunnel(s, target, headers, payload=b"through the session"):
    """CONNECT with headers: (Response, Conn, decision line)."""
    resp, conn = connect(s.port, target, extra_headers=headers)
    if resp.status == 200:
        assert echo_both_ways(conn.sock, payload) == payload
    d = s.decision_for(conn.local_port)
    return resp, conn, d


def _get(s, url, headers):
    """One plain-HTTP request on its own connection: (Response, decision line)."""
    with Conn(s.port) as c:
        r = c.request("GET", url, headers=headers)
    return r, s.decision_for(c.local_port)


def _origin_headers(resp):
    """The headers origins.py's /headers saw, lower-cased names."""
    return [(k.lower(), v) for k, v in json.loads(resp.body)["headers"]]


def _dec(line):
    return (line.get("decision"), line.get("reason"))


# --- two sessions, disjoint lists ---------------------------------------------

def test_each_session_reaches_its_own_hosts_and_is_refused_the_others(sluice, dns, tmp_path):
    s, ss, _ = _gate(sluice, tmp_path)
    A, B = ss["A"], ss["B"]

    # refusals first: nothing has resolved origin.test or origin2.test on this gate
    mark = dns.mark()
    refused = []
    resp, conn, d = _tunnel(s, "origin2.test:9000", A.headers)
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")
    refused.append((d, "A", "origin2.test"))
    r, d = _get(s, "http://origin2.test/headers", A.headers)
    assert_refused(r, 403, "not_allowlisted")
    refused.append((d, "A", "origin2.test"))
    resp, conn, d = _tunnel(s, "origin.test:9000", B.headers)
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")
    refused.append((d, "B", "origin.test"))
    r, d = _get(s, "http://origin.test/headers", B.headers)
    assert_refused(r, 403, "not_allowlisted")
    refused.append((d, "B", "origin.test"))
    asked = dns.names_since(mark)
    assert not asked & {"origin.test", "origin2.test"}, \
        f"DNS was asked {sorted(asked)} for a name the session's list lacks"
    for d, who, host in refused:
        assert d.get("session") == who and d.get("host") == host and _dec(d) == ("deny", "not_allowlisted"), \
            f"refused line for {who} -> {host}:\n{show([d])}"

    # then each its own: CONNECT and plain HTTP; now DNS is asked (the log works)
    mark = dns.mark()
    allowed = []
    for sess, host, rule_file in ((A, "origin.test", "A.allow"), (B, "origin2.test", "B.allow")):
        resp, conn, d = _tunnel(s, f"{host}:9000", sess.headers)
        assert resp.status == 200, resp
        conn.close()
        assert str(d.get("rule", "")).endswith(f"{rule_file}:2"), show([d])
        allowed.append((d, sess.name))
        r, d = _get(s, f"http://{host}/headers", sess.headers)
        assert r.status == 200, r
        assert str(d.get("rule", "")).endswith(f"{rule_file}:1"), show([d])
        allowed.append((d, sess.name))
    assert {"origin.test", "origin2.test"} <= dns.names_since(mark)

    # every line of those connections carries its session (decision and close)
    for d, who in allowed:
        assert _dec(d) == ("allow", "allowlisted"), show([d])
        s.close_for(d["id"])
        for l in _lines_of(s, d["id"]):
            assert l.get("session") == who, f"a line of session {who}'s connection:\n{show([l])}"
    for d, who, _ in refused:
        for l in _lines_of(s, d["id"]):
            assert l.get("session") == who, show([l])


def test_the_global_allowlist_is_seen_by_both_sessions(sluice, tmp_path):
    s, ss, _ = _gate(sluice, tmp_path)
    for sess in ss.values():
        resp, conn, d = _tunnel(s, "wild.test:9000", sess.headers)
        assert resp.status == 200, resp
        conn.close()
        assert _dec(d) == ("allow", "allowlisted") and d.get("session") == sess.name, show([d])
        assert str(d.get("rule", "")).endswith("allowlist.txt:2"), show([d])
        r, d = _get(s, "http://wild.test/headers", sess.headers)
        assert r.status == 200, r
        assert d.get("session") == sess.name, show([d])


# --- authentication failures ----------------------------------------------------

def _failures(ss, expired):
    A, B = ss["A"], ss["B"]
    huge = "Basic " + base64.b64encode(b"A:" + b"x" * 9000).decode()      # 12 KiB value
    return [
        ("none", None, "auth_required", None),
        ("wrong-token", basic("A", "0" * 32), "auth_failed", "A"),
        ("unknown-name", basic("nosuch", A.token), "auth_failed", "nosuch"),
        ("b-token-a-name", basic("A", B.token), "auth_failed", "A"),
        ("expired", basic("old", expired.token), "auth_failed", "old"),
        ("bad-base64", "Basic !!not*base64!!", "auth_failed", None),
        ("no-colon", "Basic " + base64.b64encode(f"A{A.token}".encode()).decode(), "auth_failed", None),
        ("not-basic", f"Bearer {A.token}", "auth_failed", None),
        ("digest", f'Digest username="A", response="{A.token}"', "auth_failed", None),
        ("empty", "Basic ", "auth_failed", None),
        ("huge", huge, "auth_failed", None),
        ("quoting-name", basic('A"\\}{<', A.token), "auth_failed", 'A"\\}{<'),
        ("control-name", basic("A\n\x01", A.token), "auth_failed", "A\n\x01"),
    ]


@pytest.mark.parametrize("kind", ["connect", "http"])
def test_missing_or_bad_credentials_get_407_and_reach_no_dns(sluice, dns, tmp_path, kind):
    """Every way a client can fail to authenticate, on a CONNECT and on a
    plain-HTTP request to a host session A may reach: 407 (the huge value
    may be 431 instead: reported), logged with its reason, no DNS query,
    nothing at the origin, no `session` field."""
    sessions = {"A": A_ALLOW, "B": B_ALLOW, "old": {"allow": A_ALLOW, "expires": int(time.time()) - 3600}}
    s, ss, _ = _gate(sluice, tmp_path, sessions=sessions)
    mark = dns.mark()
    seen = {}
    for what, value, reason, claimed in _failures(ss, ss["old"]):
        headers = [] if value is None else [("Proxy-Authorization", value)]
        if kind == "connect":
            resp, conn = connect(s.port, "origin.test:9000", extra_headers=headers)
            conn.close()
        else:
            with Conn(s.port) as conn:
                resp = conn.request("GET", "http://origin.test/headers", headers=headers)
        d = s.decision_for(conn.local_port)
        if what == "huge" and resp.status == 431:
            seen[what] = "431"
            assert resp.decision and resp.decision[0] == "deny", resp
            assert d.get("decision") == "deny", show([d])
        else:
            seen[what] = resp.status
            assert_auth_refused(resp, reason)
            assert _dec(d) == ("deny", reason), f"{what}:\n{show([d])}"
        assert "session" not in d, f"{what}: an unauthenticated line carries session:\n{show([d])}"
        if claimed is not None:
            assert d.get("session_claimed") == claimed, f"{what}: session_claimed should be {claimed!r}:\n{show([d])}"
        assert d.get("host") == "origin.test", f"{what}:\n{show([d])}"
    print(f"huge Proxy-Authorization value ({kind}): the gate answered {seen['huge']}")
    asked = dns.names_since(mark)
    assert "origin.test" not in asked, f"DNS was asked for origin.test on an unauthenticated client's behalf: {asked}"
    # the same request with A's credentials is allowed and does ask DNS: the check above could fail
    mark = dns.mark()
    if kind == "connect":
        resp, conn, d = _tunnel(s, "origin.test:9000", ss["A"].headers)
        conn.close()
    else:
        resp, d = _get(s, "http://origin.test/headers", ss["A"].headers)
    assert resp.status == 200 and d.get("session") == "A", (resp, show([d]))
    assert "origin.test" in dns.names_since(mark)


def test_a_407_reaches_no_origin(sluice, origins, recorder, tmp_path):
    """The CONNECT to a recorder and the plain-HTTP request without
    credentials: no TCP connection reaches either origin."""
    s, ss, _ = _gate(sluice, tmp_path, sessions={"A": A_ALLOW + ["recorder.test"]})
    rmark = recorder.mark()
    before = origins.http_requests
    resp, conn = connect(s.port, "recorder.test:443", extra_headers=[("Proxy-Authorization", basic("A", "bad"))])
    conn.close()
    assert_auth_refused(resp, "auth_failed")
    with Conn(s.port) as c:
        assert_auth_refused(c.request("GET", "http://origin.test/headers"), "auth_required")
    time.sleep(0.3)
    assert recorder.since(rmark) == [] and origins.http_requests == before


def test_no_token_appears_in_any_log_line_reply_or_check_output(sluice, sluice_bin, tmp_path):
    s, ss, sdir = _gate(sluice, tmp_path)
    A, B = ss["A"], ss["B"]
    wrong = "f" * 32
    replies = bytearray()
    for headers, target in ((A.headers, "origin.test:9000"), (B.headers, "origin.test:9000"),
                            (auth("A", wrong), "origin.test:9000"), (auth("A", B.token), "origin.test:9000"),
                            (auth("nosuch", A.token), "origin.test:9000"),
                            ([("Proxy-Authorization", f"Bearer {A.token}")], "origin.test:9000"),
                            ([("Proxy-Authorization", "Basic " + base64.b64encode(f"A{A.token}".encode()).decode())],
                             "origin.test:9000")):
        resp, conn = connect(s.port, target, extra_headers=headers)
        replies += resp.raw_head + resp.body
        conn.close()
    for headers, url in ((A.headers, "http://origin.test/headers"), (auth("A", wrong), "http://origin.test/headers"),
                         (auth("B", A.token), "http://origin2.test/headers")):
        with Conn(s.port) as c:
            r = c.request("GET", url, headers=headers)
            replies += r.raw_head + (r.body if r.status != 200 else b"")
    s.wait_count(lambda l: l.get("event") == "decision", 10, what="decision lines")
    check = subprocess.run([str(sluice_bin), "check", "-c", str(s.config_path)], capture_output=True,
                           env=sanitizer_env(), timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert b"A" in check.stdout and b"B" in check.stdout
    s.stop()
    places = {"the decision log": s.log_path.read_bytes(), "sluice's stderr": s.stderr.encode(),
              "sluice's stdout": s.stdout_path.read_bytes(), "replies to clients": bytes(replies),
              "`sluice check` output": check.stdout + check.stderr}
    secrets_ = {"A's token": A.token, "B's token": B.token, "the wrong token": wrong,
                "A's token's hash": token_sha256(A.token), "B's token's hash": token_sha256(B.token)}
    for label, secret in secrets_.items():
        pieces = [secret] + [secret[i:i + 12] for i in range(0, len(secret) - 11, 6)]
        pieces += [basic("A", secret).split()[1], basic("B", secret).split()[1]]
        for where, data in places.items():
            for piece in pieces:
                assert piece.encode() not in data, f"{label} (or {piece!r} of it) appears in {where}"


# --- Proxy-Authorization is never forwarded --------------------------------------

@pytest.mark.parametrize("copies", ["once", "lower-case", "twice-same", "twice-a-then-b"])
def test_proxy_authorization_never_reaches_the_plain_http_origin(sluice, origins, tmp_path, copies):
    """Sent once (any case of the name), the header is read and dropped;
    sent twice it is ambiguous (which one would an intermediary use?):
    407 auth_failed (proxy/README's table), and the origin gets nothing."""
    s, ss, _ = _gate(sluice, tmp_path)
    A, B = ss["A"], ss["B"]
    headers = {"once": A.headers, "twice-same": A.headers * 2, "twice-a-then-b": A.headers + B.headers,
               "lower-case": [("proxy-authorization", basic("A", A.token))]}[copies]
    for url in ("http://origin.test/headers", "http://wild.test/headers"):
        before = origins.http_requests
        with Conn(s.port) as c:
            r = c.request("GET", url, headers=headers)
        d = s.decision_for(c.local_port)
        if copies.startswith("twice"):
            assert_auth_refused(r, "auth_failed")
            assert origins.http_requests == before, "a refused request reached the origin"
            assert "session" not in d, show([d])
        else:
            assert r.status == 200, r
            got = [v for k, v in _origin_headers(r) if k == "proxy-authorization"]
            assert got == [], f"the origin got Proxy-Authorization {got!r}"
            assert d.get("session") == "A", show([d])


def test_no_proxy_header_in_the_tunnel_and_none_sent_upstream_on_connect(sluice, recorder, tmp_path):
    """A CONNECT's head never reaches the origin: the recorder gets only the
    bytes the client sent into the tunnel."""
    s, ss, _ = _gate(sluice, tmp_path, sessions={"A": ["recorder.test"]}, config={"policy": {"sni_check": "no"}})
    mark = recorder.mark()
    resp, conn = connect(s.port, "recorder.test:443", extra_headers=ss["A"].headers)
    assert resp.status == 200, resp
    conn.send(b"payload")
    [rec] = recorder.wait_bytes(mark, 7)
    conn.close()
    assert rec["data"] == b"payload", rec


# --- keep-alive -----------------------------------------------------------------

@pytest.mark.parametrize("second", ["other-session-own-host", "other-session-global-host",
                                    "other-session-first-host", "no-credentials"])
def test_a_keep_alive_connection_cannot_switch_sessions(sluice, origins, tmp_path, second):
    s, ss, _ = _gate(sluice, tmp_path)
    A, B = ss["A"], ss["B"]
    with Conn(s.port) as c:
        r1 = c.request("GET", "http://origin.test/headers", headers=A.headers)
        assert r1.status == 200 and not r1.conn_close, r1
        r2 = c.request("GET", "http://wild.test/headers", headers=A.headers)   # same session: fine
        assert r2.status == 200 and not r2.conn_close, r2
        before = origins.http_requests
        url, headers, reason = {
            "other-session-own-host": ("http://origin2.test/headers", B.headers, "auth_failed"),
            "other-session-global-host": ("http://wild.test/headers", B.headers, "auth_failed"),
            "other-session-first-host": ("http://origin.test/headers", B.headers, "auth_failed"),
            "no-credentials": ("http://wild.test/headers", [], "auth_required"),
        }[second]
        r3 = c.request("GET", url, headers=headers)
        assert_auth_refused(r3, reason)
        assert c.at_eof(5), "the connection stayed open after a request naming another session"
    assert origins.http_requests == before, "the refused request reached an origin"
    lines = s.decisions_for(c.local_port)
    s.wait_count(lambda l: l.get("event") == "decision" and str(l.get("client", "")).endswith(f":{c.local_port}"), 3)
    lines = s.decisions_for(c.local_port)
    assert [(_dec(l), l.get("session")) for l in lines[:2]] == [(("allow", "allowlisted"), "A")] * 2, show(lines)
    assert _dec(lines[2]) == ("deny", reason), show(lines)
    assert lines[2].get("session") in (None, "A"), \
        f"the refused request is logged as session B:\n{show(lines)}"


# --- require = no -----------------------------------------------------------------

def test_require_no_anonymous_sees_the_global_list_only(sluice, dns, tmp_path):
    s, ss, _ = _gate(sluice, tmp_path, require=False)
    mark = dns.mark()
    resp, conn, d = _tunnel(s, "origin.test:9000", [])
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")
    assert "session" not in d, show([d])
    r, d = _get(s, "http://origin2.test/headers", [])
    assert_refused(r, 403, "not_allowlisted")
    assert "origin.test" not in dns.names_since(mark) and "origin2.test" not in dns.names_since(mark)
    resp, conn, d = _tunnel(s, "wild.test:9000", [])
    assert resp.status == 200, resp
    conn.close()
    s.close_for(d["id"])
    for l in _lines_of(s, d["id"]):
        assert "session" not in l, f"an anonymous client's line carries session:\n{show([l])}"
    r, d = _get(s, "http://wild.test/headers", [])
    assert r.status == 200 and "session" not in d, (r, show([d]))
    # a client that sends credentials must pass
    for headers in (auth("A", "0" * 32), auth("nosuch", ss["A"].token), [("Proxy-Authorization", "Basic !!")]):
        resp, conn = connect(s.port, "wild.test:9000", extra_headers=headers)
        conn.close()
        assert_auth_refused(resp, "auth_failed")
        with Conn(s.port) as c:
            assert_auth_refused(c.request("GET", "http://wild.test/headers", headers=headers), "auth_failed")
    resp, conn, d = _tunnel(s, "origin.test:9000", ss["A"].headers)
    assert resp.status == 200 and d.get("session") == "A", (resp, show([d]))
    conn.close()


# --- inspected hosts ---------------------------------------------------------------

API = "api.inspect.test"
REG = "registry.inspect.test"


def test_requests_inside_an_inspected_tunnel_are_decided_by_its_sessions_rules(sluice, sluice_inspecting,
                                                                               inspect_origins, tmp_path):
    o = inspect_origins
    a_allow = [f"GET {API}/echo/*", f"GET {REG}/*"]
    b_allow = [f"GET,POST {API}/*"]
    s, ss, _ = _gate(sluice, tmp_path, sessions={"A": a_allow, "B": b_allow}, allow=[],
                     factory=sluice_inspecting)
    A, B = ss["A"], ss["B"]
    mark = o.mark()
    tsock, conn, raw = tls_through_as(s.port, API, s.ca, A.headers)
    r = conn.request("GET", "/echo/a", host=API)
    assert r.status == 200, r
    assert [h for h in json.loads(r.body)["headers"] if h[0].lower() == "proxy-authorization"] == []
    r = conn.request("POST", "/echo/a", host=API, body=b"x")
    assert_refused(r, 403, "rule_not_matched")
    tsock.close()
    da = s.decision_for(raw.local_port)

    # B's credentials sent inside A's tunnel (to the origin, as far as the
    # client knows): the requests stay A's. Whether the gate refuses such a
    # request (407) or passes it by A's rules is its choice; B's rules
    # never apply and the header never reaches the origin.
    want = [("GET", "/echo/a")]
    tsock, conn, raw = tls_through_as(s.port, API, s.ca, A.headers)
    r = conn.request("GET", "/echo/with-b", host=API, headers=B.headers)
    with_b = r.status
    if r.status == 200:
        want.append(("GET", "/echo/with-b"))
        assert [h for h in json.loads(r.body)["headers"] if h[0].lower() == "proxy-authorization"] == [], \
            "Proxy-Authorization sent inside the tunnel reached the origin"
        r = conn.request("POST", "/echo/with-b", host=API, body=b"x", headers=B.headers)
        assert r.status != 200 and r.status in (403, 407), f"POST allowed by B's rules inside A's tunnel: {r!r}"
    else:
        assert_auth_refused(r, "auth_failed")
    print(f"a request with B's Proxy-Authorization inside A's inspected tunnel: {with_b}")
    tsock.close()
    dab = s.decision_for(raw.local_port)
    assert dab.get("session") == "A", show([dab])

    tsock, conn, raw = tls_through_as(s.port, API, s.ca, B.headers)
    r = conn.request("POST", "/echo/b", host=API, body=b"y")
    assert r.status == 200, r
    tsock.close()
    db = s.decision_for(raw.local_port)
    want.append(("POST", "/echo/b"))
    o.wait_closed(mark)
    assert [(q.method, q.path) for q in o.requests_since(mark)] == want
    assert (da.get("reason"), da.get("session")) == ("inspected", "A"), show([da])
    assert (db.get("reason"), db.get("session")) == ("inspected", "B"), show([db])
    s.wait_count(lambda l: l.get("event") == "request", 3, what="request lines")
    la = sorted((l for l in _lines_of(s, da["id"]) if l.get("event") == "request"), key=lambda l: l["n"])
    lab = [l for l in _lines_of(s, dab["id"]) if l.get("event") == "request"]
    lb = [l for l in _lines_of(s, db["id"]) if l.get("event") == "request"]
    assert [(l["method"], l["decision"], l.get("session")) for l in la] == \
        [("GET", "allow", "A"), ("POST", "deny", "A")], show(la)
    assert all(l.get("session") == "A" for l in lab), show(lab)
    assert [(l["method"], l["decision"], l.get("session")) for l in lb] == [("POST", "allow", "B")], show(lb)
    assert str(la[0].get("rule", "")).endswith("A.allow:1"), show(la)
    # B cannot reach A's inspected host, plain HTTP or CONNECT
    with Conn(s.port) as c:
        assert_refused(c.request("GET", f"http://{REG}/echo", headers=B.headers), 403, "not_allowlisted")
    with Conn(s.port) as c:
        r = c.request("GET", f"http://{REG}/echo", headers=A.headers)
    assert r.status == 200 and s.decision_for(c.local_port).get("session") == "A", r


# --- reload ----------------------------------------------------------------------

def test_reload_adds_changes_and_removes_a_session(sluice, tmp_path):
    s, ss, sdir = _gate(sluice, tmp_path, sessions={"A": A_ALLOW})
    resp, conn = connect(s.port, "origin2.test:9000", extra_headers=auth("C", "c" * 32))
    conn.close()
    assert_auth_refused(resp, "auth_failed")

    C = write_session(sdir, "C", allow=B_ALLOW)
    ok, line = s.reload()
    assert ok, line
    resp, conn, d = _tunnel(s, "origin2.test:9000", C.headers)
    assert resp.status == 200 and d.get("session") == "C", (resp, show([d]))

    # a new token: the old one is refused, and (proxy/README) the tunnel
    # opened with it is closed as revoked
    old = C.token
    C = write_session(sdir, "C", allow=B_ALLOW)
    ok, line = s.reload()
    t0 = time.monotonic()
    assert ok, line
    closed, _ = conn.drain_until_closed(2.0)
    took = time.monotonic() - t0
    conn.close()
    assert closed and took <= 1.5, f"the tunnel opened with C's old token: closed={closed} after {took:.2f}s"
    close = s.close_for(d["id"], timeout=3)
    assert close.get("end") == "session_revoked", show([close])
    resp, conn = connect(s.port, "origin2.test:9000", extra_headers=auth("C", old))
    conn.close()
    assert_auth_refused(resp, "auth_failed")
    resp, conn, d = _tunnel(s, "origin2.test:9000", C.headers)
    assert resp.status == 200, resp

    # removal: C's open tunnel closes within a second, A's stays
    keep_resp, keep, keep_d = _tunnel(s, "origin.test:9000", ss["A"].headers)
    assert keep_resp.status == 200
    with Conn(s.port) as ka:                   # an idle keep-alive plain-HTTP connection of C's
        assert ka.request("GET", "http://origin2.test/headers", headers=C.headers).status == 200
        remove_session(sdir, "C")
        ok, line = s.reload()
        t0 = time.monotonic()
        assert ok, line
        closed, _ = conn.drain_until_closed(2.0)
        took = time.monotonic() - t0
        assert closed, "the removed session's tunnel is still open 2 s after the reload"
        assert took <= 1.5, f"the removed session's tunnel closed {took:.2f}s after the reload"
        closed_ka, _ = ka.drain_until_closed(2.0)
    conn.close()
    close = s.close_for(d["id"], timeout=3)
    assert close.get("end") == "session_revoked" and close.get("session") == "C", show([close])
    assert closed_ka, "the removed session's keep-alive connection is still open 2 s after the reload"
    assert echo_both_ways(keep.sock, b"A is still here" * 100) == b"A is still here" * 100
    keep.close()
    resp, conn = connect(s.port, "origin2.test:9000", extra_headers=C.headers)
    conn.close()
    assert_auth_refused(resp, "auth_failed")
    with Conn(s.port) as c:
        assert_auth_refused(c.request("GET", "http://origin2.test/headers", headers=C.headers), "auth_failed")
    d = s.decision_for(c.local_port)
    assert d.get("session_claimed") == "C" and "session" not in d, show([d])


def test_a_broken_session_file_keeps_the_old_sessions(sluice, tmp_path):
    s, ss, sdir = _gate(sluice, tmp_path)
    (sdir / "C.ini").write_text("[session]\ntoken_sha256 = nothex\nallowlist = C.allow\n")
    (sdir / "C.allow").write_text("origin2.test:9000\n")
    remove_session(sdir, "B")
    ok, line = s.reload()
    assert not ok, f"a broken session file was accepted: {line}"
    assert "C.ini:2" in s.stderr, f"the reload error does not name C.ini:2:\n{s.stderr}"
    resp, conn, d = _tunnel(s, "origin2.test:9000", ss["B"].headers)
    assert resp.status == 200 and d.get("session") == "B", (resp, show([d]))
    conn.close()


def test_an_expired_sessions_tunnel_closes_within_a_second_of_its_expiry(sluice, tmp_path):
    expires = int(time.time()) + 5
    s, ss, _ = _gate(sluice, tmp_path, sessions={"A": A_ALLOW, "T": {"allow": B_ALLOW, "expires": expires}})
    resp, conn, d = _tunnel(s, "origin2.test:9000", ss["T"].headers)
    assert resp.status == 200, resp
    keep_resp, keep, _ = _tunnel(s, "origin.test:9000", ss["A"].headers)
    assert keep_resp.status == 200
    # still served a moment before the expiry
    while time.time() < expires - 1.0:
        time.sleep(0.05)
    assert echo_both_ways(conn.sock, b"before expiry") == b"before expiry"
    closed, _ = conn.drain_until_closed(expires + 2.5 - time.time())
    at = time.time()
    assert closed, "the expired session's tunnel is still open 2.5 s after its expiry"
    assert expires - 0.05 <= at <= expires + 1.5, \
        f"the tunnel closed {at - expires:+.2f}s from the session's expiry"
    conn.close()
    close = s.close_for(d["id"], timeout=3)
    assert close.get("end") == "session_revoked" and close.get("session") == "T", show([close])
    resp, c2 = connect(s.port, "origin2.test:9000", extra_headers=ss["T"].headers)
    c2.close()
    assert_auth_refused(resp, "auth_failed")
    assert echo_both_ways(keep.sock, b"A lives on") == b"A lives on"
    keep.close()


# --- a session's own log stream --------------------------------------------------

def test_a_session_with_log_writes_its_lines_to_its_own_verifiable_stream(sluice, sluice_bin, tmp_path):
    gate_dir = tmp_path / "gate"
    a_log = gate_dir / "A.jsonl"
    s, ss, _ = _gate(sluice, tmp_path, sessions={"A": {"allow": A_ALLOW, "log": str(a_log)}, "B": B_ALLOW})
    A, B = ss["A"], ss["B"]
    for sess, host in ((A, "origin.test"), (B, "origin2.test")):
        resp, conn = connect(s.port, f"{host}:9000", extra_headers=sess.headers)
        assert resp.status == 200, resp
        conn.close()
        resp, conn = connect(s.port, "wild.test:9000", extra_headers=sess.headers)
        conn.close()
        resp, conn = connect(s.port, "denied.test:9000", extra_headers=sess.headers)
        assert_refused(resp, 403, "not_allowlisted")
        conn.close()
        with Conn(s.port) as c:
            assert c.request("GET", f"http://{host}/headers", headers=sess.headers).status == 200
    # B's four decisions and two closes in the gate's log; A's in its own
    s.wait_count(lambda l: l.get("session") == "B", 6, what="session B lines")
    a_lines = None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        a_lines = read_jsonl(a_log)
        if sum(1 for l in a_lines if l.get("session") == "A") >= 6:
            break
        time.sleep(0.05)
    assert a_lines and sum(1 for l in a_lines if l.get("session") == "A") >= 6, \
        f"A's stream {a_log} has {len(a_lines or [])} lines:\n{show(a_lines or [])}"
    assert all(l.get("session") == "A" for l in a_lines), f"a line in A's stream is not A's:\n{show(a_lines)}"
    assert a_lines[0].get("seq") == 1 and a_lines[0].get("stream"), show(a_lines[:1])
    assert [l["seq"] for l in a_lines] == list(range(1, len(a_lines) + 1)), show(a_lines)
    gate_lines = s.log_lines()
    assert not [l for l in gate_lines if l.get("session") == "A"], \
        f"session A's lines are in the gate's log too:\n{show([l for l in gate_lines if l.get('session') == 'A'])}"
    assert {l.get("host") for l in a_lines if l.get("event") == "decision"} == {"origin.test", "wild.test", "denied.test"}
    assert a_lines[0]["stream"] != (gate_lines[0].get("stream") if gate_lines else None)
    s.stop()
    read_jsonl(a_log, complete=True)
    for path in (a_log, s.log_path):
        r = subprocess.run([str(sluice_bin), "audit", "--verify", str(path)], capture_output=True,
                           env=sanitizer_env(), timeout=60)
        err = r.stderr.decode(errors="replace")
        assert not any(m in err for m in SANITIZER_MARKERS), err
        assert r.returncode == 0, f"audit --verify {path.name}: exit {r.returncode}\n{r.stdout.decode()}{err}"


# --- /metrics ---------------------------------------------------------------------

def _admin_port(s):
    return int(s.wait_stderr(r"sluice: admin on 127\.0\.0\.1:(\d+)").group(1))


def test_metrics_count_decisions_by_session(sluice, tmp_path):
    s, ss, _ = _gate(sluice, tmp_path, config=ADMIN)
    admin = _admin_port(s)
    A, B = ss["A"], ss["B"]
    for sess, target in ((A, "origin.test:9000"), (A, "wild.test:9000"), (A, "origin2.test:9000"),
                         (B, "origin2.test:9000")):
        resp, conn = connect(s.port, target, extra_headers=sess.headers)
        conn.close()
    with Conn(s.port) as c:
        assert c.request("GET", "http://origin.test/headers", headers=A.headers).status == 200
    for headers in (auth("ghost", "x" * 32), auth("A", "bad"), []):
        resp, conn = connect(s.port, "origin.test:9000", extra_headers=headers)
        conn.close()
    s.wait_count(lambda l: l.get("event") == "decision", 8, what="decision lines")
    samples, body = metrics(admin)
    counts = session_counts(samples)
    assert counts.get(("A", "allow")) == 3 and counts.get(("A", "deny")) == 1, f"{counts}\n{body}"
    assert counts.get(("B", "allow")) == 1 and counts.get(("B", "deny"), 0) == 0, f"{counts}\n{body}"
    labels = {k[0] for k in counts}
    assert "ghost" not in labels, f"an unauthenticated name became a /metrics label: {counts}"
    assert labels <= {"A", "B", "_other"}, counts


def test_metrics_session_labels_are_bounded(sluice, tmp_path):
    n = 260
    sessions = {f"s{i:03d}": [] for i in range(n)}
    s, ss, _ = _gate(sluice, tmp_path, sessions=sessions, config=ADMIN)
    admin = _admin_port(s)
    for name in sorted(ss):
        resp, conn = connect(s.port, "wild.test:9000", extra_headers=ss[name].headers)
        assert resp.status == 200, (name, resp)
        conn.close()
    s.wait_count(lambda l: l.get("event") == "decision", n, what="decision lines")
    counts = session_counts(metrics(admin)[0])
    named = {k[0] for k in counts if k[0] != "_other"}
    assert len(named) <= 256, f"{len(named)} distinct session labels"
    assert len(named) == 256, f"only {len(named)} sessions got a label of their own"
    assert counts.get(("_other", "allow")) == n - 256, counts.get(("_other", "allow"))
    assert sum(v for (sess, dec), v in counts.items() if dec == "allow") == n
