"""Generators: a case from a seed.

A case is plain JSON (so it can be stored, replayed and mutated):

  {"v": 1, "seed": S, "origin": "gen" | "mut:...",
   "clients": [CLIENT...],             # connections to sluice, run together
   "origins": {"SLOT:PORT": [SCRIPT...]},   # per accepted connection, in order
   "dns": {NAME: {"A": [ANSWER...], "AAAA": [ANSWER...]}}}   # per query, in order

Bytes are latin-1 strings. Names carry the placeholder NONCE, which each
run replaces with a fresh 6-hex-digit value (same length: split offsets
stay put), so that no answer is ever served from an earlier case's pin.
SLOT is o0..o29 (11.0.1.10..39), v0..v3 (2c0f:fff0:1::a..d) or an address.

CLIENT: {"start_ms", "data", "bulk" (filler bytes sent after data),
  "writes": [[len, delay_ms]...] (the rest goes in one piece),
  "end": {"kind": hold|shut|rst|close, "at": offset|null, "ms": delay},
  "stop_read": bytes after which the client stops reading (-1: never),
  "rcvbuf": SO_RCVBUF or 0, "wait_ms": how long to wait for sluice to close}

SCRIPT: a list of ops: {"op": "req"} (wait for one whole request),
  {"op": "send", "d": DATA, "w": [[len, delay]...]}, {"op": "bulk", "n": N},
  {"op": "sleep", "ms": N}, {"op": "shut"}, {"op": "rst"}, {"op": "close"},
  {"op": "stall"} (never read again), {"op": "echo", "ms": N},
  and optionally {"rcvbuf": N} as the first element's sibling key "rcvbuf".
  After the last op the origin reads until EOF, then closes.

ANSWER: {"rcode": 0, "an": [RR...], "ttl"...} or {"drop": 1}, with optional
  "delay_ms", "tc" (truncated: c-ares retries over TCP, which gets "tcp":
  ANSWER or "close"), "cut": N (send only N bytes), "raw": DATA (these
  bytes with the query's id), "wrong_id": 1, "dup": N, "qd": "none"|"other".
RR: {"t": "A"|"AAAA"|"CNAME"|"TXT", "name": "@"|NAME, "addr": SLOT|ADDR,
  "target": NAME, "ttl": N}.
"""

import copy
import random

from . import gen_inspect, net, rules
from .tls import client_hello

NONCE = "~nnnn~"
POISON = "P0ISON-"
ZONES = {"ok": "ok.fuzz.test", "no": "no.fuzz.test", "port": "port.fuzz.test",
         "i1": "i1.fuzz.test", "i2": "i2.fuzz.test"}   # i1, i2: inspected (rules.py)

NONPUBLIC_V4 = ["10.0.1.1", "127.0.0.1", "127.0.0.53", "0.0.0.0", "169.254.169.254",
                "168.63.129.16", "192.168.7.1", "172.16.7.1", "100.64.7.1", "198.18.0.1",
                "192.0.0.170", "224.0.0.1", "240.0.0.1", "255.255.255.255", "192.0.2.1"]
NONPUBLIC_V6 = ["::1", "::", "fd00:ec2::254", "fc00:7::1", "fe80::7", "::ffff:10.0.1.1",
                "::ffff:11.0.1.10", "::ffff:127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:101",
                "2001:db8::1", "ff02::1", "2002:a00:101::1", "100::1", "::a00:101"]
TTLS = [0, 0, 1, 2, 5, 30, 300, 86400, 2**31 - 1, 2**31, 2**32 - 1]
METHODS = ["GET", "GET", "GET", "HEAD", "POST", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]
WEIRD_METHODS = ["get", "G ET", "GET\t", "TRACE", "CONNECT", "BREW", "", "\x00GET", "GÉT"]
HDR_NAMES = ["Accept", "User-Agent", "X-Fuzz", "Cookie", "Accept-Encoding", "Cache-Control",
             "If-None-Match", "Range", "Referer", "X-Forwarded-For", "Via"]


def _hexs(rng, n):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _text(rng, n, alphabet="abcdefghijklmnopqrstuvwxyz0123456789"):
    if n > 256:   # long ones are mostly one byte repeated: stored as a run (codec.py)
        return "".join(rng.choice(alphabet) for _ in range(32)) + rng.choice(alphabet) * (n - 32)
    return "".join(rng.choice(alphabet) for _ in range(n))


def _garbage(rng, n):
    return "".join(chr(rng.getrandbits(8)) for _ in range(n))


def _size(rng):
    """A small size, now and then a large one."""
    r = rng.random()
    if r < 0.6:
        return rng.randint(0, 64)
    if r < 0.9:
        return rng.randint(65, 4096)
    return rng.randint(4097, 70000)


class Ctx:
    """What one case's generators share: its names, slots and ports."""

    def __init__(self, rng):
        self.rng = rng
        self.names = {}      # name -> kind (ok, no, port)
        self.used = set()    # (slot or literal address, port) an origin may see
        self.last = None     # the last target chosen
        self.slots = rng.sample(range(len(net.ORIGIN_V4)), 4)
        # How hostile the case is: 0 valid throughout, 1 the nominal odds of
        # every defect, 2.5 two and a half times them.
        self.k = rng.choice([0.0, 0.25, 0.5, 1.0, 1.0, 1.75, 2.5])
        self.v6slots = rng.sample(range(len(net.ORIGIN_V6)), 2)

    def odd(self, p):
        """True with probability p at nominal hostility."""
        return self.rng.random() < p * self.k

    def name(self, kind=None):
        rng = self.rng
        mine = [n for n, k in self.names.items() if kind in (None, k)]
        if mine and rng.random() < 0.6:
            return rng.choice(mine)
        kind = kind or rng.choices(["ok", "no", "port", "i1", "i2"], [12, 2, 1, 1, 1])[0]
        n = f"h{len(self.names)}-{NONCE}.{ZONES[kind]}"
        self.names[n] = kind
        return n

    def slot(self, qtype=None):
        v6 = qtype == "AAAA" if qtype and self.rng.random() < 0.95 else self.rng.random() < 0.15
        if v6:
            return f"v{self.rng.choice(self.v6slots)}"
        return f"o{self.rng.choice(self.slots)}"


