"""Refusals by policy: the allowlist (before any DNS), ports, non-public
answers, numeric host spellings, DNS and connect failures."""

import time

import pytest

from sluicetest.checks import STANDARD_ALLOW, assert_decision, assert_refused, shows_line
from sluicetest.client import Conn, connect, echo_both_ways, raw_exchange


def _request(port, form, host, hport):
    """A request to host:hport, as CONNECT or as an absolute-form GET."""
    if form == "connect":
        return connect(port, f"{host}:{hport}")
    c = Conn(port)
    auth = host if hport == 80 else f"{host}:{hport}"
    return c.request("GET", f"http://{auth}/bytes/10"), c


@pytest.mark.parametrize("form,port,line", [
    ("connect", 443, "denied.test"),
    ("connect", 8443, "denied.test:8443"),
    ("http", 80, "denied.test"),
    ("http", 8080, "denied.test:8080"),
])
def test_denied_name_is_never_resolved(sluice, dns, form, port, line):
    s = sluice(allow=STANDARD_ALLOW)
    mark = dns.mark()
    resp, conn = _request(s.port, form, "denied.test", port)
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")
    assert shows_line(resp.text, line), \
        f"body does not show the allowlist line {line!r}: {resp.text!r}"
    d = s.decision_for(conn.local_port)
    assert_decision(d, "deny", "not_allowlisted", "denied.test", port,
                    "CONNECT" if form == "connect" else "GET")
    asked = dns.names_since(mark)
    assert "denied.test" not in asked, f"DNS was asked about a name not on the allowlist: {asked}"


def test_subdomain_of_an_allowed_name_is_not_allowed(sluice, dns):
    s = sluice(allow=STANDARD_ALLOW)
    mark = dns.mark()
    resp, conn = connect(s.port, "sub.origin.test:443")
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")
    assert "sub.origin.test" not in dns.names_since(mark)


@pytest.mark.parametrize("form,port", [("connect", 8443), ("connect", 80), ("http", 8081)])
def test_port_not_allowed_is_403_and_never_resolved(sluice, dns, form, port):
    s = sluice(allow=["origin.test"])
    mark = dns.mark()
    resp, conn = _request(s.port, form, "origin.test", port)
    conn.close()
    assert_refused(resp, 403, "port_not_allowed")
    d = s.decision_for(conn.local_port)
    assert_decision(d, "deny", "port_not_allowed", "origin.test", port)
    assert "origin.test" not in dns.names_since(mark)


def test_connect_ports_and_http_ports_widen_what_a_bare_entry_permits(sluice):
    s = sluice(allow=["origin.test"],
               config={"policy": {"connect_ports": "443, 9000", "http_ports": "80, 8080"}})
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200, resp
    assert echo_both_ways(conn.sock, b"nine") == b"nine"
    conn.close()
    with Conn(s.port) as c:
        r = c.request("GET", "http://origin.test:8080/bytes/3")
        assert r.status == 200, r


# name -> spellings of the non-public address the refusal must name
NON_PUBLIC = {
    "private.test": ["10.0.0.1"],
    "metadata.test": ["169.254.169.254"],
    "metadata6.test": ["fd00:ec2::254"],
    "mixed.test": ["10.0.0.1"],
    "mixed46.test": ["64:ff9b::a9fe:a9fe", "64:ff9b::169.254.169.254"],
    "mapped.test": ["::ffff:10.0.0.1", "::ffff:a00:1"],
    "nat64.test": ["64:ff9b::a00:1", "64:ff9b::10.0.0.1"],
}


@pytest.mark.parametrize("form", ["connect", "http"])
@pytest.mark.parametrize("name", sorted(NON_PUBLIC))
def test_non_public_answer_is_refused_naming_the_address(sluice, recorder, name, form):
    s = sluice(allow=STANDARD_ALLOW)
    mark = recorder.mark()
    resp, conn = _request(s.port, form, name, 443 if form == "connect" else 80)
    conn.close()
    assert_refused(resp, 403, "non_public_address")
    assert any(a in resp.text for a in NON_PUBLIC[name]), \
        f"body does not name the address ({NON_PUBLIC[name]}): {resp.text!r}"
    d = s.decision_for(conn.local_port)
    assert_decision(d, "deny", "non_public_address", name)
    assert [c for c in recorder.since(mark) if c["local"][0] == "10.0.0.1"] == [], \
        "sluice connected to a private address"


