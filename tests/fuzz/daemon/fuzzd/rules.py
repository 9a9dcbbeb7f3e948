"""The fuzzer's model of the request rules it gives sluice (SPEC part 2,
Request rules), and of its one credential. checks.py judges every request
line and every request an origin got against this model, never against
what sluice says.

Two inspected zones: i1 allows reads only, i2 any method under /up/ and
GET of /pub/*.txt. i1 also has a plain entry, which rules shadow: it must
allow nothing more. The credential is set on i2 only, and only inside TLS
sluice verified."""

import base64
import hashlib
import re

from . import net

ON = True      # whether the gate under test inspects (harness.py sets it; off: i1, i2 are refused)
INSPECTED = ("i1.fuzz.test", "i2.fuzz.test")
CANARY_NAME = "canary.i1.fuzz.test"      # the inspected canary (a name under i1)
CRED_NAME = "fz"
CRED_HEADER = "Authorization"
CRED_ZONE = "i2.fuzz.test"

# Pinned artifacts (SPEC part 2): the bodies the fuzzer's origins know, and
# the digests the gate's GET rules pin them to. A rule may name several
# digests (any one matching will do), in several algorithms; /pin/many has
# twelve, the body's own last; /pin/many-cut forty, as pip gives one
# package, more than an integrity_mismatch line's "expected" lists (3,000
# bytes: "expected_more" counts the rest).
def _text_body(tag, unit, n):
    return (tag + unit * n).encode("latin-1")


BODIES = {
    "a": b"pinned artifact a.tgz: 0123456789\n",
    "b1": bytes((i * 7 + 3) % 94 + 33 for i in range(1500)),
    "b2": _text_body("b2:", "0123456789abcdef", 100),
    "empty": b"",
    "big": _text_body("big:", "0123456789abcdefghijklmnopqrstuv" * 2, 1600),
    "many": b"many digests, this one last\n",
    "c": b"a pinned text file\n" * 3,
}
BULK_N = 300000    # /pin/bulk is the origins' bulk filler (origins.py _bulk), this many bytes


