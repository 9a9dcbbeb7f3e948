"""sni_check: the first bytes into a tunnel to port 443 must be a ClientHello
naming the CONNECT host; otherwise the tunnel closes before a byte reaches
the origin. recorder.test (11.0.0.3:443) keeps whatever arrives."""

import pytest

from sluicetest.checks import STANDARD_ALLOW, assert_decision
from sluicetest.client import client_hello, connect

SNI_ON = {"policy": {"sni_check": "yes"}}
RECORDER = ("11.0.0.3", 443)


def _mentions(lines, conn_id, word):
    return any(l.get("id") == conn_id and word in (l.get("reason"), l.get("end"), l.get("decision"))
               for l in lines)


def _refused_before_origin(s, recorder, target, first_bytes):
    mark = recorder.mark()
    resp, conn = connect(s.port, target)
    assert resp.status == 200, resp
    conn.send(first_bytes)
    closed, got = conn.drain_until_closed(timeout=5.0)
    assert closed, "tunnel stayed open after a bad first flight"
    assert got == b"" or got[:1] == b"\x15", f"unexpected bytes before the close: {got[:100]!r}"
    conn.close()
    conns = recorder.wait_all_closed(mark, local=RECORDER)
    assert all(c["data"] == b"" for c in conns), \
        f"bytes reached the origin: {[c['data'][:80] for c in conns]}"
    d = s.decision_for(conn.local_port)
    s.wait_log(lambda l: _mentions([l], d["id"], "sni_mismatch"),
               what=f"sni_mismatch line for id {d['id']}")
    return d


def test_client_hello_naming_another_server_closes_tunnel_before_origin_sees_a_byte(sluice, recorder):
    s = sluice(allow=STANDARD_ALLOW, config=SNI_ON)
    _refused_before_origin(s, recorder, "recorder.test:443", client_hello("origin.test"))


def test_client_hello_without_server_name_is_refused_for_a_named_host(sluice, recorder):
    s = sluice(allow=STANDARD_ALLOW, config=SNI_ON)
    _refused_before_origin(s, recorder, "recorder.test:443", client_hello(None))


@pytest.mark.parametrize("first", [b"GET / HTTP/1.1\r\nHost: recorder.test\r\n\r\n",
                                   b"SSH-2.0-OpenSSH_9.2\r\n",
                                   b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00"],
                         ids=["http", "ssh", "not-a-clienthello"])
def test_non_tls_first_bytes_into_a_443_tunnel_are_refused(sluice, recorder, first):
    s = sluice(allow=STANDARD_ALLOW, config=SNI_ON)
    _refused_before_origin(s, recorder, "recorder.test:443", first)


@pytest.mark.parametrize("split", [False, True], ids=["one-write", "byte-pieces"])
def test_client_hello_with_matching_sni_passes_byte_exact(sluice, recorder, split):
    s = sluice(allow=STANDARD_ALLOW, config=SNI_ON)
    hello = client_hello("recorder.test")
    mark = recorder.mark()
    resp, conn = connect(s.port, "recorder.test:443")
    assert resp.status == 200, resp
    if split:
        for piece in (hello[:1], hello[1:5], hello[5:40], hello[40:]):
            conn.sock.sendall(piece)
    else:
        conn.sock.sendall(hello)
    conn.sock.sendall(b"after the hello")
    conns = recorder.wait_bytes(mark, len(hello) + 15, local=RECORDER)
    assert b"".join(c["data"] for c in conns) == hello + b"after the hello"
    conn.close()
    d = s.decision_for(conn.local_port)
    close = s.close_for(d["id"])
    assert close["bytes_up"] == len(hello) + 15 and close["bytes_down"] == 0


def test_sni_is_compared_case_insensitively(sluice, recorder):
    s = sluice(allow=STANDARD_ALLOW, config=SNI_ON)
    hello = client_hello("recorder.test").replace(b"recorder.test", b"RECORDER.Test")
    assert b"RECORDER.Test" in hello
    mark = recorder.mark()
    resp, conn = connect(s.port, "recorder.test:443")
    assert resp.status == 200
    conn.sock.sendall(hello)
    conns = recorder.wait_bytes(mark, len(hello), local=RECORDER)
    assert conns[0]["data"] == hello
    conn.close()


def test_ip_literal_tunnel_accepts_a_hello_without_server_name(sluice, recorder):
    s = sluice(allow=STANDARD_ALLOW + ["11.0.0.3:443"], config=SNI_ON)
    hello = client_hello(None)
    mark = recorder.mark()
    resp, conn = connect(s.port, "11.0.0.3:443")
    assert resp.status == 200, resp
    conn.sock.sendall(hello)
    conns = recorder.wait_bytes(mark, len(hello), local=RECORDER)
    assert conns[0]["data"] == hello
    conn.close()


def test_sni_check_off_lets_any_first_bytes_through(sluice, recorder):
    s = sluice(allow=STANDARD_ALLOW, config={"policy": {"sni_check": "no"}})
    mark = recorder.mark()
    resp, conn = connect(s.port, "recorder.test:443")
    assert resp.status == 200
    conn.sock.sendall(b"plain bytes")
    conns = recorder.wait_bytes(mark, 11, local=RECORDER)
    assert conns[0]["data"] == b"plain bytes"
    conn.close()


def test_sni_check_does_not_apply_to_other_ports(sluice):
    s = sluice(allow=STANDARD_ALLOW, config=SNI_ON)
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    conn.sock.sendall(b"not tls")
    assert conn.read_exact(7) == b"not tls"
    conn.close()


@pytest.mark.parametrize("sni,passes", [("recorder.test", True), ("origin.test", False)])
def test_client_hello_sent_together_with_the_connect_head_is_checked(sluice, recorder, sni, passes):
    """A client that does not wait for the 200 before its ClientHello."""
    from sluicetest.client import Conn
    s = sluice(allow=STANDARD_ALLOW, config=SNI_ON)
    hello = client_hello(sni)
    mark = recorder.mark()
    conn = Conn(s.port)
    conn.send(b"CONNECT recorder.test:443 HTTP/1.1\r\nHost: recorder.test:443\r\n\r\n" + hello)
    if passes:
        resp = conn.read_response("CONNECT")
        assert resp.status == 200, resp
        conns = recorder.wait_bytes(mark, len(hello), local=RECORDER)
        assert b"".join(c["data"] for c in conns) == hello
        conn.close()
    else:
        # the 200 may or may not have gone out before the hello was judged
        closed, got = conn.drain_until_closed(5.0)
        assert closed
        assert got == b"" or got.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 403 ")), got[:200]
        conn.close()
        conns = recorder.wait_all_closed(mark, local=RECORDER)
        assert all(c["data"] == b"" for c in conns)
        d = s.decision_for(conn.local_port)
        s.wait_log(lambda l: _mentions([l], d["id"], "sni_mismatch"), what="sni_mismatch line")


def test_tunnel_that_never_sends_a_client_hello_is_closed_at_header_ms(sluice, recorder):
    import time
    s = sluice(allow=STANDARD_ALLOW, config={"policy": {"sni_check": "yes"},
                                             "timeouts": {"header_ms": 1000}})
    mark = recorder.mark()
    t0 = time.monotonic()
    resp, conn = connect(s.port, "recorder.test:443")
    assert resp.status == 200
    closed, got = conn.drain_until_closed(5.0)
    elapsed = time.monotonic() - t0
    assert closed and got == b""
    assert elapsed <= 1.0 + 1.5, f"silent tunnel closed after {elapsed:.2f}s"
    conn.close()
    assert all(c["data"] == b"" for c in recorder.wait_all_closed(mark, local=RECORDER))