def test_private_ip_literal_on_the_allowlist_is_still_refused(sluice, recorder):
    s = sluice(allow=STANDARD_ALLOW)
    mark = recorder.mark()
    resp, conn = connect(s.port, "10.0.0.1:9000")
    conn.close()
    assert_refused(resp, 403, "non_public_address")
    assert "10.0.0.1" in resp.text
    assert recorder.since(mark) == []


def test_allow_cidr_lets_a_private_mirror_through(sluice, recorder):
    s = sluice(allow=STANDARD_ALLOW, config={"policy": {"allow_cidr": "10.0.0.1/32"}})
    mark = recorder.mark()
    resp, conn = connect(s.port, "private.test:9000")
    assert resp.status == 200, resp
    conn.sock.sendall(b"to the mirror")
    conns = recorder.wait_bytes(mark, 13)
    assert conns[0]["local"] == ("10.0.0.1", 9000) and conns[0]["data"] == b"to the mirror"
    conn.close()


def test_deny_cidr_refuses_a_public_address(sluice):
    s = sluice(allow=STANDARD_ALLOW, config={"policy": {"deny_cidr": "11.0.0.2/32"}})
    resp, conn = connect(s.port, "origin2.test:9000")
    conn.close()
    assert_refused(resp, 403, "non_public_address")
    assert "11.0.0.2" in resp.text
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    conn.close()


AMBIGUOUS = ["127.1", "0x7f.0.0.1", "2130706433", "0177.0.0.1", "11.1", "011.0.0.1",
             "0xb000001", "11.0.0.01"]


@pytest.mark.parametrize("host", AMBIGUOUS)
def test_ambiguous_numeric_host_in_connect_is_400(sluice, dns, host):
    s = sluice(allow=STANDARD_ALLOW)
    mark = dns.mark()
    resp, conn = connect(s.port, f"{host}:9000")
    conn.close()
    assert_refused(resp, 400, "bad_request")
    assert s.decision_for(conn.local_port)["reason"] == "bad_request"
    assert dns.queries_since(mark) == []


@pytest.mark.parametrize("host", AMBIGUOUS)
def test_ambiguous_numeric_host_in_absolute_url_is_400(sluice, host):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        r = c.request("GET", f"http://{host}:9000/")
        assert_refused(r, 400, "bad_request")


@pytest.mark.parametrize("target", ["[fe80::1%25lo]:443", "[fe80::1%lo]:443", "[::1]x:443",
                                    "origin.test:0", "origin.test:65536", "origin.test:",
                                    "origin.test", "origin.test:+443", "ori gin.test:443"])
def test_malformed_connect_target_is_400(sluice, target):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = raw_exchange(s.port, f"CONNECT {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
                              method="CONNECT")
    conn.close()
    assert_refused(resp, 400, "bad_request")


