"""Run sluice for a test: write its config and allowlist, start it, read the
listening port from its stderr, parse its decision log, reload and stop it."""

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer", "ThreadSanitizer")
LISTEN_RE = re.compile(r"sluice: listening on (\S+):(\d+)")
RELOAD_RE = re.compile(r"sluice: (reloaded policy|reload failed: .*)")
PROXY_ENV = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")


def binary():
    b = os.environ.get("SLUICE_BIN", "build/san/sluice")
    p = Path(b)
    return p if p.is_absolute() else REPO / p


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_ENV}
    env.update(extra)
    return env


# Variables that make a TLS client trust more (or other) CAs than the one a
# test gives it: the real clients run without them.
CA_ENV = ("GIT_SSL_CAINFO", "GIT_SSL_CAPATH", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
          "NODE_EXTRA_CA_CERTS", "NODE_TLS_REJECT_UNAUTHORIZED", "REQUESTS_CA_BUNDLE", "NIX_SSL_CERT_FILE",
          "npm_config_cafile", "npm_config_ca", "GIT_SSL_NO_VERIFY")


def client_env(**extra):
    """clean_env() without CA settings: a client trusts only what the test
    passes it."""
    drop = {c.lower() for c in CA_ENV}
    env = {k: v for k, v in clean_env().items() if k.lower() not in drop}
    env.update(extra)
    return env


