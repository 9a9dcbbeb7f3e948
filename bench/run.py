#!/usr/bin/python3
"""The sluice benchmark driver (issue 6). Run it through bench/run.sh, which
puts it in a network namespace of its own; see bench/README.md.

It times one system call on this machine (bench/syscost.c), starts the
origin (bench/origin.c), a dnsmasq, and one proxy after another (the relay
floor bench/floor.c, squid, tinyproxy, sluice with a one-entry allowlist,
sluice with the full policy), probes each (the origin must pass, a decoy port
must be refused), drives each with the load generator (bench/loadgen.c) and a
direct baseline, prints one table, and writes the raw results as JSON.

Inspection (issue 11): the origin also serves HTTPS, with a certificate from
a CA the bench makes (openssl); squid with ssl_bump (`squid-bump`) and sluice
with request rules (`sluice-inspect`) each inspect tunnels to it with a CA of
their own, and the load generator trusts that CA. They get a table of their
own, beside direct TLS to the origin.

Pinned artifacts (issue 12): sluice-inspect's allowlist also pins the bulk
body under two more paths (/bulk/N/sha512, /bulk/N/sha256: the origin serves
the same bytes there), with digests this driver computes from the bytes
bench/origin.c sends; the pinned runs beside the unpinned one give the cost
of hashing at the gate.

Python standard library only. Installs nothing. Every process it starts is
stopped by its PID; every measurement is bounded in time.
"""

import argparse
import base64
import datetime
import hashlib
import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LOADGEN = os.path.join(ROOT, "build", "bench", "loadgen")
ORIGIN = os.path.join(ROOT, "build", "bench", "origin")
FLOOR = os.path.join(ROOT, "build", "bench", "floor")
SYSCOST = os.path.join(ROOT, "build", "bench", "syscost")
SYSCOST_CALLS = 1000000
SLUICE = os.environ.get("SLUICE_BIN", os.path.join(ROOT, "build", "sluice"))
SQUID = shutil.which("squid") or "/usr/sbin/squid"
SQUID_CERTGEN = "/usr/lib/squid/security_file_certgen"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
TINYPROXY = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
DNSMASQ = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"

# Everything is on loopback, inside the namespace run.sh made.
ORIGIN_IP = "127.0.0.2"
ORIGIN_PORT = 8080
DECOY_PORT = 8081
# inspection: the origin's HTTPS port, and a "rogue" HTTPS port whose
# certificate (for the same names) comes from a CA no proxy trusts
TLS_PORT = 8443
ROGUE_PORT = 8444
DNS_IP = "127.0.0.53"
SMALL_BYTES = 64
# full-policy names; dnsmasq answers them with ORIGIN_IP
NAME_TUNNEL = "t.origin.bench.test"
NAME_HTTP = "h.origin.bench.test"
DNS_TTL = 5
# every byte of the origin's /bulk/N body (bench/origin.c fills its buffer
# with it): the pinned runs' digests are computed from it, never fetched
BULK_FILL = b"b"
# the pinned bulk modes: key, the path's NAME (/bulk/N/NAME), the algorithm
PIN_MODES = (("pbulk", "sha512", "sha512"), ("pbulk256", "sha256", "sha256"))
# the probe's pinned bodies: one with its digest, one with the digest of a
# body one byte longer (which the gate must refuse)
PIN_PROBE_BYTES = 4096

PROFILES = {
    "full": dict(duration=10.0, warmup=1.0, conc=(50, 200), rate=500, bulk=1 << 30,
                 bulk_limit=90.0, idle_n=10000, idle_first=1000, idle_limit=300.0,
                 timeout_ms=10000, rounds=2, bulk_reps=3, ibulk=1 << 30, pbulk=1 << 30,
                 sessions=10000, sess_conc=(50, 200), reloads=5),
    # the sessions pair at one C only: it must not slow bench-smoke
    "smoke": dict(duration=1.0, warmup=0.2, conc=(4, 16), rate=200, bulk=16 << 20,
                  bulk_limit=15.0, idle_n=200, idle_first=100, idle_limit=15.0,
                  timeout_ms=5000, rounds=1, bulk_reps=1, ibulk=16 << 20, pbulk=16 << 20,
                  sessions=100, sess_conc=(16,), reloads=2),
}

LOG_POLICY = {
    "floor": "none (it writes no log)",
    "squid": "access_log stdio: one write(2) per line (buffered_logs off, the default), no fsync",
    "tinyproxy": "one write(2) and one fsync(2) per log line (LogLevel Info: about 7 lines per connection)",
    "sluice": "decision log: a writer thread; deny lines written before the refusal is sent; allow and close "
              "lines gathered, written within 100 ms or at 64 KiB; no fsync; SHA-256 hash chain on every line",
    "sluice-full": "the same as sluice (the decision log on, in a file)",
    "squid-bump": "as squid (one write(2) per access-log line); a bumped tunnel logs its CONNECT and each request "
                  "inside",
    "sluice-inspect": "as sluice; a `decision` line per CONNECT and a `request` line per request inside",
    "sluice-anon": "the same as sluice",
    "sluice-sessions": "the same as sluice (sessions without `log`: every line in the gate's log, with "
                       "`\"session\"`)",
}

verbose = True


