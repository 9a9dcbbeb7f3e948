"""What the hostile-origin and hostile-client suites share: the allowlist,
starting a gate for them, reading the decision log per client connection,
and a few client-side waits."""

import itertools
import json
import random
import socket
import time

from .client import Conn
from .differential import request
from .netns import tcp_sockets
from .slowdns import ADDR as SLOW_DNS

ALLOW = [
    "h1.hostile.test",
    "h2.hostile.test",
    "two.hostile.test",
    "alias.hostile.test",
    "*.slow.hostile.test",
    "stall.test:443",
]
STALL = ("11.0.0.4", 443)


def gate(sluice, slow_dns=False, timeouts=None, env=None, **sections):
    """A sluice for these suites: the hostile allowlist, a short shutdown
    grace (the tests stop it to read a complete log), and with slow_dns the
    scriptable DNS server with pinning off, so every request resolves."""
    config = {"proxy": {"shutdown_grace_ms": 1000}}
    if slow_dns:
        config["dns"] = {"server": f"{SLOW_DNS[0]}:{SLOW_DNS[1]}", "min_ttl_s": 0, "max_ttl_s": 0,
                         "timeout_ms": 5000}
    if timeouts:
        config["timeouts"] = dict(timeouts)
    for k, v in sections.items():
        config.setdefault(k, {}).update(v)
    return sluice(allow=ALLOW, config=config, env=env)


def exchanges(s, port):
    """[(decision line, [its close lines])] for the client connection from
    127.0.0.1:port, in log order."""
    lines = s.log_lines()
    out = []
    for d in lines:
        if d.get("event") == "decision" and str(d.get("client", "")).endswith(f":{port}"):
            out.append((d, [l for l in lines if l.get("event") == "close" and l.get("id") == d.get("id")]))
    return out


def assert_exchanges(s, port, expected):
    """expected: [("allow", END or {END, ...}) | ("deny", REASON or {...})],
    one per request the client sent whose head sluice parsed: exactly one
    decision line each, and exactly one close line for each allow."""
    got = exchanges(s, port)

    def show():
        return "\n".join(json.dumps(d) + "".join("\n    " + json.dumps(c) for c in cs) for d, cs in got)

    assert len(got) == len(expected), \
        f"client :{port}: {len(got)} decision line(s), expected {len(expected)}:\n{show()}"
    for i, ((d, closes), (decision, what)) in enumerate(zip(got, expected)):
        ok = {what} if isinstance(what, str) else set(what)
        assert d["decision"] == decision, f"request {i + 1}: {decision} expected:\n{show()}"
        if decision == "allow":
            assert len(closes) == 1, f"request {i + 1}: {len(closes)} close lines:\n{show()}"
            assert closes[0]["end"] in ok, \
                f"request {i + 1}: close end {closes[0]['end']!r}, expected {sorted(ok)}:\n{show()}"
        else:
            assert d["reason"] in ok, f"request {i + 1}: reason {d['reason']!r}, expected {sorted(ok)}:\n{show()}"
            assert not closes, f"request {i + 1}: a deny with a close line:\n{show()}"


def read_until(conn, marker, timeout=5.0):
    """Read into conn.buf until it contains marker (bytes). Returns the
    buffer so far; raises AssertionError on EOF or timeout."""
    deadline = time.monotonic() + timeout
    old = conn.sock.gettimeout()
    try:
        while marker not in conn.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{marker!r} not received within {timeout}s; got {bytes(conn.buf)[:300]!r}")
            conn.sock.settimeout(left)
            try:
                data = conn.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                raise AssertionError(f"connection closed before {marker!r}; got {bytes(conn.buf)[:300]!r}")
            conn.buf += data
        return bytes(conn.buf)
    finally:
        conn.sock.settimeout(old)


def crash_summary(s):
    """'' if sluice runs; else its exit status and sanitizer SUMMARY lines."""
    if s.alive():
        return ""
    lines = [l for l in s.stderr.splitlines() if "SUMMARY:" in l or "ERROR:" in l]
    return f"sluice died (status {s.proc.poll()}): " + " | ".join(lines[:4])


def fresh_client_is_served(s, path, host="h1.hostile.test", timeout=5.0):
    """A new client gets a correct response from the gate (the scripted
    origin's default Serve). Returns the Sent for the differential check."""
    raw, sent = request("GET", f"http://{host}{path}")
    if not s.alive():
        raise AssertionError(crash_summary(s))
    try:
        with Conn(s.port, timeout=timeout) as c:
            c.send(raw)
            r = c.read_final(timeout=timeout)
    except Exception as e:
        time.sleep(0.2)     # let a crashing sluice finish dying, to say so
        raise AssertionError(f"the gate did not serve a fresh client for {path} ({e!r}). "
                             f"{crash_summary(s)}")
    assert r.status == 200 and r.header("X-Path") == path and r.header("X-Host") == host, \
        f"fresh client got the wrong response for {path}: {r!r}"
    return sent


def wait_origin_side_ended(remote, timeout=5.0):
    """Wait until no socket in this namespace is ESTABLISHED to remote: the
    origin's FIN or reset has reached the kernel on sluice's side. (The
    scripted origin's close can take effect a moment after its script step
    returns: its reader thread holds the socket until its recv() returns.)
    From then on sluice cannot mistake that connection for a live one: its
    check before reuse sees the end even if its event has not run yet."""
    deadline = time.monotonic() + timeout
    while tcp_sockets("ESTABLISHED", remote):
        if time.monotonic() > deadline:
            raise AssertionError(f"a connection to {remote} is still established after {timeout}s")
        time.sleep(0.002)


def syn_sent_ports(remote=STALL):
    """Local ports of sockets now connecting (SYN_SENT) to remote."""
    return {loc[1] for loc, _, _ in tcp_sockets("SYN_SENT", remote)}


def wait_new_syn_sent(before, remote=STALL, timeout=5.0):
    """Wait until a socket not in `before` is connecting to remote: sluice is
    in its connecting phase."""
    deadline = time.monotonic() + timeout
    while True:
        now = syn_sent_ports(remote)
        if now - before:
            return now - before
        if time.monotonic() > deadline:
            raise AssertionError(f"sluice did not start connecting to {remote} within {timeout}s")
        time.sleep(0.002)


def wait_no_syn_sent(ports, remote=STALL, timeout=5.0):
    """Wait until none of these local ports is still connecting to remote
    (every attempt timed out or was given up). Only sluice's own ports: the
    stall listener's queue fillers stay in SYN_SENT."""
    deadline = time.monotonic() + timeout
    while syn_sent_ports(remote) & set(ports):
        if time.monotonic() > deadline:
            raise AssertionError(f"sockets still connecting to {remote} after {timeout}s")
        time.sleep(0.01)


# Client ports for tests that match many short-lived connections to their log
# lines: a reset frees an ephemeral port at once and the kernel hands it out
# again, so these come from a counter below the ephemeral range instead.
_PORTS = itertools.count(20000 + random.randrange(0, 6000, 500))


def unique_port_conn(port, timeout=15.0):
    """A client connection from a port no other connection of this run used."""
    while True:
        p = next(_PORTS)
        if p >= 32000:
            raise AssertionError("out of client ports")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", p))
        except OSError:
            sock.close()
            continue
        sock.settimeout(timeout)
        sock.connect(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Conn(None, sock=sock)


def small_rcvbuf_conn(port, rcvbuf=65536, timeout=15.0):
    """A client connection with a small receive buffer, set before connect,
    so that a client that does not read holds little in the kernel."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.connect(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Conn(None, sock=sock)
