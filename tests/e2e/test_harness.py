"""The test environment itself: if these fail, the other failures are the
harness's, not sluice's."""

import socket
import ssl

import pytest

from sluicetest import dnsquery
from sluicetest.client import Conn, client_hello
from sluicetest.dns import BLACKHOLE, RECORDS
from sluicetest.pattern import pattern


def test_resolver_answers_every_test_name(dns):
    for name, addrs in RECORDS.items():
        got = [a for t in ("A", "AAAA") for _, a, _ in dnsquery.query(name, t)[1]]
        assert len(got) == len(addrs), (name, got)
    assert dnsquery.query("denied.test")[0] == "NXDOMAIN"


def test_query_log_shows_asked_names_and_only_those(dns):
    mark = dns.mark()
    dnsquery.query("asked.test")
    names = dns.names_since(mark)
    assert "asked.test" in names
    assert "denied.test" not in names


def test_blackhole_dns_never_answers(blackhole_dns):
    before = blackhole_dns.udp_queries
    with pytest.raises(socket.timeout):
        dnsquery.query("origin.test", server=BLACKHOLE, timeout=0.3)
    assert blackhole_dns.udp_queries > before


def test_origin_serves_its_paths(origins):
    with Conn(80, host="11.0.0.1") as c:
        assert c.request("GET", "/bytes/100000", host="origin.test").body == pattern(100000)
        r = c.request("POST", "/echo", host="origin.test", body=b"x" * 70000, chunked=True)
        assert r.body == b"x" * 70000
        assert c.request("GET", "/chunked/300000", host="origin.test").body == pattern(300000)
        r = c.request("HEAD", "/bytes/10", host="origin.test")
        assert r.header("Content-Length") == "10" and r.body == b""
        assert c.request("GET", "/close/5000", host="origin.test").body == pattern(5000)


def test_https_origin_presents_a_certificate_the_test_ca_verifies(origins, tls):
    ctx = ssl.create_default_context(cafile=str(tls["ca"]))
    with ctx.wrap_socket(socket.create_connection(("11.0.0.1", 443), timeout=5),
                         server_hostname="origin.test") as s:
        r = Conn.wrap(s).request("GET", "/bytes/10", host="origin.test")
        assert r.body == pattern(10)


def test_echo_and_recorder_and_stall(origins):
    with socket.create_connection(("2c0f:fff0::1", 9000), timeout=5) as s:
        s.sendall(b"hi")
        assert s.recv(10) == b"hi"
    mark = origins.recorder.mark()
    with socket.create_connection(("11.0.0.3", 443), timeout=5) as s:
        s.sendall(client_hello("a.test"))
    conns = origins.recorder.wait_all_closed(mark)
    assert len(conns) == 1 and conns[0]["data"][:1] == b"\x16"
    s = socket.socket()
    s.settimeout(0.5)
    with pytest.raises(socket.timeout):
        s.connect(("11.0.0.4", 443))
    s.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("11.0.0.1", 81), timeout=5)