def sanitizer_env():
    return clean_env(ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
                     UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")


class LogError(AssertionError):
    pass


def render_ini(sections):
    out = []
    for section, keys in sections.items():
        out.append(f"[{section}]")
        for key, value in keys.items():
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                if isinstance(v, bool):
                    v = "yes" if v else "no"
                out.append(f"{key} = {v}")
        out.append("")
    return "\n".join(out)


def default_sections(workdir):
    return {
        "proxy": {"listen": "127.0.0.1:0"},
        "policy": {"allowlist": str(workdir / "allowlist.txt")},
        "dns": {"server": "127.0.0.53:53"},
        "log": {"path": str(workdir / "decisions.log")},
    }


def merge(base, override):
    out = {s: dict(k) for s, k in base.items()}
    for section, keys in (override or {}).items():
        out.setdefault(section, {})
        for k, v in keys.items():
            if v is None:
                out[section].pop(k, None)
            else:
                out[section][k] = v
    return out


class Sluice:
    def __init__(self, workdir, allow=(), config=None, args=(), cwd="/", env=None, stdout_pipe=False):
        """env: extra environment variables; stdout_pipe: standard output is
        a pipe the test reads (or does not) through stdout_fd, rather than a
        file."""
        self.workdir = Path(workdir)
        self.cwd = cwd
        self.extra_env = dict(env or {})
        self.stdout_pipe = stdout_pipe
        self.stdout_fd = None
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.workdir / "sluice.ini"
        self.allowlist_path = self.workdir / "allowlist.txt"
        self.sections = merge(default_sections(self.workdir), config)
        self.log_path = Path(self.sections["log"]["path"]) if self.sections["log"].get("path") not in (None, "-") else None
        self.args = list(args)
        self.write_allowlist(allow)
        self.write_config(self.sections)
        self.proc = None
        self.stderr_lines = []
        self._cond = threading.Condition()
        self._reader = None
        self.listeners = []
        self.stopped = False
        self.returncode = None

    # --- files ----------------------------------------------------------
    def write_allowlist(self, lines):
        text = "".join(f"{l}\n" for l in lines)
        tmp = self.allowlist_path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.allowlist_path)

    def write_config(self, sections):
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(render_ini(sections))
        tmp.replace(self.config_path)

    # --- process ----------------------------------------------------------
    def start(self, timeout=15.0, listeners=1):
        b = binary()
        if not b.exists():
            raise AssertionError(f"sluice binary {b} does not exist (make build/san/sluice, or set SLUICE_BIN)")
        if self.stdout_pipe:
            self.stdout_path = None
            self._stdout = subprocess.PIPE
        else:
            self.stdout_path = self.workdir / "sluice.stdout"
            self._stdout = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen([str(b), "run", "-c", str(self.config_path), *self.args],
                                     stdin=subprocess.DEVNULL, stdout=self._stdout,
                                     stderr=subprocess.PIPE, env=self._env(),
                                     cwd=self.cwd)
        if self.stdout_pipe:
            self.stdout_fd = self.proc.stdout.fileno()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        start = 0
        for _ in range(listeners):
            m = self.wait_stderr(LISTEN_RE, start=start, timeout=timeout)
            self.listeners.append((m.group(1).strip("[]"), int(m.group(2))))
            start = self.last_stderr_index + 1
        self.port = self.listeners[0][1]
        return self

    def _env(self):
        """sanitizer_env(), with extra_env on top; ASAN_OPTIONS and
        UBSAN_OPTIONS given there are appended to the defaults."""
        env = sanitizer_env()
        for k, v in self.extra_env.items():
            env[k] = f"{env[k]}:{v}" if k in ("ASAN_OPTIONS", "UBSAN_OPTIONS") and k in env else v
        return env

    def rss(self):
        """sluice's resident set size in bytes (VmRSS)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS line")

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cond:
                self.stderr_lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self.stderr_lines.append(None)    # EOF marker
            self._cond.notify_all()

    @property
    def stderr(self):
        with self._cond:
            return "\n".join(l for l in self.stderr_lines if l is not None)

    def wait_stderr(self, regex, start=0, timeout=10.0):
        """Wait for a stderr line at index >= start matching regex."""
        if isinstance(regex, str):
            regex = re.compile(regex)
        deadline = time.monotonic() + timeout
        with self._cond:
            i = start
            while True:
                while i < len(self.stderr_lines):
                    line = self.stderr_lines[i]
                    if line is None:
                        raise AssertionError(f"sluice exited (status {self.proc.wait()}) before "
                                             f"printing /{regex.pattern}/; stderr:\n{self.stderr}")
                    m = regex.search(line)
                    if m:
                        self.last_stderr_index = i
                        return m
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"sluice did not print /{regex.pattern}/ within {timeout}s; "
                                         f"stderr:\n{self.stderr}")
                self._cond.wait(left)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def reload(self, timeout=10.0):
        """SIGHUP; wait for sluice to say how the reload went. Returns
        (ok, stderr line)."""
        with self._cond:
            start = len(self.stderr_lines)
        self.proc.send_signal(signal.SIGHUP)
        m = self.wait_stderr(RELOAD_RE, start=start, timeout=timeout)
        return m.group(1) == "reloaded policy", m.group(0)

    def wait_exit(self, timeout):
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"sluice did not exit within {timeout}s")
        self.stopped = True
        if self._reader:
            self._reader.join(5)
        if not self.stdout_pipe:
            self._stdout.close()
        return self.returncode

    def stop(self, timeout=20.0):
        """SIGTERM, wait, and require exit status 0."""
        if self.stopped:
            return self.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.wait_exit(timeout)
        assert rc == 0, f"sluice exited with status {rc}; stderr:\n{self.stderr}"
        return rc

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.wait_exit(10)

    def sanitizer_report(self):
        text = self.stderr
        if any(m in text for m in SANITIZER_MARKERS):
            return text
        return None

    # --- the decision log -------------------------------------------------
    def log_lines(self, complete=False):
        """Every line of the decision log, parsed. Each must be one JSON
        object; a trailing line without its newline is skipped unless
        complete=True, when it is an error."""
        if self.log_path is None or not self.log_path.exists():
            return []
        data = self.log_path.read_bytes()
        lines = data.split(b"\n")
        tail = lines.pop()
        if tail and complete:
            raise LogError(f"decision log does not end with a newline: {tail[:200]!r}")
        out = []
        for n, raw in enumerate(lines, 1):
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                raise LogError(f"{self.log_path}:{n}: not a JSON line ({e}): {raw[:300]!r}")
            if not isinstance(obj, dict):
                raise LogError(f"{self.log_path}:{n}: not a JSON object: {raw[:300]!r}")
            out.append(obj)
        return out

    def wait_log(self, pred, timeout=5.0, what="a matching log line"):
        deadline = time.monotonic() + timeout
        while True:
            for line in self.log_lines():
                if pred(line):
                    return line
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} in the decision log within {timeout}s; log:\n"
                                     + "\n".join(json.dumps(l) for l in self.log_lines()[-30:]))
            time.sleep(0.01)

    def wait_count(self, pred, n, timeout=10.0, what="lines"):
        """Wait until at least n log lines satisfy pred; return all lines."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.log_lines()
            have = sum(1 for l in lines if pred(l))
            if have >= n:
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(f"{have} of {n} {what} in the decision log after {timeout}s")
            time.sleep(0.05)

    def decision_for(self, client_port, timeout=5.0):
        """The decision line for the client connection from 127.0.0.1:client_port
        (the first one, or the only one)."""
        return self.wait_log(lambda l: l.get("event") == "decision"
                             and str(l.get("client", "")).endswith(f":{client_port}"),
                             timeout, f"decision line for client port {client_port}")

    def decisions_for(self, client_port):
        return [l for l in self.log_lines() if l.get("event") == "decision"
                and str(l.get("client", "")).endswith(f":{client_port}")]

    def close_for(self, conn_id, timeout=5.0):
        return self.wait_log(lambda l: l.get("event") == "close" and l.get("id") == conn_id,
                             timeout, f"close line for id {conn_id}")
