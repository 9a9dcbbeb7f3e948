"""Sessions (SPEC part 2, "Sessions: one gate, many sandboxes"): the
fuzzer's model of them, and the generators of session cases.

A case with sessions has a "sessions" key, which the harness gives the gate
(a [sessions] dir of NAME.ini files, reloaded with SIGHUP when it differs
from the gate's current one; a case without the key runs on a gate without
[sessions]):

  "sessions": {"require": true|false,
               "list": [{"name": NAME, "token": TOKEN, "zone": 0|1|2, "expired": bool}...]}

Session ZONE i's own allowlist is *.si.fuzz.test (only it has it) and
*.ok.fuzz.test (on the global list too). Tokens are stored in the case: the
client streams carry their Basic credentials, right or wrong in every way
(CRED_KINDS). The harness adds a session of its own for the canaries
(CANARY_NAME, a fresh token each run, no allowlist of its own).

checks.py judges the gate against this model, never against what the gate
says: expected(...) is what a request's Proxy-Authorization must come to."""

import base64
import hashlib
import random
import re

from . import gen, net

ZONES = ["s0.fuzz.test", "s1.fuzz.test", "s2.fuzz.test"]
CANARY_NAME = "fzcanary"
REALM = b'Proxy-Authenticate: Basic realm="sluice"\r\n'
USER_MAX, PASS_MAX = 64, 256
VALUE_MAX = 6 + 4 * ((USER_MAX + 1 + PASS_MAX + 2) // 3)    # proxy_auth.h SL_PROXY_AUTH_VALUE_MAX
EXPIRED = "2000-01-01T00:00:00Z"
LATER = "2099-01-01T00:00:00Z"
_NAME_OK = re.compile(r"[A-Za-z0-9._-]{1,64}")


def zone_of(host):
    """The session zone index a host is under (a subdomain), or None."""
    h = str(host).lower().rstrip(".")
    for i, z in enumerate(ZONES):
        if h.endswith("." + z):
            return i
    return None


def cred(name, token, scheme="Basic"):
    return f"{scheme} " + base64.b64encode(f"{name}:{token}".encode("latin-1")).decode()


def token_sha256(token):
    return hashlib.sha256(token.encode("latin-1")).hexdigest()


def session_allowlist(zone):
    return f"*.{ZONES[zone]}\n*.ok.fuzz.test\n"


class Config:
    """A case's sessions, as the model sees them (and the canaries' one)."""

    def __init__(self, spec, canary_token=None):
        self.require = bool(spec.get("require"))
        self.list = [s for s in spec.get("list", []) if isinstance(s, dict) and _NAME_OK.fullmatch(str(s.get("name", "")))
                     and not str(s["name"]).startswith(".")]
        self.by_name = {s["name"]: s for s in self.list}
        if canary_token:
            self.by_name.setdefault(CANARY_NAME, {"name": CANARY_NAME, "token": canary_token, "zone": None,
                                                  "expired": False})
        self.owner = {}
        for s in self.list:
            if not s.get("expired") and s.get("zone") is not None:
                self.owner.setdefault(int(s["zone"]), s["name"])

    def valid_creds(self):
        """name -> the canonical credential (what the gate accepts, any scheme case aside)."""
        return {n: cred(n, s["token"]) for n, s in self.by_name.items() if not s.get("expired")}

    def secrets(self):
        """Every token and credential of the config: none may be in a log line or a reply."""
        out = set()
        for n, s in self.by_name.items():
            if len(s["token"]) >= 8:
                out.add(s["token"])
            out.add(cred(n, s["token"]).split(" ", 1)[1])
        return out

    def zones_of(self, name):
        s = self.by_name.get(name)
        if not s or s.get("expired") or s.get("zone") is None:
            return set()
        return {int(s["zone"])}


def parse_value(value):
    """(name, token) of a Proxy-Authorization value the gate reads, or None
    (proxy_auth.c: the scheme in any case, one space, canonical base64, a
    colon, name 1-64 and token up to 256 printable ASCII bytes)."""
    v = value
    if len(v) > VALUE_MAX or len(v) < 6 or v[:6].lower() != "basic ":
        return None
    b = v[6:]
    try:
        dec = base64.b64decode(b.encode("latin-1"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    if not b or base64.b64encode(dec).decode("latin-1") != b:
        return None
    name, colon, token = dec.partition(b":")
    if not colon or not name or len(name) > USER_MAX or len(token) > PASS_MAX:
        return None
    if any(ch < 0x21 or ch > 0x7E for ch in dec):
        return None
    return name.decode(), token.decode()


def expected(cfg, values, bound):
    """What one request comes to: ("ok", NAME), ("anon", None) or ("fail",
    REASON), given its Proxy-Authorization values and the session the
    connection is already bound to (or None)."""
    if not values:
        return ("fail", "auth_required") if cfg.require or bound else ("anon", None)
    if len(values) > 1:
        return ("fail", "auth_failed")
    nt = parse_value(values[0])
    s = cfg.by_name.get(nt[0]) if nt else None
    if not s or s["token"] != nt[1] or s.get("expired") or (bound and bound != nt[0]):
        return ("fail", "auth_failed")
    return ("ok", nt[0])


_PA_VALUE = re.compile(r"(?im)^proxy-authorization:[ \t]*([^\r\n]*)")


def tokens_in(text):
    """The tokens and credentials a client stream's Proxy-Authorization
    values carry (long enough to mean something when found elsewhere)."""
    out = set()
    for m in _PA_VALUE.finditer(text):
        v = m.group(1).strip(" \t")
        b = v.split(None, 1)[-1] if v else ""
        if len(b) >= 12:
            out.add(b)
        try:
            dec = base64.b64decode(b + "=" * (-len(b) % 4), validate=False).decode("latin-1")
        except (ValueError, UnicodeEncodeError):
            continue
        if ":" in dec and len(dec.split(":", 1)[1]) >= 8:
            out.add(dec.split(":", 1)[1])
    return out


# ---- generators ------------------------------------------------------------

def _token(rng):
    r = rng.random()
    if r < 0.75:
        return gen._hexs(rng, 32)          # as `sluice session new` makes them
    if r < 0.9:
        return "".join(rng.choice("ABCDEFabcdef0123456789-_.~!:") for _ in range(rng.choice([8, 40, 256])))
    return gen._hexs(rng, rng.choice([12, 64]))


def _name(rng, i):
    r = rng.random()
    if r < 0.6:
        return f"sb{i}-{gen._hexs(rng, 4)}"
    if r < 0.8:
        return rng.choice(["build-42", "A.b_c-", "x", "0", "_"]) + f"{i}" + gen._hexs(rng, 2)
    return (f"n{i}" + "z" * 64)[:64]


def config(rng):
    n = rng.choice([2, 3, 3])
    names = []
    for i in range(n):
        nm = _name(rng, i)
        while nm in names:
            nm = nm[:-1] + rng.choice("abcdef")
        names.append(nm)
    lst = [{"name": nm, "token": _token(rng), "zone": i, "expired": False} for i, nm in enumerate(names)]
    if rng.random() < 0.35:
        rng.choice(lst)["expired"] = True
    return {"require": rng.random() < 0.5, "list": lst}


CRED_KINDS = ["right", "right", "right", "right", "right", "scheme_case", "wrong_token", "other_token",
              "unknown_name", "other_session", "expired", "bad_b64", "bad_pad", "no_colon", "two", "huge",
              "huge_line", "not_basic", "two_spaces", "empty_name", "missing", "missing", "ctl"]


def cred_header(rng, spec, me, kind=None):
    """Header lines (with CRLF) carrying credentials of kind for session me."""
    lst = spec["list"]
    other = rng.choice([s for s in lst if s is not me] or lst)
    expired = [s for s in lst if s.get("expired")]
    kind = kind or rng.choice(CRED_KINDS)
    name, token = me["name"], me["token"]
    hn = "Proxy-Authorization" if rng.random() < 0.85 else rng.choice(["proxy-authorization", "PROXY-AUTHORIZATION"])
    v = cred(name, token)
    if kind == "scheme_case":
        v = cred(name, token, rng.choice(["basic", "BASIC", "bAsIc"]))
    elif kind == "wrong_token":
        t = token[:-1] + ("0" if token[-1:] != "0" else "1") if rng.random() < 0.6 else \
            rng.choice(["", token[:-1], token + "0", token.upper() if token.upper() != token else token + "x"])
        v = cred(name, t)
    elif kind == "other_token":
        v = cred(name, other["token"] if other["token"] != token else token + "z")
    elif kind == "unknown_name":
        v = cred(rng.choice(["nosuch", name + "x", name.upper() if name.upper() != name else name + "Q",
                             "a" * 65, 'q"\\uote']), token)
    elif kind == "other_session":
        v = cred(other["name"], other["token"])
    elif kind == "expired":
        e = rng.choice(expired) if expired else me
        v = cred(e["name"], e["token"])
    elif kind == "bad_b64":
        b = v[6:]
        i = rng.randrange(len(b))
        v = "Basic " + b[:i] + rng.choice(["!", "-", "_", " ", "*", "\t"]) + b[i + 1:]
    elif kind == "bad_pad":
        b = v[6:]
        v = "Basic " + rng.choice([b.rstrip("="), b + "=", b + "====", b[:-1] + "A" if b.endswith("=") else b + "AA=="])
        if v == cred(name, token):
            v += "="
    elif kind == "no_colon":
        v = "Basic " + base64.b64encode(f"{name}{token}".encode("latin-1")).decode()
    elif kind == "two":
        second = rng.choice([v, cred(other["name"], other["token"]), "Basic eDp5"])
        return f"{hn}: {v}\r\n{hn}: {second}\r\n"
    elif kind == "huge":
        v = cred(name, token + "x" * rng.choice([300, 2000]))
    elif kind == "huge_line":
        v = "Basic " + "QUFB" * rng.choice([2100, 9000])
    elif kind == "not_basic":
        v = rng.choice([f"Bearer {token}", f"Digest username=\"{name}\"", token,
                        "Negotiate " + v[6:], "Basic", "Basic "])
    elif kind == "two_spaces":
        v = "Basic  " + v[6:] if rng.random() < 0.5 else "Basic\t" + v[6:]
    elif kind == "empty_name":
        v = cred("", token)
    elif kind == "ctl":
        v = cred(name, token[:3] + rng.choice(["\x01", " ", "\x7f", "\xe9"]) + token[3:])
    elif kind == "missing":
        return ""
    ows = rng.choice(["", "", "", " ", "\t"]) if rng.random() < 0.2 else ""
    return f"{hn}: {ows}{v}{ows}\r\n"


def _host(rng, spec, me, names):
    """A host for session me: its own zone, another session's, the global
    list's, one no list has, an inspected one."""
    r = rng.random()
    if r < 0.45:
        z = me["zone"]
    elif r < 0.65:
        z = rng.choice([s["zone"] for s in spec["list"] if s is not me] or [me["zone"]])
    elif r < 0.85:
        z = "ok"
    elif r < 0.93:
        z = "no"
    else:
        z = rng.choice(["i1", "i2"])
    zone = ZONES[z] if isinstance(z, int) else gen.ZONES[z]
    mine = [n for n in names if n.endswith("." + zone)]
    if mine and rng.random() < 0.5:
        return rng.choice(mine)
    n = f"h{len(names)}-{gen.NONCE}.{zone}"
    names.append(n)
    return n


def _request(rng, host, port, creds, i):
    method = rng.choice(["GET", "GET", "GET", "HEAD", "POST"])
    auth = host if port == 80 else f"{host}:{port}"
    path = f"/s{i}/" + gen._text(rng, 3)
    if host.endswith(".i1.fuzz.test") or host.endswith(".i2.fuzz.test"):
        method, path = rng.choice([("GET", f"/r{i}"), ("GET", "/up/x"), ("POST", "/up/y"), ("GET", "/pub/a.txt")])
    h = f"{method} http://{auth}{path} HTTP/1.1\r\nHost: {auth}\r\n{creds}"
    if method == "POST":
        body = gen._text(rng, rng.randint(0, 30))
        return h + f"Content-Length: {len(body)}\r\n\r\n{body}"
    return h + "\r\n"


def client(rng, spec, names, me=None):
    """A session's client: keep-alive plain HTTP, changing credentials now
    and then (to another session's, none, wrong ones), or a CONNECT with or
    without them (an opaque tunnel, or inspected with TLS inside)."""
    me = me or rng.choice(spec["list"])
    first = rng.choice(["right"] * 6 + [None])
    r = rng.random()
    if r < 0.3:
        host = _host(rng, spec, me, names)
        port = 443 if rng.random() < 0.85 else rng.choice(net.CONNECT_PORTS)
        creds = cred_header(rng, spec, me, first)
        head = f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{creds}\r\n"
        if (host.endswith(".i1.fuzz.test") or host.endswith(".i2.fuzz.test")) and rng.random() < 0.8:
            from . import gen_inspect
            ctx = gen.Ctx(rng)
            ctx.k = 0.0
            plain = gen_inspect.requests(rng, ctx, host, port, rng.choice([1, 2]))
            if rng.random() < 0.3:   # credentials inside the tunnel: ignored, and never forwarded
                i = plain.find("\r\n")
                plain = plain[:i + 2] + cred_header(rng, spec, me, "right") + plain[i + 2:]
            return {"start_ms": 0, "data": head, "bulk": 0, "writes": gen.splits(rng, len(head)),
                    "end": {"kind": "hold", "at": None, "ms": 0},
                    "tls": gen_inspect.tls_spec(rng, ctx, host, plain), "stop_read": -1, "rcvbuf": 0,
                    "wait_ms": rng.choice([400, 700])}
        payload = gen.client_hello(rng, host.split(":")[0]).decode("latin-1") if port == 443 else ""
        payload += gen._text(rng, rng.choice([0, 10, 300]))
        data = head + payload
    else:
        port = rng.choice(net.HTTP_PORTS)
        reqs = []
        kind = first
        for i in range(rng.choice([1, 2, 2, 3, 4])):
            host = _host(rng, spec, me, names)
            reqs.append(_request(rng, host, port, cred_header(rng, spec, me, kind), i))
            # mostly the same credentials again; now and then a change
            kind = rng.choice(["right"] * 4 + [None]) if kind == "right" else kind if rng.random() < 0.5 else None
        data = "".join(reqs)
    writes = [] if rng.random() < 0.5 else gen.splits(rng, len(data))
    end = {"kind": rng.choice(["hold", "hold", "shut"]), "at": None, "ms": 0}
    if rng.random() < 0.1:
        end = gen.client_end(rng, len(data), 1.0)
    return {"start_ms": rng.choice([0, 0, 10]), "data": data, "bulk": 0, "writes": writes, "end": end,
            "stop_read": -1, "rcvbuf": 0, "wait_ms": rng.choice([400, 700, 1200])}


def scenario(seed):
    """Two or three sessions and one to three of their clients at once,
    their hosts answered cleanly, origins that serve every request (or echo
    a tunnel)."""
    rng = random.Random(seed)
    spec = config(rng)
    names = []
    clients = [client(rng, spec, names) for _ in range(rng.choice([1, 1, 2, 3]))]
    ctx = gen.Ctx(rng)
    ctx.k = 0.0
    dns, origins = {}, {}
    for n in names:
        if n.endswith(".no.fuzz.test") and rng.random() < 0.7:
            continue
        dns[n], addrs = gen._clean_dns(ctx, n, rng)
        inspected = n.endswith(".i1.fuzz.test") or n.endswith(".i2.fuzz.test")
        for a in addrs:
            for port in net.HTTP_PORTS:
                origins.setdefault(f"{a}:{port}", [{"ops": _serve(rng), "rcvbuf": 0} for _ in range(2)])
            for port in net.CONNECT_PORTS:
                if inspected:
                    origins[f"{a}:{port}"] = [{"tls": {"cert": "good"}, "ops": _serve(rng)} for _ in range(2)]
                else:
                    origins.setdefault(f"{a}:{port}", [{"ops": [{"op": "echo", "ms": 500}]}])
    if rng.random() < 0.2:      # someone anonymous at the same time
        other = gen.Ctx(rng)
        other.k = rng.choice([0.0, 1.0])
        clients.append(gen.client(rng, other))
    return {"v": 1, "seed": seed, "origin": "scenario:sessions", "k": 0.0, "sessions": spec, "clients": clients,
            "origins": origins, "dns": dns}


def _serve(rng):
    ops = []
    for _ in range(4):
        resp = gen._ok_response(rng)
        ops += [{"op": "req"}, {"op": "send", "d": resp, "w": []}]
    return ops


def mutate(rng, case):
    """A session case's own mutations: its config (require, expiry, a
    token), or one client's credentials swapped for another kind."""
    spec = case.get("sessions")
    if not isinstance(spec, dict) or not spec.get("list"):
        case["sessions"] = config(rng)
        return "snew"
    r = rng.random()
    if r < 0.2:
        spec["require"] = not spec.get("require")
        return "sreq"
    if r < 0.35:
        s = rng.choice(spec["list"])
        s["expired"] = not s.get("expired")
        return "sexp"
    if r < 0.45:
        rng.choice(spec["list"])["token"] = _token(rng)
        return "stok"
    cl = rng.choice(case["clients"])
    data = cl.get("data", "")
    hits = list(re.finditer(r"(?im)^proxy-authorization:[^\r\n]*\r\n", data))
    me = rng.choice(spec["list"])
    fresh = cred_header(rng, spec, me)
    if hits:
        m = rng.choice(hits)
        cl["data"] = data[:m.start()] + fresh + data[m.end():]
    else:
        i = data.find("\r\n")
        if i < 0:
            return "snone"
        cl["data"] = data[:i + 2] + fresh + data[i + 2:]
    cl["writes"] = [] if rng.random() < 0.5 else gen.splits(rng, len(cl["data"]))
    return "scred"
