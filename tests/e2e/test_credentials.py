"""Credentials the sandbox never holds (SPEC part 2): on a request to an
inspected host that a rule allows, sluice sets the credential's header,
replacing whatever the client sent; the secret reaches the origin and
nothing else: not the log, stderr, /metrics, /pins, a reply, or
`sluice check`. Each test uses a new random secret, so finding it anywhere
is a leak, not a coincidence."""

import http.client
import json
import secrets
import subprocess

import pytest

from sluicetest.checks import assert_refused
from sluicetest.client import Conn
from sluicetest.inspectlog import check_request, show, tunnel_line, wait_requests
from sluicetest.pattern import pattern
from sluicetest.tlsclient import tls_through

REG = "registry.inspect.test"
API = "api.inspect.test"
ALLOW = [f"GET,HEAD {REG}/*", f"GET {API}/*"]


def _secret():
    return "sl-cred-" + secrets.token_hex(20)


def _npm(secret):
    return [("npm", REG, "Authorization", "Bearer {secret}", secret)]


def _admin_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


@pytest.mark.parametrize("client_headers", [
    [],
    [("Authorization", "Bearer sandbox-guess")],
    [("authorization", "token lower-case-name")],
    [("Authorization", "Bearer one"), ("Authorization", "Bearer two")],
], ids=["none", "own-value", "lower-case-name", "two-values"])
def test_origin_sees_the_credential_in_place_of_what_the_client_sent(sluice_inspecting, inspect_origins,
                                                                    client_headers):
    o = inspect_origins
    secret = _secret()
    s = sluice_inspecting(allow=ALLOW, credentials=_npm(secret))
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    r = conn.request("GET", "/bytes/10", host=REG, headers=client_headers)
    assert r.status == 200 and r.body == pattern(10), r
    tsock.close()
    [q] = o.requests_since(mark)
    assert q.header_all("Authorization") == [f"Bearer {secret}"], \
        f"the origin got Authorization {q.header_all('Authorization')!r}, expected the credential once"
    d = tunnel_line(s, raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    check_request(line, ALLOW, n=1, method="GET", path="/bytes/10", decision="allow", reason="rule",
                  status=200, rule=ALLOW[0], credential="npm")


def test_the_secret_reaches_the_origin_and_nothing_else(sluice_inspecting, inspect_origins, sluice_bin):
    o = inspect_origins
    secret = _secret()
    s = sluice_inspecting(allow=ALLOW, credentials=_npm(secret), config={"admin": {"listen": "127.0.0.1:0"}})
    admin = int(s.wait_stderr(r"sluice: admin on 127\.0\.0\.1:(\d+)").group(1))
    mark = o.mark()
    client_got = bytearray()

    def keep(resp):
        client_got.extend(resp.raw_head + resp.body)
        return resp

    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    assert keep(conn.request("GET", "/bytes/10", host=REG, headers=[("Authorization", "Bearer mine")])).status == 200
    assert keep(conn.request("HEAD", "/bytes/10", host=REG)).status == 200
    assert_refused(keep(conn.request("PUT", "/echo", host=REG, body=b"x")), 403, "rule_not_matched")
    tsock.close()
    with Conn(s.port) as c:
        assert keep(c.request("GET", f"http://{REG}/bytes/5", headers=[("Authorization", "Bearer mine")])).status == 200
    with Conn(s.port) as c:
        assert_refused(keep(c.request("DELETE", f"http://{REG}/echo")), 403, "rule_not_matched")
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    assert_refused(keep(conn.request("GET", "/a/%2e%2e/b", host=REG)), 400, "bad_request")
    tsock.close()
    ok, why = s.reload()                         # secrets are read again
    assert ok, why
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    assert keep(conn.request("GET", "/bytes/7", host=REG)).status == 200
    tsock.close()

    pages = {}
    for path in ("/metrics", "/pins", "/healthz"):
        status, body = _admin_get(admin, path)
        assert status == 200, (path, status, body[:200])
        pages[path] = body
    check = subprocess.run([str(sluice_bin), "check", "-c", str(s.config_path)], capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    s.stop()

    got = [q.header_all("Authorization") for q in o.requests_since(mark)]
    assert got.count([f"Bearer {secret}"]) == 3, \
        f"the origin should have seen the credential on the three allowed inspected requests: {got}"
    assert [] in got, f"the plain-HTTP request kept an Authorization header: {got}"
    places = {"the decision log": s.log_path.read_bytes(), "sluice's stderr": s.stderr.encode(),
              "sluice's stdout": s.stdout_path.read_bytes(), "replies to the client": bytes(client_got),
              "`sluice check` output": check.stdout + check.stderr}
    places.update({f"the admin page {p}": b for p, b in pages.items()})
    # the whole secret, and any 16 characters of it
    pieces = [secret] + [secret[i:i + 16] for i in range(0, len(secret) - 15, 8)]
    for where, data in places.items():
        for piece in pieces:
            assert piece.encode() not in data, f"the secret (or {piece!r} of it) appears in {where}"


def test_a_request_the_rules_refuse_gets_no_credential_and_reaches_no_origin(sluice_inspecting,
                                                                            inspect_origins):
    o = inspect_origins
    secret = _secret()
    s = sluice_inspecting(allow=ALLOW, credentials=_npm(secret))
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    r = conn.request("POST", "/echo", host=REG, body=b"{}", headers=[("Authorization", "Bearer mine")])
    assert_refused(r, 403, "rule_not_matched")
    tsock.close()
    o.wait_closed(mark)
    assert o.requests_since(mark) == []
    d = tunnel_line(s, raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    check_request(line, ALLOW, n=1, method="POST", path="/echo", decision="deny", reason="rule_not_matched",
                  status=403)      # and no credential field


def test_an_inspected_host_without_a_credential_passes_the_clients_header(sluice_inspecting, inspect_origins):
    o = inspect_origins
    s = sluice_inspecting(allow=ALLOW, credentials=_npm(_secret()))
    mark = o.mark()
    tsock, conn, raw = tls_through(s.port, API, s.ca)
    r = conn.request("GET", "/echo", host=API, headers=[("Authorization", "Bearer the-clients-own")])
    assert r.status == 200, r
    tsock.close()
    [q] = o.requests_since(mark)
    assert q.header_all("Authorization") == ["Bearer the-clients-own"]
    d = tunnel_line(s, raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    check_request(line, ALLOW, n=1, method="GET", path="/echo", decision="allow", reason="rule", status=200,
                  rule=ALLOW[1], host=API)


def test_plain_http_to_a_credential_host_gets_no_credential_and_loses_the_clients_value(sluice_inspecting,
                                                                                       inspect_origins):
    """A credential goes only inside TLS that sluice verified; on plain HTTP
    the client's own value of that header is still dropped."""
    o = inspect_origins
    secret = _secret()
    s = sluice_inspecting(allow=ALLOW, credentials=_npm(secret))
    mark = o.mark()
    with Conn(s.port) as c:
        r = c.request("GET", f"http://{REG}/echo", headers=[("Authorization", "Bearer the-clients-own")])
    assert r.status == 200, r
    doc = json.loads(r.body)
    assert doc["tls"] is False
    [q] = o.requests_since(mark)
    assert q.header_all("Authorization") == [], f"plain HTTP carried Authorization {q.header_all('Authorization')}"
    d = s.decision_for(c.local_port)
    assert (d["decision"], d["reason"]) == ("allow", "rule") and "credential" not in d, show([d])
