"""Where everything lives inside the fuzzer's network namespace, and the
check that it is one.

Nothing is sent before `isolate()` has run `verify()` from the end-to-end
suite's sluicetest/netns.py: a network namespace of our own whose only link
is lo, with no route out. Then lo gets the fuzzer's own addresses (netns.py's
lists belong to the end-to-end tests and are left alone)."""

import ipaddress
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
from sluicetest import netns  # noqa: E402

# Origins: 11.0.1.0/24 (and a few IPv6 ones). Slots o0..o29 are the
# per-case origins a DNS answer can name; CANARY serves the canaries,
# CANARY_TLS the inspected one.
ORIGIN_V4 = [f"11.0.1.{10 + i}" for i in range(30)]
ORIGIN_V6 = [f"2c0f:fff0:1::{10 + i:x}" for i in range(4)]
CANARY = "11.0.1.1"
CANARY_TLS = "11.0.1.2"               # the inspected canary's TLS origin
LITERAL_V4 = "11.0.1.200"             # on the allowlist as an IP literal
LITERAL_V6 = "2c0f:fff0:1::c8"
STALL = ("11.0.1.245", 8444)          # SYNs dropped: connects time out
OWN_PUBLIC = ("11.0.1.250", 8081)     # sluice's own second listener
UNROUTED_V4 = "11.0.2.1"              # public, not on lo: no route, connect fails
# Non-public addresses put on lo too: a gate that connected to one would
# reach our wildcard origins, which would notice.
PRIVATE_ON_LO = ["10.0.1.1", "192.168.7.1", "172.16.7.1", "100.64.7.1", "169.254.169.254",
                 "168.63.129.16", "198.18.0.1", "192.0.0.170"]
PRIVATE_V6_ON_LO = ["fd00:ec2::254", "fc00:7::1"]
DNS_SERVERS = [("127.0.0.60", 53), ("127.0.0.61", 53)]

HTTP_PORTS = [80, 8080]                # plain HTTP only (bare entries)
CONNECT_PORTS = [443, 8443]            # CONNECT only (bare entries)
ORIGIN_PORTS = HTTP_PORTS + CONNECT_PORTS
PUBLIC_NETS = [ipaddress.ip_network("11.0.0.0/8"), ipaddress.ip_network("2c0f:fff0::/32")]


def slot_addr(slot):
    """'o3' -> 11.0.1.13, 'v1' -> 2c0f:fff0:1::b; anything else as it is."""
    if isinstance(slot, str) and len(slot) >= 2 and slot[0] in "ov" and slot[1:].isdigit():
        i = int(slot[1:])
        pool = ORIGIN_V4 if slot[0] == "o" else ORIGIN_V6
        return pool[i % len(pool)]
    return slot


def is_public(addr):
    """Whether the fuzzer treats an address as public: its own public
    ranges, never the gate's own public listener on its port (the caller
    checks the port)."""
    try:
        a = ipaddress.ip_address(addr.strip("[]"))
    except ValueError:
        return False
    return any(a in n for n in PUBLIC_NETS)


def _ip(*args):
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def isolate():
    """Refuse to go on outside a fresh namespace; then bring up lo with our
    addresses. Raises netns.NotIsolated."""
    netns.verify()
    _ip("link", "set", "lo", "up")
    have = _ip("-o", "addr", "show", "dev", "lo")
    v4 = [CANARY, CANARY_TLS, LITERAL_V4, STALL[0], OWN_PUBLIC[0]] + ORIGIN_V4 + PRIVATE_ON_LO + \
         [a for a, _ in DNS_SERVERS if not a.startswith("127.")]
    for a in v4:
        if f" {a}/" not in have:
            _ip("addr", "add", f"{a}/32", "dev", "lo")
    for a in ORIGIN_V6 + [LITERAL_V6] + PRIVATE_V6_ON_LO:
        if f" {a}/" not in have:
            _ip("-6", "addr", "add", f"{a}/128", "dev", "lo", "nodad")
    # verify() again: adding addresses must not have added a way out.
    netns.verify()