# ---- DNS answers ----------------------------------------------------------

def dns_answer(rng, ctx, qtype, name):
    r = rng.random() / max(ctx.k, 1e-9)
    if r < 0.02:
        return {"drop": 1}
    if r < 0.045:
        return {"rcode": rng.choice([2, 3, 5, 1, 4, 9, 15]), "an": []}
    if r < 0.065:
        return {"raw": _garbage(rng, rng.randint(0, 80))}
    ans = {"rcode": 0, "an": []}
    chain_owner = "@"
    if ctx.odd(0.1):
        # a CNAME chain, its targets under fuzz.test (some answered on their own)
        for i in range(rng.choice([1, 1, 2, 3, 8])):
            tgt = f"c{i}{_hexs(rng, 2)}-{NONCE}.{rng.choice(list(ZONES.values()))}"
            ans["an"].append({"t": "CNAME", "name": chain_owner, "target": tgt, "ttl": rng.choice(TTLS)})
            chain_owner = tgt
        if rng.random() < 0.05:
            ans["an"].append({"t": "CNAME", "name": chain_owner, "target": name, "ttl": 5})  # a loop
    n = rng.choice([0, 1, 1, 1, 1, 2, 2, 3, 4, 8, 16, 17, 40] if qtype == "A" else
                   [0, 0, 0, 0, 1, 1, 2, 3, 16, 40])
    mix = rng.random()
    for _ in range(n):
        if mix > 0.25 * ctx.k or rng.random() < 0.8:
            addr = ctx.slot(qtype) if rng.random() < 0.93 else rng.choice(
                [net.UNROUTED_V4, net.STALL[0], net.OWN_PUBLIC[0], net.LITERAL_V4])
        else:
            addr = rng.choice(NONPUBLIC_V4 if qtype == "A" and rng.random() < 0.8 else NONPUBLIC_V6)
        t = qtype if rng.random() < 0.92 else rng.choice(["A", "AAAA", "TXT"])
        ans["an"].append({"t": t, "name": chain_owner if rng.random() < 0.95 else "@",
                          "addr": addr, "ttl": rng.choice(TTLS)})
    if ctx.odd(0.05):
        ans["delay_ms"] = rng.choice([20, 100, 200, 400])
    if ctx.odd(0.04):
        ans["tc"] = 1
        ans["tcp"] = rng.choice(["close", {"rcode": 0, "an": list(ans["an"])}, {"raw": _garbage(rng, 30)}])
    if ctx.odd(0.03):
        ans["cut"] = rng.randint(0, 60)
    if ctx.odd(0.02):
        ans["wrong_id"] = 1
    if ctx.odd(0.03):
        ans["dup"] = rng.randint(2, 4)
    if ctx.odd(0.02):
        ans["qd"] = rng.choice(["none", "other"])
    return ans


def dns_entry(rng, ctx, name):
    entry = {}
    for qtype in ("A", "AAAA"):
        k = 1 if rng.random() < 0.85 else rng.randint(2, 3)
        entry[qtype] = [dns_answer(rng, ctx, qtype, name) for _ in range(k)]
    return entry


def dns_table(rng, ctx):
    """An entry for every name the clients use, and for every CNAME target
    (some stay unanswered: NXDOMAIN)."""
    table = {}
    todo = list(ctx.names)
    while todo and len(table) < 10:
        n = todo.pop(0)
        if n in table:
            continue
        if ctx.names.get(n) == "no" and rng.random() < 0.5:
            continue      # never asked anyway
        table[n] = dns_entry(rng, ctx, n)
        for q in table[n].values():
            for a in q:
                for rr in a.get("an", []):
                    if rr.get("t") == "CNAME" and rr["target"] not in table and rng.random() < 0.5:
                        todo.append(rr["target"])
    return table


# ---- client streams ---------------------------------------------------------

def _host_and_port(rng, ctx, connect):
    """(authority for the target, host for a Host header, port)."""
    if ctx.last and ctx.last[3] == connect and ctx.rng.random() < 0.6:
        return ctx.last[:3]    # pipelined to the same origin: its connection may be reused
    out = _pick_host_and_port(rng, ctx, connect)
    ctx.last = out + (connect,)
    return out


def _pick_host_and_port(rng, ctx, connect):
    # mostly names; literals and odd hosts more often as the case is more hostile
    r = rng.random() * ctx.k if ctx.k < 1 else rng.random() ** (1 / ctx.k)
    ports_good = net.CONNECT_PORTS if connect else net.HTTP_PORTS
    port = rng.choice(ports_good) if not ctx.odd(0.12) else rng.choice(
        [net.OWN_PUBLIC[1], net.STALL[1], 80, 443, 8080, 8443, 1, 65535])
    if r < 0.75:
        host = ctx.name()
        if rng.random() < 0.05:
            host = host.upper()
        if rng.random() < 0.04:
            host += "."
    elif r < 0.82:
        host = rng.choice([net.LITERAL_V4, f"[{net.LITERAL_V6}]"])
        ctx.used.add((host.strip("[]"), port))
    elif r < 0.92:
        host = rng.choice(["10.0.1.1", "169.254.169.254", "127.0.0.1", net.OWN_PUBLIC[0],
                           f"11.0.1.{10 + rng.choice(ctx.slots)}", "[::1]", "[fd00:ec2::254]",
                           "[::ffff:10.0.1.1]", "0.0.0.0", "canary.fuzz.test"])
        if host == net.OWN_PUBLIC[0]:
            port = net.OWN_PUBLIC[1]
    else:
        host = rng.choice(["127.1", "0x7f.0.0.1", "2130706433", "0177.0.0.1", "011.0.1.200",
                           "[fe80::1%25lo]", "11.0.1.200.", "a..b.ok.fuzz.test", "-x.ok.fuzz.test",
                           "x_y.ok.fuzz.test", "ok.fuzz.test", "*.ok.fuzz.test", "xn--zz.ok.fuzz.test",
                           "é.ok.fuzz.test", "a" * 64 + ".ok.fuzz.test", ("b" * 60 + ".") * 5 + "ok.fuzz.test",
                           "", "[", "[::1", "h\x00.ok.fuzz.test"])
    pstr = str(port)
    r = rng.random()
    if r < 0.04:
        pstr = rng.choice(["", "0", "65536", "99999", "080", "+80", "8O", "-1", "4294967376"])
    authority = f"{host}:{pstr}" if (connect or port != 80 or rng.random() < 0.2) else host
    if not connect and port == 80 and rng.random() < 0.1:
        authority = host
    return authority, host, port


