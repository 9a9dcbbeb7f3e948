"""Mutations of a stored case. A mutant is a whole new case (JSON); the seed
it records drives every choice made here, so the same parent and seed give
the same mutant."""

import copy
import random
import re

from . import gen, gen_inspect, rules, sess
from .pki import CERT_KINDS

TOKENS = ["\r\n", "\r\n\r\n", "\n", "\r", " ", ":", "0\r\n\r\n", "chunked", "Transfer-Encoding: chunked\r\n",
          "Content-Length: ", "Content-Length: 0\r\n", "Connection: close\r\n", "Expect: 100-continue\r\n",
          "HTTP/1.1", "HTTP/1.0", "GET ", "HEAD ", "POST ", "CONNECT ", "http://", gen.NONCE,
          ".ok.fuzz.test", ".no.fuzz.test", ":80", ":443", ":8080", ":8443", "ffffffff", ";ext=1",
          "\x00", "\x16\x03\x01", "Host: ", "%", "[", "]", "@", "#", "0", "-1", "99999999999"]


_NAME_RE = re.compile(r"h\d+-" + re.escape(gen.NONCE) + r"\.(ok|no|port|i1|i2|s0|s1|s2)\.fuzz\.test", re.I)


def mutate_bytes(rng, s, donors=()):
    if not s:
        return rng.choice(TOKENS)
    for _ in range(rng.choice([1, 1, 2, 3, 5])):
        op = rng.random()
        i = rng.randrange(len(s) + 1)
        # Half the time after the first head: a broken head only ever
        # reaches the parser's refusals.
        he = s.find("\r\n\r\n")
        if he >= 0 and rng.random() < 0.5:
            i = rng.randrange(he + 4, len(s) + 1)
        if op < 0.2:      # flip a byte
            if i < len(s):
                s = s[:i] + chr(ord(s[i]) ^ (1 << rng.randrange(8))) + s[i + 1:]
        elif op < 0.35:   # insert a token
            s = s[:i] + rng.choice(TOKENS) + s[i:]
        elif op < 0.5:    # delete a run
            j = min(len(s), i + rng.choice([1, 1, 2, 4, 16, 200]))
            s = s[:i] + s[j:]
        elif op < 0.6:    # duplicate a run
            j = min(len(s), i + rng.choice([1, 4, 32, 500]))
            s = s[:i] + s[i:j] + s[i:]
        elif op < 0.7:    # change a number
            k = i
            while k < len(s) and not s[k].isdigit():
                k += 1
            j = k
            while j < len(s) and s[j].isdigit():
                j += 1
            if k < len(s):
                s = s[:k] + str(rng.choice([0, 1, 2, 9, 255, 65535, 65536, 2**31, 2**63, 10**20,
                                           rng.randint(0, 100000)])) + s[j:]
        elif op < 0.8:    # swap CRLF for LF or the reverse
            s = s.replace("\r\n", "\n", 1) if rng.random() < 0.5 else s.replace("\n", "\r\n", 1)
        elif op < 0.9 and donors:   # splice from another stream
            d = rng.choice(donors)
            if d:
                a = rng.randrange(len(d))
                b = min(len(d), a + rng.randint(1, 400))
                s = s[:i] + d[a:b] + s[i:]
        else:             # truncate
            s = s[:i]
    return s[:200000]


def _client_donors(corpus):
    out = []
    for c in corpus:
        out += [cl.get("data", "") for cl in c.get("clients", [])]
        out += [cl["tls"].get("data", "") for cl in c.get("clients", []) if isinstance(cl.get("tls"), dict)]
    return out


def _inside(rng, cl):
    """A TLS client's tls object, most of the time: mutations then edit
    the plaintext inside the tunnel rather than the CONNECT."""
    t = cl.get("tls")
    return t if isinstance(t, dict) and rng.random() < 0.8 else None


def _tunnel_of(cl):
    """(host, port) of a TLS client's CONNECT."""
    m = re.search(r":(\d+) ", cl.get("data", ""))
    return cl["tls"].get("host", ""), int(m.group(1)) if m else 443


def _names_of(case):
    """The names a case's clients use, with a kind for the generators."""
    names = {}
    for n in case.get("dns", {}):
        kind = "ok"
        for k, zone in gen.ZONES.items():
            if n.endswith("." + zone):
                kind = k
        names[n] = kind
    return names


def _ctx_for(rng, case):
    ctx = gen.Ctx(rng)
    if "k" in case:
        ctx.k = case["k"]
    ctx.names.update(_names_of(case))
    slots = sorted({int(k.split(":")[0][1:]) for k in case.get("origins", {})
                    if k[:1] == "o" and k.split(":")[0][1:].isdigit()})
    if slots:
        ctx.slots = slots
    return ctx


