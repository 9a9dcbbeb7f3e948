"""Plain HTTP (absolute-form) requests that are allowed, and keep-alive."""

import json
import socket

import pytest

from sluicetest.checks import STANDARD_ALLOW, assert_decision, assert_refused
from sluicetest.client import Conn, curl
from sluicetest.pattern import BIG, digest, pattern


@pytest.mark.parametrize("path", ["bytes", "chunked", "close"])
def test_http_download_of_64_mib_is_byte_exact(sluice, path):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port, timeout=60) as c:
        r = c.request("GET", f"http://origin.test/{path}/{BIG}")
        assert r.status == 200, r
        assert len(r.body) == BIG and digest(r.body) == digest(pattern(BIG))
        if path == "close":
            assert c.at_eof(), "a body delimited by close must end with the connection"
        d = s.decision_for(c.local_port)
    assert_decision(d, "allow", "allowlisted", "origin.test", 80, "GET")
    s.close_for(d["id"])


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_http_upload_of_64_mib_is_echoed_byte_exact(sluice, chunked):
    s = sluice(allow=STANDARD_ALLOW)
    body = pattern(BIG, seed=4)
    with Conn(s.port, timeout=60) as c:
        r = c.request("POST", "http://origin.test/echo", body=body, chunked=chunked)
        assert r.status == 200, r
        assert r.header("X-Request-Framing") == ("chunked" if chunked else "length")
        assert len(r.body) == BIG and digest(r.body) == digest(body)


def test_keep_alive_connection_checks_each_request_on_its_own(sluice, dns):
    s = sluice(allow=STANDARD_ALLOW)
    mark = dns.mark()
    with Conn(s.port) as c:
        r1 = c.request("GET", "http://origin.test/bytes/1000")
        assert r1.status == 200 and r1.body == pattern(1000)
        assert not r1.conn_close
        r2 = c.request("GET", "http://origin2.test/chunked/2000")
        assert r2.status == 200 and r2.body == pattern(2000)
        assert not r2.conn_close
        r3 = c.request("GET", "http://origin.test:8080/bytes/30")
        assert r3.status == 200 and r3.body == pattern(30)
        r4 = c.request("GET", "http://denied.test/bytes/10")
        assert_refused(r4, 403, "not_allowlisted")
        if r4.conn_close:
            assert c.at_eof(), "reply said Connection: close but the connection stayed open"
        else:
            r5 = c.request("GET", "http://origin.test/bytes/5")
            assert r5.status == 200 and r5.body == pattern(5)
        port = c.local_port
    lines = s.decisions_for(port)
    assert [(l["host"].lower(), l["port"], l["decision"]) for l in lines[:4]] == [
        ("origin.test", 80, "allow"), ("origin2.test", 80, "allow"),
        ("origin.test", 8080, "allow"), ("denied.test", 80, "deny")]
    assert "denied.test" not in dns.names_since(mark)


def test_head_response_has_no_body_and_connection_stays_usable(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        r = c.request("HEAD", "http://origin.test/bytes/5000")
        assert r.status == 200 and r.header("Content-Length") == "5000" and r.body == b""
        r = c.request("GET", "http://origin.test/bytes/70")
        assert r.status == 200 and r.body == pattern(70)


def test_request_is_forwarded_in_origin_form_without_hop_by_hop_headers(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        r = c.request("GET", "http://origin.test/headers?q=1", headers=[
            ("Proxy-Authorization", "Basic c2VjcmV0OnNlY3JldA=="),
            ("Proxy-Connection", "keep-alive"),
            ("Keep-Alive", "timeout=5"),
            ("Connection", "X-Private-Hop"),
            ("X-Private-Hop", "secret"),
            ("X-Kept", "yes"),
        ])
        assert r.status == 200, r
        doc = json.loads(r.body)
    assert doc["target"] == "/headers?q=1"
    names = {k.lower() for k, _ in doc["headers"]}
    for hop in ("proxy-authorization", "proxy-connection", "keep-alive", "x-private-hop"):
        assert hop not in names, f"{hop} was forwarded: {doc['headers']}"
    assert ("X-Kept", "yes") in [tuple(h) for h in doc["headers"]]
    hosts = [v for k, v in doc["headers"] if k.lower() == "host"]
    assert hosts == ["origin.test"]


def test_host_header_that_disagrees_with_the_url_is_400(sluice, dns):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        r = c.request("GET", "http://origin.test/bytes/1", host="origin2.test")
        assert_refused(r, 400, "bad_request")


def test_request_with_content_length_and_transfer_encoding_is_400(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        c.send(b"POST http://origin.test/echo HTTP/1.1\r\nHost: origin.test\r\n"
               b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        r = c.read_response()
        assert_refused(r, 400, "bad_request")


def test_curl_fetches_plain_http_through_the_proxy(sluice, tmp_path):
    s = sluice(allow=STANDARD_ALLOW)
    out = tmp_path / "body"
    r = curl(s.port, "-o", str(out), "-w", "%{http_code}", "http://origin.test/chunked/777777")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"200" and out.read_bytes() == pattern(777777)


def test_http_to_an_ipv6_origin(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        r = c.request("GET", "http://v6.test/bytes/12345")
        assert r.status == 200 and r.body == pattern(12345)


def test_pipelined_requests_are_answered_in_order(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        c.send(b"GET http://origin.test/bytes/100 HTTP/1.1\r\nHost: origin.test\r\n\r\n"
               b"POST http://origin2.test/echo HTTP/1.1\r\nHost: origin2.test\r\n"
               b"Content-Length: 5\r\n\r\nhello"
               b"GET http://origin.test/chunked/300 HTTP/1.1\r\nHost: origin.test\r\n\r\n")
        r1 = c.read_response()
        r2 = c.read_response()
        r3 = c.read_response()
    assert r1.status == 200 and r1.body == pattern(100)
    assert r2.status == 200 and r2.body == b"hello"
    assert r3.status == 200 and r3.body == pattern(300)


def test_http_1_0_client_gets_its_response_and_the_connection_closes(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        r = c.request("GET", "http://origin.test/bytes/4321", version="HTTP/1.0")
        assert r.status == 200 and r.body == pattern(4321)
        assert c.at_eof()


@pytest.mark.parametrize("body", [b"", b"hello"])
def test_a_half_close_after_a_whole_request_still_gets_the_response(sluice, body):
    """The client sends its request (with or without a body) and shuts its
    sending side at once, while the gate is still resolving and connecting:
    the response still arrives whole, then the connection closes."""
    s = sluice(allow=STANDARD_ALLOW)
    with Conn(s.port) as c:
        if body:
            c.send(b"POST http://origin2.test/echo HTTP/1.1\r\nHost: origin2.test\r\n"
                   b"Content-Length: 5\r\n\r\n" + body)
        else:
            c.send(b"GET http://origin.test/bytes/5000 HTTP/1.1\r\nHost: origin.test\r\n\r\n")
        c.sock.shutdown(socket.SHUT_WR)
        r = c.read_response()
        assert r.status == 200
        assert r.body == (body if body else pattern(5000))
        assert c.at_eof()
    d = s.decision_for(c.local_port)
    close = s.close_for(d["id"])
    assert close["end"] == "done"
