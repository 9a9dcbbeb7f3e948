"""Hostile TLS clients of an inspected tunnel: ALPN without http/1.1, bytes
that are not TLS, a handshake stopped half-way, a ClientHello split over
many records, one larger than a record. Each ends in a handshake or a clear,
logged refusal within its time limit, and no request byte reaches the
origin unless the handshake completed."""

import re
import ssl
import time

import pytest

from sluicetest import tlshello
from sluicetest.client import Conn, client_hello
from sluicetest.inspectlog import check_inspected, check_request, mentions, show, tunnel_line, wait_requests
from sluicetest.pattern import pattern
from sluicetest.tlsclient import MemTLS, context, reframer, tls_through, tunnel

REG = "registry.inspect.test"
READS = f"GET,HEAD {REG}/*"


def _lines_of(s, conn_id):
    return [l for l in s.log_lines() if l.get("id") == conn_id]


def _no_client_bytes_upstream(o, mark):
    """Nothing the client sent reached the origin: no request, and no TLS
    from the client (sluice's own handshake, if any, is no client byte)."""
    conns = o.wait_closed(mark)
    assert not any(c.requests for c in conns), f"a request reached the origin: {conns}"
    return conns


def _still_serves(s):
    tsock, conn, raw = tls_through(s.port, REG, s.ca)
    assert conn.request("GET", "/bytes/3", host=REG).body == pattern(3)
    tsock.close()


def test_client_offering_only_h2_fails_its_handshake_and_the_close_line_says_why(sluice_inspecting,
                                                                                inspect_origins):
    o = inspect_origins
    s = sluice_inspecting(allow=[READS])
    mark = o.mark()
    raw = tunnel(s.port, REG)
    with pytest.raises(ssl.SSLError) as e:
        context(s.ca, alpn=("h2",)).wrap_socket(raw.sock, server_hostname=REG)
    assert re.search(r"no.application.protocol", str(e.value), re.I), \
        f"expected the no_application_protocol alert (RFC 7301), got {e.value}"
    raw.close()
    d = tunnel_line(s, raw.local_port)
    close = s.close_for(d["id"])
    assert mentions(close, r"alpn|application.protocol|\bh2\b|http/1\.1"), \
        f"the close line does not say the ALPN offer was refused:\n{show(_lines_of(s, d['id']))}"
    _no_client_bytes_upstream(o, mark)
    _still_serves(s)


