"""Attacks on inspected tunnels from a reviewer's side: TLS peers that send
what no TLS library sends on request (sluicetest/tlsrecords.py writes their
records), the tunnel's state machine hit at awkward moments, the request
log, and the credential's header."""

import time

from sluicetest.inspectlog import check_request, show, tunnel_line, wait_requests
from sluicetest.pattern import pattern
from sluicetest.tlsclient import tunnel
from sluicetest.tlsrecords import ALERT, APPLICATION_DATA, CLIENT_HELLO_EMPTY, HANDSHAKE, RawTLS

REG = "registry.inspect.test"
READS = f"GET,HEAD {REG}/*"
MiB = 1 << 20


def _raw_client(s, host=REG):
    raw = tunnel(s.port, host)
    return raw, RawTLS.client(raw.sock, s.ca, host).handshake()


def _get(host, path, extra=""):
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()


def _ends_response(data):
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) >= int(v)
    return False


def test_hand_written_records_carry_a_request_through_the_tunnel(sluice_inspecting, inspect_origins):
    """The record writer itself: a request in records of our own, the
    response read out of sluice's records (so the attacks below mean what
    they say)."""
    s = sluice_inspecting(allow=[READS])
    raw, t = _raw_client(s)
    t.send_app(_get(REG, "/bytes/50"), record=7)    # a head in 7-byte records
    data, closed, _ = t.recv_app_until(_ends_response)
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(pattern(50)), data[:300]
    raw.close()
    d = tunnel_line(s, raw.local_port)
    [line] = wait_requests(s, d["id"], 1)
    check_request(line, [READS], n=1, method="GET", path="/bytes/50", decision="allow", reason="rule",
                  status=200, rule=READS)


def _push(sock, data, stall_s=2.0):
    """Send as much of data as the peer takes; stop when a send has waited
    stall_s. Returns the bytes sent."""
    sock.settimeout(stall_s)
    sent = 0
    view = memoryview(data)
    try:
        while sent < len(data):
            sent += sock.send(view[sent:sent + (1 << 16)])
    except (TimeoutError, BlockingIOError):
        pass
    return sent


