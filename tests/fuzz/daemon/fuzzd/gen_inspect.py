"""Generators for inspected tunnels (SPEC part 2, Inspection), to the
format of gen.py.

A TLS CLIENT is a CLIENT whose "data" is the CONNECT head (its "writes"
split it) and which has a "tls" object for what follows the 200:

  {"host": the CONNECT host (SNI "@" and the leaf's expected name),
   "sni": "@" | null (none) | NAME, "alpn": ["http/1.1"] | ["h2"] | ... | null,
   "records": the ClientHello in this many records,
   "raw": DATA instead of a handshake (garbage after the 200) or null,
   "data": the plaintext stream inside, "writes": its splits (as CLIENT's),
   "cut": {"at": ciphertext offset, "kind": rst|close|shut|hold} or null,
   "notify": send close_notify after the plaintext,
   "resume": "same" | "other": offer the TLS session of an earlier tunnel to
     this host or to another one (sluice issues session tickets),
   "flip": [N...]: flip a bit N bytes before the ClientHello's end}

The CLIENT's "end" ("at" a plaintext offset), "stop_read" (plaintext
bytes), "rcvbuf" and "wait_ms" keep their meaning.

A TLS origin SCRIPT has "tls": {"cert": good|wrong_name|expired|not_yet|
untrusted, "cut": N, "then": rst|close|stall (its handshake flight cut
after N bytes), "hs": alert|garbage (instead of a handshake)}; its ops
are plaintext (gen.py's) plus "notify" (close_notify), "alert" (an alert
in the clear), "badrec" (a record that cannot decrypt). rst, close and
shut end the connection without close_notify."""

import copy
import gzip

from . import gen, net, rules
from .pki import BAD_CERTS

