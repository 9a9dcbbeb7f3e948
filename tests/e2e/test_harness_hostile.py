"""The hostile suites' own tools, without sluice: the strict parser refuses
what it must, the differential check catches each kind of bad traffic, the
slow DNS server holds and answers, the scripted origin records and acts.
If these fail, the hostile suites' failures are the harness's."""

import socket
import threading
import time

import pytest

from sluicetest import dnsquery
from sluicetest.client import Conn
from sluicetest.differential import Sent, origin_problems, request
from sluicetest.scripted import H1, Reset, Script, Send, WaitEOF, WaitRequest
from sluicetest.slowdns import ADDR as SLOW
from sluicetest.strict import parse_requests, parse_responses

HEAD = b"POST /x HTTP/1.1\r\nHost: h1.hostile.test\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("body", [
    b"zz\r\n", b"-1\r\n", b"10000000000000000\r\n", b"5\r\nhello0\r\n\r\n", b"5\nhello\r\n0\r\n\r\n",
    b"5;a\x01b\r\nhello\r\n0\r\n\r\n", b"5\r\nhello\r\n0\r\nBad Trailer\r\n\r\n", b"5\r\nhello world\r\n0\r\n\r\n",
])
def test_strict_parser_refuses_bad_chunked_bodies(body):
    reqs, tail, err = parse_requests(HEAD + body)
    assert err is not None and not reqs, (body, reqs, tail)


@pytest.mark.parametrize("head", [
    b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    b"GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
    b"GET /x HTTP/1.1\r\nHost : a\r\n\r\n",
    b"GET /x HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
    b"GET /x HTTP/1.1\nHost: a\n\n",
    b"GET  /x HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /x HTTP/2.0\r\nHost: a\r\n\r\n",
])
def test_strict_parser_refuses_bad_request_heads(head):
    assert parse_requests(head)[2] is not None, head


def test_strict_parser_splits_a_stream_and_keeps_the_incomplete_tail():
    raw1, _ = request("POST", "http://h1.hostile.test/a", body=b"hello", chunked=True)
    raw2, _ = request("POST", "http://h1.hostile.test/b", body=b"0123456789")
    reqs, tail, err = parse_requests(raw1 + raw2[:-3])
    assert err is None and [r.body for r in reqs] == [b"hello"]
    assert tail.head.target == "http://h1.hostile.test/b" and tail.head.body == b"0123456"
    ext = HEAD + b'5;a=b;c="d \\" e"\r\nhello\r\n0\r\nX-T: 1\r\n\r\n'
    reqs, tail, err = parse_requests(ext)
    assert err is None and reqs[0].body == b"hello" and reqs[0].trailers == [("X-T", "1")]