def _bulk_bytes(n):
    block = (b"0123456789abcdefghijklmnopqrstuvwxyz" * 2000)[:65536]
    return (block * (n // len(block) + 1))[:n]


BODIES["bulk"] = _bulk_bytes(BULK_N)
_HASH = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


def sri(alg, data):
    return f"{alg}-{base64.b64encode(_HASH[alg](data).digest()).decode()}"


# path pattern -> (digests in the rule's order, the bodies that match)
PINS = [
    ("i1.fuzz.test", "/pin/a.tgz", [sri("sha256", BODIES["a"])], ["a"]),
    ("i1.fuzz.test", "/pin/b.tgz", [sri("sha512", BODIES["b1"]), sri("sha384", BODIES["b2"])], ["b1", "b2"]),
    ("i1.fuzz.test", "/pin/empty", [sri("sha256", b"")], ["empty"]),
    ("i1.fuzz.test", "/pin/big", [sri("sha384", BODIES["big"]), sri("sha256", BODIES["big"])], ["big"]),
    ("i1.fuzz.test", "/pin/bulk", [sri("sha256", BODIES["bulk"])], ["bulk"]),
    ("i1.fuzz.test", "/pin/many", [sri("sha512", b"decoy %d" % i) for i in range(11)] +
     [sri("sha512", BODIES["many"])], ["many"]),
    ("i1.fuzz.test", "/pin/many-cut", [sri("sha512", b"decoy %d" % i) for i in range(39)] +
     [sri("sha512", BODIES["many"])], ["many"]),
    ("i2.fuzz.test", "/pub/pin/*.txt", [sri("sha256", BODIES["c"]), sri("sha512", BODIES["c"])], ["c"]),
]
PINNED_PATHS = {"i1.fuzz.test": ["/pin/a.tgz", "/pin/b.tgz", "/pin/empty", "/pin/big", "/pin/bulk", "/pin/many",
                                 "/pin/many-cut"],
                "i2.fuzz.test": ["/pub/pin/x.txt", "/pub/pin/a/b.txt"]}

# (zone, methods or None for any, path pattern, digests): in the allowlist's
# order, the pinned rules first (the first rule that matches decides).
RULES = [(z, {"GET"}, p, d) for z, p, d, _ in PINS] + [
    ("i1.fuzz.test", {"GET", "HEAD"}, "/*", []),
    ("i2.fuzz.test", None, "/up/*", []),
    ("i2.fuzz.test", {"GET"}, "/pub/*.txt", []),
]

ALLOWLIST = "# request rules (tests/fuzz/daemon/fuzzd/rules.py is their model)\n" + "".join(
    f"GET *.{z}{p} {' '.join(d)}\n" for z, p, d, _ in PINS) + """GET,HEAD *.i1.fuzz.test/*
*.i1.fuzz.test
* *.i2.fuzz.test/up/*
GET *.i2.fuzz.test/pub/*.txt
"""

CREDENTIALS = f"{CRED_NAME} *.{CRED_ZONE} {CRED_HEADER} Bearer {{secret}}\n"


def _pattern(p):
    return re.compile("".join(".*" if ch == "*" else re.escape(ch) for ch in p), re.S)


_RULES = [(z, m, _pattern(p)) for z, m, p, _ in RULES]


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
_ESC = re.compile(r"%([0-9A-Fa-f]{2})")


def _refused_byte(b):
    """A decoded byte that may not be percent-encoded in a path."""
    return b in (0x2E, 0x2F, 0x5C) or b < 0x20 or b == 0x7F


def path_ambiguous(path):
    """Why sluice must refuse this path (the target up to '?'), or None.
    SPEC: dot segments (also percent-encoded), %2f, %5c, a backslash, %00,
    a bad percent escape; allowlist/README.md adds dot segments with
    ;params, empty segments but a trailing one, every encoded control
    byte, double encoding and overlong UTF-8 of these, raw bytes that are
    not printable ASCII, and '#'."""
    if "\\" in path:
        return "backslash"
    if any(not (0x21 <= ord(ch) <= 0x7E) for ch in path) or "#" in path:
        return "a byte that is not printable ASCII, or #"
    if _PCT.search(path):
        return "bad escape"
    for m in _ESC.finditer(path):
        b = int(m.group(1), 16)
        if b in (0x2F, 0x5C) or b < 0x20 or b == 0x7F:
            return f"encoded byte {m.group(0)}"
        nxt = _ESC.match(path, m.end())
        if b == 0x25 and nxt and _refused_byte(int(nxt.group(1), 16)) or \
                b == 0x25 and path[m.end():m.end() + 2].lower() in ("2e", "2f", "5c", "00"):
            return "double encoding"
        if b in (0xC0, 0xC1) or (b == 0xE0 and nxt and 0x80 <= int(nxt.group(1), 16) <= 0x9F) or \
                (b == 0xF0 and nxt and 0x80 <= int(nxt.group(1), 16) <= 0x8F):
            return "overlong UTF-8"
    segs = path.split("/")[1:]
    for i, seg in enumerate(segs):
        if seg == "" and i != len(segs) - 1:
            return "empty segment"
        if re.sub("%2e", ".", seg.split(";", 1)[0], flags=re.I) in (".", ".."):
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

def pin_of(host, method, path):
    """The digests that pin this request (the first rule that allows it
    has them), or None: not pinned, or refused. The path is without its
    query."""
    if path_ambiguous(path):
        return None
    i = rule_allows(host, method, path)
    return RULES[i][3] or None if i is not None else None


def algs_of(digests):
    """The algorithms a rule names, in the order it first names them."""
    out = []
    for d in digests:
        a = d.split("-", 1)[0]
        if a not in out:
            out.append(a)
    return out


# The gate holds a pinned body whole until its digest is known while it is
# at most [tls] pin_hold_kib (daemon.py sets it), far more than any body
# here: none of a body that does not match reaches a client.
PIN_HOLD_KIB = 8192


def pin_bodies(host, method, path):
    """The bodies of rules.BODIES that match the pin on this request."""
    digests = pin_of(host, method, path)
    return [b for b in BODIES.values() if digests and pin_matches(digests, b)]


def pin_matches(digests, body):
    return any(sri(d.split("-", 1)[0], body) == d for d in digests)


def actual_of(digests, body):
    """What the gate logs as "actual" for this body under these digests."""
    return " ".join(sri(a, body) for a in algs_of(digests))