def _chunked_body(rng, clean):
    """(text, size): a chunked body, well-formed when clean."""
    out = []
    total = 0
    for _ in range(rng.choice([0, 1, 1, 2, 3, 5, 20])):
        n = _size(rng) if rng.random() < 0.3 else rng.randint(1, 40)
        size = format(n, "x")
        if not clean and rng.random() < 0.3:
            size = rng.choice([size.upper(), "0" * rng.randint(1, 20) + size, size + " ",
                               " " + size, "-" + size, "0x" + size, "ffffffffffffffffff", "g",
                               "", size + "\t", "7fffffffffffffff", "1" * 17])
        ext = ""
        if rng.random() < 0.15:
            ext = rng.choice([";a=b", ";ext", '; q="x"', ";" + "e" * 5000, ";a=\x01"])
        eol = "\r\n" if clean or rng.random() < 0.85 else rng.choice(["\n", "\r", "\r\r\n", ""])
        data = _text(rng, n)
        out.append(f"{size}{ext}{eol}{data}\r\n" if clean or rng.random() < 0.9 else f"{size}{eol}{data}")
        total += n
    trailer = ""
    if rng.random() < 0.15:
        trailer = rng.choice(["X-T: 1\r\n", "Trailer-Field: x\r\n" * 3, "bad trailer\r\n", "X:\x00\r\n"])
    last = "0\r\n" if clean or rng.random() < 0.8 else rng.choice(["0\n", "00\r\n", "0;x\r\n", ""])
    out.append(f"{last}{trailer}\r\n")
    return "".join(out), total


HTTP_DEFECTS = ["method", "scheme", "path", "long_path", "target_form", "version", "eol", "host_hdr",
                "no_host", "two_hosts", "cl_value", "two_cl", "te_value", "cl_and_te", "chunk_syntax",
                "bad_header", "many_headers", "hop_by_hop", "shuffle", "body_short", "body_long"]