def test_renegotiation_requests_from_a_client_that_does_not_read_are_bounded(sluice_inspecting,
                                                                            inspect_origins):
    """Renegotiation is off, so sluice answers each ClientHello after the
    handshake with a no_renegotiation warning alert (RFC 5746 / 5246
    7.2.2) and reads on. A record of 4,096 empty ClientHellos is 16 KiB;
    its 4,096 alerts are 124 KiB. A client that never reads must not make
    sluice queue those without a bound: its reading has to stop while its
    replies wait."""
    s = sluice_inspecting(allow=[READS])
    raw, t = _raw_client(s)
    # One record first: the alerts really come (this is what the flood repeats).
    t.send_record(HANDSHAKE, CLIENT_HELLO_EMPTY * 3)
    recs, _ = t.recv_records(5.0, until=lambda r: len(r) >= 3)
    assert [(ty, p) for ty, p in recs] == [(ALERT, b"\x01\x64")] * 3, recs
    rss0 = s.rss()
    seq0 = t.wseq
    record = t.seal(HANDSHAKE, CLIENT_HELLO_EMPTY * 4096)
    flood = b"".join([record] + [t.seal(HANDSHAKE, CLIENT_HELLO_EMPTY * 4096) for _ in range(511)])
    sent = _push(raw.sock, flood)                      # 8 MiB, never reading
    time.sleep(0.5)
    grown = s.rss() - rss0
    assert grown < 24 * MiB, \
        f"{sent / MiB:.1f} MiB of renegotiation requests (client not reading) grew sluice by {grown / MiB:.1f} MiB"
    cpu0 = _cpu_s(s)
    time.sleep(1.0)
    assert _cpu_s(s) - cpu0 < 0.3, "sluice spins while its answers wait for a client that does not read"
    # The client reads again: what was held back is answered, then requests go on.
    t.rseq += _discard_records(t, raw.sock, quiet_s=1.5)
    raw.sock.settimeout(10.0)
    raw.sock.sendall(flood[sent:sent + (-sent) % len(record)])   # the record cut by the stall, whole
    t.wseq = seq0 + -(-sent // len(record))                       # the records sent, not all sealed
    t.send_app(_get(REG, "/bytes/20"))
    data, closed, _ = t.recv_app_until(_ends_response)
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(pattern(20)), data[:300]
    raw.close()
    assert s.alive()


def _cpu_s(s):
    with open(f"/proc/{s.proc.pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / 100.0   # utime + stime, in clock ticks


def _discard_records(t, sock, quiet_s):
    """Read and count whole records (unopened) until none come for quiet_s."""
    buf, n = bytearray(t.rbuf), 0
    sock.settimeout(quiet_s)
    while True:
        off = 0
        while len(buf) - off >= 5:
            size = 5 + int.from_bytes(buf[off + 3:off + 5], "big")
            if len(buf) - off < size:
                break
            off += size
            n += 1
        del buf[:off]
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not data:
            break
        buf += data
    t.rbuf = bytes(buf)
    return n


# --- the log of a tunnel ---------------------------------------------------------

SPEC_REASONS = {"allowlisted", "not_allowlisted", "port_not_allowed", "bad_request", "non_public_address",
                "dns_error", "dns_timeout", "connect_failed", "connect_timeout", "sni_mismatch",
                "too_many_clients", "log_unavailable", "shutdown", "inspected", "rule", "rule_not_matched",
                "upstream_tls_failed"}


def test_an_inspected_connects_decision_line_names_the_sni_it_read(sluice_inspecting, inspect_origins):
    """SPEC's decision line has `sni` whenever a ClientHello with a server
    name was read; an inspected CONNECT reads one as every checked tunnel
    does (its allow line is written later, after the origin's handshake)."""
    s = sluice_inspecting(allow=[READS, "GET,HEAD expired.inspect.test/*"])
    for host in (REG, "expired.inspect.test"):
        raw, t = _raw_client(s, host)
        raw.close()
        d = tunnel_line(s, raw.local_port)
        assert d.get("sni") == host, f"the decision line of CONNECT {host} has no sni:\n{show([d])}"


def test_a_client_gone_during_the_origins_handshake_still_gets_a_decision_of_spec(sluice_inspecting, recorder):
    """The client sends its ClientHello and closes while sluice's handshake
    with the origin runs (the recorder never answers it). The CONNECT was
    made, so it is decided as any other: by what the origin does (here no
    handshake within connect_ms: upstream_tls_failed), with a reason SPEC
    lists; not deny `client_eof`."""
    from sluicetest.client import client_hello
    host = "recorder.test"
    s = sluice_inspecting(allow=[f"GET {host}/*"], config={"timeouts": {"connect_ms": 1500}})
    mark = recorder.mark()
    raw = tunnel(s.port, host)
    raw.send(client_hello(host))
    recorder.wait_bytes(mark, 5)                  # sluice's own ClientHello reached the origin
    raw.close()
    d = tunnel_line(s, raw.local_port)
    lines = [l for l in s.log_lines() if l.get("id") == d["id"]]
    assert d["reason"] in SPEC_REASONS, f"a reason SPEC does not list:\n{show(lines)}"
    assert (d["decision"], d["reason"]) == ("deny", "upstream_tls_failed"), show(lines)
    time.sleep(0.3)
    lines = [l for l in s.log_lines() if l.get("id") == d["id"]]
    assert [l["event"] for l in lines] == ["decision"], show(lines)


def test_a_request_head_cut_by_header_ms_in_a_tunnel_gets_a_line_with_its_own_n(sluice_inspecting,
                                                                               inspect_origins):
    """n counts the requests of a tunnel from 1; a head that never ends
    (refused 408 at header_ms) is a request with its own n, not the
    previous one's again (nor 0 when it is the first)."""
    s = sluice_inspecting(allow=[READS], config={"timeouts": {"header_ms": 800}})
    for before in (0, 1):
        raw, t = _raw_client(s)
        for i in range(before):
            t.send_app(_get(REG, "/bytes/3"))
            data, _, _ = t.recv_app_until(_ends_response)
            assert data.startswith(b"HTTP/1.1 200"), data[:200]
        t.send_app(b"GET /bytes/3 HTTP/1.1\r\nHost: ")
        data, closed, _ = t.recv_app_until(_ends_response, timeout=5.0)
        assert data.startswith(b"HTTP/1.1 408"), data[:200]
        raw.close()
        d = tunnel_line(s, raw.local_port)
        lines = wait_requests(s, d["id"], before + 1)
        assert [l["n"] for l in lines] == list(range(1, before + 2)), show(lines)