def say(msg):
    if verbose:
        print(f"bench: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# processes
# --------------------------------------------------------------------------

class Proc:
    """A process this driver started; stopped by its PID."""
    started = []

    def __init__(self, name, argv, workdir, stdin=subprocess.DEVNULL, stdout=None, env=None):
        self.name = name
        self.argv = argv
        self.err_path = os.path.join(workdir, f"{name}.stderr")
        self.err = open(self.err_path, "wb")
        self.p = subprocess.Popen(argv, stdin=stdin, stdout=stdout if stdout else self.err,
                                  stderr=self.err, env=env, start_new_session=False)
        self.pid = self.p.pid
        Proc.started.append(self)

    def alive(self):
        return self.p.poll() is None

    def stop(self, timeout=15):
        if self.p.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                say(f"{self.name} (pid {self.pid}) did not stop within {timeout} s; SIGKILL")
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.p.wait(5)
        self.err.close()
        if self in Proc.started:
            Proc.started.remove(self)
        return self.p.returncode

    def stderr_text(self, limit=4000):
        try:
            with open(self.err_path, "rb") as f:
                data = f.read()
            return data[-limit:].decode(errors="replace")
        except OSError:
            return ""


def stop_all():
    for p in list(reversed(Proc.started)):
        try:
            p.stop(timeout=5)
        except Exception as e:  # keep stopping the others
            print(f"bench: stopping {p.name}: {e}", file=sys.stderr)


def wait_port(ip, port, proc, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited {proc.p.returncode}: {proc.stderr_text()}")
        try:
            with socket.create_connection((ip, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{proc.name if proc else ip}: nothing accepts on {ip}:{port} after {timeout} s")


def children_of(pid):
    """pid and all its descendants."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def rss_kb(pid):
    total = 0
    for p in children_of(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def fd_count(pid):
    n = 0
    for p in children_of(pid):
        try:
            n += len(os.listdir(f"/proc/{p}/fd"))
        except OSError:
            pass
    return n


def threads(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def vm_field_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class RssWatch:
    """The proxy's memory while one run lasts: VmRSS sampled every 20 ms
    (its processes summed), and the kernel's own peak (VmHWM, reset through
    clear_refs at the start, so it is the peak of this run alone: a sample
    can miss a short spike, the high-water mark cannot)."""

    def __init__(self, pids):
        self.pids = pids
        self.hwm_reset = True
        for p in pids:
            try:
                with open(f"/proc/{p}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                self.hwm_reset = False
        self.before = self.rss()
        self.peak = self.before
        self.samples = 0
        self.done = threading.Event()
        self.th = threading.Thread(target=self.loop, daemon=True)
        self.th.start()

    def rss(self):
        return sum(vm_field_kb(p, "VmRSS") or 0 for p in self.pids)

    def loop(self):
        while not self.done.wait(0.02):
            self.peak = max(self.peak, self.rss())
            self.samples += 1

    def stop(self):
        self.done.set()
        self.th.join()
        out = {"rss_before_kb": self.before, "rss_peak_sampled_kb": self.peak, "rss_after_kb": self.rss(),
               "rss_samples": self.samples}
        if self.hwm_reset:
            hwm = [vm_field_kb(p, "VmHWM") for p in self.pids]
            if None not in hwm:
                out["rss_hwm_kb"] = sum(hwm)
        out["rss_peak_kb"] = max(out.get("rss_hwm_kb", 0), self.peak)
        out["rss_growth_kb"] = out["rss_peak_kb"] - self.before
        return out


_digests = {}


def bulk_digest(n, alg):
    """The SRI digest (\"sha512-<base64>\") of the origin's n-byte /bulk/n
    body, computed here from the bytes bench/origin.c sends (BULK_FILL)."""
    if (n, alg) not in _digests:
        h = hashlib.new(alg)
        block = memoryview(BULK_FILL * (1 << 20))
        left = n
        while left:
            k = min(left, len(block))
            h.update(block[:k])
            left -= k
        _digests[(n, alg)] = f"{alg}-" + base64.b64encode(h.digest()).decode()
    return _digests[(n, alg)]


def log_offset(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def log_requests(path, offset, want_path, timeout=3.0):
    """The decision log's `request` lines for want_path written after
    offset. An allowed request's line comes when it ends, through the
    writer thread (within 100 ms): wait up to timeout for one."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                for line in f:
                    try:
                        obj = json.loads(line)
                    except ValueError:
                        continue
                    if obj.get("event") == "request" and obj.get("path") == want_path:
                        found.append(obj)
        except OSError:
            pass
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def check_bulk_line(t, key, offset, size):
    """A bulk run's request line in sluice-inspect's log: the rule it
    names (the pinned one for a pinned run), allowed, 200, the whole body
    down (bytes_down counts the response head too)."""
    want_path, want_rule = t.bulk_paths[key](size)
    lines = log_requests(t.log_path, offset, want_path)
    out = {"path": want_path, "want_rule": want_rule, "lines": len(lines)}
    if len(lines) != 1:
        out["ok"] = False
        out["why"] = f"{len(lines)} request lines for {want_path} (want 1)"
        return out
    ln = lines[0]
    out.update({k: ln.get(k) for k in ("rule", "decision", "reason", "status", "bytes_down", "expected", "actual")
                if k in ln})
    down = ln.get("bytes_down") or 0
    out["ok"] = (ln.get("rule") == want_rule and ln.get("decision") == "allow" and ln.get("status") == 200
                 and size <= down < size + 1024)
    if not out["ok"]:
        out["why"] = (f"rule {ln.get('rule')} (want {want_rule}), {ln.get('decision')}/{ln.get('reason')}, "
                      f"status {ln.get('status')}, bytes_down {down:,} (want {size:,} + the head)")
    return out


# --------------------------------------------------------------------------
# plain HTTP over a socket, for the probes
# --------------------------------------------------------------------------

def read_head(sock, buf=b""):
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None, buf
        buf += chunk
        if len(buf) > 65536:
            raise ValueError("head too long")
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.\d (\d{3})", lines[0])
    status = int(m.group(1)) if m else 0
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return (status, lines[0], headers), rest


def read_body(sock, headers, rest):
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return rest[:n]
    while True:   # to EOF
        chunk = sock.recv(65536)
        if not chunk:
            return rest
        rest += chunk


def exchange(addr, data, want_body=True, timeout=5.0):
    """Send data on a new connection; return (status, status_line, headers, body, sock)."""
    s = socket.create_connection(addr, timeout=timeout)
    s.sendall(data)
    head, rest = read_head(s)
    if head is None:
        return 0, "(connection closed without a reply)", {}, b"", s
    status, line, headers = head
    body = read_body(s, headers, rest) if want_body else rest
    return status, line, headers, body, s


def origin_stats():
    st, _, _, body, s = exchange((ORIGIN_IP, ORIGIN_PORT), b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    s.close()
    return json.loads(body)


def basic(cred):
    """A Proxy-Authorization header line for NAME:TOKEN."""
    return f"Proxy-Authorization: Basic {base64.b64encode(cred.encode()).decode()}\r\n"


def probe(proxy_addr, tunnel_target, http_target, decoy_tunnel, decoy_http, auth=""):
    """The allow/deny probe. Returns (ok, [checks]). auth: a header line
    for every request to the proxy itself (never inside the tunnel)."""
    checks = []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        return ok

    decoy_before = origin_stats()["decoy_accepts"]
    small = b"x" * SMALL_BYTES
    # 1. CONNECT to the origin, a request through the tunnel
    try:
        st, line, _, _, s = exchange(proxy_addr, f"CONNECT {tunnel_target} HTTP/1.1\r\nHost: {tunnel_target}\r\n{auth}\r\n"
                                     .encode(), want_body=False)
        ok = st == 200
        detail = line
        if ok:
            s.sendall(f"GET /small HTTP/1.1\r\nHost: {tunnel_target}\r\n\r\n".encode())
            head, rest = read_head(s)
            body = read_body(s, head[2], rest) if head else b""
            ok = head is not None and head[0] == 200 and body == small
            detail += f"; through the tunnel: {head[1] if head else 'no reply'}"
        s.close()
        check("CONNECT origin passes", ok, detail)
    except (OSError, ValueError) as e:
        check("CONNECT origin passes", False, repr(e))
    # 2. absolute-form GET to the origin
    try:
        st, line, _, body, s = exchange(proxy_addr, f"GET http://{http_target}/small HTTP/1.1\r\nHost: {http_target}\r\n{auth}\r\n"
                                        .encode())
        s.close()
        check("GET origin passes", st == 200 and body == small, line)
    except (OSError, ValueError) as e:
        check("GET origin passes", False, repr(e))
    # 3. CONNECT to the decoy port
    try:
        st, line, hdrs, _, s = exchange(proxy_addr, f"CONNECT {decoy_tunnel} HTTP/1.1\r\nHost: {decoy_tunnel}\r\n{auth}\r\n"
                                        .encode(), want_body=False)
        s.close()
        check("CONNECT decoy refused", st != 200, line + (f" ({hdrs.get('sluice-decision')})" if hdrs.get("sluice-decision") else ""))
    except (OSError, ValueError) as e:
        check("CONNECT decoy refused", True, f"connection failed: {e!r}")
    # 4. absolute-form GET to the decoy port
    try:
        st, line, hdrs, body, s = exchange(proxy_addr, f"GET http://{decoy_http}/small HTTP/1.1\r\nHost: {decoy_http}\r\n{auth}\r\n"
                                           .encode())
        s.close()
        check("GET decoy refused", not (200 <= st < 300) and b"DECOY" not in body,
              line + (f" ({hdrs.get('sluice-decision')})" if hdrs.get("sluice-decision") else ""))
    except (OSError, ValueError) as e:
        check("GET decoy refused", True, f"connection failed: {e!r}")
    time.sleep(0.2)
    decoy_after = origin_stats()["decoy_accepts"]
    check("decoy port never reached", decoy_after == decoy_before,
          f"decoy accepts {decoy_before} -> {decoy_after}")
    return all(c["ok"] for c in checks), checks


# --------------------------------------------------------------------------
# TLS: the bench's certificates, and the probe of an inspecting proxy
# --------------------------------------------------------------------------

# filled by make_bench_pki(): the origin's CA, its leaf, the rogue CA and leaf
PKI = {}


def openssl(args, what):
    r = subprocess.run([OPENSSL] + args, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl ({what}) failed: {r.stderr.strip()[-500:]}")


def make_ca(d, name, cn, days=30):
    """An ECDSA P-256 CA, pathlen:0: d/NAME.pem and d/NAME.key (0600)."""
    pem, key = os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key")
    openssl(["req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", pem, "-days", str(days), "-subj", f"/CN={cn}",
             "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"], f"CA {cn}")
    os.chmod(key, 0o600)
    return pem, key


def make_leaf(d, name, ca_pem, ca_key, days=30):
    """An ECDSA P-256 server certificate for the origin's name and address,
    signed by the CA: d/NAME.pem and d/NAME.key."""
    pem, key, csr, ext = (os.path.join(d, f"{name}.{x}") for x in ("pem", "key", "csr", "ext"))
    with open(ext, "w") as f:
        f.write(f"subjectAltName=DNS:{NAME_TUNNEL},IP:{ORIGIN_IP}\n"
                "basicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectKeyIdentifier=hash\n"
                "authorityKeyIdentifier=keyid\n")
    openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", csr, "-subj", f"/CN={NAME_TUNNEL}"], f"key for {name}")
    openssl(["x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key, "-set_serial",
             str(int.from_bytes(os.urandom(8), "big")), "-days", str(days), "-out", pem, "-extfile", ext],
            f"certificate {name}")
    os.chmod(key, 0o644)   # the origin is a test server; nothing it serves is secret
    return pem, key


def make_bench_pki(workdir):
    """The origin's CA and certificate, and the rogue listener's: a
    certificate for the same names from a CA that no proxy trusts."""
    d = os.path.join(workdir, "pki")
    os.makedirs(d, exist_ok=True)
    PKI["ca"], PKI["ca_key"] = make_ca(d, "origin-ca", "sluice bench origin CA")
    PKI["cert"], PKI["key"] = make_leaf(d, "origin", PKI["ca"], PKI["ca_key"])
    PKI["rogue_ca"], PKI["rogue_ca_key"] = make_ca(d, "rogue-ca", "sluice bench rogue CA (trusted by nobody)")
    PKI["rogue_cert"], PKI["rogue_key"] = make_leaf(d, "rogue", PKI["rogue_ca"], PKI["rogue_ca_key"])
    os.chmod(d, 0o755)


def tls_get(proxy_addr, hostport, ca, direct_port=None, timeout=5.0, path="/small"):
    """CONNECT hostport through the proxy (or connect to the origin's
    direct_port), TLS verified against ca for NAME_TUNNEL, GET path.
    Returns (stage, detail, status, body): stage "connect" (refused, or
    the connection failed), "tls" (the handshake failed) or "http"."""
    try:
        if proxy_addr:
            st, line, hdrs, _, s = exchange(proxy_addr, f"CONNECT {hostport} HTTP/1.1\r\nHost: {hostport}\r\n\r\n"
                                            .encode(), want_body=False, timeout=timeout)
            if st != 200:
                s.close()
                return "connect", line + (f" ({hdrs.get('sluice-decision')})" if hdrs.get("sluice-decision") else ""), \
                    st, b""
        else:
            s = socket.create_connection((ORIGIN_IP, direct_port), timeout=timeout)
    except (OSError, ValueError) as e:
        return "connect", repr(e), 0, b""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    try:
        ts = ctx.wrap_socket(s, server_hostname=NAME_TUNNEL)
    except (OSError, ssl.SSLError) as e:
        s.close()
        return "tls", str(e), 0, b""
    try:
        issuer = dict(x[0] for x in ts.getpeercert().get("issuer", ()))
        how = f"{ts.version()} {ts.cipher()[0]}, leaf issued by {issuer.get('commonName', '?')!r}"
        ts.sendall(f"GET {path} HTTP/1.1\r\nHost: {hostport}\r\n\r\n".encode())
        head, rest = read_head(ts)
        if head is None:
            return "http", how + "; closed without a reply", 0, b""
        body = read_body(ts, head[2], rest)
        return "http", how + f"; {head[1]}" + (f" ({head[2].get('sluice-decision')})"
                                                if head[2].get("sluice-decision") else ""), head[0], body
    except (OSError, ValueError, ssl.SSLError) as e:
        return "http", f"after the handshake: {e!r}", 0, b""
    finally:
        ts.close()


def probe_tls(t):
    """The allow/deny probe of an inspecting proxy, or of the TLS origin
    directly. Returns (ok, [checks])."""
    checks = []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        return ok

    small = b"x" * SMALL_BYTES
    st0 = origin_stats()
    if t.proxy_addr is None:
        # the premises of the proxies' checks: the origin answers over TLS;
        # the rogue listener's certificate fails against the origin's CA,
        # and with its own CA it answers and counts the request
        stage, detail, status, body = tls_get(None, t.tls_target, PKI["ca"], direct_port=TLS_PORT)
        check("TLS origin answers directly", stage == "http" and status == 200 and body == small, detail)
        stage, detail, _, _ = tls_get(None, f"{NAME_TUNNEL}:{ROGUE_PORT}", PKI["ca"], direct_port=ROGUE_PORT)
        check("rogue certificate fails against the origin's CA", stage == "tls", detail)
        stage, detail, status, body = tls_get(None, f"{NAME_TUNNEL}:{ROGUE_PORT}", PKI["rogue_ca"],
                                              direct_port=ROGUE_PORT)
        st1 = origin_stats()
        check("rogue listener answers and counts", stage == "http" and status == 200 and
              st1["rogue_requests"] == st0["rogue_requests"] + 1, detail)
        return all(c["ok"] for c in checks), checks
    # 1. an inspected request: the leaf must chain to the proxy's CA (so
    # the proxy terminated TLS: the origin's own certificate would not),
    # and the request must reach the origin over TLS
    stage, detail, status, body = tls_get(t.proxy_addr, t.tls_target, t.tls_ca)
    st1 = origin_stats()
    check("CONNECT, TLS with the proxy's CA, GET passes", stage == "http" and status == 200 and body == small,
          f"{stage}: {detail}" + (" (the certificate the client got does not chain to the proxy's CA: "
                                  "the proxy did not terminate TLS itself; does it inspect?)"
                                  if stage == "tls" and "CERTIFICATE_VERIFY_FAILED" in detail else ""))
    check("the request reached the origin over TLS", st1["tls_requests"] > st0["tls_requests"],
          f"origin TLS requests {st0['tls_requests']} -> {st1['tls_requests']}")
    # 2. an origin whose certificate the proxy's upstream_ca does not trust:
    # the policy admits its port, so the CONNECT passes (a refusal there
    # would prove nothing), and no request may reach it
    stage, detail, status, body = tls_get(t.proxy_addr, f"{NAME_TUNNEL}:{ROGUE_PORT}", t.tls_ca)
    time.sleep(0.2)
    st2 = origin_stats()
    check("untrusted upstream certificate refused", stage != "connect" and not (status == 200 and body == small)
          and st2["rogue_requests"] == st1["rogue_requests"],
          f"{stage}: {detail}; rogue requests {st1['rogue_requests']} -> {st2['rogue_requests']}")
    # 3. the decoy port: refused at the CONNECT, or (squid with ssl_bump
    # does this) inside a tunnel the proxy terminates itself
    stage, detail, status, body = tls_get(t.proxy_addr, f"{NAME_TUNNEL}:{DECOY_PORT}", t.tls_ca)
    check("CONNECT decoy refused", stage == "connect" or (status != 200 and b"DECOY" not in body),
          f"{stage}: {detail}")
    time.sleep(0.2)
    st3 = origin_stats()
    check("decoy port never reached", st3["decoy_accepts"] == st0["decoy_accepts"],
          f"decoy accepts {st0['decoy_accepts']} -> {st3['decoy_accepts']}")
    if getattr(t, "pin_probe", None):
        probe_pins(t, check)
    return all(c["ok"] for c in checks), checks


def probe_pins(t, check):
    """The pinned runs' premises, on a small body: one pinned with the
    digest this driver computes passes whole (so the gate hashes the bytes
    as we do); one pinned with another body's digest is cut before its end,
    and the log names the mismatch, with our digest as the actual one."""
    n = PIN_PROBE_BYTES
    good, bad = t.pin_probe["good"], t.pin_probe["bad"]
    off = log_offset(t.log_path)
    stage, detail, status, body = tls_get(t.proxy_addr, t.tls_target, t.tls_ca, path=good[0])
    lines = log_requests(t.log_path, off, good[0])
    ln = lines[0] if lines else {}
    check("pinned body with its digest passes", stage == "http" and status == 200 and body == BULK_FILL * n
          and ln.get("decision") == "allow" and ln.get("rule") == good[1],
          f"{detail}; {len(body)} bytes; log: {ln.get('decision')} {ln.get('reason')} rule {ln.get('rule')}")
    off = log_offset(t.log_path)
    stage, detail, status, body = tls_get(t.proxy_addr, t.tls_target, t.tls_ca, path=bad[0])
    lines = log_requests(t.log_path, off, bad[0])
    ln = lines[0] if lines else {}
    check("pinned body with a wrong digest is cut", len(body) < n and ln.get("decision") == "deny"
          and ln.get("reason") == "integrity_mismatch" and ln.get("expected") == bad[2]
          and ln.get("actual") == bulk_digest(n, "sha512"),
          f"{stage}: {detail}; the client got {len(body)} of {n} bytes; log: {ln.get('decision')} "
          f"{ln.get('reason')}, actual {'= ours' if ln.get('actual') == bulk_digest(n, 'sha512') else ln.get('actual')}")


# --------------------------------------------------------------------------
# proxies
# --------------------------------------------------------------------------

class Target:
    """What one column of the table talks to."""

    def __init__(self, name, listen_port=None, tunnel_host=None, http_host=None):
        self.name = name
        self.port = listen_port
        self.tunnel_target = f"{tunnel_host or ORIGIN_IP}:{ORIGIN_PORT}"
        self.http_target = f"{http_host or ORIGIN_IP}:{ORIGIN_PORT}"
        self.decoy_tunnel = f"{tunnel_host or ORIGIN_IP}:{DECOY_PORT}"
        self.decoy_http = f"{http_host or ORIGIN_IP}:{DECOY_PORT}"
        # inspection: the origin by name (both inspecting proxies resolve it
        # through dnsmasq), and the CA a client of this target trusts
        self.tls_target = f"{NAME_TUNNEL}:{TLS_PORT}"
        self.tls_ca = None
        # which of the two tables: "plain" modes, "tls" (inspection) modes
        self.families = ("plain",)
        self.proc = None
        self.notes = []

    @property
    def proxy_addr(self):
        return None if self.port is None else ("127.0.0.1", self.port)

    def start(self, workdir):
        pass

    def stop(self):
        if self.proc:
            rc = self.proc.stop()
            self.proc = None
            return rc
        return None

    def version(self):
        return ""


class Direct(Target):
    def __init__(self):
        super().__init__("direct")
        self.families = ("plain", "tls")

    def start(self, workdir):
        self.tls_ca = PKI["ca"]


class Floor(Target):
    """bench/floor.c: the relay floor, what relaying itself costs here."""

    def __init__(self, port):
        super().__init__("floor", port)
        self.notes.append("bench/floor.c, a minimal epoll relay with the origin's address as its only allowlist "
                          "entry; no DNS, no log, no per-request parsing (plain HTTP is relayed as a byte stream "
                          "after the first request): what relaying itself costs on this machine")

    def start(self, workdir):
        # one thread per online CPU (its default), as sluice runs one worker per core
        self.proc = Proc("floor", [FLOOR, "--listen", f"127.0.0.1:{self.port}",
                                   "--allow", f"{ORIGIN_IP}:{ORIGIN_PORT}"], workdir)
        wait_port("127.0.0.1", self.port, self.proc)

    def version(self):
        return "bench/floor.c"


class Squid(Target):
    def __init__(self, port):
        super().__init__("squid", port)

    def start(self, workdir):
        d = os.path.join(workdir, "squid")
        os.makedirs(d, exist_ok=True)
        shutil.chown(d, "proxy", "proxy")
        conf = os.path.join(d, "squid.conf")
        with open(conf, "w") as f:
            f.write(f"""# written by bench/run.py
http_port 127.0.0.1:{self.port}
acl bench_origin dst {ORIGIN_IP}/32
acl bench_port port {ORIGIN_PORT}
http_access allow bench_origin bench_port
http_access deny all
cache deny all
access_log stdio:{d}/access.log
cache_log {d}/cache.log
cache_store_log none
logfile_rotate 0
pid_filename none
coredump_dir {d}
max_filedescriptors 65536
shutdown_lifetime 1 seconds
pinger_enable off
netdb_filename none
dns_nameservers {DNS_IP}
visible_hostname sluice-bench
""")
        self.log_path = os.path.join(d, "access.log")
        r = subprocess.run([SQUID, "-k", "parse", "-f", conf], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"squid -k parse failed: {r.stderr[-2000:]}")
        self.proc = Proc("squid", [SQUID, "-N", "-f", conf], workdir)
        wait_port("127.0.0.1", self.port, self.proc)

    def version(self):
        try:
            return subprocess.run([SQUID, "-v"], capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"


class SquidBump(Target):
    """squid inspecting with ssl_bump: the same binary as the squid column
    (Debian's squid-openssl replaces squid; without TLS in its config it is
    the plain squid)."""

    def __init__(self, port):
        super().__init__("squid-bump", port)
        self.families = ("tls",)

    def start(self, workdir):
        if not os.access(SQUID_CERTGEN, os.X_OK):
            raise RuntimeError(f"{SQUID_CERTGEN} is missing: squid-bump needs Debian's squid-openssl "
                               "(make bench-deps installs it)")
        d = os.path.join(workdir, "squid-bump")
        os.makedirs(d, exist_ok=True)
        self.tls_ca, ca_key = make_ca(d, "ca", "sluice bench squid-bump CA")
        db = os.path.join(d, "ssl_db")
        r = subprocess.run([SQUID_CERTGEN, "-c", "-s", db, "-M", "16MB"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"security_file_certgen -c failed: {(r.stdout + r.stderr)[-1000:]}")
        for root, dirs, files in os.walk(d):
            for n in [root] + [os.path.join(root, x) for x in dirs + files]:
                shutil.chown(n, "proxy", "proxy")
        conf = os.path.join(d, "squid.conf")
        with open(conf, "w") as f:
            f.write(f"""# written by bench/run.py
# bump at step 1: squid completes the client's handshake with a leaf for the
# CONNECT host signed by its CA, then connects to the origin and verifies its
# certificate before it sends the request. (peek at step 1, then bump, would
# mimic the origin's certificate, but squid then keeps no generated leaf in
# its memory cache: it asks the helper and parses the PEM on every tunnel.)
http_port 127.0.0.1:{self.port} ssl-bump tls-cert={self.tls_ca} tls-key={ca_key} generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program {SQUID_CERTGEN} -s {db} -M 16MB
sslcrtd_children 4 startup=1 idle=1
ssl_bump bump all
# the origin's CA only, as sluice-inspect's upstream_ca
tls_outgoing_options cafile={PKI["ca"]} default-ca=off
acl bench_origin dstdomain {NAME_TUNNEL}
acl bench_tls_ports port {TLS_PORT} {ROGUE_PORT}
http_access allow bench_origin bench_tls_ports
http_access deny all
cache deny all
access_log stdio:{d}/access.log
cache_log {d}/cache.log
cache_store_log none
logfile_rotate 0
pid_filename none
coredump_dir {d}
max_filedescriptors 65536
shutdown_lifetime 1 seconds
pinger_enable off
netdb_filename none
dns_nameservers {DNS_IP}
visible_hostname sluice-bench
""")
        self.log_path = os.path.join(d, "access.log")
        self.notes.append(f"`ssl_bump bump all` (at step 1: the client's handshake first, with a leaf for the "
                          f"CONNECT host; then the origin's) behind `acl dstdomain {NAME_TUNNEL}` + `acl port "
                          f"{TLS_PORT} {ROGUE_PORT}`, everything else denied; its own ECDSA P-256 CA made by openssl "
                          "(squid signs every leaf with the CA's key pair); `sslcrtd_program security_file_certgen` "
                          "with its database in the run's temporary directory, `dynamic_cert_mem_cache_size=16MB`; "
                          "upstream verified against the origin's CA only (`tls_outgoing_options cafile=... "
                          "default-ca=off`); names resolved by dnsmasq")
        r = subprocess.run([SQUID, "-k", "parse", "-f", conf], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"squid -k parse failed: {r.stderr[-2000:]}")
        self.proc = Proc(self.name, [SQUID, "-N", "-f", conf], workdir)
        wait_port("127.0.0.1", self.port, self.proc)

    def version(self):
        return Squid.version(self)


class Tinyproxy(Target):
    def __init__(self, port):
        super().__init__("tinyproxy", port)

    def start(self, workdir):
        d = os.path.join(workdir, "tinyproxy")
        os.makedirs(d, exist_ok=True)
        shutil.chown(d, "tinyproxy", "tinyproxy")
        flt = os.path.join(d, "filter")
        with open(flt, "w") as f:
            # FilterURLs: GETs are matched as http://HOST:PORT/..., CONNECTs as HOST:PORT
            ip = re.escape(ORIGIN_IP)
            f.write(f"^(http://)?{ip}:{ORIGIN_PORT}(/|$)\n")
        conf = os.path.join(d, "tinyproxy.conf")
        with open(conf, "w") as f:
            f.write(f"""# written by bench/run.py
User tinyproxy
Group tinyproxy
Port {self.port}
Listen 127.0.0.1
Timeout 600
LogFile "{d}/tinyproxy.log"
LogLevel Info
PidFile "{d}/tinyproxy.pid"
MaxClients 20000
Filter "{flt}"
FilterURLs On
FilterType ere
FilterDefaultDeny Yes
ConnectPort {ORIGIN_PORT}
DisableViaHeader Yes
""")
        os.chmod(conf, 0o644)
        os.chmod(flt, 0o644)
        self.log_path = os.path.join(d, "tinyproxy.log")
        self.proc = Proc("tinyproxy", [TINYPROXY, "-d", "-c", conf], workdir)
        wait_port("127.0.0.1", self.port, self.proc)

    def version(self):
        try:
            return subprocess.run([TINYPROXY, "-v"], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return "?"


def gen_allowlist(path):
    """1,000 entries: exact hosts, wildcards, apex entries, some with ports;
    the bench origin's wildcard sits in the middle. Returns its line number."""
    lines = ["# 1,000-entry allowlist written by bench/run.py"]
    origin_line = None
    for i in range(999):
        k = i % 10
        if k < 4:
            e = f"api{i}.svc{i % 50}.corp{i % 7}.example.net"
        elif k < 7:
            e = f"*.cdn{i}.example.org" + (f":{8000 + i % 100}" if i % 3 == 0 else "")
        elif k < 9:
            e = f".mirror{i}.example.com"
        else:
            e = f"registry{i}.pkgs.example.io:443"
        lines.append(e)
        if i == 599:
            lines.append(f"*.origin.bench.test:{ORIGIN_PORT}")
            origin_line = len(lines)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return origin_line, len(lines) - 1


class Sluice(Target):
    def __init__(self, name, port, full):
        if full:
            super().__init__(name, port, NAME_TUNNEL, NAME_HTTP)
        else:
            super().__init__(name, port)
        self.full = full

    def start(self, workdir):
        d = os.path.join(workdir, self.name)
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, "sluice.ini")
        if self.full:
            line, n = gen_allowlist(os.path.join(d, "allowlist.txt"))
            policy = "allowlist = allowlist.txt\n"
            self.notes.append(f"{n}-entry allowlist (exact, *. and . entries), the origin matched by "
                              f"`*.origin.bench.test:{ORIGIN_PORT}` on line {line}; names resolved by dnsmasq "
                              f"(TTL {DNS_TTL} s)")
        else:
            policy = f"allow = {ORIGIN_IP}:{ORIGIN_PORT}\n"
            self.notes.append(f"one allowlist entry, `{ORIGIN_IP}:{ORIGIN_PORT}` (IP literal: no DNS)")
        self.notes.append(f"allow_cidr = {ORIGIN_IP}/32 (the bench origin's loopback address only; "
                          "without it sluice refuses loopback answers as non-public)")
        with open(conf, "w") as f:
            f.write(f"""; written by bench/run.py
[proxy]
listen = 127.0.0.1:{self.port}
workers = 0
max_clients = 30000
shutdown_grace_ms = 1000

[policy]
{policy}allow_cidr = {ORIGIN_IP}/32

[dns]
server = {DNS_IP}:53

[log]
path = decisions.jsonl
""")
        self.log_path = os.path.join(d, "decisions.jsonl")
        r = subprocess.run([SLUICE, "check", "-c", conf], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"sluice check failed ({r.returncode}): {r.stderr[-2000:]}")
        self.proc = Proc(self.name, [SLUICE, "run", "-c", conf], workdir)
        wait_port("127.0.0.1", self.port, self.proc)

    def version(self):
        try:
            return subprocess.run([SLUICE, "version"], capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"


class SluiceInspect(Sluice):
    """sluice with request rules for the bench origin: every tunnel to it is
    inspected (issue 11). Its allowlist also pins the bulk body under the
    pinned modes' paths (issue 12): the pinned rules come first, since the
    first rule that matches a path decides."""

    def __init__(self, port, pin_bytes, wrong_pins=False):
        super().__init__("sluice-inspect", port, False)
        self.families = ("tls", "pin")
        self.pin_bytes = pin_bytes
        self.wrong_pins = wrong_pins
        self.pin_probe = None
        # bulk key -> (size -> (the path the run GETs, the rule its log line must name))
        self.bulk_paths = {}

    def start(self, workdir):
        d = os.path.join(workdir, self.name)
        os.makedirs(d, exist_ok=True)
        cadir = os.path.join(d, "ca")
        # `sluice ca init` where this sluice has it; until then the same kind
        # of CA from openssl (ECDSA P-256, pathlen:0, the key 0600)
        r = subprocess.run([SLUICE, "ca", "init", cadir], capture_output=True, text=True, timeout=30)
        said = (r.stdout + r.stderr).strip()
        if r.returncode == 0:
            self.tls_ca = os.path.join(cadir, "ca.pem")
            self.notes.append("its CA made by `sluice ca init`")
        elif "unknown command" in said:
            os.makedirs(cadir, exist_ok=True)
            self.tls_ca, _ = make_ca(cadir, "ca", "sluice bench inspection CA")
            self.notes.append("its CA made by openssl (ECDSA P-256, pathlen:0): this sluice has no `sluice ca init`")
        else:
            raise RuntimeError(f"sluice ca init failed ({r.returncode}): {said[-1000:]}")
        # the pinned rules, with digests of the bytes the origin sends
        # (BULK_FILL), computed here; then the unpinned rules
        say(f"  digests of the {self.pin_bytes:,}-byte bulk body (sha512, sha256)")
        lines = ["# written by bench/run.py: request rules make the bench origin an inspected host;",
                 "# the pinned bulk runs' paths first (the first rule that matches decides)"]
        rule_at = {}
        host = f"{NAME_TUNNEL}:{TLS_PORT}"
        for key, name, alg in PIN_MODES:
            # --wrong-pins: another body's digest (one byte longer), so that
            # every pinned run must fail
            digest = bulk_digest(self.pin_bytes + (1 if self.wrong_pins else 0), alg)
            lines.append(f"GET {host}/bulk/{self.pin_bytes}/{name} {digest}")
            rule_at[key] = len(lines)
        n = PIN_PROBE_BYTES
        lines.append(f"GET {host}/bulk/{n}/probe-good {bulk_digest(n, 'sha512')}")
        good_line = len(lines)
        wrong = bulk_digest(n + 1, "sha512")   # another body's: one byte longer
        lines.append(f"GET {host}/bulk/{n}/probe-bad {wrong}")
        bad_line = len(lines)
        lines.append(f"* {host}/*")
        open_line = len(lines)
        lines += ["# the probe's origin with a certificate from a CA nobody trusts: admitted, so",
                  "# that refusing it is the upstream check's doing",
                  f"* {NAME_TUNNEL}:{ROGUE_PORT}/*"]
        with open(os.path.join(d, "allowlist.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        # the rule as the log names it: FILE:LINE, the file's path as sluice
        # resolved it (relative to the config's directory)
        rule = lambda line: f"{os.path.join(d, 'allowlist.txt')}:{line}"
        self.pin_probe = {"good": (f"/bulk/{n}/probe-good", rule(good_line)),
                          "bad": (f"/bulk/{n}/probe-bad", rule(bad_line), wrong)}
        self.bulk_paths = {"ibulk": lambda size: (f"/bulk/{size}", rule(open_line))}
        for key, name, _ in PIN_MODES:
            self.bulk_paths[key] = (lambda size, name=name, key=key:
                                    (f"/bulk/{size}/{name}", rule(rule_at[key]) if size == self.pin_bytes else None))
        self.notes.append(f"pinned: `GET {host}/bulk/N/sha512 sha512-…` and `…/sha256 sha256-…` (lines "
                          f"{rule_at['pbulk']} and {rule_at['pbulk256']}, before the unpinned `*` rule), the "
                          "digests computed by bench/run.py from the bytes bench/origin.c sends (N times 'b'); "
                          "each bulk run's request line is checked (the rule it names, 200, bytes_down); "
                          "the probe checks that a small pinned body passes and one pinned with a wrong digest "
                          "is cut, the log's `actual` being the digest the driver computed")
        conf = os.path.join(d, "sluice.ini")
        with open(conf, "w") as f:
            f.write(f"""; written by bench/run.py
[proxy]
listen = 127.0.0.1:{self.port}
workers = 0
max_clients = 30000
shutdown_grace_ms = 1000

[policy]
allowlist = allowlist.txt
allow_cidr = {ORIGIN_IP}/32

[dns]
server = {DNS_IP}:53

[tls]
ca_cert = ca/ca.pem
ca_key = ca/ca.key
upstream_ca = {PKI["ca"]}

[log]
path = decisions.jsonl
""")
        self.log_path = os.path.join(d, "decisions.jsonl")
        self.notes.append(f"request rules `* {NAME_TUNNEL}:{TLS_PORT}/*` (and `:{ROGUE_PORT}` for the probe's "
                          f"untrusted origin); `[tls]` with upstream_ca = the origin's CA only; names resolved by "
                          f"dnsmasq; allow_cidr = {ORIGIN_IP}/32")
        r = subprocess.run([SLUICE, "check", "-c", conf], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            said = "; ".join(r.stderr.strip().splitlines())[-600:]
            raise RuntimeError(f"this sluice cannot inspect: `sluice check` refuses request rules or [tls] "
                               f"(exit {r.returncode}: {said}); the sluice-inspect column needs sluice with "
                               "inspection (issue 11)")
        self.proc = Proc(self.name, [SLUICE, "run", "-c", conf], workdir)
        wait_port("127.0.0.1", self.port, self.proc)


class SluiceSessions(Sluice):
    """Issue 13's pair: the gate with `[sessions] dir` holding n session
    files, every request authenticated (sluice-sessions), and the same
    config without `[sessions]` (sluice-anon: one session, no
    authentication). Each session has an allowlist of 1-3 entries of its
    own; the origin is on the global list, so every session reaches it and
    the figures compare like with like. Session 0's list also holds the
    decoy port, which the probe uses to show the session lists are read
    (session 0 reaches it, session 1 is refused)."""

    def __init__(self, name, port, n_sessions):
        super().__init__(name, port, False)
        self.families = ("sess",)
        self.n_sessions = n_sessions     # None: no [sessions] at all
        self.creds = []                  # NAME:TOKEN, session i at index i
        self.creds_path = None
        self.loadgen_extra = []
        self.check_s = None

    def write_sessions(self, d):
        sd = os.path.join(d, "sessions.d")
        os.makedirs(sd, exist_ok=True)
        self.creds = []
        for i in range(self.n_sessions):
            name = f"bench-{i:05d}"
            token = os.urandom(16).hex()   # as `sluice session new` makes them
            self.creds.append(f"{name}:{token}")
            own = [f"api.s{i}.sessions.bench.example:443", f"*.pkg{i}.sessions.bench.example",
                   f".mirror{i}.sessions.bench.example:8443"][:1 + i % 3]
            if i == 0:
                own.insert(0, f"{ORIGIN_IP}:{DECOY_PORT}")
            with open(os.path.join(sd, f"{name}.allow"), "w") as f:
                f.write("\n".join(own) + "\n")
            with open(os.path.join(sd, f"{name}.ini"), "w") as f:
                f.write(f"[session]\ntoken_sha256 = {hashlib.sha256(token.encode()).hexdigest()}\n"
                        f"allowlist = {name}.allow\n")
        self.creds_path = os.path.join(d, "credentials.txt")
        with open(self.creds_path, "w") as f:
            f.write("\n".join(self.creds) + "\n")
        os.chmod(self.creds_path, 0o600)
        self.loadgen_extra = ["--proxy-auth-file", self.creds_path]

    def start(self, workdir):
        d = os.path.join(workdir, self.name)
        os.makedirs(d, exist_ok=True)
        sessions = ""
        if self.n_sessions is not None:
            say(f"  {self.n_sessions:,} session files")
            self.write_sessions(d)
            sessions = "\n[sessions]\ndir = sessions.d\nrequire = yes\n"
            self.notes.append(f"`[sessions] dir` with {self.n_sessions:,} session files (`require = yes`), each "
                              "with a random 32-hex-digit token stored as its `token_sha256` and an allowlist of "
                              "1-3 entries of its own (exact, `*.` and `.` names, none of them the origin's); "
                              "the load generator sends `Proxy-Authorization: Basic` on every CONNECT and every "
                              "plain-HTTP request, the i-th connection as session i mod "
                              f"{self.n_sessions:,}")
        else:
            self.notes.append("the same config as sluice-sessions without `[sessions]`: every client anonymous, "
                              "no credentials sent")
        self.notes.append(f"global allowlist: `allow = {ORIGIN_IP}:{ORIGIN_PORT}`; allow_cidr = {ORIGIN_IP}/32")
        conf = os.path.join(d, "sluice.ini")
        with open(conf, "w") as f:
            f.write(f"""; written by bench/run.py
[proxy]
listen = 127.0.0.1:{self.port}
workers = 0
max_clients = 30000
shutdown_grace_ms = 1000

[policy]
allow = {ORIGIN_IP}:{ORIGIN_PORT}
allow_cidr = {ORIGIN_IP}/32

[dns]
server = {DNS_IP}:53

[log]
path = decisions.jsonl
{sessions}""")
        self.log_path = os.path.join(d, "decisions.jsonl")
        t0 = time.monotonic()
        r = subprocess.run([SLUICE, "check", "-c", conf], capture_output=True, text=True, timeout=120)
        self.check_s = time.monotonic() - t0
        if r.returncode != 0:
            said = "; ".join(r.stderr.strip().splitlines()[:5])[-600:]
            raise RuntimeError(f"sluice check failed ({r.returncode}): {said}"
                               + ("; the sluice-sessions column needs sluice with sessions (issue 13)"
                                  if self.n_sessions is not None else ""))
        self.proc = Proc(self.name, [SLUICE, "run", "-c", conf], workdir)
        wait_port("127.0.0.1", self.port, self.proc)

    def probe_self(self):
        """The plain probe (with session 1's credentials where there are
        sessions); then that the gate asks for credentials, refuses a wrong
        token, and keeps one session's own entry from another."""
        if self.n_sessions is None:
            return probe(self.proxy_addr, self.tunnel_target, self.http_target, self.decoy_tunnel, self.decoy_http)
        other = self.creds[1 % len(self.creds)]
        ok, checks = probe(self.proxy_addr, self.tunnel_target, self.http_target, self.decoy_tunnel,
                           self.decoy_http, auth=basic(other))

        def check(name, good, detail):
            checks.append({"check": name, "ok": bool(good), "detail": detail})
            return good

        def connect(target, auth):
            st, line, hdrs, _, s = exchange(self.proxy_addr, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"
                                            f"{auth}\r\n".encode(), want_body=False)
            s.close()
            return st, line, hdrs

        try:
            st, line, hdrs = connect(self.tunnel_target, "")
            pa = hdrs.get("proxy-authenticate", "")
            check("CONNECT without credentials: 407 asking for Basic", st == 407 and pa.startswith("Basic")
                  and 'realm="sluice"' in pa, f"{line}; Proxy-Authenticate: {pa or '(none)'}")
            name = other.split(":", 1)[0]
            st, line, _ = connect(self.tunnel_target, basic(f"{name}:{os.urandom(16).hex()}"))
            check("CONNECT with a wrong token: 407", st == 407, line)
            before = origin_stats()["decoy_accepts"]
            st, line, _ = connect(self.decoy_tunnel, basic(self.creds[0]))
            time.sleep(0.2)
            after = origin_stats()["decoy_accepts"]
            check("session 0 reaches the entry only its own allowlist has (the decoy port)",
                  st == 200 and after == before + 1, f"{line}; decoy accepts {before} -> {after}")
        except (OSError, ValueError) as e:
            check("credentials probe", False, repr(e))
        return all(c["ok"] for c in checks), checks


# --------------------------------------------------------------------------
# measurements
# --------------------------------------------------------------------------

def loadgen(args, limit):
    """Run the load generator; returns its result object (or one with "failed")."""
    say("  " + " ".join(args))
    try:
        r = subprocess.run([LOADGEN] + args, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"failed": f"loadgen did not finish within {limit:.0f} s", "ops": 0}
    res = None
    for line in r.stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("event") == "result":
            res = obj
    if res is None:
        return {"failed": f"loadgen exit {r.returncode}: {r.stderr[-500:]}", "ops": 0}
    if r.stderr.strip():
        res["stderr"] = r.stderr[-500:]
    return res


def cpu_split(res, proxy_pids, origin_pid):
    """Sum utime/stime over the proxy's PIDs; the origin's separately."""
    pu = ps = ou = os_ = 0.0
    for c in res.get("cpu", []):
        if c["utime_us"] < 0:
            continue
        if c["pid"] == origin_pid:
            ou += c["utime_us"]
            os_ += c["stime_us"]
        elif c["pid"] in proxy_pids:
            pu += c["utime_us"]
            ps += c["stime_us"]
    ops = res.get("ops", 0) or 0
    out = {"origin_user_us_per_op": ou / ops if ops else None,
           "origin_sys_us_per_op": os_ / ops if ops else None}
    if proxy_pids:
        out["proxy_user_us_per_op"] = pu / ops if ops else None
        out["proxy_sys_us_per_op"] = ps / ops if ops else None
    return out


def measure_idle(t, prof, n, first, origin_pid, tls=False):
    """Open n idle tunnels in steps and sample the proxy's RSS at each.
    tls: inspected tunnels, held once their handshake is done."""
    out = {"n": n, "steps": []}
    pid = t.proc.pid if t.proc else None
    if pid:
        time.sleep(0.3)
        out["rss_before_kb"] = rss_kb(pid)
        out["fds_before"] = fd_count(pid)
    args = ["idle", "--target", t.tls_target if tls else t.tunnel_target, "-n", str(n), "--steps", f"{first},{n}",
            "-c", "100", "-d", str(prof["idle_limit"]), "--hold", str(prof["idle_limit"]),
            "--timeout-ms", str(prof["timeout_ms"])] + (["--tls", "--ca", t.tls_ca] if tls else [])
    if t.proxy_addr:
        args += ["--proxy", f"127.0.0.1:{t.port}"]
    else:
        args += ["--connect", f"{ORIGIN_IP}:{TLS_PORT if tls else ORIGIN_PORT}"]
    say("  " + " ".join(args))
    p = subprocess.Popen([LOADGEN] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 2 * prof["idle_limit"] + 30
    result = None
    buf = ""
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([p.stdout], [], [], 1.0)
            if not r:
                if p.poll() is not None:
                    break
                continue
            line = p.stdout.readline()
            if not line:
                break
            buf += line
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == "at":
                time.sleep(0.5)   # let the proxy finish its allocations
                step = {"n": ev["n"], "open": ev["open"], "seconds": ev["seconds"]}
                if pid:
                    step["rss_kb"] = rss_kb(pid)
                    step["fds"] = fd_count(pid)
                    step["threads"] = threads(pid)
                out["steps"].append(step)
                say(f"    {ev['open']} idle tunnels open in {ev['seconds']:.1f} s"
                    + (" (time limit reached)" if ev.get("partial") else "")
                    + (f"; proxy RSS {step['rss_kb'] / 1024:.1f} MB" if pid else ""))
                if ev.get("partial"):
                    step["partial"] = True
                p.stdin.write("stop\n" if ev["n"] >= n or ev.get("partial") else "go\n")
                p.stdin.flush()
            elif ev.get("event") == "result":
                result = ev
                break
    finally:
        try:
            p.stdin.close()
        except OSError:
            pass
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    out["result"] = result
    if result is None:
        out["failed"] = "loadgen gave no result: " + (p.stderr.read()[-300:] if p.stderr else "")
    if pid:
        # wait for the proxy to let go of the tunnels
        t0 = time.monotonic()
        while time.monotonic() - t0 < 15 and fd_count(pid) > out["fds_before"] + 20:
            time.sleep(0.2)
        out["release_s"] = round(time.monotonic() - t0, 2)
        out["fds_after"] = fd_count(pid)
        out["rss_after_kb"] = rss_kb(pid)
        steps = out["steps"]
        if steps and steps[-1]["open"] > 0:
            last = steps[-1]
            out["rss_at_n_kb"] = last["rss_kb"]
            out["n_reached"] = last["open"]
            out["rss_per_1000_kb"] = (last["rss_kb"] - out["rss_before_kb"]) / (last["open"] / 1000.0)
    elif out["steps"]:
        out["n_reached"] = out["steps"][-1]["open"]
    return out


def proc_cpu_us(pid):
    """utime + stime of pid (all its threads), in µs; None if unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1e6 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


RELOAD_DONE = (b"reloaded policy", b"reload failed")


def measure_reload(t, reps):
    """SIGHUP, then the time until the gate says "reloaded policy" on
    standard error (polled every 2 ms: that is the resolution), reps
    times; with the gate's CPU over it (clock ticks: 10 ms resolution) and
    its memory (RssWatch: RSS before, the peak, RSS after)."""
    pid = t.proc.pid
    out = {"runs": []}
    for _ in range(reps):
        time.sleep(0.5)
        watch = RssWatch(children_of(pid))
        off = log_offset(t.proc.err_path)
        cpu0 = proc_cpu_us(pid)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGHUP)
        said = None
        while time.monotonic() - t0 < 120 and said is None:
            time.sleep(0.002)
            with open(t.proc.err_path, "rb") as f:
                f.seek(off)
                for line in f.read().splitlines():
                    if any(w in line for w in RELOAD_DONE):
                        said = line.decode(errors="replace")
                        break
        wall = time.monotonic() - t0
        cpu1 = proc_cpu_us(pid)
        time.sleep(0.2)   # RSS once the old policy is gone
        mem = watch.stop()
        run = {"wall_ms": wall * 1000, "said": said, "ok": bool(said and "reloaded policy" in said),
               "cpu_ms": (cpu1 - cpu0) / 1000 if cpu0 is not None and cpu1 is not None else None, "memory": mem}
        out["runs"].append(run)
        say(f"  {t.name} reload: {run['wall_ms']:.0f} ms"
            + (f", CPU {run['cpu_ms']:.0f} ms" if run["cpu_ms"] is not None else "")
            + f"; RSS {mem['rss_before_kb'] / 1024:.1f} -> {mem['rss_after_kb'] / 1024:.1f} MB, "
            f"peak +{mem['rss_growth_kb'] / 1024:.1f} MB; {said or 'no reply within 120 s'}")
        if not run["ok"]:
            break
    ok = [r for r in out["runs"] if r["ok"]]
    out["ok"] = len(ok) == reps
    if ok:
        walls = sorted(r["wall_ms"] for r in ok)
        out["wall_ms_best"] = walls[0]
        out["wall_ms_median"] = walls[(len(walls) - 1) // 2]
        cpus = sorted(r["cpu_ms"] for r in ok if r["cpu_ms"] is not None)
        out["cpu_ms_median"] = cpus[(len(cpus) - 1) // 2] if cpus else None
        out["rss_growth_kb_max"] = max(r["memory"]["rss_growth_kb"] for r in ok)
        out["rss_after_kb"] = ok[-1]["memory"]["rss_after_kb"]
    return out


def start_and_probe(t, workdir, results):
    """Start a target, read its RSS at start, probe it. Returns its record."""
    name = t.name
    rec = {"name": name, "reported": False, "notes": t.notes, "runs": {}, "families": list(t.families)}
    results["targets"][name] = rec
    say(f"== {name}")
    try:
        t.start(workdir)
    except Exception as e:
        rec["failed"] = f"could not start: {e}"
        say(f"  {name}: {rec['failed']}")
        t.stop()
        return rec
    rec["version"] = t.version()
    if getattr(t, "check_s", None) is not None:
        rec["check_s"] = t.check_s
        rec["sessions"] = t.n_sessions or 0
    pid = t.proc.pid if t.proc else None
    if pid:
        time.sleep(0.5)
        rec["rss_start_kb"] = rss_kb(pid)
        rec["threads_start"] = threads(pid)
        say(f"  RSS at start {rec['rss_start_kb'] / 1024:.1f} MB")
        if hasattr(t, "probe_self"):
            ok, checks = t.probe_self()
        elif "plain" in t.families:
            ok, checks = probe(t.proxy_addr, t.tunnel_target, t.http_target, t.decoy_tunnel, t.decoy_http)
        else:
            ok, checks = probe_tls(t)
        rec["probe"] = {"ok": ok, "checks": checks}
        for c in checks:
            say(f"  probe: {'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['detail']}")
        if not ok:
            rec["failed"] = "failed the allow/deny probe: " + "; ".join(
                f"{c['check']}: {c['detail']}" for c in checks if not c["ok"])
            finish(t, rec, workdir)
            return rec
    else:
        # direct: the origin must answer and so must the decoy (the probe's premise)
        st, line, _, body, s = exchange((ORIGIN_IP, ORIGIN_PORT), b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
        s.close()
        st2, _, _, body2, s2 = exchange((ORIGIN_IP, DECOY_PORT), b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
        s2.close()
        ok = st == 200 and body == b"x" * SMALL_BYTES and st2 == 200 and b"DECOY" in body2
        checks = [{"check": "origin and decoy answer directly", "ok": ok, "detail": line}]
        if "tls" in t.families:
            ok2, checks2 = probe_tls(t)
            ok = ok and ok2
            checks += checks2
        rec["probe"] = {"ok": ok, "checks": checks}
        for c in checks:
            say(f"  probe: {'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {c['detail']}")
        if not ok:
            rec["failed"] = "the origin does not answer directly: " + "; ".join(
                f"{c['check']}: {c['detail']}" for c in checks if not c["ok"])
            return rec
    rec["reported"] = True
    return rec


def other_cores(res):
    """CPU (in cores) that processes other than the proxy, the origin and the
    load generator used during a run: machine busy time minus ours."""
    w = res.get("window_s") or 0
    mb = res.get("machine_busy")
    if not w or mb is None or mb < 0 or "cpu" not in res:
        return None
    ours = sum(c["utime_us"] + c["stime_us"] for c in res["cpu"] if c["utime_us"] >= 0)
    ours += res["self_cpu"]["utime_us"] + res["self_cpu"]["stime_us"]
    return max(0.0, (mb * (os.cpu_count() or 1) * w * 1e6 - ours) / (w * 1e6))


def measure(t, rec, key, args, limit, origin_pid, direct_port=ORIGIN_PORT):
    """One load-generator run against one target (direct: to direct_port)."""
    pid = t.proc.pid if t.proc else None
    proxy_pids = children_of(pid) if pid else []
    cpu_args = []
    for p in proxy_pids[:12] + [origin_pid]:
        cpu_args += ["--cpu-pid", str(p)]
    base = cpu_args + (["--proxy", f"127.0.0.1:{t.port}"] if t.proxy_addr
                       else ["--connect", f"{ORIGIN_IP}:{direct_port}"])
    bulk = key in BULK_KEYS
    watch = RssWatch(proxy_pids) if bulk and proxy_pids else None
    check_log = bulk and key in getattr(t, "bulk_paths", {})
    off = log_offset(t.log_path) if check_log else 0
    res = loadgen(args + base, limit)
    if watch:
        res["memory"] = watch.stop()
    if check_log:
        res["log_check"] = check_bulk_line(t, key, off, int(args[args.index("--bytes") + 1]))
    res.update(cpu_split(res, proxy_pids, origin_pid))
    res["other_cores"] = other_cores(res)
    rec.setdefault("all_runs", {}).setdefault(key, []).append(res)
    rec["runs"][key] = res
    if bulk:
        mem = res.get("memory") or {}
        lc = res.get("log_check")
        say(f"    {t.name} {key}: {res.get('mb_per_s', 0):,.0f} MB/s, complete {res.get('complete')}"
            + (f" [{res.get('failed') or res.get('last_error')}]" if not res.get("complete") else "")
            + (f"; RSS {mem['rss_before_kb'] / 1024:.1f} MB, peak +{mem['rss_growth_kb'] / 1024:.2f} MB" if mem else "")
            + (f"; log: {lc.get('rule')} {lc.get('status')} {lc.get('bytes_down') or 0:,} bytes down"
               + ("" if lc["ok"] else f" [WRONG: {lc.get('why')}]") if lc else ""))
    elif "rate" in key:
        lat = res.get("lat_us", {})
        say(f"    {t.name} {key}: p50 {lat.get('p50', 0) / 1000:.2f} ms, p99 {lat.get('p99', 0) / 1000:.2f} ms, "
            f"errors {res.get('errors', '?')}")
    else:
        say(f"    {t.name} {key}: {res.get('ops_per_s', 0):,.0f}/s, errors {res.get('errors', '?')}"
            + (f", proxy CPU {res['proxy_user_us_per_op'] + res['proxy_sys_us_per_op']:.0f} µs/op"
               if res.get("proxy_user_us_per_op") is not None else "")
            + (f" [{res['failed']}]" if "failed" in res else "")
            + (f" [{res['last_error']}]" if res.get("errors") and res.get("last_error") else ""))
    if res.get("other_cores") is not None and res["other_cores"] > 0.3:
        say(f"      (other processes used {res['other_cores']:.1f} cores meanwhile)")
    return res


def mode_plan(prof):
    """(key, loadgen mode, arguments without the target, time limit,
    family), in order. Family "plain" runs on the plain targets, "tls" (the
    inspection modes, keys starting with "i") on the inspecting ones;
    direct runs both."""
    lim = prof["duration"] + prof["warmup"] + prof["timeout_ms"] / 1000 + 30
    plan = []
    for mode in ("tunnel", "http"):
        for c in prof["conc"]:
            plan.append((f"{mode}_c{c}", mode, ["-c", str(c), "-d", str(prof["duration"]),
                                                "--warmup", str(prof["warmup"])], lim))
    for mode in ("tunnel", "http"):
        plan.append((f"{mode}_rate{prof['rate']}", mode,
                     ["-c", "200", "--rate", str(prof["rate"]), "-d", str(prof["duration"]),
                      "--warmup", str(prof["warmup"])], lim))
    plan.append(("bulk", "bulk", ["--bytes", str(prof["bulk"]), "-d", str(prof["bulk_limit"])],
                 prof["bulk_limit"] + 30))
    plan = [p + ("plain",) for p in plan]
    # inspection: connect, CONNECT, handshake, one GET, close; GETs in
    # kept-alive inspected tunnels; one big GET in one inspected tunnel
    for mode in ("tunnel", "http"):
        for c in prof["conc"]:
            plan.append((f"i{mode}_c{c}", mode, ["-c", str(c), "-d", str(prof["duration"]),
                                                 "--warmup", str(prof["warmup"])], lim, "tls"))
    plan.append(("ibulk", "bulk", ["--bytes", str(prof["ibulk"]), "-d", str(prof["bulk_limit"])],
                 prof["bulk_limit"] + 30, "tls"))
    # pinned (issue 12): the same download under paths the policy pins, on
    # the targets that pin ("pin": sluice-inspect); run in turn with ibulk
    for key, name, _ in PIN_MODES:
        plan.append((key, "bulk", ["--bytes", str(prof["pbulk"]), "--bulk-name", name, "-d", str(prof["bulk_limit"])],
                     prof["bulk_limit"] + 30, "pin"))
    # sessions (issue 13): the same tunnels and requests, on the gate with
    # sessions (authenticated) and on the same gate without ("sess")
    for mode in ("tunnel", "http"):
        for c in prof["sess_conc"]:
            plan.append((f"s{mode}_c{c}", mode, ["-c", str(c), "-d", str(prof["duration"]),
                                                 "--warmup", str(prof["warmup"])], lim, "sess"))
    return plan


BULK_KEYS = ("bulk", "ibulk") + tuple(k for k, _, _ in PIN_MODES)


def plan_groups(plan):
    """The plan in groups: consecutive bulk modes form one group, whose
    runs take turns (every mode on every target, then again), so that the
    pinned and the unpinned download share the machine's changes alike."""
    groups = []
    for p in plan:
        if p[1] == "bulk" and groups and groups[-1][-1][1] == "bulk":
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def finish(t, rec, workdir):
    """RSS after the runs, stop by PID, read its log."""
    pid = t.proc.pid if t.proc else None
    if not pid:
        return
    time.sleep(0.5)
    rec["rss_end_kb"] = rss_kb(pid)
    rec["fds_end"] = fd_count(pid)
    rec["threads_end"] = threads(pid)
    rc = t.stop()
    rec["exit_code"] = rc
    try:
        with open(os.path.join(workdir, f"{t.name}.stderr"), "rb") as f:
            rec["stderr_tail"] = f.read()[-3000:].decode(errors="replace")
    except OSError:
        pass
    if rec.get("reported"):
        say(f"  {t.name}: RSS after all runs {rec['rss_end_kb'] / 1024:.1f} MB; exit {rc}")
        rec["log"] = log_summary(t)


def log_summary(t):
    path = getattr(t, "log_path", None)
    out = {"path": os.path.basename(path) if path else None}
    if not path or not os.path.exists(path):
        out["lines"] = 0
        return out
    n = 0
    reasons = {}
    events = {}
    bad = 0
    sessions = set()
    no_session = 0
    with open(path, "rb") as f:
        for line in f:
            n += 1
            if isinstance(t, Sluice):
                try:
                    obj = json.loads(line)
                except ValueError:
                    bad += 1
                    continue
                events[obj.get("event")] = events.get(obj.get("event"), 0) + 1
                if "session" in obj:
                    sessions.add(obj["session"])
                elif obj.get("event") == "decision" and obj.get("decision") == "allow":
                    no_session += 1
                if obj.get("event") == "decision":
                    k = f"{obj.get('decision')}:{obj.get('reason')}"
                    reasons[k] = reasons.get(k, 0) + 1
                elif obj.get("event") == "close":
                    k = f"close:{obj.get('end')}"
                    reasons[k] = reasons.get(k, 0) + 1
    out["lines"] = n
    out["bytes"] = os.path.getsize(path)
    if isinstance(t, Sluice):
        out["events"] = events
        out["reasons"] = reasons
        out["not_json"] = bad
        out["sessions_seen"] = len(sessions)
        out["lines_without_session"] = no_session   # allowed decisions
        # the hash chain must hold after the load (where this sluice has `audit`)
        try:
            r = subprocess.run([SLUICE, "audit", "--verify", path], capture_output=True, text=True, timeout=300)
            text = (r.stdout + r.stderr).strip()
            if "unknown command" not in text:
                out["verify"] = {"exit": r.returncode, "said": text[-300:]}
        except (OSError, subprocess.SubprocessError) as e:
            out["verify"] = {"exit": None, "said": repr(e)}
    return out


# --------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------

def fmt_num(v, digits=0):
    if v is None:
        return "—"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def ratio(v, ref):
    if v is None or ref is None or ref == 0:
        return None
    return v / ref


def build_rows(results, prof, family="plain"):
    """The table's rows: the plain modes, or (family "tls") the inspection
    modes, whose keys are the plain ones with an "i" before them."""
    T = results["targets"]
    rate = prof["rate"]
    c1, c2 = prof["conc"]
    idle_n = results["meta"]["idle_n"]
    i = "i" if family == "tls" else ""
    idle_key = i + "idle"
    fam_keys = {k for k, *_, f in mode_plan(prof) if f == family or (family == "tls" and f == "pin")}

    def run(name, key):
        return T.get(name, {}).get("runs", {}).get(key, {})

    def ops(key):
        return lambda n: run(n, key).get("ops_per_s") if run(n, key).get("ops") else None

    def cpu(key):
        def f(n):
            r = run(n, key)
            if n == "direct":
                u, s = r.get("origin_user_us_per_op"), r.get("origin_sys_us_per_op")
            else:
                u, s = r.get("proxy_user_us_per_op"), r.get("proxy_sys_us_per_op")
            if u is None or s is None:
                return None
            return (u + s, u, s)
        return f

    def lat(key, pct):
        return lambda n: run(n, key).get("lat_us", {}).get(pct, 0) / 1000 if run(n, key).get("lat_us") else None

    def behind(key):
        def f(n):
            r = run(n, key)
            if r.get("incomplete") or (r.get("drain_s") or 0) > 1.0 or (r.get("ops_per_s") or 0) < 0.95 * rate:
                return "†"
            return ""
        return f

    def bulk_flag(n):
        r = run(n, i + "bulk")
        return "" if r.get("complete") else "‡"

    def bulk(n):
        r = run(n, i + "bulk")
        return r.get("mb_per_s") if r.get("bytes") else None

    def pinned(key):
        """A pinned download's MB/s and its ratio to the unpinned one (the
        same column, the same run); issue 12's target is the ratio."""
        def f(n):
            r = run(n, key)
            if not r.get("bytes"):
                return None
            v = r.get("mb_per_s") or 0
            u = bulk(n)
            return fmt_num(v) + ("" if r.get("complete") else "‡") + (f" ({v / u:.2f}× unpinned)" if u else "")
        return f

    def bulk_cpu(n):
        """The proxy's CPU per byte of one bulk download, each mode's
        reported (median) run: what pinning adds per byte."""
        cells = []
        for key in (i + "bulk",) + tuple(k for k, _, _ in PIN_MODES):
            r = run(n, key)
            u, sy = r.get("proxy_user_us_per_op"), r.get("proxy_sys_us_per_op")
            cells.append(f"{(u + sy) * 1000 / r['bytes']:.1f}" if u is not None and sy is not None and r.get("bytes")
                         else "—")
        return None if all(c == "—" for c in cells) else " / ".join(cells)

    def bulk_growth(n):
        """The largest peak RSS growth over each bulk mode's runs."""
        cells = []
        for key in (i + "bulk",) + tuple(k for k, _, _ in PIN_MODES):
            g = [x["memory"]["rss_growth_kb"] for x in T.get(n, {}).get("all_runs", {}).get(key, [])
                 if x.get("memory")]
            cells.append(f"{max(g) / 1024:.2f}" if g else "—")
        return None if all(c == "—" for c in cells) else " / ".join(cells)

    def mem(field, scale=1 / 1024):
        def f(n):
            if n == "direct":
                return None
            v = T.get(n, {}).get(field)
            return v * scale if v is not None else None
        return f

    def idle(field):
        def f(n):
            if n == "direct":
                return None
            v = T.get(n, {}).get(idle_key, {}).get(field)
            return v / 1024 if v is not None else None
        return f

    def idle_short(n):
        got = T.get(n, {}).get(idle_key, {}).get("n_reached")
        if n == "direct" or got is None or got >= idle_n:
            return ""
        return f" (only {got:,} opened)"

    def other(n):
        vals = [run(n, f"{i}{m}_c{c}").get("other_cores") for m in ("tunnel", "http") for c in (c1, c2)]
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None

    def errors(n):
        tot = 0
        for k, r in T.get(n, {}).get("runs", {}).items():
            if k in fam_keys:
                tot += r.get("errors", 0) or 0
        ir = (T.get(n, {}).get(idle_key, {}) or {}).get("result") or {}
        tot += ir.get("errors", 0) or 0
        return tot

    if family == "tls":
        return [
            (f"inspected tunnels/s, C={c1}", ops(f"itunnel_c{c1}"), 0, "hi"),
            (f"inspected tunnels/s, C={c2}", ops(f"itunnel_c{c2}"), 0, "hi"),
            (f"CPU µs per inspected tunnel, C={c1} (user+sys)¹", cpu(f"itunnel_c{c1}"), 0, "cpu"),
            (f"requests/s in kept-alive inspected tunnels, C={c1}", ops(f"ihttp_c{c1}"), 0, "hi"),
            (f"requests/s in kept-alive inspected tunnels, C={c2}", ops(f"ihttp_c{c2}"), 0, "hi"),
            (f"CPU µs per inspected request, C={c1} (user+sys)¹", cpu(f"ihttp_c{c1}"), 0, "cpu"),
            ("bulk MB/s, one inspected tunnel", bulk, 0, "hi", bulk_flag),
            ("pinned bulk MB/s, one inspected tunnel (sha512)⁴", pinned("pbulk"), 0, "text"),
            ("pinned bulk MB/s, one inspected tunnel (sha256)⁴", pinned("pbulk256"), 0, "text"),
            ("proxy CPU ns per byte, one bulk download (unpinned / sha512 / sha256)⁴", bulk_cpu, 0, "text"),
            ("peak RSS growth during one bulk download, MB (unpinned / sha512 / sha256)⁴", bulk_growth, 0, "text"),
            ("RSS at start, MB", mem("rss_start_kb"), 1, "lo"),
            ("RSS per 1,000 idle inspected tunnels, MB", idle("rss_per_1000_kb"), 2, "lo"),
            (f"RSS holding {idle_n:,} idle inspected tunnels, MB²", idle("rss_at_n_kb"), 1, "lo", idle_short),
            ("RSS after all runs, MB", mem("rss_end_kb"), 1, "lo"),
            ("errors, all inspection runs", errors, 0, "err"),
            ("other processes' CPU during the throughput runs, cores³", other, 2, "info"),
        ]
    return [
        # label, getter, digits, kind ('hi' higher is better, 'lo' lower is better, 'cpu')
        (f"tunnels/s, C={c1}", ops(f"tunnel_c{c1}"), 0, "hi"),
        (f"tunnels/s, C={c2}", ops(f"tunnel_c{c2}"), 0, "hi"),
        (f"CPU µs per tunnel, C={c1} (user+sys)¹", cpu(f"tunnel_c{c1}"), 0, "cpu"),
        (f"requests/s keep-alive, C={c1}", ops(f"http_c{c1}"), 0, "hi"),
        (f"requests/s keep-alive, C={c2}", ops(f"http_c{c2}"), 0, "hi"),
        (f"CPU µs per request, C={c1} (user+sys)¹", cpu(f"http_c{c1}"), 0, "cpu"),
        (f"tunnel latency p50 at {rate}/s, ms", lat(f"tunnel_rate{rate}", "p50"), 2, "lo", behind(f"tunnel_rate{rate}")),
        (f"tunnel latency p99 at {rate}/s, ms", lat(f"tunnel_rate{rate}", "p99"), 2, "lo", behind(f"tunnel_rate{rate}")),
        (f"request latency p50 at {rate}/s, ms", lat(f"http_rate{rate}", "p50"), 2, "lo", behind(f"http_rate{rate}")),
        (f"request latency p99 at {rate}/s, ms", lat(f"http_rate{rate}", "p99"), 2, "lo", behind(f"http_rate{rate}")),
        ("bulk MB/s, one tunnel", bulk, 0, "hi", bulk_flag),
        ("RSS at start, MB", mem("rss_start_kb"), 1, "lo"),
        ("RSS per 1,000 idle tunnels, MB", idle("rss_per_1000_kb"), 2, "lo"),
        (f"RSS holding {idle_n:,} idle tunnels, MB²", idle("rss_at_n_kb"), 1, "lo", idle_short),
        ("RSS after all runs, MB", mem("rss_end_kb"), 1, "lo"),
        ("errors, all runs", errors, 0, "err"),
        ("other processes' CPU during the throughput runs, cores³", other, 2, "info"),
    ]


def render_table(results, prof, family="plain"):
    """The plain table (ratios to direct and squid), or the inspection one
    (ratios to direct and squid-bump)."""
    T = results["targets"]
    cols = [n for n in results["order"] if T.get(n, {}).get("reported") and family in T[n].get("families", ())]
    if not cols:
        return ""
    rows = build_rows(results, prof, family)
    ref, mark = ("squid", "s") if family == "plain" else ("squid-bump", "b")
    header = ("| figure | " if family == "plain" else "| inspection | ") + " | ".join(cols) + " |"
    sep = "|---|" + "---|" * len(cols)
    out = [header, sep]
    for row in rows:
        label, get, digits, kind = row[:4]
        flag = row[4] if len(row) > 4 else (lambda n: "")
        cells = []
        d = get("direct") if "direct" in cols else None
        s = get(ref) if ref in cols else None
        for n in cols:
            v = get(n)
            if kind == "cpu":
                if v is None:
                    cells.append("—")
                    continue
                tot, u, sy = v
                txt = f"{tot:,.0f} ({u:,.0f}u+{sy:,.0f}s)"
                rd = ratio(tot, d[0] if d else None)
                rs = ratio(tot, s[0] if s else None)
            elif kind == "err":
                cells.append(str(v))
                continue
            elif kind == "info":
                cells.append("—" if v is None else f"{v:.2f}")
                continue
            elif kind == "text":
                cells.append("—" if v is None else v)
                continue
            else:
                if v is None:
                    cells.append("—")
                    continue
                txt = fmt_num(v, digits) + flag(n)
                rd = ratio(v, d)
                rs = ratio(v, s)
            parts = []
            if n != "direct" and rd is not None:
                parts.append(f"{rd:.2f}×d")
            if n != ref and rs is not None:
                parts.append(f"{rs:.2f}×{mark}")
            cells.append(txt + (f" ({', '.join(parts)})" if parts else ""))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


SESS_PAIR = ("sluice-anon", "sluice-sessions")


def sess_best(rec, key):
    """The best of a mode's runs (the most operations per second): the
    figure least held down by the rest of the machine."""
    runs = [r for r in rec.get("all_runs", {}).get(key, []) if r.get("ops")]
    return max(runs, key=lambda r: r["ops_per_s"]) if runs else None


def render_sessions(results, prof):
    """Issue 13's table: the gate with n sessions, every request
    authenticated, beside the same gate without [sessions]; the ratio is
    sessions / anon of the best of each. Returns markdown, or "" if the pair
    did not run."""
    T = results["targets"]
    anon, sess = (T.get(n, {}) for n in SESS_PAIR)
    if not anon.get("reported") and not sess.get("reported"):
        return ""
    n = sess.get("sessions") or prof["sessions"]
    cols = [c for c in SESS_PAIR if T.get(c, {}).get("reported")]

    def cell_ops(rec, key, ref):
        b = sess_best(rec, key)
        if not b:
            return "—"
        txt = fmt_num(b["ops_per_s"])
        rb = sess_best(ref, key) if ref else None
        if rb:
            txt += f" (**{b['ops_per_s'] / rb['ops_per_s']:.3f}×a**)"
        return txt

    def cell_cpu(rec, key, ref):
        b = sess_best(rec, key)
        if not b or b.get("proxy_user_us_per_op") is None:
            return "—"
        u, sy = b["proxy_user_us_per_op"], b["proxy_sys_us_per_op"]
        txt = f"{u + sy:,.1f} ({u:,.1f}u+{sy:,.1f}s)"
        rb = sess_best(ref, key) if ref else None
        if rb and rb.get("proxy_user_us_per_op") is not None:
            txt += f" ({(u + sy) / (rb['proxy_user_us_per_op'] + rb['proxy_sys_us_per_op']):.2f}×a)"
        return txt

    def mb(kb, digits=1):
        return "—" if kb is None else f"{kb / 1024:,.{digits}f}"

    def reload_cell(rec, field, fmt):
        rl = rec.get("reload") or {}
        v = rl.get(field)
        return "—" if v is None else fmt(v)

    rows = [("sessions loaded", lambda r, ref: f"{r.get('sessions', 0):,}")]
    for c in prof["sess_conc"]:
        rows.append((f"tunnels/s, C={c}, best of {prof['rounds']}", lambda r, ref, c=c: cell_ops(r, f"stunnel_c{c}", ref)))
    for c in prof["sess_conc"]:
        rows.append((f"CPU µs per tunnel, C={c} (user+sys)¹", lambda r, ref, c=c: cell_cpu(r, f"stunnel_c{c}", ref)))
    for c in prof["sess_conc"]:
        rows.append((f"requests/s keep-alive, C={c}, best of {prof['rounds']}",
                     lambda r, ref, c=c: cell_ops(r, f"shttp_c{c}", ref)))
    for c in prof["sess_conc"]:
        rows.append((f"CPU µs per request, C={c} (user+sys)¹", lambda r, ref, c=c: cell_cpu(r, f"shttp_c{c}", ref)))
    rows += [
        ("`sluice check -c` (reads the config and every session file), s",
         lambda r, ref: "—" if r.get("check_s") is None else f"{r['check_s']:.2f}"),
        ("RSS at start, MB", lambda r, ref: mb(r.get("rss_start_kb"))),
        ("RSS per session at start, KB (against sluice-anon)",
         lambda r, ref: "—" if not ref or not r.get("sessions") or r.get("rss_start_kb") is None
         or ref.get("rss_start_kb") is None
         else f"{(r['rss_start_kb'] - ref['rss_start_kb']) / r['sessions']:.2f}"),
        (f"reload: SIGHUP to \"reloaded policy\", ms, median of {prof['reloads']} (best)⁵",
         lambda r, ref: reload_cell(r, "wall_ms_median", lambda v: f"{v:,.0f}")
         + reload_cell(r, "wall_ms_best", lambda v: f" ({v:,.0f})")),
        ("reload: the gate's CPU, ms, median⁵", lambda r, ref: reload_cell(r, "cpu_ms_median", lambda v: f"{v:,.0f}")),
        ("reload: peak RSS growth during one, MB (largest)⁵",
         lambda r, ref: reload_cell(r, "rss_growth_kb_max", lambda v: f"{v / 1024:,.1f}")),
        ("RSS after the reloads, MB", lambda r, ref: reload_cell(r, "rss_after_kb", lambda v: f"{v / 1024:,.1f}")),
        ("RSS per session after the reloads, KB (against sluice-anon's)",
         lambda r, ref: "—" if not ref or not r.get("sessions") or not (r.get("reload") or {}).get("rss_after_kb")
         or not (ref.get("reload") or {}).get("rss_after_kb")
         else f"{(r['reload']['rss_after_kb'] - ref['reload']['rss_after_kb']) / r['sessions']:.2f}"),
        ("RSS after all runs, MB", lambda r, ref: mb(r.get("rss_end_kb"))),
        ("sessions named in the log", lambda r, ref: "—" if not r.get("sessions")
         else f"{(r.get('log') or {}).get('sessions_seen', 0):,}"),
        ("errors, all runs", lambda r, ref: str(sum(x.get("errors", 0) or 0 for k, lst in r.get("all_runs", {}).items()
                                                if k[0] == "s" for x in lst))),
        ("other processes' CPU during the best runs, cores³",
         lambda r, ref: (lambda v: "—" if not v else f"{sum(v) / len(v):.2f}")(
             [b["other_cores"] for k in r.get("all_runs", {}) if k[0] == "s"
              for b in [sess_best(r, k)] if b and b.get("other_cores") is not None])),
    ]
    out = ["| sessions (issue 13) | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for label, get in rows:
        cells = []
        for c in cols:
            ref = anon if c == "sluice-sessions" and anon.get("reported") else None
            cells.append(get(T[c], ref))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    notes = [f"×a: sluice-sessions against sluice-anon, the best run of each (of {prof['rounds']}; higher is "
             "better for /s, lower for CPU); issue 13's target: within 5% (≥ 0.95× in /s). sluice-anon is the "
             f"same config without `[sessions]`; sluice-sessions has {n:,} session files and authenticates every "
             "CONNECT and every plain-HTTP request (a keep-alive connection once per request)."]
    if anon.get("reported") and sess.get("reported"):
        per = []
        for key in [f"s{m}_c{c}" for m in ("tunnel", "http") for c in prof["sess_conc"]]:
            a_runs, s_runs = anon.get("all_runs", {}).get(key, []), sess.get("all_runs", {}).get(key, [])
            rs = [s_["ops_per_s"] / a_["ops_per_s"] for a_, s_ in zip(a_runs, s_runs)
                  if a_.get("ops") and s_.get("ops")]
            if rs:
                per.append(f"{key[1:]} " + ", ".join(f"{x:.3f}" for x in rs))
        if per:
            notes.append("The same ratio round by round (the pair ran back to back, its order swapped every round): "
                         + "; ".join(per) + ".")
    notes.append("⁵ SIGHUP to the gate's \"reloaded policy\" line on standard error (polled every 2 ms), on the idle "
                 "gate before the load runs: the config and every session file read again, checked and swapped in; "
                 "CPU from /proc/PID/stat (10 ms ticks); peak growth from VmHWM (reset before each reload) and VmRSS "
                 "every 20 ms, minus the RSS before. RSS per session: (sluice-sessions' RSS at start − "
                 "sluice-anon's) / sessions.")
    return "\n".join(out) + "\n\n" + "\n".join(f"- {l}" for l in notes)


def render_footer(results, prof, inspection=False, plain=True):
    T = results["targets"]
    meta = results["meta"]
    lines = []
    if plain or inspection:
        lines.append("×d: ratio to direct (no proxy); ×s: ratio to squid" + ("; ×b: ratio to squid-bump" if inspection
                                                                              else "")
                     + ". Higher is better for /s and MB/s, lower for CPU, latency and RSS.")
    lines.append("¹ CPU of the proxy process (all threads, and child processes if any) from /proc/PID/stat, "
                 "utime and stime over the measured window, divided by the operations completed in it; "
                 "u = user, s = system. In the direct column: the origin server's CPU per operation, "
                 "i.e. what one endpoint of the same exchange costs.")
    if plain:
        lines.append(f"Latency: {prof['rate']} operations per second offered on a fixed schedule (at most 200 "
                     "at once), measured from each operation's scheduled start, so queueing behind a slow gate "
                     "counts. † the gate did not keep up with the offered rate (the window's operations took more "
                     "than 1 s past its end to finish, or some never did: those count with their age at the "
                     "cut-off, a lower bound).")
    lines.append("Tunnels: connect, CONNECT, a 64-byte GET and its response through the tunnel, close. "
                 "Requests: absolute-form GETs on keep-alive client connections (a gate that closes the "
                 "client connection after each response makes the client reconnect; that is counted). "
                 "Bulk: one tunnel, one GET of the whole body; ‡ incomplete within the time limit"
                 + (f"; the median of {prof.get('bulk_reps', 1) * prof['rounds']} runs, the targets taking turns."
                    if prof.get("bulk_reps", 1) * prof["rounds"] > 1 else "."))
    if inspection:
        lines.append(f"Inspection (the second table): the origin also serves HTTPS on {ORIGIN_IP}:{TLS_PORT}, an "
                     f"ECDSA P-256 certificate for {NAME_TUNNEL} and {ORIGIN_IP} from a CA the run makes with "
                     "openssl; squid-bump and sluice-inspect each answer the client with a leaf from a CA of their "
                     "own, which the load generator trusts, and verify the origin against the origin's CA only. "
                     "TLS 1.2 on both sides of the proxy (what sluice speaks), ECDHE-ECDSA with AES-128-GCM on P-256; "
                     "every handshake is a full one (neither the load generator nor the origin resumes sessions or "
                     "issues tickets). Inspected tunnels: connect, CONNECT, the handshake, a 64-byte GET, "
                     "close_notify, close. Requests: origin-form GETs in kept-alive inspected tunnels (CONNECT and "
                     "the handshake once per connection). Bulk: one GET in one inspected tunnel, MB/s from the "
                     "request on. Idle inspected tunnels: held after the handshake and one GET (squid connects to "
                     "the origin only for the first request). Direct: TLS straight to the origin; its CPU rows are the origin's, one TLS "
                     "endpoint. The load generator and the origin use OpenSSL "
                     f"({ssl_version()}): mbedtls 2.28, measured here, is some 20 times slower at the handshake's "
                     "P-256 operations and at AES-GCM, and would have measured the load generator.")
        lines.append("Issue 11's targets, sluice-inspect against squid-bump: ≥ 2× inspected tunnels/s and "
                     "requests/s, CPU per inspected request ≤ 0.5×, bulk ≥ 1.5×, RSS per idle inspected tunnel "
                     "≤ 0.5×; and the plain table's opaque tunnels within 5% of their figures before the issue.")
    if not plain:
        pass
    elif meta.get("idle_note"):
        lines.append("² " + meta["idle_note"])
    else:
        lines.append(f"² RSS (VmRSS) of the proxy holding {meta['idle_n']:,} idle CONNECT tunnels "
                     f"(opened {meta['idle_first']:,} first, then the rest); per 1,000 = "
                     "(RSS at the end − RSS just before) / (tunnels / 1,000).")
    lines.append("³ Machine CPU time (from /proc/stat) minus that of the proxy, the origin and the load "
                 "generator, averaged over the four throughput runs: what other programs on the machine (and kernel "
                 "threads, such as a file system journal flushing a proxy's fsyncs) took "
                 "meanwhile, out of 2 cores. Above a few tenths, that column's /s and latency figures are "
                 "depressed; CPU per operation much less so. Every mode is run on all targets back to back, "
                 "so a change in the machine's load skews neighbouring columns alike"
                 + (f"; each mode ran {prof['rounds']} times and each cell shows the run in which other "
                    "processes took the least CPU." if prof.get("rounds", 1) > 1 else "."))
    pin = T.get("sluice-inspect", {})
    if inspection and any(pin.get("all_runs", {}).get(k) for k, _, _ in PIN_MODES):
        runs = "; ".join(f"{k} " + ", ".join(fmt_num(r.get("mb_per_s")) for r in pin["all_runs"][k])
                         for k in ("ibulk",) + tuple(k for k, _, _ in PIN_MODES) if pin["all_runs"].get(k))
        lines.append("⁴ Pinned bulk (issue 12): the same download as the inspected bulk, under a path that "
                     "sluice-inspect's allowlist pins with the body's sha512 (or sha256) digest, computed by the "
                     "driver from the bytes the origin sends; sluice hashes the body as it streams and holds its "
                     "last bytes until the digest matched. Each run's request line is checked: the pinned rule, "
                     "200, the whole body down. The ratio is to the unpinned inspected bulk of the same column "
                     "and run (medians; issue 12's target: ≥ 0.9×); the runs took turns. Every run, MB/s: "
                     f"{runs}. CPU per byte: the proxy's user + system time over the download (the median run) "
                     "divided by the bytes. RSS growth: the proxy's peak during one download (the kernel's VmHWM, reset "
                     "before it, and VmRSS sampled every 20 ms) minus its RSS before, the largest over the runs.")
    lines.append("Log flushing: " + "; ".join(
        f"**{n}**: {LOG_POLICY[n]}" for n in results["order"] if n in LOG_POLICY and T.get(n, {}).get("reported")) + ".")
    logs = []
    for n in results["order"]:
        lg = T.get(n, {}).get("log")
        if T.get(n, {}).get("reported") and lg and lg.get("path"):
            v = lg.get("verify")
            logs.append(f"{n} {lg.get('lines', 0):,}" + (
                "" if not v else " (hash chain verified by `sluice audit --verify`)" if v.get("exit") == 0
                else " (**`sluice audit --verify` failed**)"))
    if logs:
        lines.append("Log lines written during the run: " + ", ".join(logs) + ".")
    for n in results["order"]:
        r = T.get(n, {})
        if not r.get("reported"):
            lines.append(f"**{n} is not reported**: {r.get('failed', 'not run')}.")
    for n in results["order"]:
        r = T.get(n, {})
        if r.get("reported") and r.get("notes"):
            lines.append(f"{n}: " + "; ".join(r["notes"]) + ".")
    lines.append(
        f"Machine: {meta['cpus']} CPUs ({meta['cpu_model']}), kernel {meta['kernel']}; the load generator "
        f"(one thread), the origin (one thread) and the proxy share them. sluice runs "
        f"{meta.get('sluice_workers', '?')} workers, floor {meta.get('sluice_workers', '?')} threads, squid one "
        f"process, tinyproxy a thread per connection. "
        f"Load average at start {meta['loadavg_start']}, at end {meta.get('loadavg_end', '?')}.")
    sc = results.get("machine", {}).get("syscall_cost") or {}
    if sc.get("getppid") and sc.get("recv_eagain"):
        g, r = sc["getppid"], sc["recv_eagain"]
        lines.append(f"One syscall here costs about {g['user_ns'] / 1000:.2f} µs of user time and "
                     f"{g['sys_ns'] / 1000:.2f} µs of system time (getppid in a loop; recv on an empty socket: "
                     f"{r['user_ns'] / 1000:.2f} + {r['sys_ns'] / 1000:.2f}). Measured by `bench/syscost.c` "
                     f"({sc.get('calls', SYSCOST_CALLS):,} calls of each, user and system time from getrusage) "
                     "at the start of this run.")
    else:
        lines.append(f"The cost of one syscall was not measured: {sc.get('failed', 'syscost did not run')}.")
    if meta.get("other_load"):
        lines.append("Other processes busy on the machine at the start (not part of the bench): "
                     + meta["other_load"] + ".")
    lines.append(f"Profile `{meta['profile']}`: {prof['duration']:g} s measured after {prof['warmup']:g} s warm-up "
                 f"per throughput and latency run; bulk {prof['bulk'] / 2**20:,.0f} MiB"
                 + (f", inspected bulk {prof['ibulk'] / 2**20:,.0f} MiB" if inspection else "")
                 + "; all on loopback in a "
                 f"private network namespace; {meta['date']}, sluice {meta.get('sluice_rev', '?')}.")
    return "\n".join(f"- {l}" for l in lines)


# --------------------------------------------------------------------------
# setup
# --------------------------------------------------------------------------

def syscall_cost():
    """What one system call costs here (bench/syscost.c), in ns per call."""
    try:
        r = subprocess.run([SYSCOST, str(SYSCOST_CALLS)], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return {"failed": f"syscost: {e!r}"}
    try:
        obj = json.loads(r.stdout.strip().splitlines()[-1])
        if not all(isinstance(obj[k][f], (int, float)) for k in ("getppid", "recv_eagain")
                   for f in ("user_ns", "sys_ns")):
            raise ValueError("not numbers")
    except (ValueError, IndexError, KeyError, TypeError):
        return {"failed": f"syscost exit {r.returncode}: {(r.stdout + r.stderr)[-300:]!r}"}
    obj["calls"] = SYSCOST_CALLS
    return obj


def setup_namespace():
    parent = os.environ.get("SLUICE_BENCH_PARENT_NETNS")
    mine = os.readlink("/proc/self/ns/net")
    if not parent or parent == mine:
        sys.exit("bench: not in a network namespace of its own; run bench/run.sh, not run.py")
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    names = [l.split(":")[1].strip() for l in links.splitlines() if l.strip()]
    if names != ["lo"]:
        sys.exit(f"bench: the network namespace has links other than lo: {names}")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # per-namespace settings: more ephemeral ports for the short-lived connections
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", "w") as f:
            f.write("10000 65000")
    except OSError as e:
        say(f"could not widen ip_local_port_range: {e}")


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (1 << 20, 1 << 17, 65536):
        if hard >= want:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            hard = want
            break
        except (ValueError, OSError):
            continue
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def other_load():
    """The busiest processes on the machine right now that are not ours (1 s sample)."""
    def sample():
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    s = f.read()
                comm = s[s.index("(") + 1:s.rindex(")")]
                fields = s.rsplit(")", 1)[1].split()
                out[int(d)] = (comm, int(fields[11]) + int(fields[12]))
            except (OSError, ValueError, IndexError):
                pass
        return out
    a = sample()
    time.sleep(1.0)
    b = sample()
    tck = os.sysconf("SC_CLK_TCK")
    mine = set(children_of(os.getpid()))
    busy = []
    for pid, (comm, t) in b.items():
        if pid in mine or pid not in a:
            continue
        cpu = (t - a[pid][1]) / tck
        if cpu >= 0.05:
            busy.append((cpu, comm))
    busy.sort(reverse=True)
    total = sum(c for c, _ in busy)
    if total < 0.1:
        return ""
    by = {}
    for c, comm in busy:
        by[comm] = by.get(comm, 0) + c
    top = sorted(by.items(), key=lambda x: -x[1])[:6]
    return f"{total:.1f} CPUs busy: " + ", ".join(f"{c} {v:.2f}" for c, v in top)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def ssl_version():
    return ssl.OPENSSL_VERSION


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def update_readme(table_md):
    path = os.path.join(HERE, "README.md")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return False
    begin, end = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"
    if begin not in text or end not in text:
        return False
    pre, rest = text.split(begin, 1)
    _, post = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(pre + begin + "\n" + table_md + "\n" + end + post)
    return True


# the table's columns, in order
TARGET_NAMES = ["direct", "floor", "squid", "tinyproxy", "sluice", "sluice-full", "squid-bump", "sluice-inspect",
                "sluice-anon", "sluice-sessions"]


def main():
    global verbose
    ap = argparse.ArgumentParser(description="sluice benchmark (run through bench/run.sh)")
    ap.add_argument("--smoke", action="store_true", help="about a second per mode, small C and byte counts")
    ap.add_argument("--only", action="append", default=[],
                    choices=TARGET_NAMES, metavar="NAME",
                    help="measure only these targets (" + ", ".join(TARGET_NAMES) + "); repeatable")
    ap.add_argument("--skip", action="append", default=[], choices=TARGET_NAMES, metavar="NAME",
                    help="leave these targets out; repeatable")
    ap.add_argument("--duration", type=float, help="seconds per throughput/latency run")
    ap.add_argument("--rounds", type=int, help="measure every mode this many times (full: 2, smoke: 1); "
                    "each cell reports the round least disturbed by other processes")
    ap.add_argument("--mode", action="append", default=[], metavar="KEY",
                    help="run only these modes (the JSON's keys: ibulk, pbulk, pbulk256, tunnel_c50, ...; idle and "
                    "iidle for the idle-tunnel steps); repeatable")
    ap.add_argument("--bulk-reps", type=int, help="runs of each bulk mode per round (full: 3, smoke: 1)")
    ap.add_argument("--wrong-pins", action="store_true",
                    help="pin the pinned modes' paths with the digest of a body one byte longer: every pinned run "
                    "must then fail (a check of the check)")
    ap.add_argument("--sessions", type=int, metavar="N",
                    help="session files of sluice-sessions (full: 10,000, smoke: 100; at least 2)")
    ap.add_argument("--reloads", type=int, metavar="N", help="SIGHUPs timed on the sessions pair (full: 5, smoke: 2)")
    ap.add_argument("--json", help="where to write the raw results")
    ap.add_argument("--no-readme", action="store_true", help="do not update the table in bench/README.md")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (configs, logs)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args()
    verbose = not a.quiet
    prof = dict(PROFILES["smoke" if a.smoke else "full"])
    if a.duration:
        prof["duration"] = a.duration
    rounds = a.rounds or prof["rounds"]
    prof["rounds"] = rounds
    if a.bulk_reps:
        prof["bulk_reps"] = a.bulk_reps
    if a.sessions is not None:
        if a.sessions < 2:
            sys.exit("bench: --sessions wants at least 2 (the probe uses two sessions)")
        prof["sessions"] = a.sessions
    if a.reloads:
        prof["reloads"] = a.reloads
    plan = mode_plan(prof)
    known = [p[0] for p in plan] + ["idle", "iidle", "reload"]
    bad = [m for m in a.mode if m not in known]
    if bad:
        sys.exit(f"bench: unknown --mode {', '.join(bad)}; this profile's modes: {', '.join(known)}")
    if a.mode:
        plan = [p for p in plan if p[0] in a.mode]
    idle_steps = [m for m in ("idle", "iidle", "reload") if not a.mode or m in a.mode]
    out_json = a.json or (os.path.join(ROOT, "build", "bench", "smoke.json") if a.smoke
                          else os.path.join(HERE, "results", "latest.json"))

    for b, what in ((LOADGEN, "make build/bench/loadgen"), (ORIGIN, "make build/bench/origin"),
                    (FLOOR, "make build/bench/floor"), (SYSCOST, "make build/bench/syscost"),
                    (SLUICE, "make build/sluice"), (OPENSSL, "apt-get install openssl")):
        if not os.access(b, os.X_OK):
            sys.exit(f"bench: {b} is missing; build it first ({what}, or make bench)")

    setup_namespace()
    hard = raise_nofile()
    # tunnels the fd limit allows: the proxy holds two descriptors per tunnel
    idle_n = prof["idle_n"]
    idle_note = None
    fd_room = (hard - 300) // 2
    if fd_room < idle_n:
        capped = max(100, fd_room // 100 * 100)
        idle_note = (f"RSS holding {capped:,} idle CONNECT tunnels, not {idle_n:,}: RLIMIT_NOFILE's hard limit "
                     f"is {hard:,} here and cannot be raised (no CAP_SYS_RESOURCE), and a proxy holds two "
                     f"descriptors per tunnel. Per 1,000 = (RSS at the end − RSS just before) / "
                     f"(tunnels / 1,000).")
        idle_n = capped
    first = min(prof["idle_first"], idle_n)

    workdir = tempfile.mkdtemp(prefix="sluice-bench-")
    os.chmod(workdir, 0o755)
    rev = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    results = {
        "meta": {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "profile": "smoke" if a.smoke else "full",
            "params": prof,
            "cpus": os.cpu_count(),
            "cpu_model": cpu_model(),
            "kernel": os.uname().release,
            "rlimit_nofile": hard,
            "idle_n": idle_n,
            "idle_first": first,
            "idle_note": idle_note,
            "loadavg_start": loadavg(),
            "sluice_rev": rev,
            "workdir": workdir if a.keep else None,
        },
        "order": [],
        "targets": {},
    }
    if not a.smoke:
        results["meta"]["other_load"] = other_load()
    results["meta"]["sluice_workers"] = os.cpu_count()

    all_targets = [Direct(), Floor(3132), Squid(3130), Tinyproxy(3131), Sluice("sluice", 3128, False),
                   Sluice("sluice-full", 3129, True), SquidBump(3133), SluiceInspect(3134, prof["pbulk"], a.wrong_pins),
                   SluiceSessions("sluice-anon", 3135, None), SluiceSessions("sluice-sessions", 3136, prof["sessions"])]
    assert [t.name for t in all_targets] == TARGET_NAMES
    targets = [t for t in all_targets if (not a.only or t.name in a.only) and t.name not in a.skip]
    # direct TLS only beside an inspecting target (or on its own)
    if not any("tls" in t.families for t in targets if t.name != "direct") and len(targets) > 1:
        all_targets[0].families = ("plain",)
    results["order"] = [t.name for t in targets]
    T = results["targets"]
    failed = False
    problems = []

    # the price of entering the kernel here, in the same run as the table
    say("== one syscall's cost (bench/syscost.c)")
    sc = syscall_cost()
    results["machine"] = {"syscall_cost": sc}
    if "failed" in sc:
        failed = True
        problems.append(f"syscost: {sc['failed']}")
    else:
        say(f"  getppid {sc['getppid']['user_ns']:.0f} ns user + {sc['getppid']['sys_ns']:.0f} ns system; "
            f"recv (EAGAIN) {sc['recv_eagain']['user_ns']:.0f} + {sc['recv_eagain']['sys_ns']:.0f}")

    def on_term(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_term)

    try:
        make_bench_pki(workdir)
        origin = Proc("origin", [ORIGIN, "--listen", f"{ORIGIN_IP}:{ORIGIN_PORT}", "--decoy", f"{ORIGIN_IP}:{DECOY_PORT}",
                                 "--tls-listen", f"{ORIGIN_IP}:{TLS_PORT}", "--cert", PKI["cert"], "--key", PKI["key"],
                                 "--rogue", f"{ORIGIN_IP}:{ROGUE_PORT}", "--rogue-cert", PKI["rogue_cert"],
                                 "--rogue-key", PKI["rogue_key"], "--small-bytes", str(SMALL_BYTES)], workdir)
        wait_port(ORIGIN_IP, ORIGIN_PORT, origin)
        wait_port(ORIGIN_IP, TLS_PORT, origin)
        dns = Proc("dnsmasq", [DNSMASQ, "--keep-in-foreground", "--user=root", "--group=root", "--pid-file=",
                               "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--no-poll",
                               f"--listen-address={DNS_IP}", "--bind-interfaces", "--port=53",
                               f"--local-ttl={DNS_TTL}", "--local=/bench.test/", "--log-facility=-",
                               f"--host-record={NAME_TUNNEL},{ORIGIN_IP}", f"--host-record={NAME_HTTP},{ORIGIN_IP}"],
                   workdir)
        time.sleep(0.3)
        if not dns.alive():
            raise RuntimeError(f"dnsmasq exited: {dns.stderr_text()}")

        # every target is up at once (an idle proxy costs nothing) so that each
        # mode is measured on all of them back to back: a machine whose other
        # load changes over the run then skews the columns alike
        live = []
        for t in targets:
            rec = start_and_probe(t, workdir, results)
            if rec.get("reported"):
                live.append(t)
            else:
                failed = True
                problems.append(f"{t.name}: {rec.get('failed')}")
        # reload and memory of the sessions pair, while nothing else runs
        if "reload" in idle_steps and any("sess" in t.families for t in live):
            say("== reload (SIGHUP)")
        for t in live:
            if "reload" in idle_steps and "sess" in t.families:
                T[t.name]["reload"] = measure_reload(t, prof["reloads"])
        if "idle" in idle_steps and any("plain" in t.families for t in live):
            say("== idle tunnels (memory)")
        for t in live:
            if "idle" in idle_steps and "plain" in t.families:
                say(f"  {t.name}")
                T[t.name]["idle"] = measure_idle(t, prof, idle_n, first, origin.pid)
        if "iidle" in idle_steps and any("tls" in t.families for t in live):
            say("== idle inspected tunnels (memory)")
        for t in live:
            if "iidle" in idle_steps and "tls" in t.families:
                say(f"  {t.name}")
                T[t.name]["iidle"] = measure_idle(t, prof, idle_n, first, origin.pid, tls=True)
        for rnd in range(rounds):
            for group in plan_groups(plan):
                ons = [[t for t in live if g[4] in t.families] for g in group]
                if not any(ons):
                    continue
                say(f"== {' + '.join(g[0] for g, on in zip(group, ons) if on)}"
                    + (f", round {rnd + 1} of {rounds}" if rounds > 1 else ""))
                # a bulk run takes about a second and swings most from run to
                # run (direct the most): it is repeated, the targets (and the
                # bulk modes of one group) in turn
                # the sessions pair swaps its order every round, so neither
                # always runs first after another mode
                if group[0][4] == "sess" and rnd % 2:
                    ons = [on[::-1] for on in ons]
                for _ in range(prof["bulk_reps"] if group[0][1] == "bulk" else 1):
                    for (key, mode, args, lim, fam), t in ((g, t) for g, on in zip(group, ons) for t in on):
                        if fam in ("tls", "pin"):
                            measure(t, T[t.name], key,
                                    [mode, "--target", t.tls_target, "--timeout-ms", str(prof["timeout_ms"]),
                                     "--tls", "--ca", t.tls_ca] + args, lim, origin.pid, direct_port=TLS_PORT)
                            continue
                        tgt = t.http_target if mode == "http" else t.tunnel_target
                        measure(t, T[t.name], key,
                                [mode, "--target", tgt, "--timeout-ms", str(prof["timeout_ms"])] + args
                                + getattr(t, "loadgen_extra", []), lim, origin.pid)
        # with several rounds, each cell reports the round in which other
        # processes took the least CPU; bulk, the median of all its runs (all
        # runs stay in the JSON)
        for t in live:
            rec = T[t.name]
            for key, lst in rec.get("all_runs", {}).items():
                ok = [r for r in lst if r.get("ops")] or lst
                if key in BULK_KEYS:
                    ranked = sorted(ok, key=lambda r: r.get("mb_per_s") or 0)
                    rec["runs"][key] = ranked[(len(ranked) - 1) // 2]
                else:
                    rec["runs"][key] = min(ok, key=lambda r: r["other_cores"] if r.get("other_cores") is not None
                                           else 99)
        say("== stopping")
        for t in live:
            finish(t, T[t.name], workdir)
        for t in live:
            rec = T[t.name]
            # every mode must have produced a measurement
            for key, lst in rec.get("all_runs", {}).items():
                for r in lst:
                    if "failed" in r or not r.get("ops"):
                        failed = True
                        problems.append(f"{t.name} {key}: no measurement ({r.get('failed') or r.get('last_error')})")
                    if r.get("log_check") and not r["log_check"]["ok"]:
                        # a pinned run that was not pinned (or an unpinned one
                        # that was) measured something else
                        failed = True
                        problems.append(f"{t.name} {key}: its request line is wrong: {r['log_check'].get('why')}")
                    elif r.get("errors"):
                        problems.append(f"{t.name} {key}: {r['errors']} errors ({r.get('last_error')})")
            for ikey, fam in (("idle", "plain"), ("iidle", "tls")):
                if fam not in t.families or ikey not in idle_steps:
                    continue
                idle = rec.get(ikey, {})
                if not idle.get("steps") or not idle.get("n_reached"):
                    failed = True
                    problems.append(f"{t.name} {ikey}: no measurement "
                                    f"({idle.get('failed') or (idle.get('result') or {}).get('last_error')})")
                elif idle.get("n_reached", 0) < idle_n:
                    problems.append(f"{t.name} {ikey}: only {idle['n_reached']} of {idle_n} tunnels opened")
            if "sess" in t.families and "reload" in idle_steps and not (rec.get("reload") or {}).get("ok"):
                failed = True
                runs = (rec.get("reload") or {}).get("runs") or [{}]
                problems.append(f"{t.name}: reload did not say \"reloaded policy\" ({runs[-1].get('said')})")
            if t.name == "sluice-sessions" and rec.get("log"):
                # every tunnel is a connection of its own, session i mod n:
                # as many sessions as tunnels (up to n) must show in the log
                tunnels = sum(r.get("ops", 0) + r.get("ops_warmup", 0) for k, lst in rec.get("all_runs", {}).items()
                              if k.startswith("stunnel") for r in lst)
                seen = rec["log"].get("sessions_seen", 0)
                if seen < min(t.n_sessions, tunnels):
                    failed = True
                    problems.append(f"{t.name}: its log names {seen:,} sessions, after {tunnels:,} tunnels "
                                    f"spread over {t.n_sessions:,}")
                if rec["log"].get("lines_without_session"):
                    failed = True
                    problems.append(f"{t.name}: {rec['log']['lines_without_session']:,} allowed decisions "
                                    "without \"session\" in its log")
            ver = (rec.get("log") or {}).get("verify")
            if ver and ver.get("exit") != 0:
                problems.append(f"{t.name}: `sluice audit --verify` on its decision log: {ver.get('said')}")
            if (rec.get("log") or {}).get("not_json"):
                problems.append(f"{t.name}: {rec['log']['not_json']} decision log lines are not JSON")
            if rec.get("exit_code") not in (None, 0):
                problems.append(f"{t.name} exited {rec['exit_code']} on SIGTERM")
        origin.stop()
        dns.stop()
    except KeyboardInterrupt as e:
        print(f"bench: interrupted ({e})", file=sys.stderr)
        failed = True
        problems.append("interrupted")
    finally:
        stop_all()

    results["meta"]["loadavg_end"] = loadavg()
    results["problems"] = problems
    table = render_table(results, prof)
    itable = render_table(results, prof, "tls")
    plain_shown = bool(table)
    if itable:
        table = (table + "\n\n" if table else "") + itable
    footer = render_footer(results, prof, bool(itable), plain_shown)
    stable = render_sessions(results, prof)
    if stable:
        footer += "\n\n" + stable
    print()
    print(table)
    print()
    print(footer)
    if problems:
        print()
        print("Problems:")
        for p in problems:
            print(f"- {p}")
    results["table_markdown"] = table + "\n\n" + footer
    os.makedirs(os.path.dirname(out_json), exist_ok=True)
    with open(out_json, "w") as f:
        json.dump(results, f, indent=1, sort_keys=False)
        f.write("\n")
    say(f"raw results: {os.path.relpath(out_json, ROOT)}")
    if not a.smoke and not a.only and not a.skip and not a.mode and not a.no_readme and not failed:
        if update_readme(table + "\n\n" + footer):
            say("table written to bench/README.md")
    if a.keep:
        say(f"kept {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    if failed:
        print("bench: FAILED: " + "; ".join(p for p in problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
