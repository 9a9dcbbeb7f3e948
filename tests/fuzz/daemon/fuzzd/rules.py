"""The fuzzer's model of the request rules it gives sluice (SPEC part 2,
Request rules), and of its one credential. checks.py judges every request
line and every request an origin got against this model, never against
what sluice says.

Two inspected zones: i1 allows reads only, i2 any method under /up/ and
GET of /pub/*.txt. i1 also has a plain entry, which rules shadow: it must
allow nothing more. The credential is set on i2 only, and only inside TLS
sluice verified."""

import re

from . import net

ON = True      # whether the gate under test inspects (harness.py sets it; off: i1, i2 are refused)
INSPECTED = ("i1.fuzz.test", "i2.fuzz.test")
CANARY_NAME = "canary.i1.fuzz.test"      # the inspected canary (a name under i1)
CRED_NAME = "fz"
CRED_HEADER = "Authorization"
CRED_ZONE = "i2.fuzz.test"

# (zone, methods or None for any, path pattern): in the allowlist's order.
RULES = [
    ("i1.fuzz.test", {"GET", "HEAD"}, "/*"),
    ("i2.fuzz.test", None, "/up/*"),
    ("i2.fuzz.test", {"GET"}, "/pub/*.txt"),
]

ALLOWLIST = """# request rules (tests/fuzz/daemon/fuzzd/rules.py is their model)
GET,HEAD *.i1.fuzz.test/*
*.i1.fuzz.test
* *.i2.fuzz.test/up/*
GET *.i2.fuzz.test/pub/*.txt
"""

CREDENTIALS = f"{CRED_NAME} *.{CRED_ZONE} {CRED_HEADER} Bearer {{secret}}\n"


def _pattern(p):
    return re.compile("".join(".*" if ch == "*" else re.escape(ch) for ch in p), re.S)


_RULES = [(z, m, _pattern(p)) for z, m, p in RULES]


def zone_of(host):
    """The inspected zone a host is under (a subdomain, not the apex), or None."""
    h = str(host).lower().rstrip(".")
    for z in INSPECTED:
        if h.endswith("." + z):
            return z
    return None


def inspected(host, port, connect):
    """Whether request rules cover host:port (bare rules: the default ports)."""
    return zone_of(host) is not None and port in (net.CONNECT_PORTS if connect else net.HTTP_PORTS)


def has_credential(host, port, tls):
    """sluice sets the credential on this request (TLS only, never plain HTTP)."""
    return tls and zone_of(host) == CRED_ZONE and port in net.CONNECT_PORTS


_PCT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def path_ambiguous(path):
    """Why sluice must refuse this path (the target up to '?'), or None:
    dot segments (also percent-encoded), %2f, %5c, a backslash, %00, a bad
    percent escape (SPEC)."""
    if "\\" in path:
        return "backslash"
    if _PCT.search(path):
        return "bad escape"
    low = path.lower()
    for bad in ("%2f", "%5c", "%00"):
        if bad in low:
            return bad
    for seg in low.split("/"):
        if seg.replace("%2e", ".") in (".", ".."):
            return "dot segment"
    return None


def rule_allows(host, method, path):
    """The model's verdict on a request to an inspected host: the first
    rule (index) that allows it, or None. The path is without its query."""
    z = zone_of(host)
    for i, (zone, methods, pat) in enumerate(_RULES):
        if zone == z and (methods is None or method in methods) and pat.fullmatch(path):
            return i
    return None


def split_target(target):
    """An origin-form target's path without its query."""
    return target.split("?", 1)[0]


def rule_line_numbers(allowlist_text):
    """The line of each of RULES in the allowlist sluice reads, in order
    (a request line's "rule" must name the first rule that allows it)."""
    out = []
    for i, line in enumerate(allowlist_text.splitlines(), 1):
        first = line.split("#", 1)[0].split()
        if len(first) >= 2 and re.fullmatch(r"\*|[A-Z]+(,[A-Z]+)*", first[0]):
            out.append(i)
    return out