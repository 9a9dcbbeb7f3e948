"""Make sure the tests run inside a network namespace of their own, then give
its loopback the addresses the tests use.

The suite is run as `unshare --net -- python3 -m pytest tests/e2e`. Nothing may
send a packet before `verify()` has said that this process is in a fresh,
empty network namespace: a namespace other than its ancestors', whose only
link is `lo` and which has no route out."""

import os
import subprocess

# Addresses the tests put on lo. Inside the namespace they belong to the test.
PUBLIC_V4 = ["11.0.0.1", "11.0.0.2", "11.0.0.3", "11.0.0.4", "11.0.0.5", "11.0.0.6",
             # the inspecting origins (sluicetest/inspecting.py)
             "11.0.1.1", "11.0.1.2", "11.0.1.3", "11.0.1.4", "11.0.1.5", "11.0.1.6", "11.0.1.7",
             "11.0.1.10", "11.0.1.11", "11.0.1.12", "11.0.1.13", "11.0.1.14"]
PUBLIC_V6 = ["2c0f:fff0::1"]
PRIVATE_V4 = ["10.0.0.1"]


class NotIsolated(Exception):
    pass


def _ns(pid):
    return os.readlink(f"/proc/{pid}/ns/net")


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _ip(*args):
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def verify():
    """Raise NotIsolated unless this process is in a network namespace of its
    own with nothing but loopback in it."""
    mine = _ns("self")
    # PID 1's namespace may be unreadable in a sandbox: then an ancestor
    # (the shell that ran `unshare`) has to be in another namespace.
    other = None
    try:
        if _ns(1) != mine:
            other = "pid 1"
    except OSError:
        pass
    if other is None:
        pid = os.getpid()
        while pid > 1:
            try:
                pid = _ppid(pid)
                if pid <= 1:
                    break
                if _ns(pid) != mine:
                    other = f"ancestor pid {pid}"
                    break
            except OSError:
                break
    if other is None:
        raise NotIsolated(
            f"this process's network namespace ({mine}) is not a new one: no ancestor "
            "is in another; run the suite as `unshare --net -- python3 -m pytest tests/e2e` "
            "(make e2e)")
    links = [line.split(":")[1].strip().split("@")[0]
             for line in _ip("-o", "link", "show").splitlines() if line.strip()]
    if links != ["lo"]:
        raise NotIsolated(f"network namespace has links other than lo: {links}")
    for family in ("-4", "-6"):
        routes = _ip(family, "route", "show", "default").strip()
        if routes:
            raise NotIsolated(f"network namespace has a default route: {routes}")
        for table in ("main",):
            for line in _ip(family, "route", "show", "table", table).splitlines():
                if line.strip() and " dev lo" not in line and not line.startswith(("local", "unreachable", "blackhole")):
                    raise NotIsolated(f"network namespace has a route off loopback: {line}")


def setup_loopback():
    """Bring lo up and add the test's addresses to it."""
    _ip("link", "set", "lo", "up")
    existing = _ip("-o", "addr", "show", "dev", "lo")
    for a in PUBLIC_V4 + PRIVATE_V4:
        if f" {a}/" not in existing:
            _ip("addr", "add", f"{a}/32", "dev", "lo")
    for a in PUBLIC_V6:
        if f" {a}/" not in existing:
            _ip("-6", "addr", "add", f"{a}/128", "dev", "lo", "nodad")
    with open("/proc/sys/net/ipv6/conf/lo/disable_ipv6") as f:
        if f.read().strip() != "0":
            raise NotIsolated("IPv6 is disabled on lo in the test namespace")


def tcp_sockets(state=None, remote=None):
    """[(local (ip, port), remote (ip, port), state)] of this namespace's IPv4
    TCP sockets (/proc/net/tcp), filtered by state (e.g. "SYN_SENT") and
    remote address. Used to see that sluice is connecting somewhere."""
    import ipaddress
    import struct
    states = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "06": "TIME_WAIT",
              "07": "CLOSE", "08": "CLOSE_WAIT", "0A": "LISTEN"}

    def addr(text):
        ip, port = text.split(":")
        return str(ipaddress.IPv4Address(struct.pack("<I", int(ip, 16)))), int(port, 16)

    out = []
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            st = states.get(parts[3], parts[3])
            loc, rem = addr(parts[1]), addr(parts[2])
            if (state is None or st == state) and (remote is None or rem == tuple(remote)):
                out.append((loc, rem, st))
    return out