def test_name_that_does_not_exist_is_502_dns_error(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = connect(s.port, "nxdomain.test:9000")
    conn.close()
    assert_refused(resp, 502, "dns_error")
    assert_decision(s.decision_for(conn.local_port), "deny", "dns_error", "nxdomain.test", 9000)


def test_silent_dns_server_gives_504_dns_timeout_within_timeout_ms(sluice, blackhole_dns):
    s = sluice(allow=STANDARD_ALLOW,
               config={"dns": {"server": "127.0.0.54:53", "timeout_ms": 1000}})
    before = blackhole_dns.udp_queries
    t0 = time.monotonic()
    waiting = Conn(s.port)
    waiting.send(b"CONNECT origin.test:9000 HTTP/1.1\r\nHost: origin.test:9000\r\n\r\n")
    # while that lookup hangs, another client is answered at once
    resp, conn = connect(s.port, "denied.test:443")
    conn.close()
    assert resp.status == 403
    assert time.monotonic() - t0 < 0.9, "a pending lookup held up another client"
    resp = waiting.read_response("CONNECT")
    elapsed = time.monotonic() - t0
    waiting.close()
    assert_refused(resp, 504, "dns_timeout")
    assert elapsed <= 1.0 + 1.5, f"dns_timeout after {elapsed:.2f}s with timeout_ms = 1000"
    assert blackhole_dns.udp_queries > before, "sluice did not ask the configured server"
    assert_decision(s.decision_for(waiting.local_port), "deny", "dns_timeout", "origin.test", 9000)


def test_closed_origin_port_gives_502_connect_failed(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = connect(s.port, "origin.test:81")
    conn.close()
    assert_refused(resp, 502, "connect_failed")
    assert_decision(s.decision_for(conn.local_port), "deny", "connect_failed", "origin.test", 81)


def test_closed_origin_port_over_http_gives_502_connect_failed(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        r = c.request("GET", "http://origin.test:81/")
        assert_refused(r, 502, "connect_failed")


def test_origin_that_never_accepts_gives_504_connect_timeout(sluice):
    s = sluice(allow=STANDARD_ALLOW, config={"timeouts": {"connect_ms": 1000}})
    t0 = time.monotonic()
    resp, conn = connect(s.port, "stall.test:443")
    elapsed = time.monotonic() - t0
    conn.close()
    assert_refused(resp, 504, "connect_timeout")
    assert 0.8 <= elapsed <= 1.0 + 1.5, f"connect_timeout after {elapsed:.2f}s, connect_ms = 1000"


def test_with_no_allowlist_everything_is_denied(sluice, dns):
    s = sluice(allow=[], config={"policy": {"allowlist": None}})
    mark = dns.mark()
    resp, conn = connect(s.port, "origin.test:443")
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")
    assert "origin.test" not in dns.names_since(mark)


def test_inline_allow_entry_in_config_is_honoured(sluice):
    s = sluice(allow=[], config={"policy": {"allow": ["origin.test:9000", "origin2.test:9000"]}})
    for target in ("origin.test:9000", "origin2.test:9000"):
        resp, conn = connect(s.port, target)
        assert resp.status == 200, resp
        conn.close()


def test_answers_stay_pinned_for_min_ttl_s_within_a_worker(sluice, dns):
    """dnsmasq answers with a 2 s TTL; min_ttl_s = 30 keeps the answer, so a
    second request does not ask DNS again. (Each worker has its own cache:
    with one worker every request shares it.)"""
    s = sluice(allow=STANDARD_ALLOW, config={"dns": {"min_ttl_s": 30}, "proxy": {"workers": 1}})
    mark = dns.mark()
    for _ in range(3):
        resp, conn = connect(s.port, "origin2.test:9000")
        assert resp.status == 200, resp
        conn.close()
    asked = [q for q in dns.queries_since(mark) if q == ("A", "origin2.test")]
    assert len(asked) == 1, f"origin2.test asked {len(asked)} times within its pinned TTL"


def test_the_gate_never_connects_to_its_own_listener(sluice):
    # allow_cidr admits loopback, so only the own-listener rule stands between
    # a CONNECT to the gate's own port and a request loop.
    s = sluice(config={"policy": {"allow_cidr": "127.0.0.0/8"}})
    s.write_allowlist([f"127.0.0.1:{s.port}", "127.0.0.1:9"])
    s.reload()
    resp, conn = connect(s.port, f"127.0.0.1:{s.port}")
    conn.close()
    assert_refused(resp, 403, "non_public_address")
    assert "own listening address" in resp.text
    # The same allow_cidr does admit another loopback port (nothing listens
    # there, so the refusal is a connect failure, not a policy one).
    resp, conn = connect(s.port, "127.0.0.1:9")
    conn.close()
    assert_refused(resp, 502, "connect_failed")
