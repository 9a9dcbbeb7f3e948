"""Config and allowlist semantics seen from outside: listeners, flags over
the config file, entry forms, exit_idle_s."""

import socket
import time

import pytest

from sluicetest.checks import assert_refused
from sluicetest.client import Conn, connect, echo_both_ways


def _tunnel_works(port, target="origin.test:9000", host="127.0.0.1"):
    c = Conn(port, host=host)
    c.send(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    resp = c.read_response("CONNECT")
    ok = resp.status == 200 and echo_both_ways(c.sock, b"ok") == b"ok"
    c.close()
    return ok


def test_listens_on_every_listen_address_including_ipv6(sluice):
    s = sluice(allow=["origin.test:9000"],
               config={"proxy": {"listen": ["127.0.0.1:0", "[::1]:0"]}}, listeners=2)
    hosts = sorted(h for h, _ in s.listeners)
    assert hosts == ["127.0.0.1", "::1"], s.listeners
    for host, port in s.listeners:
        assert _tunnel_works(port, host=host)


def test_command_line_flags_override_the_config_file(sluice):
    s = sluice(allow=[], config={"policy": {"allowlist": None}},
               args=["--allow", "origin2.test:9000", "--listen", "127.0.0.1:0"])
    assert _tunnel_works(s.port, "origin2.test:9000")
    resp, conn = connect(s.port, "origin.test:9000")
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")


def test_unicode_allowlist_entry_matches_its_xn_form(sluice):
    s = sluice(allow=["bücher.test:9000"])
    assert _tunnel_works(s.port, "xn--bcher-kva.test:9000")


def test_wildcard_entry_covers_subdomains_not_the_apex(sluice, dns):
    s = sluice(allow=["*.wild.test:9000"])
    assert _tunnel_works(s.port, "a.wild.test:9000")
    mark = dns.mark()
    resp, conn = connect(s.port, "wild.test:9000")
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")
    assert "wild.test" not in dns.names_since(mark)


def test_dot_entry_covers_the_apex_and_subdomains(sluice):
    s = sluice(allow=[".apex.test:9000"])
    assert _tunnel_works(s.port, "apex.test:9000")
    assert _tunnel_works(s.port, "b.apex.test:9000")


def test_comments_and_blank_lines_in_the_allowlist_are_ignored(sluice):
    s = sluice(allow=["", "# a comment", "   ", "origin.test:9000   # trailing comment", ""])
    assert _tunnel_works(s.port)


def test_exit_idle_s_exits_0_after_a_quiet_period(sluice):
    s = sluice(allow=["origin.test:9000"], config={"proxy": {"exit_idle_s": 1}})
    assert _tunnel_works(s.port)
    t0 = time.monotonic()
    rc = s.wait_exit(10)
    assert rc == 0
    assert time.monotonic() - t0 <= 1 + 3


def test_exit_idle_s_does_not_end_an_open_tunnel(sluice):
    s = sluice(allow=["origin.test:9000"], config={"proxy": {"exit_idle_s": 1}})
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    # an open (if quiet) tunnel is a client: the gate stays up well past 1 s
    closed, _ = conn.drain_until_closed(2.5)
    assert not closed and s.alive(), "exit_idle_s ended a gate with an open tunnel"
    assert echo_both_ways(conn.sock, b"still") == b"still"
    conn.close()
    assert s.wait_exit(10) == 0