def http_request(rng, ctx, inside=None):
    """One absolute-form request: valid, or valid but for one to three
    defects chosen on purpose. inside=(host, port): an origin-form request
    inside an inspected tunnel to that host instead."""
    defects = set() if not ctx.odd(0.35) else set(rng.sample(HTTP_DEFECTS, rng.choice([1, 1, 1, 2, 3])))
    zone = None
    if inside:
        host, port = inside
        authority = host if port == 443 and rng.random() < 0.8 else f"{host}:{port}"
        zone = rules.zone_of(host)
        method = rng.choice(gen_inspect.METHODS[zone])
    else:
        authority, host, port = _host_and_port(rng, ctx, connect=False)
        zone = rules.zone_of(host)
        method = rng.choice(METHODS) if not zone else rng.choice(gen_inspect.METHODS[zone])
    if "method" in defects:
        method = rng.choice(WEIRD_METHODS)
    scheme = "http" if "scheme" not in defects else rng.choice(["HTTP", "https", "ftp", "http:/", ""])
    path = rng.choice(["/", "/p", "/q?x=1", "/" + _text(rng, rng.randint(1, 40))])
    if zone and rng.random() < 0.8:
        path = gen_inspect.path(rng, ctx, zone)
    if "path" in defects:
        path = rng.choice(["", "/%00", "/a#frag", "/ sp", "/\xe9", "/a\tb", "?x", "/\x7f"])
    if "long_path" in defects:
        path = "/" + "a" * rng.choice([8100, 8200, 33000])
    target = f"{scheme}://{authority}{path}"
    if inside and "scheme" not in defects:
        target = path
    if "target_form" in defects:
        target = rng.choice(["/", "*", f"{host}:{port}", f"//{authority}/", f"http://user@{authority}/",
                             f"http://{authority}:{port}/"])
    version = "HTTP/1.1" if rng.random() < 0.85 else "HTTP/1.0"
    if "version" in defects:
        version = rng.choice(["HTTP/2.0", "HTTP/0.9", "HTTP/1.10", "http/1.1", "", "HTTP/1.1 ", "HTTP/01.1"])
    eol = "\r\n"
    hdrs = []
    if "no_host" not in defects and (version == "HTTP/1.1" or rng.random() < 0.7):
        hdrs.append(("Host", authority if port != 80 or rng.random() < 0.5 else host))
    if "host_hdr" in defects:
        hdrs = [("Host", rng.choice([ctx.name(), "other.ok.fuzz.test", f"{host}:9", "", f"{host}:{port + 1}"]))]
    if "two_hosts" in defects:
        hdrs += [("Host", authority), ("Host", authority)]
    for _ in range(rng.choice([0, 0, 1, 2, 5])):
        hdrs.append((rng.choice(HDR_NAMES), _text(rng, rng.randint(0, 30))))
    if "hop_by_hop" in defects or rng.random() < 0.15:
        hdrs.append(rng.choice([("Connection", "close"), ("Connection", "keep-alive"),
                                ("Proxy-Connection", "keep-alive"), ("Connection", "close, x-fuzz"),
                                ("Keep-Alive", "timeout=5"), ("Proxy-Authorization", "Basic eDp5"),
                                ("TE", "trailers"), ("Upgrade", "websocket"), ("Connection", "host"),
                                ("Connection", "content-length")]))
    if rng.random() < 0.06:
        hdrs.append(("Expect", "100-continue"))
    if zone and rng.random() < 0.25:
        # the client's own value of the credential's header: sluice drops it
        hdrs.append((rules.CRED_HEADER, "Bearer client-own-" + _hexs(rng, 8)))
    body = ""
    framing = rng.random()
    wants_body = method in ("POST", "PUT", "PATCH") or framing < 0.1 or \
        defects & {"cl_value", "two_cl", "te_value", "cl_and_te", "chunk_syntax", "body_short", "body_long"}
    if wants_body:
        chunked = (framing < 0.45 and version == "HTTP/1.1") or defects & {"te_value", "chunk_syntax"}
        if not chunked:
            n = _size(rng)
            body = _text(rng, n)
            cl = str(n)
            if "cl_value" in defects:
                cl = rng.choice(["-1", "1e3", "0x10", " " + cl, cl + ", " + cl, cl + ", " + str(n + 1),
                                 "99999999999999999999", "18446744073709551616", "", "+5", "0" + cl])
            hdrs.append(("Content-Length", cl))
            if "two_cl" in defects:
                hdrs.append(("Content-Length", rng.choice([cl, str(n + 1)])))
            if "body_short" in defects and body:
                body = body[:rng.randrange(len(body))]
            if "body_long" in defects:
                body += _text(rng, rng.randint(1, 50))
        else:
            body, _ = _chunked_body(rng, "chunk_syntax" not in defects)
            te = "chunked"
            if "te_value" in defects:
                te = rng.choice(["Chunked", "gzip, chunked", "chunked, gzip", "chunked, chunked",
                                 " chunked", "chunked\x0b", "identity", "xchunked"])
            hdrs.append(("Transfer-Encoding", te))
            if "body_short" in defects and body:
                body = body[:rng.randrange(len(body))]
        if "cl_and_te" in defects:
            hdrs.append(("Content-Length", str(len(body))) if chunked else ("Transfer-Encoding", "chunked"))
    if "bad_header" in defects:
        hdrs.append(rng.choice([("X-Long", "v" * rng.choice([8000, 33000])), ("Bad Name", "x"),
                                ("X-Fold", "a\r\n b"), ("X-Ctl", "a\x01b"), ("X-Nul", "a\x00b"),
                                (" Lead", "x"), ("Colon ", "x"), ("", "empty"), ("X-Bare", "a\nb"),
                                ("X-Cr", "a\rb")]))
    if "many_headers" in defects:
        hdrs += [("X-Many", str(i)) for i in range(rng.choice([99, 101, 300]))]
    if "shuffle" in defects:
        rng.shuffle(hdrs)
    if "eol" in defects:
        eol = rng.choice(["\n", "\r", "\r\r\n"])
    head = f"{method} {target} {version}{eol}" + "".join(f"{k}: {v}{eol}" for k, v in hdrs) + eol
    if version == "":
        head = f"{method} {target}{eol}{eol}"
    return head + body


def connect_request(rng, ctx):
    authority, host, port = _host_and_port(rng, ctx, connect=True)
    clean = not ctx.odd(0.3)
    version = "HTTP/1.1" if clean or rng.random() < 0.8 else rng.choice(["HTTP/1.0", "HTTP/2", ""])
    eol = "\r\n" if clean or rng.random() < 0.9 else "\n"
    hdrs = ""
    if rng.random() < 0.7:
        hdrs += f"Host: {authority}{eol}"
    if rng.random() < 0.1:
        hdrs += f"Proxy-Connection: keep-alive{eol}"
    if not clean and rng.random() < 0.1:
        hdrs += f"Content-Length: {rng.randint(0, 20)}{eol}"
    head = f"CONNECT {authority} {version}{eol}{hdrs}{eol}"
    tail = ""
    r = rng.random()
    sni_host = host.rstrip(".").split(":")[0]
    if port == 443 or r < 0.3:
        sr = rng.random() * min(1.0, ctx.k)
        if sr < 0.6:
            sni = sni_host
        elif sr < 0.7:
            sni = sni_host.upper() + rng.choice(["", "."])
        elif sr < 0.8:
            sni = None
        elif sr < 0.9:
            sni = ctx.name()
        else:
            sni = rng.choice(["", "x" * 300, "a\x00b", sni_host + "\x00evil.test"])
        hello = client_hello(rng, sni, records=rng.choice([1, 1, 1, 2, 5]),
                             padding=rng.choice([0, 0, 0, 300, 17000]))
        hello = hello.decode("latin-1")
        if rng.random() < 0.1:
            hello = hello[:rng.randint(0, len(hello))]
        tail = hello
    elif r < 0.5:
        tail = rng.choice(["GET / HTTP/1.1\r\nHost: x\r\n\r\n", "SSH-2.0-x\r\n", "\x16\x03\x01\x00\x05hello"])
    tail += _text(rng, rng.choice([0, 0, 10, 300, 5000]))
    return head, tail