def test_strict_response_parser_knows_bodiless_and_close_delimited_responses():
    data = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\nuntil close")
    methods = ["GET", "HEAD", "GET", "GET"]
    resps, tail, err = parse_responses(data, methods, eof=True)
    assert err is None and tail is None
    assert [(r.status, r.body) for r in resps] == [(100, b""), (204, b""), (200, b""), (200, b"ok"),
                                                   (200, b"until close")]
    resps, tail, err = parse_responses(data, methods, eof=False)
    assert tail is not None and tail.head.status == 200
    assert parse_responses(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n")[2]


class FakeConn:
    """What origin_problems needs of an OriginConn."""

    def __init__(self, index, data):
        self.index, self.received, self.local = index, data, H1


def _origin_form(raw):
    return raw.replace(b"http://h1.hostile.test", b"").replace(b"http://h2.hostile.test", b"")


def test_differential_check_accepts_faithful_traffic_and_catches_each_fault():
    raw_a, a = request("POST", "http://h1.hostile.test/a", body=b"hello")
    raw_b, b = request("GET", "http://h2.hostile.test/b", allowed=False)
    bad_body = b"5\r\nhelloXX\r\n0\r\n\r\n"
    raw_c, c = request("POST", "http://h1.hostile.test/c", chunked=True, raw_body=bad_body, valid=8)
    c.complete = False
    sent = [a, b, c]
    a_, b_, c_ = _origin_form(raw_a), _origin_form(raw_b), _origin_form(raw_c)
    cut = c_.index(b"\r\n\r\n") + 4
    assert origin_problems([FakeConn(0, a_), FakeConn(1, c_[:cut + 8])], sent) == []
    faults = {
        "twice": [FakeConn(0, a_ + a_)],
        "twice over two connections": [FakeConn(0, a_), FakeConn(1, a_)],
        "refused host": [FakeConn(0, b_)],
        "bytes after the malformed part": [FakeConn(0, c_[:cut + 9])],
        "malformed stream": [FakeConn(0, a_ + b"junk\r\n\r\n")],
        "never sent": [FakeConn(0, _origin_form(request("GET", "http://h1.hostile.test/z")[0]))],
        "other body": [FakeConn(0, a_.replace(b"hello", b"HELLO"))],
        "two hosts on one connection": [FakeConn(0, a_ + _origin_form(request("GET", "http://h2.hostile.test/y")[0]))],
    }
    sent_y = sent + [Sent("GET", "/y", "h2.hostile.test")]
    for what, conns in faults.items():
        assert origin_problems(conns, sent_y if "two hosts" in what else sent), f"{what} not caught"


def test_slow_dns_holds_then_answers_by_hand_built_records(_slow_dns):
    _slow_dns.reset()
    assert dnsquery.query("h1.hostile.test", "A", SLOW) == ("NOERROR", [("A", "11.0.0.5", 0)])
    assert dnsquery.query("x.slow.hostile.test", "A", SLOW)[1] == [("A", "11.0.0.5", 0)]
    assert dnsquery.query("nothing.test", "A", SLOW)[0] == "NXDOMAIN"
    assert dnsquery.query("h1.hostile.test", "AAAA", SLOW) == ("NOERROR", [])
    _slow_dns.hold("h2.hostile.test")
    mark = _slow_dns.mark()
    got = []
    t = threading.Thread(target=lambda: got.append(dnsquery.query("h2.hostile.test", "A", SLOW, timeout=5)))
    t.start()
    _slow_dns.wait_query("h2.hostile.test", mark)
    time.sleep(0.2)
    assert not got, "a held query was answered"
    _slow_dns.release("h2.hostile.test")
    t.join(5)
    assert got == [("NOERROR", [("A", "11.0.0.6", 0)])]
    _slow_dns.reset()


def test_scripted_origin_records_serves_and_resets(scripted):
    m = scripted.mark()
    scripted.play(Script(WaitRequest(), Send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), Reset()))
    with Conn(80, host="11.0.0.5") as c:
        raw, _ = request("GET", "http://h1.hostile.test/one")
        c.send(raw)
        assert c.read_final().body == b"ok"
        closed, rest = c.drain_until_closed(5)
        assert closed and rest == b""
    oc = scripted.wait_conn(m, 1)
    assert oc.received == raw and oc.wait_script() is None
    with Conn(80, host="11.0.0.5") as c:       # no script queued: Serve()
        raw, _ = request("POST", "http://h1.hostile.test/two", body=b"body")
        c.send(raw)
        r = c.read_final("POST")
        assert r.header("X-Path") == "http://h1.hostile.test/two" and r.body == b"body"
        c.sock.shutdown(socket.SHUT_WR)
        oc2 = scripted.wait_conn(m, 2)
        assert oc2.wait_closed(5) and oc2.ended == "eof"
    scripted.play(Script(WaitEOF()))
    with Conn(80, host="11.0.0.5") as c:
        c.reset()
    assert scripted.wait_conn(m, 3).wait_closed(5) and scripted.wait_conn(m, 3).ended == "reset"
