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

from . import gen, net, rules
from .pki import BAD_CERTS

METHODS = {
    "i1.fuzz.test": ["GET", "GET", "GET", "HEAD", "HEAD", "POST", "PUT", "DELETE"],
    "i2.fuzz.test": ["GET", "GET", "POST", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
}
_PATHS = {
    "i1.fuzz.test": ["/", "/x", "/is-number", "/pkg/-/pkg-1.0.0.tgz", "/a/b/c", "/q?x=1&y=/../z", "/up/x"],
    "i2.fuzz.test": ["/up/x", "/up/", "/up/a/b?c=d", "/up/a.txt", "/pub/a.txt", "/pub/x/y.txt", "/pub/a.txt?v=1",
                     "/pub/a.txtx", "/pub/a", "/other", "/upx", "/UP/x", "/", "/up"],
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

KINDS = ["keepalive", "reconnect", "badcert", "refused", "plain", "hostile_tls", "upload", "resume"]


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


def scenario(rng, ctx, seed):
    kind = rng.choice(KINDS)
    zone_kind = rng.choice(["i1", "i2"])
    name = f"h0-{gen.NONCE}.{gen.ZONES[zone_kind]}"
    zone = gen.ZONES[zone_kind]
    ctx.names[name] = zone_kind
    dns_e, addrs = gen._clean_dns(ctx, name, rng)
    port = 443 if rng.random() < 0.85 else 8443
    n = rng.randint(1, 4)
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