def client(rng, ctx):
    ctx.last = None
    if rng.random() < 0.15:
        return gen_inspect.client(rng, ctx)
    parts = []
    bulk = 0
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4])):
        kind = rng.choices(["http", "connect", "garbage", "tls", "empty", "space"],
                           [60, 25, 6 * ctx.k, 2 * ctx.k, 2 * ctx.k, 2 * ctx.k])[0]
        if kind == "http":
            parts.append(http_request(rng, ctx))
        elif kind == "connect":
            head, tail = connect_request(rng, ctx)
            parts.append(head + tail)
            break      # what follows a CONNECT is the tunnel's payload
        elif kind == "garbage":
            parts.append(_garbage(rng, rng.randint(1, 300)))
        elif kind == "tls":
            parts.append(client_hello(rng, ctx.name()).decode("latin-1"))
        elif kind == "space":
            parts.append(rng.choice(["\r\n", "\r\n\r\n", " ", "\n"]))
    data = "".join(parts)
    if rng.random() < 0.04:
        bulk = rng.choice([70000, 300000, 1 << 20])
    return {"start_ms": rng.choice([0, 0, 0, 5, 30, 100]), "data": data, "bulk": bulk,
            "writes": splits(rng, len(data)), "end": client_end(rng, len(data), ctx.k),
            "stop_read": -1 if rng.random() < 0.88 else rng.choice([0, 1, 100, 5000]),
            "rcvbuf": 0 if rng.random() < 0.9 else 2048,
            "wait_ms": rng.choice([80, 150, 150, 250, 250, 400, 700, 1200])}


def splits(rng, n):
    r = rng.random()
    if n == 0 or r < 0.35:
        return []
    if r < 0.5:   # byte by byte at first
        k = min(n, rng.randint(1, 60))
        return [[1, rng.choice([0, 0, 1, 2])] for _ in range(k)]
    out = []
    left = n
    for _ in range(rng.randint(1, 8)):
        if left <= 0:
            break
        k = rng.randint(1, left)
        d = rng.choice([0, 0, 0, 1, 5, 20, 50]) if rng.random() < 0.95 else rng.choice([200, 400])
        out.append([k, d])
        left -= k
    return out


def client_end(rng, n, k=1.0):
    if rng.random() < 0.3 * k:   # cut short: a reset, a close or a half-close at some byte
        kind = rng.choice(["shut", "rst", "rst", "close"])
        return {"kind": kind, "at": rng.randint(0, n) if n else 0, "ms": rng.choice([0, 0, 10, 100, 350])}
    return {"kind": "shut" if rng.random() < 0.3 else "hold", "at": None, "ms": 0}


# ---- origins ------------------------------------------------------------------

def _status_line(rng, code, clean):
    reasons = {100: "Continue", 101: "Switching Protocols", 102: "Processing", 103: "Early Hints",
               200: "OK", 204: "No Content", 206: "Partial", 301: "Moved", 304: "Not Modified",
               404: "Not Found", 413: "Too Large", 500: "Oops", 502: "Bad Gateway"}
    ver = "HTTP/1.1" if clean or rng.random() < 0.85 else rng.choice(["HTTP/1.0", "HTTP/2", "HTTP/1.1 ", "http/1.1", "ICY"])
    return f"{ver} {code} {reasons.get(code, 'X')}\r\n"


def http_response(rng, poison_ok=True, k=1.0):
    """(text, bulk, clean): one response (with interim heads before it),
    and whether it is framed so that its end is certain (then poison may
    follow it in the same write)."""
    clean = rng.random() >= 0.4 * k
    out = ""
    if rng.random() < 0.12:
        n = rng.choice([1, 1, 2, 5, 50, 400])
        for _ in range(min(n, 5)):
            c = rng.choice([100, 102, 103, 199])
            out += _status_line(rng, c, True) + (rng.choice(["", "Link: </s>; rel=preload\r\n"])) + "\r\n"
        if n > 5:   # many: the same head again and again
            out += "HTTP/1.1 103 Early Hints\r\nLink: </s>; rel=preload\r\n\r\n" * (n - 5)
    code = rng.choice([200, 200, 200, 200, 204, 304, 404, 500, 206, 301, 413]) if clean or rng.random() < 0.9 \
        else rng.choice([101, 100, 0, 99, 600, 999, 1000, -1])
    hdrs = [(rng.choice(["Server", "X-O", "Set-Cookie", "Date", "Vary"]), _text(rng, 8))
            for _ in range(rng.choice([0, 1, 3]))]
    if rng.random() < 0.15:
        hdrs.append(("Connection", rng.choice(["close", "keep-alive", "x-h, close"])))
    body = ""
    bulk = 0
    framing = rng.choices(["cl", "chunked", "close", "none"], [50, 25, 10, 15])[0]
    certain = clean and code not in (101,)
    if framing == "cl":
        n = _size(rng)
        if rng.random() < 0.05:
            bulk = rng.choice([300000, 1 << 20])
            n = 0
        body = _text(rng, n)
        cl = str(n + bulk)
        if not clean and rng.random() < 0.4:
            cl = rng.choice([str(n + 5), "-1", "abc", f"{n}, {n + 1}", f"{n}, {n}", "99999999999999999999", ""])
            certain = False
        hdrs.append(("Content-Length", cl))
        if not clean and rng.random() < 0.15:
            hdrs.append(("Content-Length", str(n + rng.choice([0, 1]))))
            certain = False
    elif framing == "chunked":
        body, _ = _chunked_body(rng, clean)
        hdrs.append(("Transfer-Encoding", "chunked" if clean or rng.random() < 0.7
                     else rng.choice(["gzip, chunked", "chunked, gzip", "Chunked"])))
        if rng.random() < 0.1:
            hdrs.append(("Content-Length", str(rng.randint(0, 50))))
        certain = certain and hdrs[-1][0] != "Content-Length"
    elif framing == "close":
        body = _text(rng, _size(rng))
        certain = False
    else:
        if code not in (204, 304):
            certain = False    # without a length a 200's body runs to the close
    if code in (204, 304) and rng.random() < 0.5:
        body = POISON + "body-" + _hexs(rng, 6) if poison_ok else _text(rng, 10)
        certain = False        # nothing more after this one
    if not clean and rng.random() < 0.05:
        hdrs.append(rng.choice([("X-Huge", "h" * 33000), ("Bad Name", "x"), ("X-Fold", "a\r\n b"),
                                ("X-Bare", "a\nb"), ("Sluice-X", "\x00")]))
        certain = False
    if not clean and rng.random() < 0.03:
        hdrs += [("X-M", str(i)) for i in range(150)]
        certain = False
    head = _status_line(rng, code, clean) + "".join(f"{k}: {v}\r\n" for k, v in hdrs) + "\r\n"
    if not clean and rng.random() < 0.05:
        head = head.replace("\r\n", "\n")
        certain = False
    if not clean and rng.random() < 0.04:
        head = _garbage(rng, rng.randint(1, 200))
        certain = False
    if 100 <= code < 200:
        certain = False
    return out + head + body, bulk, certain and bulk == 0