METHODS = {
    "i1.fuzz.test": ["GET", "GET", "GET", "HEAD", "HEAD", "POST", "PUT", "DELETE"],
    "i2.fuzz.test": ["GET", "GET", "POST", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
}
_PATHS = {
    "i1.fuzz.test": ["/", "/x", "/is-number", "/pkg/-/pkg-1.0.0.tgz", "/a/b/c", "/q?x=1&y=/../z", "/up/x",
                     "/pin/a.tgz", "/pin/b.tgz", "/pin/big", "/pin/empty", "/pin/many", "/pin/many-cut", "/pin/a.tgz?v=1",
                     "/pin/a.tgzx", "/pin/A.tgz"],
    "i2.fuzz.test": ["/up/x", "/up/", "/up/a/b?c=d", "/up/a.txt", "/pub/a.txt", "/pub/x/y.txt", "/pub/a.txt?v=1",
                     "/pub/a.txtx", "/pub/a", "/other", "/upx", "/UP/x", "/", "/up", "/pub/pin/x.txt",
                     "/pub/pin/a/b.txt?q=1", "/pub/pin/x.txtx"],
}
# Paths sluice must refuse as ambiguous (rules.path_ambiguous), and some
# it must not (an encoded letter, three dots, a query with dots).
_AMBIGUOUS = ["/up/../x", "/up/%2e%2e/x", "/up/.%2E/x", "/up/./x", "/up/%2fx", "/up/%2Fetc", "/up/a%5cb",
              "/up/a\\b", "/up/%00", "/up/%zz", "/up/%4", "/up/%", "/up/..", "/up/x/.", "/pub/../up/a.txt",
              "/%2e%2e/up/x", "/up/%2E", "/up//x", "//up/x", "/up/..;/x", "/up/%252e%252e/x", "/up/%252f",
              "/up/%c0%ae%c0%ae/x", "/up/%e0%80%ae/", "/up/%0d%0aX:1", "/up/#x", "/up/%7f", "/pub/a%2f.txt"]
_SUBTLE = ["/up/%41", "/up/...", "/up/.x", "/up/x?a=/../b&c=%2f", "/pub/%2e.txt", "/up/%25", "/up/;x", "/up/x/",
           "/up/%e2%82%ac", "/pub/.txt"]


def path(rng, ctx, zone):
    r = rng.random()
    if ctx.odd(0.15) or r < 0.08:
        return rng.choice(_AMBIGUOUS)
    if r < 0.16:
        return rng.choice(_SUBTLE)
    if r < 0.19:   # over the log's 1,024 bytes (the line must cut it)
        return "/up/" + gen._text(rng, rng.choice([1030, 2000]))
    p = rng.choice(_PATHS[zone])
    if rng.random() < 0.3:
        p = p.rstrip("/") + "/" + gen._text(rng, rng.randint(1, 12))
    return p


def _connect_head(rng, ctx, name, port):
    auth = f"{name}:{port}"
    if ctx.odd(0.1):
        return rng.choice([f"CONNECT {auth} HTTP/1.0\r\n\r\n", f"CONNECT {auth} HTTP/1.1\r\n\r\n",
                           f"CONNECT {auth} HTTP/1.1\r\nHost: {auth}\r\nProxy-Connection: keep-alive\r\n\r\n",
                           f"CONNECT {name} HTTP/1.1\r\nHost: {name}\r\n\r\n"])
    return f"CONNECT {auth} HTTP/1.1\r\nHost: {auth}\r\n\r\n"


def _cut(rng):
    """A ciphertext offset: in the ClientHello, in the client's second
    flight, or in an application-data record."""
    return {"at": rng.choice([rng.randint(0, 520), rng.randint(520, 700), rng.randint(700, 4000)]),
            "kind": rng.choice(["rst", "rst", "close", "shut", "hold"])}


def tls_spec(rng, ctx, name, plain):
    t = {"host": name, "sni": "@", "alpn": ["http/1.1"], "records": 1, "raw": None, "data": plain,
         "writes": gen.splits(rng, len(plain)), "cut": None, "notify": rng.random() < 0.3}
    if ctx.odd(0.08):
        t["sni"] = rng.choice([None, ctx.name(), name.upper(), name + "."])
    if ctx.odd(0.1):
        t["alpn"] = rng.choice([None, ["h2"], ["h2", "http/1.1"], ["http/1.0"]])
    if ctx.odd(0.08):
        t["records"] = rng.randint(2, 5)
    if ctx.odd(0.05):
        t["raw"] = rng.choice([gen._garbage(rng, rng.randint(1, 300)), "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                               "\x16\x03\x01\x00\x05hello",
                               gen.client_hello(rng, name).decode("latin-1")[:rng.randint(5, 80)]])
    if ctx.odd(0.12):
        t["cut"] = _cut(rng)
    if rng.random() < 0.15:
        t["resume"] = rng.choice(["same", "same", "other"])
    if ctx.odd(0.05):
        t["flip"] = [rng.randint(1, 300) for _ in range(rng.choice([1, 1, 2, 4]))]
    return t


def requests(rng, ctx, name, port, n):
    return "".join(gen.http_request(rng, ctx, inside=(name, port)) for _ in range(n))


def client(rng, ctx):
    """An inspected tunnel: CONNECT to a name under i1 or i2, TLS, requests."""
    zone = rng.choice(["i1", "i2"])
    name = ctx.name(zone)
    port = 443 if rng.random() < 0.85 else 8443
    if ctx.odd(0.05):
        port = rng.choice([80, 8080, 1])
    plain = requests(rng, ctx, name, port, rng.choice([1, 1, 2, 3, 4]))
    head = _connect_head(rng, ctx, name, port)
    return {"start_ms": rng.choice([0, 0, 0, 5, 30]), "data": head, "bulk": 0, "writes": gen.splits(rng, len(head)),
            "end": gen.client_end(rng, len(plain), ctx.k), "tls": tls_spec(rng, ctx, name, plain),
            "stop_read": -1 if rng.random() < 0.9 else rng.choice([0, 1, 100, 5000]),
            "rcvbuf": 0 if rng.random() < 0.9 else 2048, "wait_ms": rng.choice([250, 400, 700, 1200])}


def tls_script(rng, k=1.0, cert=None):
    """A TLS origin: gen.py's HTTP script inside, sometimes a certificate
    sluice must refuse, a handshake cut short, or TLS-level hostility."""
    t = {"cert": cert or ("good" if rng.random() >= 0.12 * k else rng.choice(sorted(BAD_CERTS)))}
    if rng.random() < 0.05 * k:
        t.update(cut=rng.randint(0, 900), then=rng.choice(["rst", "close", "stall"]))
    elif rng.random() < 0.02 * k:
        t["hs"] = rng.choice(["alert", "garbage"])
    ops = gen.http_script(rng, k)
    if rng.random() < 0.12 * k:
        ops.insert(rng.randint(0, len(ops)), {"op": rng.choice(["notify", "alert", "badrec"])})
    return {"tls": t, "ops": ops}


# ---- scenarios ------------------------------------------------------------------

KINDS = ["keepalive", "reconnect", "badcert", "refused", "plain", "hostile_tls", "upload", "resume", "pinned",
         "pinned"]


# ---- pinned artifacts ---------------------------------------------------------

def pin_names(zone, path):
    """The bodies that match the pin on this path (rules.PINS), or None."""
    for z, pat, _, names in rules.PINS:
        if z == zone and rules._pattern(pat).fullmatch(path.split("?", 1)[0]):
            return names
    return None


def _chunked(rng, body, ext=None):
    out, i = [], 0
    while i < len(body):
        n = rng.choice([1, 7, 100, 1000, 16384, 70000, len(body)])
        piece = body[i:i + n]
        e = ext if ext is not None else (";x=1" if rng.random() < 0.1 else "")
        out.append(f"{len(piece):x}{e}\r\n{piece}\r\n")
        i += n
    trailer = rng.choice(["X-T: 1\r\n", "Trailer-Field: x\r\n" * 3]) if rng.random() < 0.15 else ""
    return "".join(out) + f"0\r\n{trailer}\r\n"


def _flip(rng, body):
    if not body:
        return "x"
    i = rng.randrange(len(body))
    return body[:i] + chr(ord(body[i]) ^ (1 << rng.randrange(7)) or 1) + body[i + 1:]


PIN_ANSWERS = ["right", "right", "right", "right_chunked", "right_chunked", "flip", "other", "cut", "extended",
               "short_cl", "after", "unframed", "http10", "coded", "te_gzip", "cl_and_te", "partial", "partial_all",
               "status", "interim", "two", "chunk_flip", "bad_chunk", "bad_trailer", "cl0", "identity"]


def pinned_answer(rng, names, k=1.0, kind=None, poison_ok=True):
    """Ops that answer one request for a pinned path: its body (one of
    names), right, or changed, cut, extended, split, re-framed, coded,
    partial, after interim heads or followed by more."""
    name = rng.choice(names)
    kind = kind or rng.choice([a for a in PIN_ANSWERS if poison_ok or a != "after"])
    if name == "bulk":
        return _bulk_answer(rng, kind)
    body = rules.BODIES[name].decode("latin-1")
    hdrs = "".join(rng.sample(["Content-Type: application/octet-stream\r\n", 'ETag: "fz"\r\n',
                               "Content-Encoding: identity\r\n", "Cache-Control: max-age=60\r\n"],
                              rng.choice([0, 0, 1, 2])))
    if "Content-Encoding" in hdrs and kind in ("coded", "te_gzip"):
        hdrs = hdrs.replace("Content-Encoding: identity\r\n", "")

    def cl(b, status="200 OK", extra=""):
        return f"HTTP/1.1 {status}\r\n{hdrs}{extra}Content-Length: {len(b)}\r\n\r\n{b}"

    def ch(b, extra="", te="chunked"):
        return f"HTTP/1.1 200 OK\r\n{hdrs}{extra}Transfer-Encoding: {te}\r\n\r\n" + _chunked(rng, b)

    end = None
    other = rng.choice([n for n in rules.BODIES if n not in names and n != "bulk"])
    if kind == "right":
        text = cl(body)
    elif kind == "right_chunked":
        text = ch(body)
    elif kind == "flip":
        text = rng.choice([cl, ch])(_flip(rng, body))
    elif kind == "other":
        text = rng.choice([cl, ch])(rules.BODIES[other].decode("latin-1"))
    elif kind == "cut":
        text = cl(body)[:-rng.randint(1, max(1, min(len(body), 50)))] if body else cl("x")[:-1]
        end = rng.choice(["close", "rst", "shut", "stall"])
    elif kind == "extended":
        more = gen._text(rng, rng.choice([1, 5, 300]))
        text = cl(body + more)
    elif kind == "short_cl":
        # a Content-Length one short: the body is a prefix, its last byte the next message
        text = cl(body[:-1]) + body[-1:] if body else cl("") + "x"
    elif kind == "after":
        text = (cl(body) if rng.random() < 0.5 else ch(body)) + gen.poison_response(rng)
    elif kind == "unframed":
        text = f"HTTP/1.1 200 OK\r\n{hdrs}\r\n{body}"
        end = rng.choice(["close", "shut"])
    elif kind == "http10":
        text = f"HTTP/1.0 200 OK\r\n{hdrs}\r\n{body}"
        end = "close"
    elif kind == "coded":
        coding = rng.choice(["gzip", "br", "deflate", "x-gzip", "identity, gzip", "gzip, identity", "IDENTITY",
                             " identity", "identity;q=1"])
        b = gzip.compress(body.encode("latin-1"), mtime=0).decode("latin-1") if "gzip" in coding and \
            rng.random() < 0.5 else body
        text = rng.choice([cl, ch])(b, extra=f"Content-Encoding: {coding}\r\n")
    elif kind == "te_gzip":
        # a transfer coding besides chunked, over the pinned bytes themselves
        text = ch(body, te=rng.choice(["gzip, chunked", "identity, chunked", "chunked"]))
    elif kind == "cl_and_te":
        text = ch(body, extra=f"Content-Length: {len(body) + rng.choice([0, 1, -1])}\r\n")
    elif kind == "partial":
        n = rng.randint(0, max(0, len(body) - 1))
        text = cl(body[:n], status="206 Partial Content", extra=f"Content-Range: bytes 0-{max(0, n - 1)}/{len(body)}\r\n")
    elif kind == "partial_all":
        text = cl(body, status="206 Partial Content", extra=f"Content-Range: bytes 0-{len(body) - 1}/{len(body)}\r\n")
    elif kind == "status":
        code = rng.choice(["203 Non-Authoritative", "404 Not Found", "500 Oops", "301 Moved", "410 Gone", "299 X"])
        b = body if code.startswith("2") and rng.random() < 0.5 else _flip(rng, body)
        text = cl(b, status=code, extra="Location: /pin/elsewhere\r\n" if code.startswith("3") else "")
        if rng.random() < 0.2:
            text = "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"
    elif kind == "interim":
        text = rng.choice(["HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"]) * \
            rng.choice([1, 3]) + rng.choice([cl, ch])(rng.choice([body, body, _flip(rng, body)]))
    elif kind == "two":
        first, second = rng.choice([(_flip(rng, body), body), (body, _flip(rng, body)), (body, body)])
        text = rng.choice([cl, ch])(first) + rng.choice([cl, ch])(second)
    elif kind == "chunk_flip":
        c = _chunked(rng, body)
        i = c.find("\r\n") + 2     # the first chunk's first data byte
        text = f"HTTP/1.1 200 OK\r\n{hdrs}Transfer-Encoding: chunked\r\n\r\n" + (c[:i] + _flip(rng, c[i]) + c[i + 1:]
                                                                               if body else c)
    elif kind == "bad_chunk":
        c = _chunked(rng, body)
        cut = rng.randrange(len(c))
        text = f"HTTP/1.1 200 OK\r\n{hdrs}Transfer-Encoding: chunked\r\n\r\n" + c[:cut] + \
            rng.choice(["zz\r\n", "\n", "0\n\n", "5\r\nab\r\n"])
        end = rng.choice([None, "close"])
    elif kind == "bad_trailer":
        text = f"HTTP/1.1 200 OK\r\n{hdrs}Transfer-Encoding: chunked\r\n\r\n" + \
            _chunked(rng, body)[:-2] + rng.choice(["bad trailer\r\n\r\n", "X:\x00\r\n\r\n", " fold: x\r\n\r\n"])
    elif kind == "cl0":
        text = cl("")
    else:   # identity, spelled several ways
        text = cl(body, extra=rng.choice(["Content-Encoding: identity\r\n", "content-encoding: Identity\r\n", ""]))
    ops = [{"op": "send", "d": text, "w": gen.origin_splits(rng, len(text)) if rng.random() < 0.7 else
            gen.splits(rng, len(text))}]
    if end is None and rng.random() < 0.08 * k:
        end = rng.choice(["close", "rst", "shut"])
    if end:
        ops.append({"op": end})
    return ops


def _bulk_answer(rng, kind):
    n = rules.BULK_N
    head = "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
    r = rng.random()
    if kind in ("right", "right_chunked", "identity", "interim", "after") or r < 0.4:
        # (no poison after it: bulk is its own writes, and poison must share one)
        return [{"op": "send", "d": head % n, "w": []}, {"op": "bulk", "n": n}]
    if r < 0.6:     # one byte more
        return [{"op": "send", "d": head % (n + 1), "w": []}, {"op": "bulk", "n": n}, {"op": "send", "d": "!", "w": []}]
    if r < 0.8:     # the last byte changed
        return [{"op": "send", "d": head % n, "w": []}, {"op": "bulk", "n": n - 1}, {"op": "send", "d": "!", "w": []}]
    return [{"op": "send", "d": head % n, "w": []}, {"op": "bulk", "n": n - rng.choice([1, 70000])},
            {"op": rng.choice(["close", "rst"])}]


def _pinned_request(rng, name, port, zone, plain_port=None):
    """A request for a pinned path (or, now and then, a path next to one),
    with the headers that matter to a pin now and then; with the path and
    whether it can reach an origin."""
    paths = rules.PINNED_PATHS[zone]
    p = rng.choice(paths) if rng.random() < 0.85 else rng.choice(_PATHS[zone])
    if zone == "i2.fuzz.test" and p.startswith("/pub/pin/") and rng.random() < 0.5:
        p = f"/pub/pin/{gen._text(rng, rng.randint(1, 8))}.txt"
    if rng.random() < 0.1:
        p += "?v=" + gen._text(rng, 3)
    method = "GET" if rng.random() < 0.9 else "HEAD"
    extra = ""
    ranged = rng.random() < 0.15
    if ranged:
        extra += rng.choice(["Range: bytes=0-9\r\n", "Range: bytes=-1\r\n", "range: x\r\n", "Range:\r\n"])
    if rng.random() < 0.35:
        extra += rng.choice(["Accept-Encoding: gzip\r\n", "Accept-Encoding: gzip, br\r\nAccept-Encoding: zstd\r\n",
                             "accept-encoding: identity\r\n", "Accept-Encoding: *\r\n", "Accept-Encoding:\r\n"])
    if rng.random() < 0.1:
        extra += rng.choice(['If-None-Match: "fz"\r\n', "If-Range: x\r\n", "TE: gzip\r\n", "Want-Digest: sha-256\r\n"])
    if plain_port is not None:
        auth = name if plain_port == 80 else f"{name}:{plain_port}"
        head = f"{method} http://{auth}{p} HTTP/1.1\r\nHost: {auth}\r\n{extra}\r\n"
    else:
        auth = name if port == 443 else f"{name}:{port}"
        head = f"{method} {p} HTTP/1.1\r\nHost: {auth}\r\n{extra}\r\n"
    return head, p, method, ranged


def pinned_scenario(rng, ctx, seed, name, zone, port, dns_e, addrs):
    """Requests for pinned paths, in a tunnel or as plain HTTP, answered by
    origins that send the pinned bodies right or wrong in every way."""
    plain_port = rng.choice(net.HTTP_PORTS) if rng.random() < 0.3 else None
    n = rng.choice([1, 1, 2, 3, 4])
    reqs, ops = [], []
    cut = False
    for i in range(n):
        head, p, method, ranged = _pinned_request(rng, name, port, zone, plain_port)
        reqs.append(head)
        if ranged and pin_names(zone, p) and method == "GET":
            continue     # refused at the gate: the origin never sees it
        ops.append({"op": "req"})
        names = pin_names(zone, p)
        if names and method == "GET":
            more = pinned_answer(rng, names)
            cut = cut or any(o["op"] in ("close", "rst", "shut", "stall") for o in more)
            ops += more
        else:
            resp = gen._ok_response(rng)
            ops.append({"op": "send", "d": resp, "w": gen.origin_splits(rng, len(resp))})
    scripts = [{"ops": ops}]
    if cut or rng.random() < 0.3:   # the next request needs a new connection
        scripts.append({"ops": _serve(rng, n)})
    writes = []
    if rng.random() < 0.5:   # one after another rather than pipelined
        writes = [[len(r), 0 if i == 0 else rng.choice([20, 60, 150])] for i, r in enumerate(reqs)]
    stop = rng.choice([-1, -1, -1, -1, 0, 1000, 100000])
    if plain_port is not None:
        cl = gen._client_spec(rng, "".join(reqs), writes=writes, wait=rng.choice([600, 1200]))
        cl["stop_read"] = stop
        return {"v": 1, "seed": seed, "origin": "scenario:inspect_pinned_plain", "k": 0.0, "clients": [cl],
                "origins": {f"{a}:{plain_port}": [dict(s, rcvbuf=0) for s in copy.deepcopy(scripts)] for a in addrs},
                "dns": {name: dns_e}}
    for s in scripts:
        s["tls"] = {"cert": "good"}
    plain = "".join(reqs)
    head = f"CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n"
    t = {"host": name, "sni": "@", "alpn": ["http/1.1"], "records": 1, "raw": None, "data": plain,
         "writes": writes, "cut": None, "notify": rng.random() < 0.3}
    cl = {"start_ms": 0, "data": head, "bulk": 0, "writes": [], "end": {"kind": rng.choice(["hold", "shut"]),
          "at": None, "ms": 0}, "tls": t, "stop_read": stop, "rcvbuf": 0 if rng.random() < 0.8 else 2048,
          "wait_ms": rng.choice([600, 1200])}
    return {"v": 1, "seed": seed, "origin": "scenario:inspect_pinned", "k": 0.0, "clients": [cl],
            "origins": {f"{a}:{port}": copy.deepcopy(scripts) for a in addrs}, "dns": {name: dns_e}}


def _allowed_request(rng, name, port, zone, i, body=None, extra=""):
    auth = name if port == 443 else f"{name}:{port}"
    if zone == "i1.fuzz.test":
        method, p = rng.choice(["GET", "GET", "HEAD"]), f"/r{i}/" + gen._text(rng, 4)
    elif body is not None or rng.random() < 0.6:
        method, p = rng.choice(["GET", "POST", "PUT"]), f"/up/r{i}"
    else:
        method, p = "GET", f"/pub/r{i}.txt"
    if method in ("POST", "PUT") and body is None:
        body = gen._text(rng, rng.randint(0, 40))
    if rng.random() < 0.2:
        extra += f"{rules.CRED_HEADER}: Bearer client-own-{gen._hexs(rng, 8)}\r\n"
    h = f"{method} {p}{'?q=' + gen._text(rng, 3) if rng.random() < 0.2 else ''} HTTP/1.1\r\nHost: {auth}\r\n{extra}"
    if body is None or method in ("GET", "HEAD"):
        return h + "\r\n"
    if rng.random() < 0.4:
        step = max(1, len(body) // 3)
        chunks = "".join(f"{len(body[j:j + step]):x}\r\n{body[j:j + step]}\r\n" for j in range(0, len(body), step))
        return h + "Transfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n"
    return h + f"Content-Length: {len(body)}\r\n\r\n" + body


def _refused_request(rng, name, port, zone):
    auth = name if port == 443 else f"{name}:{port}"
    if rng.random() < 0.4:
        return f"GET {rng.choice(_AMBIGUOUS)} HTTP/1.1\r\nHost: {auth}\r\n\r\n"
    if zone == "i1.fuzz.test":
        return f"{rng.choice(['POST', 'PUT', 'DELETE'])} /x HTTP/1.1\r\nHost: {auth}\r\nContent-Length: 2\r\n\r\nhi"
    path = rng.choice(["/other", "/pub/x.bin", "/upx"])
    return f"{rng.choice(['GET', 'DELETE'])} {path} HTTP/1.1\r\nHost: {auth}\r\n\r\n"


def _serve(rng, n, after_last=None):
    ops = []
    for _ in range(n):
        resp = gen._ok_response(rng)
        if rng.random() < 0.3:
            resp += gen.poison_response(rng)
        ops += [{"op": "req"}, {"op": "send", "d": resp, "w": gen.origin_splits(rng, len(resp))}]
    if after_last:
        ops.append(after_last)
    return ops


def scenario(rng, ctx, seed, kind=None):
    ctx.k = 0.0
    kind = kind or rng.choice(KINDS)
    zone_kind = rng.choice(["i1", "i2"])
    name = f"h0-{gen.NONCE}.{gen.ZONES[zone_kind]}"
    zone = gen.ZONES[zone_kind]
    ctx.names[name] = zone_kind
    dns_e, addrs = gen._clean_dns(ctx, name, rng)
    port = 443 if rng.random() < 0.85 else 8443
    n = rng.randint(1, 4)
    if kind == "pinned":
        return pinned_scenario(rng, ctx, seed, name, zone, port, dns_e, addrs)
    reqs = [_allowed_request(rng, name, port, zone, i) for i in range(n)]
    scripts = [{"tls": {"cert": "good"}, "ops": _serve(rng, n)}]
    writes = []
    t_extra = {}
    end = {"kind": rng.choice(["hold", "hold", "shut"]), "at": None, "ms": 0}
    if kind == "keepalive":
        if rng.random() < 0.5:   # one after another rather than pipelined
            writes = [[len(r), 0 if i == 0 else rng.choice([20, 60, 150])] for i, r in enumerate(reqs)]
    elif kind == "reconnect":
        # The origin drops the connection after a response (announced or
        # not, with or without close_notify): the next request needs a new one.
        reqs = reqs[:1] + [_allowed_request(rng, name, port, zone, 9)]
        first = gen._ok_response(rng)
        if rng.random() < 0.5:
            first = first.replace("HTTP/1.1 200 OK\r\n", "HTTP/1.1 200 OK\r\nConnection: close\r\n")
        last = rng.choice([{"op": "close"}, {"op": "rst"}, {"op": "notify"}, {"op": "shut"}])
        scripts = [{"tls": {"cert": "good"}, "ops": [{"op": "req"}, {"op": "send", "d": first, "w": []}, last]},
                   {"tls": {"cert": "good"}, "ops": _serve(rng, 1)}]
        writes = [[len(reqs[0]), 0], [len(reqs[1]), rng.choice([100, 200])]]
    elif kind == "badcert":
        cert = rng.choice(sorted(BAD_CERTS))
        scripts = [{"tls": {"cert": cert}, "ops": _serve(rng, n)}]
    elif kind == "refused":
        i = rng.randint(0, len(reqs))
        reqs.insert(i, _refused_request(rng, name, port, zone))
        if rng.random() < 0.5:
            writes = [[len(r), 0 if j == 0 else rng.choice([20, 100])] for j, r in enumerate(reqs)]
    elif kind == "plain":
        # Plain HTTP to the inspected host: the rules, no credential.
        hport = rng.choice(net.HTTP_PORTS)
        plain = []
        for i in range(n):
            r = _allowed_request(rng, name, 443, zone, i) if rng.random() < 0.7 else \
                _refused_request(rng, name, 443, zone)
            method, target, rest = r.split(" ", 2)
            auth = name if hport == 80 else f"{name}:{hport}"
            rest = rest.replace(f"Host: {name}\r\n", f"Host: {auth}\r\n", 1)
            plain.append(f"{method} http://{auth}{target} {rest}")
        cl = gen._client_spec(rng, "".join(plain))
        return {"v": 1, "seed": seed, "origin": f"scenario:inspect_{kind}", "k": 0.0, "clients": [cl],
                "origins": {f"{a}:{hport}": [{"ops": _serve(rng, n), "rcvbuf": 0}] for a in addrs},
                "dns": {name: dns_e}}
    elif kind == "hostile_tls":
        r = rng.random()
        if r < 0.5:   # the origin, at the TLS level, after a response or mid-body
            op = rng.choice([{"op": "alert"}, {"op": "badrec"}, {"op": "notify"}, {"op": "rst"}, {"op": "close"}])
            body = gen._text(rng, 200)
            resp = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body) + rng.choice([0, 100])}\r\n\r\n{body}"
            scripts = [{"tls": {"cert": "good"}, "ops": [{"op": "req"}, {"op": "send", "d": resp, "w": []}, op] +
                        _serve(rng, n)}]
            if rng.random() < 0.3:
                scripts[0]["tls"].update(cut=rng.randint(0, 900), then=rng.choice(["rst", "close", "stall"]))
        elif r < 0.8:   # the client's ciphertext cut
            t_extra["cut"] = _cut(rng)
        else:           # the client's handshake
            t_extra.update(rng.choice([{"records": rng.randint(2, 5)}, {"alpn": ["h2"]}, {"alpn": None},
                                       {"raw": gen._garbage(rng, 100)}, {"sni": None}]))
    elif kind == "resume":
        # A second tunnel to the host offers the first one's TLS session
        # (or another host's, or a ticket with a bit flipped).
        second = {"resume": rng.choice(["same", "same", "other"])}
        if rng.random() < 0.3:
            second["flip"] = [rng.randint(1, 300)]
        t_extra["second"] = second
    elif kind == "upload":
        big = gen._text(rng, rng.choice([2000, 70000, 300000]))
        zone, name = "i2.fuzz.test", name.replace(".i1.", ".i2.")
        ctx.names = {name: "i2"}
        reqs = [_allowed_request(rng, name, port, zone, 0, body=big)]
        if rng.random() < 0.5:
            reqs.append(_allowed_request(rng, name, port, zone, 1))
        early = rng.random() < 0.5
        ops = ([{"op": "sleep", "ms": rng.choice([0, 10, 50])},
                {"op": "send", "d": "HTTP/1.1 413 Too Large\r\nContent-Length: 4\r\n\r\nbig!", "w": []},
                rng.choice([{"op": "close"}, {"op": "req"}, {"op": "rst"}])] if early else _serve(rng, len(reqs)))
        scripts = [{"tls": {"cert": "good"}, "ops": ops}]
        writes = [[1000, 0], [1000, 20], [len(big), 10]]
    plain = "".join(reqs)
    head = f"CONNECT {name}:{port} HTTP/1.1\r\nHost: {name}:{port}\r\n\r\n"
    second = t_extra.pop("second", None)
    t = {"host": name, "sni": "@", "alpn": ["http/1.1"], "records": 1, "raw": None, "data": plain,
         "writes": writes, "cut": None, "notify": rng.random() < 0.3}
    t.update(t_extra)
    cl = {"start_ms": 0, "data": head, "bulk": 0, "writes": [], "end": end, "tls": t, "stop_read": -1,
          "rcvbuf": 0, "wait_ms": rng.choice([400, 800])}
    clients = [cl]
    if second:
        again = copy.deepcopy(cl)
        again["start_ms"] = rng.choice([150, 300])
        again["tls"].update(second, data=_allowed_request(rng, name, port, zone, 5))
        clients.append(again)
        for s in scripts:
            s["ops"] += _serve(rng, 1)
        scripts.append({"tls": {"cert": "good"}, "ops": _serve(rng, 2)})
    if rng.random() < 0.3:      # someone else at the same time
        other = gen.Ctx(rng)
        other.k = rng.choice([0.0, 1.0, 2.5])
        other.names = dict(ctx.names)
        clients.append(gen.client(rng, other))
    return {"v": 1, "seed": seed, "origin": f"scenario:inspect_{kind}", "k": 0.0, "clients": clients,
            "origins": {f"{a}:{port}": copy.deepcopy(scripts) for a in addrs}, "dns": {name: dns_e}}
