#!/usr/bin/python3
"""A Python model of the inspecting gate, written from the inspect design
(the lead's brief for issue 11), to run the e2e inspection tests against
before sluice inspects: when a test fails here, the test may be the one
that is wrong. It is not sluice and does only what those tests use (exact
hosts, one allowlist, no seq/chain, no limits); pytest does not collect it.

    SLUICE_BIN=$PWD/tests/e2e/model/inspect_model.py unshare --net --mount -- \
        /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e/test_inspect.py ...

MODEL_BREAK=mode[,mode...] breaks one rule, to see that the tests catch it:
ambiguous (no path/Host checks in the tunnel), noverify (upstream
certificates not verified), nomatch (every request matches the first rule),
stayopen (the tunnel stays open after a 403), appendcred (the client's
header kept beside the credential), leak (the credential on stderr),
credplain (the credential on plain HTTP), newconn (a new upstream
connection per request), noreconnect, alpn (an h2-only client accepted),
notimeout (no header_ms on the client handshake), bighello (a ClientHello
over 16 KiB accepted)."""

import configparser
import datetime
import json
import os
import re
import select
import signal
import socket
import ssl
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from sluicetest import tlshello  # noqa: E402
from sluicetest.dns import RECORDS  # noqa: E402

HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "upgrade"}
BREAK = False   # set by MODEL_BREAK to check that a test fails on broken behaviour


def err(msg):
    sys.stderr.write(f"sluice: {msg}\n")
    sys.stderr.flush()


# --- config ---------------------------------------------------------------

class Rule:
    def __init__(self, methods, host, port, pattern, where):
        self.methods, self.host, self.port, self.pattern, self.where = methods, host, port, pattern, where
        self.rx = re.compile("".join(".*" if ch == "*" else re.escape(ch) for ch in pattern), re.S)

    def covers(self, host, port, connect):
        return self.host == host and (self.port == port or (self.port is None and port == (443 if connect else 80)))

    def matches(self, method, path):
        return (self.methods == "*" or method in self.methods.split(",")) and self.rx.fullmatch(path)


