"""The connection engine's own guarantees that no other suite pins down: the
malformed chunked request that once freed a connection under its own feet,
Happy Eyeballs past a blackholed address, an answer classified whole, and a
non-public IP literal that no allowlist line can allow."""

import socket
import subprocess
import time

from sluicetest.checks import STANDARD_ALLOW, assert_refused
from sluicetest.client import Conn, raw_exchange
from sluicetest.pattern import pattern

ZZ = (b"POST http://origin.test/echo HTTP/1.1\r\n"
      b"Host: origin.test\r\n"
      b"Transfer-Encoding: chunked\r\n"
      b"\r\n"
      b"zz\r\n")


def _exchange(port, data):
    r, c = raw_exchange(port, data)
    c.close()
    return r


def _last_decision(s):
    return s.wait_log(lambda l: l.get("event") == "decision", 5.0, "a decision line") and \
        [l for l in s.log_lines() if l.get("event") == "decision"][-1]


def _gate_still_serves(s):
    with Conn(s.port) as c:
        r = c.request("GET", "http://origin.test/bytes/100")
        assert r.status == 200 and r.body == pattern(100)


def test_malformed_chunk_size_gets_400_and_the_gate_survives(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        c.send(ZZ)
        r = c.read_response()
        assert r.status == 400, r
        assert r.conn_close and r.decision is None   # not a policy decision: the exchange failed
        assert b"malformed" in r.body
        assert c.at_eof()
        port = c.local_port
    d = s.decision_for(port)
    assert d["decision"] == "allow"
    assert s.close_for(d["id"])["end"] == "bad_request_body"
    _gate_still_serves(s)


def test_malformed_chunk_after_a_valid_one_never_reaches_the_origin(sluice, recorder):
    """The origin gets the head and the valid chunk; not a byte of the bad one."""
    s = sluice(allow=["recorder.test:443"], config={"policy": {"http_ports": "443"}})
    mark = recorder.mark()
    head = (b"POST http://recorder.test:443/up HTTP/1.1\r\nHost: recorder.test:443\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    with Conn(s.port) as c:
        c.send(head + b"5\r\nhello\r\n")
        recorder.wait_bytes(mark, 1, local=("11.0.0.3", 443))
        time.sleep(0.1)
        c.send(b"zz\r\nSMUGGLED / HTTP/1.1\r\n\r\n")
        r = c.read_response()
        assert r.status == 400
    got = recorder.wait_all_closed(mark, local=("11.0.0.3", 443))
    data = b"".join(g["data"] for g in got)
    assert data.endswith(b"5\r\nhello\r\n"), data
    assert b"zz" not in data and b"SMUGGLED" not in data


def test_happy_eyeballs_connects_past_a_blackholed_first_address(sluice):
    """blackholed.test is 11.0.0.4 (drops SYNs on 443), then 11.0.0.1 (the
    HTTPS origin): the second attempt starts 250 ms after the first, wins,
    and the first is closed."""
    s = sluice(allow=["blackholed.test"], config={"timeouts": {"connect_ms": 5000},
                                                  "policy": {"sni_check": False}})
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
        sock.sendall(b"CONNECT blackholed.test:443 HTTP/1.1\r\nHost: blackholed.test:443\r\n\r\n")
        reply = sock.recv(4096)
        elapsed = time.monotonic() - t0
        assert reply.startswith(b"HTTP/1.1 200"), reply
        d = s.decision_for(sock.getsockname()[1])
        assert d["decision"] == "allow" and d["addr"] == "11.0.0.1"
        assert 250 <= d["connect_ms"] < 300, d
        assert elapsed < 1.0
        # The losing attempt (a SYN to 11.0.0.4:443) is gone: no socket of
        # sluice's is still trying.
        out = subprocess.run(["ss", "-H", "-tnp", "state", "syn-sent", "dst", "11.0.0.4"],
                             capture_output=True, text=True, check=True).stdout
        assert f"pid={s.proc.pid}," not in out, out


def test_every_address_fails_after_connect_ms_with_the_last_one_tried(sluice):
    s = sluice(allow=["stall.test"], config={"timeouts": {"connect_ms": 400},
                                             "policy": {"sni_check": False}})
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
        sock.sendall(b"CONNECT stall.test:443 HTTP/1.1\r\nHost: stall.test:443\r\n\r\n")
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 504"), reply
    d = _last_decision(s)
    assert d["reason"] == "connect_timeout" and d["addr"] == "11.0.0.4"


def test_an_answer_is_classified_whole_whatever_sluice_keeps(sluice):
    """many.test has 17 addresses; the 17th is 127.0.0.1. sluice keeps 16 to
    connect to, but refuses the whole set."""
    s = sluice(allow=["many.test"])
    r = _exchange(s.port, b"GET http://many.test/ HTTP/1.1\r\nHost: many.test\r\n\r\n")
    assert_refused(r, 403, "non_public_address")
    assert b"127.0.0.1" in r.body
    d = _last_decision(s)
    assert d["reason"] == "non_public_address" and d["addr"] == "127.0.0.1"


def test_metadata_literal_is_refused_before_the_allowlist_and_nothing_is_suggested(sluice, dns):
    s = sluice(allow=STANDARD_ALLOW)
    mark = dns.mark()
    r = _exchange(s.port, b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n"
                             b"Host: 169.254.169.254\r\n\r\n")
    assert_refused(r, 403, "non_public_address")
    assert b"add this line" not in r.body and b"allow_cidr" not in r.body
    d = _last_decision(s)
    assert d["reason"] == "non_public_address" and d["addr"] == "169.254.169.254"
    assert "rule" not in d
    assert not dns.names_since(mark)


def test_private_literal_is_refused_with_the_allow_cidr_hint(sluice):
    s = sluice(allow=["10.0.0.1:80"])     # an allowlist line alone never allows it
    r = _exchange(s.port, b"GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n")
    assert_refused(r, 403, "non_public_address")
    assert b"allow_cidr = 10.0.0.1/32" in r.body
    assert b"add this line" not in r.body


def test_private_literal_inside_allow_cidr_is_still_decided_by_the_allowlist(sluice):
    s = sluice(allow=["10.0.0.1:80"], config={"policy": {"allow_cidr": "10.0.0.1/32"}})
    with socket.create_connection(("127.0.0.1", s.port), timeout=5) as sock:
        # 10.0.0.1:80 is a recorder: it takes the request and never answers.
        sock.sendall(b"GET http://10.0.0.1/x HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n")
        d = s.decision_for(sock.getsockname()[1])
    assert d["decision"] == "allow" and d["addr"] == "10.0.0.1"


def test_literal_admitted_by_allow_cidr_but_not_listed_gets_its_exact_line(sluice):
    s = sluice(allow=["origin.test"], config={"policy": {"allow_cidr": "10.0.0.1/32"}})
    r = _exchange(s.port, b"GET http://10.0.0.1:9000/ HTTP/1.1\r\nHost: 10.0.0.1:9000\r\n\r\n")
    assert_refused(r, 403, "not_allowlisted")
    assert b"\n    10.0.0.1:9000\n" in r.body, r.body