def poison_response(rng):
    """Bytes that must never reach a client: sent in the same write right
    after a response whose end is certain."""
    tok = POISON + _hexs(rng, 6)
    r = rng.random()
    if r < 0.5:
        return f"HTTP/1.1 200 OK\r\nContent-Length: {len(tok)}\r\n\r\n{tok}"
    if r < 0.8:
        return f"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{len(tok):x}\r\n{tok}\r\n0\r\n\r\n"
    return tok


def http_script(rng, k=1.0):
    ops = []
    # Poison may appear only while every earlier response's end was certain:
    # after one whose body runs to the close (no length), what follows is
    # that body, and delivering it is right.
    ends_certain = True
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        r = rng.random()
        if r < 0.88:
            ops.append({"op": "req"})
        elif r < 0.93:
            ops.append({"op": "sleep", "ms": rng.choice([10, 100, 400])})
        if rng.random() < 0.06:
            # a pinned artifact's body, right or wrong (gen_inspect.py): a
            # request for its path may be what this answers
            names = rng.choice([names for _, _, _, names in rules.PINS])
            ops += gen_inspect.pinned_answer(rng, names, k, poison_ok=ends_certain)
            ends_certain = False
            continue
        text, bulk, certain = http_response(rng, ends_certain, k)
        ends_certain = ends_certain and certain
        if ends_certain and rng.random() < 0.35:
            text += poison_response(rng)
        elif rng.random() < 0.05:
            text += http_response(rng, poison_ok=False)[0]    # a second response
        op = {"op": "send", "d": text, "w": origin_splits(rng, len(text))}
        ops.append(op)
        if bulk:
            ops.append({"op": "bulk", "n": bulk})
        if rng.random() < 0.05:
            ops.append({"op": "sleep", "ms": rng.choice([50, 200])})
            ops.append({"op": "send", "d": rng.choice(["x", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nu", "\r\n"]),
                        "w": []})    # unsolicited, while idle
    r = rng.random() / max(k, 1e-9)
    if r < 0.06:
        ops.append({"op": "shut"})
    elif r < 0.12:
        ops.append({"op": "rst"})
    elif r < 0.16:
        ops.append({"op": "stall"})
    elif r < 0.2:
        ops.append({"op": "close"})
    if rng.random() < 0.08 * k:
        # chaos: cut the script somewhere with a reset or a half-close
        i = rng.randint(0, len(ops))
        ops.insert(i, {"op": rng.choice(["rst", "shut", "close", "stall"])})
    if rng.random() < 0.04 * k:
        ops = [{"op": "stall"}]
    return ops


def origin_splits(rng, n):
    r = rng.random()
    if r < 0.6 or n == 0:
        return []
    if r < 0.75:   # the head byte by byte
        return [[1, rng.choice([0, 0, 1])] for _ in range(min(n, rng.randint(1, 80)))]
    return splits(rng, n)


def tunnel_script(rng, k=1.0):
    r = rng.random()
    if rng.random() > k:
        return [{"op": "echo", "ms": rng.choice([100, 500, 1500])}]
    if r < 0.45:
        return [{"op": "echo", "ms": rng.choice([100, 500, 1500])}]
    if r < 0.55:
        return [{"op": "send", "d": _text(rng, _size(rng)), "w": []}, {"op": "echo", "ms": 500}]
    if r < 0.62:
        return [{"op": "bulk", "n": rng.choice([70000, 400000, 1 << 20])}]
    if r < 0.7:
        return [{"op": "stall"}]
    if r < 0.78:
        return [{"op": "rst"}]
    if r < 0.86:
        return [{"op": "shut"}, {"op": "echo", "ms": 300}]
    if r < 0.93:
        return [{"op": "sleep", "ms": rng.choice([10, 200])}, {"op": "close"}]
    return [{"op": "send", "d": _garbage(rng, 100), "w": splits(rng, 100)}, {"op": "rst"}]


def origin_table(rng, ctx, dns):
    """Scripts for the slots and literals the case can reach. On the
    CONNECT ports of a slot an inspected name resolves to, mostly TLS
    origins (gen_inspect.py)."""
    slots = set()
    tls_slots = set()
    for name, entry in dns.items():
        for answers in entry.values():
            for a in answers:
                for rr in a.get("an", []):
                    s = rr.get("addr")
                    if isinstance(s, str) and s[:1] in "ov" and s[1:].isdigit():
                        slots.add(s)
                        if rules.zone_of(name.replace(NONCE, "x")):
                            tls_slots.add(s)
    slots |= {a for a, _ in ctx.used}
    table = {}
    for s in sorted(slots):
        for port in net.ORIGIN_PORTS:
            if rng.random() < 0.3:
                continue    # the default behaviour
            k = rng.choice([1, 1, 2, 3])
            if port in net.HTTP_PORTS:
                make = lambda: {"ops": http_script(rng, ctx.k)}
            elif s in tls_slots and rng.random() < 0.9:
                make = lambda: gen_inspect.tls_script(rng, ctx.k)
            else:
                make = lambda: {"ops": tunnel_script(rng, ctx.k)}
            table[f"{s}:{port}"] = [dict(make(), rcvbuf=0 if not ctx.odd(0.07) else 2048) for _ in range(k)]
    return table


def case(seed):
    rng = random.Random(seed)
    ctx = Ctx(rng)
    clients = [client(rng, ctx) for _ in range(rng.choice([1, 1, 1, 2, 2, 3]))]
    dns = dns_table(rng, ctx)
    return {"v": 1, "seed": seed, "origin": "gen", "k": ctx.k, "clients": clients,
            "origins": origin_table(rng, ctx, dns), "dns": dns}


# ---- scenarios: mostly valid traffic around one situation -----------------------
#
# Random cases rarely line up a valid exchange with the one odd thing that
# matters (a pipelined request behind a response with bytes after it, an
# early response to a long upload). A scenario builds that situation on
# purpose from valid parts; mutation then bends it.

def _valid_get(name, port, method="GET", path="/", extra="", body=None, chunked=False):
    auth = name if port == 80 else f"{name}:{port}"
    h = f"{method} http://{auth}{path} HTTP/1.1\r\nHost: {auth}\r\n{extra}"
    if body is None:
        return h + "\r\n"
    if chunked:
        step = max(1, len(body) // 3)
        chunks = "".join(f"{len(body[i:i + step]):x}\r\n{body[i:i + step]}\r\n" for i in range(0, len(body), step))
        return h + "Transfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n"
    return h + f"Content-Length: {len(body)}\r\n\r\n" + body


def _clean_dns(ctx, name, rng):
    addrs = [ctx.slot("A")] if rng.random() < 0.8 else [ctx.slot("A") for _ in range(rng.randint(2, 4))]
    return {"A": [{"rcode": 0, "an": [{"t": "A", "name": "@", "addr": a, "ttl": rng.choice([0, 1, 2, 5])}
                                      for a in addrs]}],
            "AAAA": [{"rcode": 0, "an": []}]}, addrs


def _ok_response(rng, body_len=None, framing=None):
    n = rng.randint(0, 60) if body_len is None else body_len
    body = _text(rng, n)
    framing = framing or rng.choice(["cl", "cl", "chunked"])
    if framing == "cl":
        return f"HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n{body}"
    ch = "".join(f"{len(body[i:i + 7]):x}\r\n{body[i:i + 7]}\r\n" for i in range(0, len(body), 7))
    return f"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{ch}0\r\n\r\n"


def _client_spec(rng, data, writes=None, end=None, wait=600):
    return {"start_ms": 0, "data": data, "bulk": 0, "writes": writes or [],
            "end": end or {"kind": rng.choice(["hold", "hold", "shut"]), "at": None, "ms": 0},
            "stop_read": -1, "rcvbuf": 0, "wait_ms": wait}


SCENARIOS = ["keepalive", "early_response", "continue", "tunnel", "origin_fail", "client_body_fail",
             "half_close", "interim", "backpressure", "reuse_then_idle_bytes"]


def scenario_case(seed):
    rng = random.Random(seed)
    ctx = Ctx(rng)
    ctx.k = 0.0
    if rng.random() < 0.4:    # inspected tunnels (and plain HTTP to inspected hosts)
        return gen_inspect.scenario(rng, ctx, seed)
    kind = rng.choice(SCENARIOS)
    name = f"h0-{NONCE}.ok.fuzz.test"
    ctx.names[name] = "ok"
    dns_e, addrs = _clean_dns(ctx, name, rng)
    port = rng.choice(net.HTTP_PORTS)
    ops = []
    reqs = []
    writes = []
    end = None
    n = rng.randint(2, 4)
    if kind in ("keepalive", "reuse_then_idle_bytes"):
        for i in range(n):
            method = rng.choice(["GET", "GET", "HEAD", "POST"])
            reqs.append(_valid_get(name, port, method, f"/{i}", body=_text(rng, rng.randint(0, 40))
                                   if method == "POST" else None, chunked=rng.random() < 0.5))
            resp = _ok_response(rng) if rng.random() < 0.8 else rng.choice(
                ["HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
                 "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"])
            ops.append({"op": "req"})
            if rng.random() < 0.4:
                resp += poison_response(rng)
            ops.append({"op": "send", "d": resp, "w": origin_splits(rng, len(resp))})
            if kind == "reuse_then_idle_bytes" and rng.random() < 0.5:
                ops.append({"op": "sleep", "ms": rng.choice([5, 30, 100])})
                ops.append({"op": "send", "d": rng.choice(["x", "\r\n", _ok_response(rng)]), "w": []})
        if rng.random() < 0.5:   # one after another rather than pipelined
            writes = [[len(r), 0 if i == 0 else rng.choice([20, 60, 150])] for i, r in enumerate(reqs)]
    elif kind == "early_response":
        body = _text(rng, rng.choice([2000, 70000, 300000]))
        reqs.append(_valid_get(name, port, "POST", "/up", body=body, chunked=rng.random() < 0.4))
        if rng.random() < 0.5:
            reqs.append(_valid_get(name, port, "GET", "/after"))
        ops = [{"op": "sleep", "ms": rng.choice([0, 10, 50])},
               {"op": "send", "d": rng.choice(["HTTP/1.1 413 Too Large\r\nContent-Length: 4\r\n\r\nbig!",
                                               "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                                               "HTTP/1.1 413 Too Large\r\nConnection: close\r\n\r\nno"]), "w": []}]
        ops.append(rng.choice([{"op": "close"}, {"op": "req"}, {"op": "stall"}, {"op": "rst"}]))
        writes = [[1000, 0], [1000, 20]] + [[len(body), 10]]
    elif kind == "continue":
        body = _text(rng, rng.randint(1, 5000))
        reqs.append(_valid_get(name, port, "PUT", "/c", extra="Expect: 100-continue\r\n", body=body,
                               chunked=rng.random() < 0.3))
        cut = reqs[0].find("\r\n\r\n") + 4
        writes = [[cut, 0], [len(reqs[0]) - cut, rng.choice([10, 100, 400])]]
        ops = [{"op": "sleep", "ms": 5},
               {"op": "send", "d": "HTTP/1.1 100 Continue\r\n\r\n" * rng.choice([1, 1, 2, 30]), "w": []},
               {"op": "req"}, {"op": "send", "d": _ok_response(rng), "w": []}]
    elif kind == "tunnel":
        cport = rng.choice(net.CONNECT_PORTS)
        hello = client_hello(rng, name, records=rng.choice([1, 2])).decode("latin-1")
        payload = hello if cport == 443 else ""
        payload += _text(rng, rng.choice([10, 5000, 70000]))
        data = f"CONNECT {name}:{cport} HTTP/1.1\r\nHost: {name}:{cport}\r\n\r\n" + payload
        ctx.used.add((addrs[0], cport))
        origins = {f"{a}:{cport}": [{"ops": tunnel_script(rng, rng.choice([0.0, 1.0]))}] for a in addrs}
        cl = _client_spec(rng, data, writes=splits(rng, len(data)),
                          end=client_end(rng, len(data), rng.choice([0.0, 0.5])), wait=rng.choice([300, 800]))
        return {"v": 1, "seed": seed, "origin": f"scenario:{kind}", "k": 0.0, "clients": [cl],
                "origins": origins, "dns": {name: dns_e}}
    elif kind == "origin_fail":
        reqs.append(_valid_get(name, port))
        if rng.random() < 0.5:
            reqs.append(_valid_get(name, port, path="/2"))
        bad = rng.choice([
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
            "HTTP/1.1 100 Continue\r\n\r\ngarbage\r\n\r\n",
            "HTTP/1.1 101 Switching Protocols\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\n" + "X: " + "y" * 33000 + "\r\n\r\n", "", "HTTP/1.1 200 O"])
        ops = [{"op": "req"}, {"op": "send", "d": bad, "w": origin_splits(rng, len(bad))},
               rng.choice([{"op": "close"}, {"op": "rst"}, {"op": "shut"}, {"op": "stall"}])]
    elif kind == "client_body_fail":
        body = _text(rng, rng.randint(10, 3000))
        r = _valid_get(name, port, "POST", "/b", body=body, chunked=rng.random() < 0.7)
        if "chunked" in r and rng.random() < 0.6:
            i = r.rfind("0\r\n\r\n")
            r = r[:i] + rng.choice(["zz\r\n", "5\r\nab\r\n", "1\r\nxy\r\n", "0\n\n"]) + "GET http://x.no.fuzz.test/ HTTP/1.1\r\n\r\n"
            end = {"kind": "hold", "at": None, "ms": 0}
        else:
            end = {"kind": rng.choice(["shut", "rst", "close"]), "at": rng.randint(len(r) // 2, len(r) - 1),
                   "ms": rng.choice([0, 20])}
        reqs.append(r)
        ops = [{"op": "req", "ms": 400}, {"op": "send", "d": _ok_response(rng), "w": []}]
        if rng.random() < 0.5:   # the origin answers before the body is through
            ops = [{"op": "sleep", "ms": 5}, {"op": "send", "d": _ok_response(rng), "w": []}]
    elif kind == "half_close":
        reqs.append(_valid_get(name, port, rng.choice(["GET", "HEAD"])))
        end = {"kind": "shut", "at": None, "ms": 0}
        ops = [{"op": "req"}, {"op": "sleep", "ms": rng.choice([0, 50, 200])},
               {"op": "send", "d": _ok_response(rng, framing=rng.choice(["cl", "chunked"])), "w": []}]
        if rng.random() < 0.3:
            ops[-1] = {"op": "send", "d": "HTTP/1.1 200 OK\r\n\r\nuntil close", "w": []}
            ops.append({"op": "close"})
    elif kind == "interim":
        reqs.append(_valid_get(name, port))
        reqs.append(_valid_get(name, port, path="/next"))
        kinds = ["HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", "HTTP/1.1 100 Continue\r\n\r\n",
                 "HTTP/1.1 102 Processing\r\n\r\n"]
        # a few different heads, then one repeated (a run: small on disk)
        heads = "".join(rng.choice(kinds) for _ in range(3)) + rng.choice(kinds) * rng.choice([0, 1, 100, 2000])
        resp = heads + _ok_response(rng)
        ops = [{"op": "req"}, {"op": "send", "d": resp, "w": origin_splits(rng, len(resp))},
               {"op": "req"}, {"op": "send", "d": _ok_response(rng), "w": []}]
    elif kind == "backpressure":
        reqs.append(_valid_get(name, port))
        if rng.random() < 0.5:
            reqs.append(_valid_get(name, port, path="/2"))
        size = rng.choice([300000, 1 << 20])
        ops = [{"op": "req"}, {"op": "send", "d": f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n", "w": []},
               {"op": "bulk", "n": size}]
        if rng.random() < 0.3:
            ops.append({"op": "send", "d": poison_response(rng), "w": []})
        cl = _client_spec(rng, "".join(reqs), wait=rng.choice([400, 1200]))
        cl["stop_read"] = rng.choice([0, 1000, 100000, -1])
        cl["rcvbuf"] = 2048
        return {"v": 1, "seed": seed, "origin": f"scenario:{kind}", "k": 0.0, "clients": [cl],
                "origins": {f"{a}:{port}": [{"ops": ops, "rcvbuf": 0}] for a in addrs}, "dns": {name: dns_e}}
    data = "".join(reqs)
    cl = _client_spec(rng, data, writes=writes, end=end)
    clients = [cl]
    if rng.random() < 0.3:      # someone else at the same time
        other = Ctx(rng)
        other.k = rng.choice([0.0, 1.0, 2.5])
        other.names = dict(ctx.names)
        clients.append(client(rng, other))
    scripts = [{"ops": ops, "rcvbuf": 0}]
    if rng.random() < 0.5:
        scripts.append({"ops": http_script(rng, 0.25), "rcvbuf": 0})
    return {"v": 1, "seed": seed, "origin": f"scenario:{kind}", "k": 0.0, "clients": clients,
            "origins": {f"{a}:{port}": copy.deepcopy(scripts) for a in addrs}, "dns": {name: dns_e}}