class Policy:
    def __init__(self, path):
        cp = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
        cp.read(path)
        base = os.path.dirname(os.path.abspath(path))
        rel = lambda p: p if os.path.isabs(p) else os.path.join(base, p)
        self.header_s = cp.getint("timeouts", "header_ms", fallback=10000) / 1000
        self.log_path = cp.get("log", "path", fallback="-")
        self.admin = cp.get("admin", "listen", fallback="")
        self.rules, self.entries, self.warnings = [], [], []
        for f in [cp.get("policy", "allowlist")]:
            for n, line in enumerate(open(f), 1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                where = f"{f}:{n}"
                if len(parts) >= 2 and re.fullmatch(r"\*|[A-Z]+(,[A-Z]+)*", parts[0]):
                    hp = parts[1]
                    i = hp.index("/")
                    host, port = _hostport(hp[:i])
                    self.rules.append(Rule(parts[0], host, port, hp[i:], where))
                else:
                    host, port = _hostport(parts[0])
                    self.entries.append((host, port, where))
        for host, port, where in self.entries:
            if any(r.host == host for r in self.rules):
                self.warnings.append(f"{where}: warning: plain entry {host} is shadowed by request rules")
        self.tls = None
        if cp.has_section("tls"):
            self.tls = {k: rel(cp.get("tls", k)) for k in ("ca_cert", "ca_key", "upstream_ca")}
        self.creds = {}
        if cp.has_section("credentials"):
            sdir = rel(cp.get("credentials", "secret_dir"))
            for line in open(rel(cp.get("credentials", "file"))):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                name, host, header, template = line.split(None, 3)
                secret = open(os.path.join(sdir, name)).read()
                if secret.endswith("\n"):
                    secret = secret[:-1]
                self.creds[host] = (name, header, template.replace("{secret}", secret))

    def covering(self, host, port, connect):
        return [r for r in self.rules if r.covers(host, port, connect)]

    def entry(self, host, port, connect):
        for h, p, where in self.entries:
            if h == host and (p == port or (p is None and port == (443 if connect else 80))):
                return where
        return None


def _hostport(s):
    if ":" in s:
        h, p = s.rsplit(":", 1)
        return h.lower(), int(p)
    return s.lower(), None


# --- log ------------------------------------------------------------------

LOCK = threading.Lock()
POLICY = None


def log(**fields):
    line = {"ts": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    line.update(fields)
    text = json.dumps(line) + "\n"
    with LOCK:
        if POLICY.log_path == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            with open(POLICY.log_path, "a") as f:
                f.write(text)


def ambiguous(path):
    if "\\" in path:
        return "a backslash"
    if "//" in path:
        return "an empty segment (//)"
    i = 0
    while True:
        i = path.find("%", i)
        if i < 0:
            break
        if not re.fullmatch(r"[0-9A-Fa-f]{2}", path[i + 1:i + 3]):
            return "a bad percent escape"
        i += 3
    low = path.lower()
    if "%00" in low:
        return "%00"
    if "%2f" in low or "%5c" in low:
        return "an encoded / or \\"
    for seg in low.split("/"):
        if seg.replace("%2e", ".") in (".", ".."):
            return "a dot segment"
    return None


def suggest(method, host, port, connect, path):
    default = 443 if connect else 80
    return f"{method} {host}{'' if port == default else f':{port}'}{path}"


def refusal(status, reason, text):
    body = f"sluice refused this request ({reason}): {text}\n".encode()
    names = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 504: "Gateway Timeout"}
    return (f"HTTP/1.1 {status} {names[status]}\r\nSluice-Decision: deny; reason={reason}\r\n"
            f"Content-Type: text/plain\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


# --- HTTP reading ---------------------------------------------------------

class Bad(Exception):
    pass


def read_message(rf, request=True, method="GET"):
    """(start line parts, headers, body) or None at EOF."""
    line = rf.readline(8193)
    if not line:
        return None
    if not line.endswith(b"\r\n") or len(line) > 8192:
        raise Bad("request line too long or bare LF")
    start = line[:-2].decode("latin-1").split(" ", 2)
    headers = []
    while True:
        h = rf.readline(8193)
        if not h:
            raise Bad("the head ended early")
        if h == b"\r\n":
            break
        k, sep, v = h[:-2].decode("latin-1").partition(":")
        if not sep or k != k.strip():
            raise Bad("bad header line")
        headers.append((k, v.strip()))
    names = [k.lower() for k, _ in headers]
    if "content-length" in names and "transfer-encoding" in names:
        raise Bad("Content-Length with Transfer-Encoding")
    body = b""
    if not request and (method == "HEAD" or int(start[1]) in (204, 304) or start[1].startswith("1")):
        pass
    elif "transfer-encoding" in names:
        out = bytearray()
        while True:
            size = int(rf.readline(1024).split(b";")[0].strip(), 16)
            if size == 0:
                while rf.readline(8192) not in (b"\r\n", b""):
                    pass
                break
            out += rf.read(size)
            rf.read(2)
        body = bytes(out)
        headers = [(k, v) for k, v in headers if k.lower() != "transfer-encoding"]
        headers.append(("Content-Length", str(len(body))))
    elif "content-length" in names:
        body = rf.read(int(dict((k.lower(), v) for k, v in headers)["content-length"]))
    elif not request:
        status = int(start[1])
        if not (method == "HEAD" or status in (204, 304) or 100 <= status < 200):
            body = rf.read()
    return start, headers, body


def serialize(start, headers, body):
    return (" ".join(start) + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode("latin-1") + body


# --- TLS ------------------------------------------------------------------

LEAVES = {}


def server_ctx(host):
    if host in LEAVES:
        return LEAVES[host]
    ca = x509.load_pem_x509_certificate(open(POLICY.tls["ca_cert"], "rb").read())
    ca_key = serialization.load_pem_private_key(open(POLICY.tls["ca_key"], "rb").read(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.utcnow()
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), False)
            .sign(ca_key, hashes.SHA256()))
    d = os.path.join(os.path.dirname(os.path.abspath(POLICY.tls["ca_cert"])), "model-leaves")
    os.makedirs(d, exist_ok=True)
    cp, kp = f"{d}/{host}.pem", f"{d}/{host}.key"
    open(cp, "wb").write(leaf.public_bytes(serialization.Encoding.PEM))
    open(kp, "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20")
    ctx.load_cert_chain(cp, kp)
    ctx.set_alpn_protocols(["http/1.1"])
    LEAVES[host] = ctx
    return ctx


def upstream_tls(addr, port, host, raw=None):
    ctx = ssl.create_default_context(cafile=POLICY.tls["upstream_ca"])
    if "noverify" in BREAK:
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20")
    ctx.set_alpn_protocols(["http/1.1"])
    raw = raw or socket.create_connection((addr, port), timeout=10)
    try:
        return ctx.wrap_socket(raw, server_hostname=host), None
    except ssl.SSLCertVerificationError as e:
        raw.close()
        names = {10: "upstream certificate expired", 9: "upstream certificate not yet valid",
                 18: "upstream certificate not trusted (self-signed)",
                 19: "upstream certificate not trusted (self-signed chain)",
                 20: "upstream certificate not trusted (unknown issuer)",
                 21: "upstream certificate not trusted", 62: "upstream certificate name mismatch"}
        return None, names.get(e.verify_code, e.verify_message)
    except (ssl.SSLError, OSError) as e:
        raw.close()
        return None, f"upstream TLS failed: {e}"


def wait_hello(c, deadline):
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, "no TLS ClientHello within header_ms"
        r, _, _ = select.select([c], [], [], left)
        if not r:
            continue
        data = c.recv(65536, socket.MSG_PEEK)
        if not data:
            return None, "client closed before sending a ClientHello"
        try:
            info = tlshello.parse(data)
        except tlshello.NeedMore:
            if len(data) > 32768:
                return None, "ClientHello too large"
            time.sleep(0.005)
            continue
        except tlshello.NotHello as e:
            return None, f"first bytes are not a TLS ClientHello ({e})"
        if info["length"] > 16384 and "bighello" not in BREAK:
            return None, f"ClientHello of {info['length']} bytes is larger than 16384"
        return info, None


# --- connections -----------------------------------------------------------

def handle(c, peer):
    cid = uuid.uuid4().hex[:16]
    try:
        c.settimeout(POLICY.header_s)
        rf = c.makefile("rb")
        msg = read_message(rf)
        if msg is None:
            return
        (method, target, version), headers, body = msg
        if method == "CONNECT":
            connect(c, rf, cid, peer, target)
        else:
            plain(c, cid, peer, method, target, headers, body)
    except (OSError, Bad, ValueError):
        pass
    finally:
        try:
            c.close()
        except OSError:
            pass


def connect(c, rf, cid, peer, target):
    host, port = target.rsplit(":", 1)
    host, port = host.lower(), int(port)
    client = f"{peer[0]}:{peer[1]}"
    rules = POLICY.covering(host, port, True)
    entry = POLICY.entry(host, port, True)
    t0 = time.monotonic()
    base = dict(id=cid, client=client, method="CONNECT", host=host, port=port)
    if not rules and not entry:
        log(event="decision", **base, decision="deny", reason="not_allowlisted")
        c.sendall(refusal(403, "not_allowlisted", f"{host}:{port} is not allowlisted"))
        return
    addr = RECORDS[host][0]
    up = socket.create_connection((addr, port), timeout=10)
    c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    info, why = wait_hello(c, time.monotonic() + POLICY.header_s)
    if why is None and info["sni"] != host:
        why = f"ClientHello names {info['sni']}, not {host}"
    if why:
        log(event="decision", **base, decision="deny", reason="sni_mismatch", detail=why)
        up.close()
        return
    if not rules:
        log(event="decision", **base, decision="allow", reason="allowlisted", rule=entry, addr=addr, sni=host)
        relay(c, up)
        log(event="close", id=cid, bytes_up=0, bytes_down=0, duration_ms=0, end="client_eof")
        return
    us, fail = upstream_tls(addr, port, host, up)
    if fail:
        log(event="decision", **base, decision="deny", reason="upstream_tls_failed", detail=fail)
    else:
        log(event="decision", **base, decision="allow", reason="inspected", rule=rules[0].where, addr=addr, sni=host)
    allowed = fail is None
    end, detail = "client_eof", None
    try:
        if info["alpn"] is not None and "http/1.1" not in info["alpn"] and "alpn" not in BREAK:
            c.sendall(b"\x15\x03\x03\x00\x02\x02\x78")     # fatal no_application_protocol
            end, detail = "client_tls_failed", f"the client's ALPN offers {info['alpn']}, not http/1.1"
            return
        c.settimeout(30 if "notimeout" in BREAK else max(0.01, POLICY.header_s - (time.monotonic() - t0)))
        try:
            cs = server_ctx(host).wrap_socket(c, server_side=True)
        except socket.timeout:
            end, detail = "client_tls_timeout", "client TLS handshake not done within header_ms"
            return
        except (ssl.SSLError, OSError) as e:
            end, detail = "client_tls_failed", str(e)
            return
        try:
            tunnel(cs, cid, host, port, addr, us, fail, rules)
        finally:
            cs.close()
    finally:
        if allowed:
            line = dict(event="close", id=cid, bytes_up=0, bytes_down=0, duration_ms=1.0, end=end)
            if end != "client_eof" and detail:
                line["detail"] = detail
            log(**line)


def tunnel(cs, cid, host, port, addr, us, fail, rules):
    cs.settimeout(30)
    rf = cs.makefile("rb")
    n = 0
    urf = us.makefile("rb") if us else None
    while True:
        try:
            msg = read_message(rf)
        except Bad as e:
            n += 1
            rline(cid, n, "?", host, "?", "deny", "bad_request", 400, detail=str(e))
            cs.sendall(refusal(400, "bad_request", str(e)))
            return
        if msg is None:
            return
        n += 1
        (method, target, version), headers, body = msg
        path = target.partition("?")[0]
        if fail:
            rline(cid, n, method, host, path, "deny", "upstream_tls_failed", 502, detail=fail)
            cs.sendall(refusal(502, "upstream_tls_failed", fail))
            return
        hosts = [v for k, v in headers if k.lower() == "host"]
        why = None
        if not target.startswith("/"):
            why = "the target is not in origin-form"
        elif len(hosts) != 1 or hosts[0].lower() not in (host, f"{host}:{port}"):
            why = f"Host must name {host}"
        else:
            why = ambiguous(path)
        if why and "ambiguous" not in BREAK:
            rline(cid, n, method, host, path, "deny", "bad_request", 400, detail=why)
            cs.sendall(refusal(400, "bad_request", why))
            return
        rule = next((r for r in rules if r.matches(method, path) or "nomatch" in BREAK), None)
        if rule is None:
            s = suggest(method, host, port, True, path)
            rline(cid, n, method, host, path, "deny", "rule_not_matched", 403, detail="no rule allows it", suggest=s)
            cs.sendall(refusal(403, "rule_not_matched", f"no rule allows this; this line would:\n\n    {s}\n"))
            if "stayopen" in BREAK:
                continue
            return
        cred = POLICY.creds.get(host)
        out = [(k, v) for k, v in headers if k.lower() not in HOP and not (cred and k.lower() == cred[1].lower()
                                                                          and "appendcred" not in BREAK)]
        if cred:
            out.append((cred[1], cred[2]))
            if "leak" in BREAK:
                err(f"set {cred[1]}: {cred[2]}")
        data = serialize([method, target, "HTTP/1.1"], out, body)
        resp = None
        for attempt in (0, 1):
            try:
                if attempt or (_dead(us) and "noreconnect" not in BREAK) or "newconn" in BREAK:
                    us.close()
                    us, f = upstream_tls(addr, port, host)
                    urf = us.makefile("rb")
                us.sendall(data)
                resp = read_message(urf, request=False, method=method)
                if resp is not None or "noreconnect" in BREAK:
                    break
            except (OSError, Bad):
                pass
        (ver, status, reason), rh, rb = resp
        rh = [(k, v) for k, v in rh if k.lower() not in HOP]
        out_bytes = serialize([ver, status, reason], rh, rb)
        cs.sendall(out_bytes)
        extra = {"credential": cred[0]} if cred else {}
        rline(cid, n, method, host, path, "allow", "rule", int(status), rule=rule.where, bytes_up=len(data),
              bytes_down=len(out_bytes), **extra)


def _dead(s):
    """Readable while idle: the origin closed (or sent what it must not)."""
    r, _, _ = select.select([s], [], [], 0)
    return bool(r) or s.pending() > 0


def rline(cid, n, method, host, path, decision, reason, status, **extra):
    line = dict(event="request", id=cid, n=n, method=method, host=host, path=path[:1024], decision=decision,
                reason=reason, status=status, bytes_up=0, bytes_down=0, duration_ms=1.0)
    line.update(extra)
    log(**line)


def relay(a, b):
    def pump(x, y):
        try:
            while True:
                d = x.recv(65536)
                if not d:
                    break
                y.sendall(d)
        except OSError:
            pass
        try:
            y.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    a.settimeout(None)
    b.settimeout(None)
    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join(30)
    b.close()


def plain(c, cid, peer, method, target, headers, body):
    m = re.match(r"^http://([^/:]+)(?::(\d+))?(/.*)?$", target)
    host, port, pt = m.group(1).lower(), int(m.group(2) or 80), m.group(3) or "/"
    path = pt.partition("?")[0]
    base = dict(id=cid, client=f"{peer[0]}:{peer[1]}", method=method, host=host, port=port)
    rules = POLICY.covering(host, port, False)
    if not rules:
        log(event="decision", **base, decision="deny", reason="not_allowlisted")
        c.sendall(refusal(403, "not_allowlisted", "not allowlisted"))
        return
    why = ambiguous(path)
    if why:
        log(event="decision", **base, decision="deny", reason="bad_request", detail=why)
        c.sendall(refusal(400, "bad_request", why))
        return
    rule = next((r for r in rules if r.matches(method, path)), None)
    if rule is None:
        s = suggest(method, host, port, False, path)
        log(event="decision", **base, decision="deny", reason="rule_not_matched", path=path, suggest=s,
            detail="no rule allows it")
        c.sendall(refusal(403, "rule_not_matched", f"this line would allow it:\n\n    {s}\n"))
        return
    cred = POLICY.creds.get(host)
    out = [(k, v) for k, v in headers if k.lower() not in HOP and not (cred and k.lower() == cred[1].lower())]
    if cred and "credplain" in BREAK:
        out.append((cred[1], cred[2]))
    out.append(("Connection", "close"))
    log(event="decision", **base, decision="allow", reason="rule", rule=rule.where, path=path)
    up = socket.create_connection((RECORDS[host][0], port), timeout=10)
    up.sendall(serialize([method, pt, "HTTP/1.1"], out, body))
    (ver, status, reason), rh, rb = read_message(up.makefile("rb"), request=False, method=method)
    rh = [(k, v) for k, v in rh if k.lower() not in HOP] + [("Connection", "close")]
    c.sendall(serialize([ver, status, reason], rh, rb))
    up.close()
    log(event="close", id=cid, bytes_up=0, bytes_down=0, duration_ms=1.0, end="client_eof")


# --- main -------------------------------------------------------------------

def admin(ls):
    while True:
        c, _ = ls.accept()
        rf = c.makefile("rb")
        line = rf.readline().split(b" ")
        while rf.readline() not in (b"\r\n", b""):
            pass
        path = line[1].decode() if len(line) > 1 else "/"
        if path in ("/metrics", "/pins", "/healthz"):
            body = {"/metrics": b"# HELP sluice_up up\n# TYPE sluice_up gauge\nsluice_up 1\n",
                    "/pins": b"[]\n", "/healthz": b"ok\n"}[path]
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        else:
            c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        c.close()


def main():
    global POLICY, BREAK
    BREAK = set(filter(None, os.environ.get("MODEL_BREAK", "").split(",")))
    if len(sys.argv) < 2 or sys.argv[1] not in ("run", "check"):
        err(f"unknown command '{sys.argv[1] if len(sys.argv) > 1 else ''}'")
        sys.exit(2)
    cfg = sys.argv[sys.argv.index("-c") + 1]
    POLICY = Policy(cfg)
    if sys.argv[1] == "check":
        for r in POLICY.rules:
            print(f"{r.host}: {r.methods} {r.pattern}  ({r.where})")
        for name, header, _ in POLICY.creds.values():
            print(f"credential {name}: {header}")
        for w in POLICY.warnings:
            print(w, file=sys.stderr)
        sys.exit(0)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    if POLICY.admin:
        als = socket.socket()
        als.bind(("127.0.0.1", 0))
        als.listen(16)
        threading.Thread(target=admin, args=(als,), daemon=True).start()
        err(f"admin on 127.0.0.1:{als.getsockname()[1]}")

    def hup(*_):
        global POLICY
        POLICY = Policy(cfg)
        err("reloaded policy")
    signal.signal(signal.SIGHUP, hup)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    err(f"listening on 127.0.0.1:{ls.getsockname()[1]}")
    while True:
        c, peer = ls.accept()
        threading.Thread(target=handle, args=(c, peer), daemon=True).start()


if __name__ == "__main__":
    main()