@pytest.mark.parametrize("first", [f"GET / HTTP/1.1\r\nHost: {REG}\r\n\r\n".encode(), b"SSH-2.0-OpenSSH_9.2\r\n",
                                   b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00"],
                         ids=["http", "ssh", "not-a-clienthello"])
def test_bytes_other_than_tls_into_an_inspected_tunnel_are_refused_as_sni_mismatch(sluice_inspecting,
                                                                                   inspect_origins, first):
    o = inspect_origins
    s = sluice_inspecting(allow=[READS])
    mark = o.mark()
    raw = tunnel(s.port, REG)
    raw.send(first)
    closed, got = raw.drain_until_closed(5.0)
    assert closed, "the tunnel stayed open after bytes that are not TLS"
    assert got == b"" or got[:1] == b"\x15", f"unexpected bytes before the close: {got[:100]!r}"
    raw.close()
    d = tunnel_line(s, raw.local_port)
    assert (d["decision"], d["reason"]) == ("deny", "sni_mismatch"), show(_lines_of(s, d["id"]))
    conns = _no_client_bytes_upstream(o, mark)
    assert all(c.first_bytes == b"" for c in conns), f"bytes reached the origin: {conns}"


def test_client_that_stops_inside_its_client_hello_is_cut_at_header_ms(sluice_inspecting, inspect_origins):
    o = inspect_origins
    s = sluice_inspecting(allow=[READS], config={"timeouts": {"header_ms": 1000}})
    mark = o.mark()
    raw = tunnel(s.port, REG)
    t0 = time.monotonic()
    raw.send(client_hello(REG)[:60])
    closed, got = raw.drain_until_closed(6.0)
    elapsed = time.monotonic() - t0
    assert closed and got == b"", (closed, got[:100])
    assert elapsed <= 1.0 + 1.5, f"a half-sent ClientHello held the tunnel {elapsed:.2f}s (header_ms 1000)"
    d = tunnel_line(s, raw.local_port)
    assert d["decision"] == "deny" and mentions(d, r"header_ms|time"), show(_lines_of(s, d["id"]))
    conns = _no_client_bytes_upstream(o, mark)
    assert all(c.first_bytes == b"" for c in conns), f"bytes reached the origin: {conns}"


def test_client_that_stops_after_the_servers_hello_is_cut_at_header_ms(sluice_inspecting, inspect_origins):
    o = inspect_origins
    s = sluice_inspecting(allow=[READS], config={"timeouts": {"header_ms": 1000}})
    mark = o.mark()
    raw = tunnel(s.port, REG)
    t0 = time.monotonic()
    t = MemTLS(raw.sock, context(s.ca), REG)
    t.send_raw(t.first_flight())
    pending = t.read_server_flight()        # sluice's ServerHello ... ServerHelloDone
    assert pending, "the client had nothing to answer with"
    closed, got = raw.drain_until_closed(6.0)   # ... and it never answers
    elapsed = time.monotonic() - t0
    assert closed, "a client that stopped mid-handshake was never cut"
    assert elapsed <= 1.0 + 1.5, f"a stalled handshake held the tunnel {elapsed:.2f}s (header_ms 1000)"
    raw.close()
    d = tunnel_line(s, raw.local_port)
    try:
        s.wait_log(lambda l: l.get("id") == d["id"] and mentions(l, r"header_ms|time"))
    except AssertionError:
        raise AssertionError("no line for the tunnel says the handshake timed out:\n"
                             + show(_lines_of(s, d["id"]))) from None
    _no_client_bytes_upstream(o, mark)
    _still_serves(s)


@pytest.mark.parametrize("fragment", [64, 200])
def test_client_hello_split_over_several_records_still_handshakes(sluice_inspecting, inspect_origins,
                                                                  fragment):
    o = inspect_origins
    allow = [READS]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    raw = tunnel(s.port, REG)
    t = MemTLS(raw.sock, context(s.ca), REG)
    t.handshake(reframer(fragment))
    assert t.selected_alpn_protocol() == "http/1.1"
    r = Conn.wrap(t).request("GET", "/bytes/100", host=REG)
    assert r.status == 200 and r.body == pattern(100), r
    t.close()
    d = tunnel_line(s, raw.local_port)
    check_inspected(d, allow, READS, REG)
    [line] = wait_requests(s, d["id"], 1)
    check_request(line, allow, n=1, method="GET", path="/bytes/100", decision="allow", reason="rule",
                  status=200, rule=READS)
    assert [q.target for q in o.requests_since(mark)] == ["/bytes/100"]


def test_client_hello_larger_than_one_record_is_refused_clearly_and_at_once(sluice_inspecting, inspect_origins):
    o = inspect_origins
    s = sluice_inspecting(allow=[READS], config={"timeouts": {"header_ms": 30000}})
    mark = o.mark()
    hello = tlshello.frame(tlshello.client_hello_message(REG, padding=17000))
    assert len(tlshello.records(hello)[0]) == 2
    raw = tunnel(s.port, REG)
    t0 = time.monotonic()
    raw.send(hello)
    closed, got = raw.drain_until_closed(10.0)
    elapsed = time.monotonic() - t0
    assert closed, "a 17 KiB ClientHello left the tunnel open"
    assert elapsed < 5.0, f"the refusal took {elapsed:.2f}s: it waited for a timeout (header_ms 30000)"
    assert got == b"" or got[:1] == b"\x15", f"only a TLS alert may come back, got {got[:100]!r}"
    raw.close()
    d = tunnel_line(s, raw.local_port)
    assert d["decision"] == "deny" and d.get("reason") and d.get("detail"), \
        f"no clear refusal in the log:\n{show(_lines_of(s, d['id']))}"
    conns = _no_client_bytes_upstream(o, mark)
    assert not any(c.hello and c.hello["length"] > tlshello.RECORD_MAX for c in conns), \
        "the oversized ClientHello reached the origin"
    assert s.alive()
    _still_serves(s)
