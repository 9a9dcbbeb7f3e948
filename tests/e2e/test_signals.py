"""SIGHUP reloads the policy atomically; SIGTERM drains open tunnels."""

import signal
import socket
import time

import pytest

from sluicetest.checks import assert_refused
from sluicetest.client import Closed, Conn, connect, echo_both_ways


def _passes(s, target):
    resp, conn = connect(s.port, target)
    ok = resp.status == 200
    if ok:
        assert echo_both_ways(conn.sock, b"reload") == b"reload"
    conn.close()
    return ok, resp


def test_sighup_adds_a_host_from_the_allowlist_file(sluice, dns):
    s = sluice(allow=["origin.test:9000"])
    ok, resp = _passes(s, "origin2.test:9000")
    assert not ok and resp.decision == ("deny", "not_allowlisted")
    s.write_allowlist(["origin.test:9000", "origin2.test:9000"])
    ok, line = s.reload()
    assert ok, line
    assert _passes(s, "origin2.test:9000")[0]
    assert _passes(s, "origin.test:9000")[0]


def test_sighup_removes_a_host(sluice, dns):
    s = sluice(allow=["origin.test:9000", "origin2.test:9000"])
    assert _passes(s, "origin2.test:9000")[0]
    s.write_allowlist(["origin.test:9000"])
    assert s.reload()[0]
    mark = dns.mark()
    ok, resp = _passes(s, "origin2.test:9000")
    assert not ok
    assert_refused(resp, 403, "not_allowlisted")
    assert "origin2.test" not in dns.names_since(mark)


@pytest.mark.parametrize("broken", ["allowlist-line", "unknown-config-key", "public-suffix-wildcard"])
def test_sighup_with_a_broken_config_keeps_the_old_policy(sluice, broken):
    s = sluice(allow=["origin.test:9000"])
    assert _passes(s, "origin.test:9000")[0]
    if broken == "allowlist-line":
        s.write_allowlist(["origin.test:9000", "origin2.test:9000", "bad host name!:x"])
    elif broken == "public-suffix-wildcard":
        s.write_allowlist(["origin.test:9000", "origin2.test:9000", "*.com"])
    else:
        s.write_allowlist(["origin.test:9000", "origin2.test:9000"])
        sections = dict(s.sections)
        sections["proxy"] = dict(sections["proxy"], no_such_key="1")
        s.write_config(sections)
    ok, line = s.reload()
    assert not ok, f"a broken config was accepted: {line}"
    assert s.alive()
    assert _passes(s, "origin.test:9000")[0], "old host lost after a failed reload"
    ok, resp = _passes(s, "origin2.test:9000")
    assert not ok, "a failed reload applied part of the new policy"
    assert resp.decision == ("deny", "not_allowlisted")
    # fixing the files and reloading again works
    s.write_allowlist(["origin.test:9000", "origin2.test:9000"])
    s.write_config(s.sections)
    ok, line = s.reload()
    assert ok, line
    assert _passes(s, "origin2.test:9000")[0]


def test_sighup_keeps_open_tunnels(sluice):
    s = sluice(allow=["origin.test:9000"])
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    s.write_allowlist(["origin2.test:9000"])
    assert s.reload()[0]
    assert echo_both_ways(conn.sock, b"still here" * 1000) == b"still here" * 1000
    conn.close()


def _wait_not_serving(port, deadline_s=5.0):
    """Wait until new clients are refused or not served any more."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            c = Conn(port, timeout=1.0)
        except (ConnectionRefusedError, socket.timeout):
            return "refused"
        except ConnectionResetError:
            # the connect raced the listener's close: the kernel resets
            # what was still in the accept queue
            return "reset"
        try:
            c.send(b"CONNECT origin.test:9000 HTTP/1.1\r\nHost: origin.test:9000\r\n\r\n")
            resp = c.read_head()
            served = resp.status == 200
        except (socket.timeout, Closed, OSError):
            served = False
        finally:
            c.close()
        if not served:
            return "not served"
        if time.monotonic() > deadline:
            raise AssertionError(f"new tunnels still served {deadline_s}s after SIGTERM")


def test_sigterm_lets_an_open_tunnel_finish(sluice):
    s = sluice(allow=["origin.test:9000"], config={"proxy": {"shutdown_grace_ms": 20000}})
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    assert echo_both_ways(conn.sock, b"before") == b"before"
    s.signal(signal.SIGTERM)
    _wait_not_serving(s.port)
    assert s.alive(), "sluice exited with a tunnel open"
    payload = b"during shutdown " * 4096
    assert echo_both_ways(conn.sock, payload) == payload
    d = s.decision_for(conn.local_port)
    conn.close()
    t0 = time.monotonic()
    rc = s.wait_exit(10)
    assert rc == 0, f"exit status {rc}"
    assert time.monotonic() - t0 < 5, "sluice lingered after its last tunnel closed"
    close = s.close_for(d["id"], timeout=1)
    assert close["bytes_up"] == 6 + len(payload) and close["bytes_down"] == 6 + len(payload)


def test_sigterm_closes_tunnels_left_open_after_the_grace_period(sluice):
    s = sluice(allow=["origin.test:9000"], config={"proxy": {"shutdown_grace_ms": 1000}})
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    rc = s.wait_exit(10)
    elapsed = time.monotonic() - t0
    assert rc == 0
    assert 0.8 <= elapsed <= 4.0, f"exited {elapsed:.2f}s after SIGTERM, grace is 1000 ms"
    closed, _ = conn.drain_until_closed(2)
    assert closed
    conn.close()
    d = s.decision_for(conn.local_port)
    s.close_for(d["id"], timeout=1)


def test_sigterm_with_no_clients_exits_0_at_once(sluice):
    s = sluice(allow=["origin.test:9000"])
    t0 = time.monotonic()
    s.stop()
    assert time.monotonic() - t0 < 3


def test_sigint_stops_like_sigterm(sluice):
    s = sluice(allow=["origin.test:9000"])
    s.signal(signal.SIGINT)
    assert s.wait_exit(10) == 0


def test_sigusr1_reopens_the_log_file(sluice):
    s = sluice(allow=["origin.test:9000"])
    resp, conn = connect(s.port, "denied.test:443")
    conn.close()
    s.decision_for(conn.local_port)
    rotated = s.log_path.with_suffix(".1")
    s.log_path.rename(rotated)
    s.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while True:
        resp, conn = connect(s.port, "denied.test:443")
        conn.close()
        if s.log_path.exists() and s.log_lines():
            break
        assert time.monotonic() < deadline, "no new log file after SIGUSR1"
    s.decision_for(conn.local_port)
    assert rotated.read_bytes().endswith(b"\n")
