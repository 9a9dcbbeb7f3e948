"""The decision log: one JSON object a line, SPEC's fields, exact byte
counts, and no way for a hostile request to break a line."""

import hashlib
import json
import re
import signal
import subprocess
import time

import pytest

from sluicetest.checks import REASONS, STANDARD_ALLOW
from sluicetest.client import Conn, connect, echo_both_ways, raw_exchange
from sluicetest.pattern import pattern
from sluicetest.proc import sanitizer_env

TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def _some_traffic(s):
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    echo_both_ways(conn.sock, b"x" * 1000)
    conn.close()
    resp, conn = connect(s.port, "denied.test:443")
    conn.close()
    with Conn(s.port) as c:
        assert c.request("GET", "http://origin.test/bytes/100").status == 200
        assert c.request("GET", "http://private.test/").status == 403
    raw_exchange(s.port, b"NONSENSE\r\n\r\n")[1].close()
    s.wait_count(lambda l: l.get("event") == "decision", 5, what="decision lines")
    s.wait_count(lambda l: l.get("event") == "close", 2, what="close lines")


def test_every_log_line_is_json_with_the_spec_fields(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    _some_traffic(s)
    s.stop()
    lines = s.log_lines(complete=True)
    assert lines
    for l in lines:
        assert TS_RE.match(str(l.get("ts"))), l
        assert isinstance(l.get("id"), str) and l["id"], l
        assert l.get("event") in ("decision", "close"), l
        if l["event"] == "decision":
            for k in ("client", "method", "host", "port", "decision", "reason"):
                assert k in l, f"decision line without {k}: {l}"
            assert re.match(r"^127\.0\.0\.1:\d+$", l["client"]), l
            assert l["decision"] in ("allow", "deny"), l
            assert l["reason"] in REASONS, l
            if l["decision"] == "allow":
                assert l["reason"] == "allowlisted" and "rule" in l and "addr" in l, l
        else:
            for k in ("bytes_up", "bytes_down", "duration_ms", "end"):
                assert k in l, f"close line without {k}: {l}"
            assert isinstance(l["bytes_up"], int) and isinstance(l["bytes_down"], int)
    ids = [l["id"] for l in lines if l["event"] == "close"]
    decided = {l["id"] for l in lines if l["event"] == "decision" and l["decision"] == "allow"}
    assert set(ids) <= decided, "a close line for an id that was never allowed"
    allow = [l for l in lines if l["event"] == "decision" and l["decision"] == "allow"]
    assert any(l["rule"].endswith("allowlist.txt:3") for l in allow if l["port"] == 9000), allow


def test_log_lines_carry_seq_and_a_sha256_chain(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    _some_traffic(s)
    s.stop()
    lines = s.log_lines(complete=True)
    assert [l.get("seq") for l in lines] == list(range(1, len(lines) + 1))
    assert "stream" in lines[0], lines[0]
    for l in lines:
        assert re.match(r"^[0-9a-f]{64}$", str(l.get("chain"))), l
    assert len({l["chain"] for l in lines}) == len(lines)
    # SPEC: chain = hex SHA-256 of the previous chain (the stream id for the
    # first line) followed by the line as written without its chain field;
    # recomputed here with hashlib, independently of sluice's own SHA-256
    prev = lines[0]["stream"].encode()
    for raw in s.log_path.read_bytes().split(b"\n")[:-1]:
        m = re.fullmatch(rb'(.*),"chain":"([0-9a-f]{64})"\}', raw)
        assert m, raw
        assert hashlib.sha256(prev + m.group(1) + b"}").hexdigest() == m.group(2).decode(), raw
        prev = m.group(2)


def test_after_a_log_reopen_the_first_line_names_the_seq_and_chain_it_continues_from(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    resp, conn = connect(s.port, "denied.test:443")
    conn.close()
    s.decision_for(conn.local_port)
    old = s.log_lines(complete=True)
    assert old and "seq" in old[-1] and "chain" in old[-1], old[-1]
    s.log_path.rename(s.log_path.with_suffix(".1"))
    s.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while not (s.log_path.exists() and s.log_lines()):
        resp, conn = connect(s.port, "denied.test:443")
        conn.close()
        assert time.monotonic() < deadline, "no new log file after SIGUSR1"
    first = s.log_lines()[0]
    # Lines made between the rename and the signal went to the renamed
    # file: the new file continues from whatever that one ends with.
    last = json.loads(s.log_path.with_suffix(".1").read_text().splitlines()[-1])
    assert last["seq"] >= old[-1]["seq"]
    assert first.get("continues_seq") == last["seq"] and first.get("continues_chain") == last["chain"], \
        f"first line after reopen does not name seq {last['seq']} and chain {last['chain']}: {first}"
    assert first["seq"] == last["seq"] + 1


def test_audit_verify_accepts_the_log_and_names_a_tampered_line(sluice, sluice_bin, tmp_path):
    s = sluice(allow=STANDARD_ALLOW)
    _some_traffic(s)
    s.stop()
    r = subprocess.run([str(sluice_bin), "audit", "--verify", str(s.log_path)],
                       capture_output=True, env=sanitizer_env(), timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    raw = s.log_path.read_bytes().split(b"\n")
    n = next(i for i, l in enumerate(raw) if b'"event":"close"' in l)
    raw[n] = re.sub(rb'"bytes_up":(\d+)', lambda m: b'"bytes_up":%d' % (int(m.group(1)) + 1), raw[n])
    tampered = tmp_path / "tampered.log"
    tampered.write_bytes(b"\n".join(raw))
    r = subprocess.run([str(sluice_bin), "audit", "--verify", str(tampered)],
                       capture_output=True, env=sanitizer_env(), timeout=60)
    out = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode != 0, out
    assert f":{n + 1}" in out or f"line {n + 1}" in out, f"does not name line {n + 1}: {out}"
    for text in (out,):
        assert "AddressSanitizer" not in text and "runtime error:" not in text


def test_close_line_counts_tunnel_payload_bytes_exactly(sluice):
    s = sluice(allow=STANDARD_ALLOW + ["origin.test:80"])
    # an echo: what goes up comes down
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    payload = pattern(123457, seed=9)
    assert echo_both_ways(conn.sock, payload) == payload
    conn.close()
    close = s.close_for(s.decision_for(conn.local_port)["id"])
    assert (close["bytes_up"], close["bytes_down"]) == (len(payload), len(payload))
    # HTTP inside a tunnel: a short request up, a long response down
    resp, conn = connect(s.port, "origin.test:80")
    assert resp.status == 200
    req = b"GET /bytes/54321 HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n"
    conn.sock.sendall(req)
    down = conn.read_until_eof()
    assert down.endswith(pattern(54321))
    conn.close()
    close = s.close_for(s.decision_for(conn.local_port)["id"])
    assert (close["bytes_up"], close["bytes_down"]) == (len(req), len(down))
    assert close["duration_ms"] >= 0


HOSTILE = [
    b'CONNECT "\\\x01\xff\xfe\x7f:443 HTTP/1.1\r\nHost: x\r\n\r\n',
    b'CONNECT a"b\\c.test:443 HTTP/1.1\r\nHost: a"b\\c.test:443\r\n\r\n',
    b'CONNECT ' + b'\\"' * 300 + b':443 HTTP/1.1\r\n\r\n',
    b'CONNECT \xc3\x28\xe2\x82:443 HTTP/1.1\r\n\r\n',
    b'CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\nUser-Agent: "\\\xff\xc3\x28}{\r\n\r\n',
    b'GET http://denied.test/"\\%22\xff\xfe\x1b[31m HTTP/1.1\r\nHost: denied.test\r\n\r\n',
    b'GET http://denied.test/ HTTP/1.1\r\nHost: "\\\x1b\xff\r\n\r\n',
    b'G\xffET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n',
    b'GET http://\xe2\x80\xae\xf0\x9f\x92\xa9.test/ HTTP/1.1\r\nHost: \xe2\x80\xae\xf0\x9f\x92\xa9.test\r\n\r\n',
    b'GET http://den\x00ied.test/ HTTP/1.1\r\nHost: den\x00ied.test\r\n\r\n',
]


@pytest.mark.parametrize("request_bytes", HOSTILE, ids=[f"hostile{i}" for i in range(len(HOSTILE))])
def test_hostile_request_still_yields_a_valid_json_log_line(sluice, request_bytes):
    s = sluice(allow=STANDARD_ALLOW)
    method = "CONNECT" if request_bytes.startswith(b"CONNECT") else "GET"
    resp, conn = raw_exchange(s.port, request_bytes, method=method)
    conn.close()
    assert resp.status in (400, 403), resp
    assert resp.decision and resp.decision[0] == "deny", resp
    d = s.decision_for(conn.local_port)       # parses every line as JSON
    assert d["decision"] == "deny"
    raw = s.log_path.read_bytes()
    raw.decode("utf-8")                       # strictly UTF-8
    assert not re.search(rb"[\x00-\x09\x0b-\x1f\x7f]", raw), "raw control byte in the log"
    assert raw.count(b"\n") == len(s.log_lines())


def test_relative_paths_in_the_config_resolve_against_its_directory(sluice):
    s = sluice(allow=["origin.test:9000"],
               config={"policy": {"allowlist": "allowlist.txt"}, "log": {"path": "decisions.log"}},
               start=False)
    s.log_path = s.workdir / "decisions.log"
    s.start()
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200, resp
    conn.close()
    assert s.decision_for(conn.local_port)["decision"] == "allow"


def test_a_refusals_line_is_in_the_file_before_its_reply_arrives(sluice):
    # The writer gathers lines for up to 100 ms, but a refusal's reply waits
    # for its own line: once the client has the 403, the line is there.
    s = sluice(allow=STANDARD_ALLOW)
    for i in range(20):
        with Conn(s.port) as c:
            resp = c.request("GET", f"http://denied-{i}.test/")
            assert resp.status == 403
            port = c.local_port
        lines = [l for l in s.log_lines() if l.get("event") == "decision"
                 and l.get("client") == f"127.0.0.1:{port}"]
        assert len(lines) == 1 and lines[0]["host"] == f"denied-{i}.test", \
            f"refusal {i} answered before its log line was written"