def mutate(parent, corpus, seed):
    rng = random.Random(seed)
    c = copy.deepcopy(parent)
    c["seed"] = seed
    done = []
    donors = _client_donors(corpus)
    for _ in range(rng.choice([1, 1, 2, 3, 4])):
        ctx = _ctx_for(rng, c)
        op = rng.choices(["cbytes", "csplit", "cend", "cnew", "cadd", "cdrop", "obytes", "onew", "oops",
                          "dnew", "dtweak", "cross", "cappend", "ctls", "otls", "opin", "sess"],
                         [18, 10, 8, 8, 4, 3, 10, 8, 6, 8, 8, 5, 6, 4, 3, 4,
                          10 if isinstance(c.get("sessions"), dict) else 1])[0]
        clients = c["clients"]
        if op == "cbytes":
            cl = rng.choice(clients)
            where = _inside(rng, cl) or cl
            where["data"] = mutate_bytes(rng, where["data"], donors)
            if rng.random() < 0.3:
                where["writes"] = gen.splits(rng, len(where["data"]))
        elif op == "csplit":
            cl = rng.choice(clients)
            where = _inside(rng, cl) or cl
            where["writes"] = gen.splits(rng, len(where["data"]))
        elif op == "cend":
            cl = rng.choice(clients)
            t = _inside(rng, cl)
            if t is not None and rng.random() < 0.4:
                t["cut"] = gen_inspect._cut(rng) if rng.random() < 0.8 else None
            cl["end"] = gen.client_end(rng, len(t["data"] if t is not None else cl["data"]),
                                       rng.choice([0.5, 1.0, 2.5]))
            if rng.random() < 0.3:
                cl["stop_read"] = rng.choice([-1, 0, 1, 100, 5000])
                cl["rcvbuf"] = rng.choice([0, 2048])
            if rng.random() < 0.3:
                cl["wait_ms"] = rng.choice([80, 150, 250, 400, 700, 1200])
        elif op == "cnew":
            clients[rng.randrange(len(clients))] = gen.client(rng, ctx)
        elif op == "cadd" and len(clients) < 4:
            clients.append(gen.client(rng, ctx))
        elif op == "cappend":
            # one more request behind what the client sends (pipelined)
            cl = rng.choice(clients)
            where = cl
            if isinstance(cl.get("tls"), dict):
                where = cl["tls"]
                extra = gen.http_request(rng, ctx, inside=_tunnel_of(cl))
            else:
                extra = gen.http_request(rng, ctx) if rng.random() < 0.85 else "".join(gen.connect_request(rng, ctx))
            if rng.random() < 0.3 and "\r\n\r\n" in where["data"]:
                cut = where["data"].find("\r\n\r\n") + 4
                where["data"] = where["data"][:cut] + extra + where["data"][cut:]
            else:
                where["data"] += extra
            if cl["end"].get("at") is not None and rng.random() < 0.5:
                cl["end"]["at"] = None
        elif op == "ctls":
            tc = [cl for cl in clients if isinstance(cl.get("tls"), dict)]
            if not tc:
                clients[rng.randrange(len(clients))] = gen_inspect.client(rng, ctx)
            else:
                t = rng.choice(tc)["tls"]
                key = rng.choice(["sni", "alpn", "records", "raw", "notify", "resume", "flip"])
                t[key] = {"sni": lambda: rng.choice(["@", "@", None, ctx.name(), t.get("host", "").upper()]),
                          "alpn": lambda: rng.choice([["http/1.1"], None, ["h2"], ["h2", "http/1.1"]]),
                          "records": lambda: rng.choice([1, 2, 3, 5]),
                          "raw": lambda: None if t.get("raw") is not None else gen._garbage(rng, rng.randint(1, 200)),
                          "notify": lambda: not t.get("notify"),
                          "resume": lambda: rng.choice([None, "same", "other"]),
                          "flip": lambda: [rng.randint(1, 300) for _ in range(rng.choice([0, 1, 2]))]}[key]()
        elif op == "otls":
            keys = [k for k, v in c["origins"].items() if any(isinstance(s_.get("tls"), dict) for s_ in v)]
            if keys:
                scripts = c["origins"][rng.choice(sorted(keys))]
                script = rng.choice([s_ for s_ in scripts if isinstance(s_.get("tls"), dict)])
                t = script["tls"]
                r = rng.random()
                if r < 0.5:
                    t["cert"] = rng.choice(CERT_KINDS)
                elif r < 0.8:
                    t.pop("hs", None)
                    if "cut" in t:
                        t.pop("cut")
                    else:
                        t.update(cut=rng.randint(0, 900), then=rng.choice(["rst", "close", "stall"]))
                else:
                    script["ops"].insert(rng.randint(0, len(script["ops"])),
                                         {"op": rng.choice(["notify", "alert", "badrec"])})
        elif op == "opin" and c["origins"]:
            # an answer becomes a pinned artifact's body, right or wrong
            # (no poison: what came before it may have no certain end)
            script = rng.choice(c["origins"][rng.choice(sorted(c["origins"]))])
            ops = script["ops"]
            sends = [i for i, o in enumerate(ops) if o.get("op") == "send"]
            names = rng.choice([names for _, _, _, names in rules.PINS])
            fresh = gen_inspect.pinned_answer(rng, names, rng.choice([0.0, 1.0]), poison_ok=False)
            if sends:
                i = rng.choice(sends)
                ops[i:i + 1] = fresh
                for o in ops[i + len(fresh):]:   # what follows may now be its body
                    if o.get("op") == "send":
                        o["d"] = o.get("d", "").replace(gen.POISON, "P0IS0N-")
            else:
                ops += [{"op": "req"}] + fresh
        elif op == "sess":
            # the case's sessions (a case without gets some), or one client's credentials
            op = "sess:" + sess.mutate(rng, c)
        elif op == "cdrop" and len(clients) > 1:
            clients.pop(rng.randrange(len(clients)))
        elif op == "obytes" and c["origins"]:
            key = rng.choice(sorted(c["origins"]))
            script = rng.choice(c["origins"][key])
            sends = [o for o in script["ops"] if o.get("op") == "send"]
            if sends:
                o = rng.choice(sends)
                o["d"] = mutate_bytes(rng, o["d"]).replace(gen.POISON, "P0IS0N-")
                if rng.random() < 0.3:
                    o["w"] = gen.origin_splits(rng, len(o["d"]))
        elif op == "onew":
            ctx.k = rng.choice([0.25, 1.0, 2.5])
            fresh = gen.origin_table(rng, ctx, c["dns"])
            if fresh:
                key = rng.choice(sorted(fresh))
                c["origins"][key] = fresh[key]
        elif op == "oops" and c["origins"]:
            key = rng.choice(sorted(c["origins"]))
            script = rng.choice(c["origins"][key])
            ops = script["ops"]
            r = rng.random()
            if ops and r < 0.3:
                ops.pop(rng.randrange(len(ops)))
            elif ops and r < 0.6:
                # A copy moves its bytes after other responses, perhaps one
                # whose body runs to the close: its poison would be that body.
                dup = copy.deepcopy(rng.choice(ops))
                if dup.get("op") == "send":
                    dup["d"] = dup.get("d", "").replace(gen.POISON, "P0IS0N-")
                ops.insert(rng.randrange(len(ops) + 1), dup)
            else:
                ops.insert(rng.randrange(len(ops) + 1),
                           rng.choice([{"op": "rst"}, {"op": "shut"}, {"op": "stall"}, {"op": "close"},
                                       {"op": "sleep", "ms": rng.choice([10, 100, 400])}]))
        elif op == "dnew":
            names = sorted(ctx.names)
            if names:
                n = rng.choice(names)
                c["dns"][n] = gen.dns_entry(rng, ctx, n)
        elif op == "dtweak" and c["dns"]:
            n = rng.choice(sorted(c["dns"]))
            q = rng.choice(["A", "AAAA"])
            answers = c["dns"][n].setdefault(q, [{"rcode": 0, "an": []}])
            a = rng.choice(answers)
            r = rng.random()
            if r < 0.25 and a.get("an"):
                rng.choice(a["an"])["ttl"] = rng.choice(gen.TTLS)
            elif r < 0.5:
                fresh = gen.dns_answer(rng, ctx, q, n).get("an") or [{"t": q, "name": "@", "addr": ctx.slot(),
                                                                       "ttl": 5}]
                a.setdefault("an", []).append(rng.choice(fresh))
            elif r < 0.6 and a.get("an"):
                a["an"].pop(rng.randrange(len(a["an"])))
            elif r < 0.7:
                answers.insert(0, rng.choice([{"drop": 1}, {"rcode": 2, "an": []}, {"raw": ""}]))
            else:
                key = rng.choice(["delay_ms", "tc", "cut", "wrong_id", "dup", "qd"])
                if key in a:
                    a.pop(key)
                else:
                    a[key] = {"delay_ms": rng.choice([20, 200, 400]), "tc": 1, "cut": rng.randint(0, 60),
                              "wrong_id": 1, "dup": 2, "qd": "none"}[key]
        elif op == "cross" and corpus:
            donor = rng.choice(corpus)
            if donor.get("clients"):
                clients[rng.randrange(len(clients))] = copy.deepcopy(rng.choice(donor["clients"]))
                for n, e in donor.get("dns", {}).items():
                    c["dns"].setdefault(n, copy.deepcopy(e))
                for k, v in donor.get("origins", {}).items():
                    c["origins"].setdefault(k, copy.deepcopy(v))
        else:
            continue
        done.append(op)
    for cl in c["clients"]:
        cl["data"] = cl["data"].replace(gen.POISON, "P0IS0N-")
        if isinstance(cl.get("tls"), dict):
            cl["tls"]["data"] = cl["tls"].get("data", "").replace(gen.POISON, "P0IS0N-")
    # New clients may name new hosts: most get an answer.
    ctx = _ctx_for(rng, c)
    for cl in c["clients"]:
        text = cl["data"] + (cl["tls"].get("data", "") if isinstance(cl.get("tls"), dict) else "")
        for m in _NAME_RE.finditer(text):
            n = m.group(0).lower().replace(gen.NONCE.lower(), gen.NONCE)
            if n not in c["dns"] and rng.random() < 0.9:
                c["dns"][n] = gen.dns_entry(rng, ctx, n)
    c["origin"] = f"mut:{parent.get('id', '?')}:{'+'.join(done) or 'none'}"
    return c
