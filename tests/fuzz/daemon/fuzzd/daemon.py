"""One sluice process under test: its config, its coverage map, its stderr
and its decision log (read as it grows, the hash chain recomputed line by
line)."""

import hashlib
import json
import mmap
import os
import re
import signal
import struct
import subprocess
import time
from pathlib import Path

from . import net, rules, sess

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer", "ThreadSanitizer", "sluice: BUG", "Assertion `")
LISTEN_RE = re.compile(r"sluice: listening on (\S+):(\d+)")
COV_HEADER = 64
COV_SIZE = 1 << 20
_CHAIN_RE = re.compile(rb'(.*),"chain":"([0-9a-f]{64})"\}')

ALLOWLIST = f"""# tests/fuzz/daemon: what the fuzzer's model of the policy (checks.py) expects
canary.fuzz.test
*.ok.fuzz.test
*.ok.fuzz.test:{net.OWN_PUBLIC[1]}
*.ok.fuzz.test:{net.STALL[1]}
*.port.fuzz.test:8080
{net.LITERAL_V4}
[{net.LITERAL_V6}]
{net.OWN_PUBLIC[0]}:{net.OWN_PUBLIC[1]}
10.0.1.1
169.254.169.254
127.0.0.1
[fd00:ec2::254]
"""


def inspect_text(workdir, tls, pin_hold_kib=None):
    """[tls] and [credentials] for an inspecting gate: tls = (the gate's CA
    cert, its key, the origins' CA); pin_hold_kib: the model's unless the
    self-test breaks it."""
    ca_cert, ca_key, upstream = tls
    return f"""
[tls]
ca_cert = {ca_cert}
ca_key = {ca_key}
upstream_ca = {upstream}
leaf_days = 7
pin_hold_kib = {rules.PIN_HOLD_KIB if pin_hold_kib is None else pin_hold_kib}

[credentials]
file = {workdir}/credentials.txt
secret_dir = {workdir}/secrets
"""


def config_text(workdir, workers, timeouts):
    servers = "\n".join(f"server = {a}:{p}" for a, p in net.DNS_SERVERS)
    return f"""[proxy]
listen = 127.0.0.1:0
listen = {net.OWN_PUBLIC[0]}:{net.OWN_PUBLIC[1]}
workers = {workers}
max_clients = 4096
shutdown_grace_ms = 500

[policy]
allowlist = {workdir}/allowlist.txt
connect_ports = {", ".join(map(str, net.CONNECT_PORTS))}
http_ports = {", ".join(map(str, net.HTTP_PORTS))}

[dns]
{servers}
timeout_ms = {timeouts["dns"]}
min_ttl_s = 0
max_ttl_s = 2

[timeouts]
header_ms = {timeouts["header"]}
connect_ms = {timeouts["connect"]}
idle_ms = {timeouts["idle"]}

[log]
path = {workdir}/decisions.log
"""


class Coverage:
    """The edge-counter map shared with a coverage build (cov.c)."""

    def __init__(self, path):
        self.path = Path(path)
        with open(self.path, "wb") as f:
            f.truncate(COV_SIZE)
        self.f = open(self.path, "r+b")
        self.m = mmap.mmap(self.f.fileno(), COV_SIZE)

    @property
    def nguards(self):
        if self.m[:6] != b"SLCOV1":
            return 0
        return min(struct.unpack("<I", self.m[8:12])[0], COV_SIZE - COV_HEADER - 1)

    def reset(self):
        n = self.nguards
        if n:
            self.m[COV_HEADER:COV_HEADER + n + 1] = bytes(n + 1)

    def counters(self):
        n = self.nguards
        return bytes(self.m[COV_HEADER + 1:COV_HEADER + n + 1]) if n else b""

    def close(self):
        self.m.close()
        self.f.close()


class LogReader:
    """Reads the decision log as it grows. Every line must be a JSON object
    whose chain is the SHA-256 of the previous chain (the stream id at the
    start) and the line without its chain field (SPEC)."""

    def __init__(self, path):
        self.path = Path(path)
        self.off = 0
        self.prev = None
        self.lines = []
        self.errors = []
        self.leaks = []         # lines with the credential's secret in them
        self.secret = None
        self.tokens = set()     # session tokens and credentials (bytes): checks.py judges each hit
        self.token_hits = []    # (line number, token, line)
        self.partial = b""

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except FileNotFoundError:
            return []
        self.off += len(data)
        data = self.partial + data
        raw_lines = data.split(b"\n")
        self.partial = raw_lines.pop()
        new = []
        for raw in raw_lines:
            n = len(self.lines) + len(new) + 1
            if self.secret and self.secret in raw:
                self.leaks.append(f"decisions.log:{n} has the credential's secret: "
                                  f"{raw.replace(self.secret, b'<SECRET>')[:300]!r}")
            for t in self.tokens:
                if t in raw or t.replace(b"/", b"\\/") in raw:
                    self.token_hits.append((n, t, raw[:600]))
            try:
                obj = json.loads(raw.decode("utf-8"))
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
            except (UnicodeDecodeError, ValueError) as e:
                self.errors.append(f"decisions.log:{n}: not a JSON object ({e}): {raw[:300]!r}")
                continue
            m = _CHAIN_RE.fullmatch(raw)
            if self.prev is None:
                self.prev = str(obj.get("stream", "")).encode()
            if not m:
                self.errors.append(f"decisions.log:{n}: no chain field at the end: {raw[:300]!r}")
            elif hashlib.sha256(self.prev + m.group(1) + b"}").hexdigest() != m.group(2).decode():
                self.errors.append(f"decisions.log:{n}: chain does not verify: {raw[:300]!r}")
            else:
                self.prev = m.group(2)
            if obj.get("seq") != n:
                self.errors.append(f"decisions.log:{n}: seq {obj.get('seq')} where {n} was due")
            new.append(obj)
        self.lines += new
        return new


def sessions_text(workdir, require):
    return f"""
[sessions]
dir = {workdir}/sessions.d
require = {"yes" if require else "no"}
"""


class Daemon:
    def __init__(self, binary, workdir, workers=1, timeouts=None, coverage=True, allowlist=ALLOWLIST,
                 policy_extra="", tls=None, secret=None, rules_text=None, pin_hold_kib=None):
        """tls: (gate CA cert, its key, the origins' CA) to inspect, with
        rules.py's rules (or rules_text: the self-test's other ones) and
        credential (whose secret is `secret`); None for a gate that does
        not inspect."""
        self.allowlist = allowlist + ((rules_text or rules.ALLOWLIST) if tls else "")
        self.pin_hold_kib = pin_hold_kib
        self.policy_extra = policy_extra
        self.tls = tls
        self.secret = secret
        self.binary = Path(binary)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.workers = workers
        self.timeouts = timeouts or {"header": 300, "connect": 300, "idle": 300, "dns": 300}
        self.cov = Coverage(self.workdir / "coverage.map") if coverage else None
        self.proc = None
        self.port = None
        self.stderr_path = self.workdir / "sluice.stderr"
        self.stderr_off = 0
        self.log = None
        self.sessions = None        # the [sessions] the gate has now: (spec, canary token, breakage) or None

    def write_sessions(self, spec, canary_token, breakage=None):
        """The case's sessions as a [sessions] dir (spec None: no [sessions]
        at all), with the canaries' session. breakage (the self-test only)
        makes the gate differ from the model: "require_no" (require = no
        whatever the case says), "cross" (every session's list has every
        session zone), "hash" (each token_sha256 is of the token with "0"
        appended, which clients send as a wrong token)."""
        self.sessions = (spec, canary_token, breakage) if spec is not None else None
        d = self.workdir / "sessions.d"
        d.mkdir(exist_ok=True)
        for f in d.iterdir():
            f.unlink()
        if spec is None:
            return
        for s in spec.get("list", []) + [{"name": sess.CANARY_NAME, "token": canary_token, "zone": None}]:
            name = str(s["name"])
            token = s["token"] + ("0" if breakage == "hash" and s["zone"] is not None else "")
            text = f"[session]\ntoken_sha256 = {sess.token_sha256(token)}\n"
            if s.get("zone") is not None:
                allow = sess.session_allowlist(int(s["zone"]))
                if breakage == "cross":
                    allow += "".join(f"*.{z}\n" for z in sess.ZONES)
                (d / f"{name}.allow").write_text(allow)
                text += f"allowlist = {name}.allow\n"
                text += f"expires = {sess.EXPIRED if s.get('expired') else sess.LATER}\n"
            (d / f"{name}.ini").write_text(text)

    def _config_text(self):
        text = config_text(self.workdir, self.workers, self.timeouts).replace(
            "[dns]\n", self.policy_extra + "\n[dns]\n" if self.policy_extra else "[dns]\n")
        if self.tls:
            text += inspect_text(self.workdir, self.tls, self.pin_hold_kib)
        if self.sessions:
            spec, _, breakage = self.sessions
            text += sessions_text(self.workdir, bool(spec.get("require")) and breakage != "require_no")
        return text

    def reload(self, timeout=15.0):
        """SIGHUP with the config as it is now written; waits for the gate
        to say it reloaded. Returns None, or what went wrong."""
        (self.workdir / "sluice.ini").write_text(self._config_text())
        off = self.stderr_path.stat().st_size
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.stderr_path, "rb") as f:
                f.seek(off)
                text = f.read().decode(errors="replace")
            if "sluice: reloaded policy" in text:
                return None
            if "reload failed" in text:
                return text[-3000:]
            if self.proc.poll() is not None:
                return f"sluice exited {self.proc.returncode} on reload"
            time.sleep(0.005)
        return f"no reload within {timeout}s"

    def write_config(self):
        (self.workdir / "allowlist.txt").write_text(self.allowlist)
        text = self._config_text()
        if self.tls:
            (self.workdir / "credentials.txt").write_text(rules.CREDENTIALS)
            sd = self.workdir / "secrets"
            sd.mkdir(mode=0o700, exist_ok=True)
            f = sd / rules.CRED_NAME
            if f.exists():
                f.unlink()
            fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, (self.secret + "\n").encode())
            os.close(fd)
        (self.workdir / "sluice.ini").write_text(text)

    def check(self):
        """`sluice check` on the config: (exit status, output)."""
        self.write_config()
        env = {k: v for k, v in os.environ.items() if k != "SLUICE_COVERAGE_MAP"}
        env["ASAN_OPTIONS"] = "detect_leaks=0"
        r = subprocess.run([str(self.binary), "check", "-c", str(self.workdir / "sluice.ini")],
                           capture_output=True, text=True, env=env, timeout=60)
        return r.returncode, r.stdout + r.stderr

    def start(self, timeout=20.0):
        self.write_config()
        log_path = self.workdir / "decisions.log"
        if log_path.exists():
            log_path.unlink()
        self.log = LogReader(log_path)
        env = {k: v for k, v in os.environ.items()
               if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
        env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:symbolize=1:detect_stack_use_after_return=0"
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
        if self.cov:
            env["SLUICE_COVERAGE_MAP"] = str(self.cov.path)
        self.stderr_file = open(self.stderr_path, "wb")
        self.stderr_off = 0
        self.proc = subprocess.Popen([str(self.binary), "run", "-c", str(self.workdir / "sluice.ini")],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.stderr_file, env=env, cwd="/")
        deadline = time.monotonic() + timeout
        while True:
            text = self.stderr_path.read_text(errors="replace")
            m = LISTEN_RE.search(text)
            if m and m.group(1).strip("[]") == "127.0.0.1":
                self.port = int(m.group(2))
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"sluice exited {self.proc.returncode} at start:\n{text}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"sluice did not start within {timeout}s:\n{text}")
            time.sleep(0.02)
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr(self):
        return self.stderr_path.read_text(errors="replace")

    def new_stderr(self):
        with open(self.stderr_path, "rb") as f:
            f.seek(self.stderr_off)
            data = f.read()
        self.stderr_off += len(data)
        return data.decode(errors="replace")

    def stop(self, timeout=20.0):
        """SIGTERM; returns (exit status, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(10)
            rc = f"did not exit within {timeout}s after SIGTERM (killed, {rc})"
        self.stderr_file.close()
        return rc, self.stderr()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        try:
            self.stderr_file.close()
        except Exception:
            pass

    def audit_verify(self):
        """`sluice audit --verify` on the log as it is now: (ok, output)."""
        env = {k: v for k, v in os.environ.items() if k != "SLUICE_COVERAGE_MAP"}
        env["ASAN_OPTIONS"] = "detect_leaks=1"
        r = subprocess.run([str(self.binary), "audit", "--verify", str(self.workdir / "decisions.log")],
                           capture_output=True, text=True, env=env, timeout=120)
        return r.returncode == 0, (r.stdout + r.stderr).strip()


def sanitizer_report(text):
    return any(m in text for m in SANITIZER_MARKERS)


def first_frames(text, n=3):
    """The first frames of the first sanitizer report, as 'func file:line',
    then, for a use after free, where it was freed ('freed: ...')."""
    frames = _frames(text, n)
    i = text.find("freed by thread")
    if i >= 0:
        freed = _frames(text[i:], n + 1)[1:]    # frame 0 is free() itself
        if freed:
            frames.append("freed: " + " < ".join(freed))
    return frames


def _frames(text, n):
    frames = []
    for line in text.splitlines():
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+)", line)
        if m:
            where = m.group(2)
            where = where.split("/wt-fuzz-daemon/")[-1] if "/wt-fuzz-daemon/" in where else where
            frames.append(f"{m.group(1)} {os.path.basename(where) if where.startswith('/') else where}")
            if len(frames) >= n:
                break
    return frames
