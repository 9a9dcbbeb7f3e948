"""Sessions (SPEC part 2, "one gate, many sandboxes"): session files the
tests write themselves, Proxy-Authorization values, and reading a session's
own log stream.

A session is `DIR/NAME.ini` with `[session]`, `token_sha256` (hex SHA-256
of the token as the client sends it), `allowlist` (relative to DIR), and
optionally `log` and `expires` (YYYY-MM-DDTHH:MM:SSZ). Its allowlist is
written beside it as `NAME.allow`, which the gate skips as a session file
(not NAME.ini)."""

import base64
import hashlib
import json
import os
import secrets
import time
from pathlib import Path

REALM = 'Basic realm="sluice"'


def new_token():
    """A token like `sluice session new` makes: 16 random bytes, 32 hex."""
    return secrets.token_hex(16)


def token_sha256(token):
    return hashlib.sha256(token.encode()).hexdigest()


def basic(name, token):
    """The Proxy-Authorization value a client sends for http://NAME:TOKEN@gate."""
    return "Basic " + base64.b64encode(f"{name}:{token}".encode()).decode()


def auth(name, token):
    """[(header, value)] for client.connect(extra_headers=) and Conn.request(headers=)."""
    return [("Proxy-Authorization", basic(name, token))]


def rfc3339(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Session:
    def __init__(self, name, token, allow, log=None, expires=None):
        self.name, self.token, self.allow = name, token, list(allow)
        self.log, self.expires = log, expires

    @property
    def headers(self):
        return auth(self.name, self.token)

    def proxy_url(self, port):
        return f"http://{self.name}:{self.token}@127.0.0.1:{port}"


def write_session(sdir, name, token=None, allow=(), log=None, expires=None, extra=()):
    """Write sdir/NAME.allow and sdir/NAME.ini (atomically, as a deployment
    tool would: the gate never reads half a file). `log` is written as
    given (relative paths are the session dir's); `expires` is an epoch or
    a string. Returns the Session."""
    sdir = Path(sdir)
    sdir.mkdir(parents=True, exist_ok=True)
    token = token or new_token()
    _atomic(sdir / f"{name}.allow", "".join(f"{l}\n" for l in allow))
    lines = ["[session]", f"token_sha256 = {token_sha256(token)}", f"allowlist = {name}.allow"]
    if log is not None:
        lines.append(f"log = {log}")
    if expires is not None:
        lines.append(f"expires = {expires if isinstance(expires, str) else rfc3339(expires)}")
    lines += list(extra)
    _atomic(sdir / f"{name}.ini", "\n".join(lines) + "\n")
    return Session(name, token, allow, log, expires)


def remove_session(sdir, name):
    os.unlink(Path(sdir) / f"{name}.ini")


def _atomic(path, text):
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def session_config(sdir, require=True, extra=None):
    """The [sessions] section for the `sluice` factory's config."""
    cfg = {"sessions": {"dir": str(sdir), "require": "yes" if require else "no"}}
    for section, keys in (extra or {}).items():
        cfg.setdefault(section, {}).update(keys)
    return cfg


def read_jsonl(path, complete=False):
    """Every line of a log file (a session's own stream), each one JSON
    object; a trailing partial line is skipped unless complete=True."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()
    if tail and complete:
        raise AssertionError(f"{path} does not end with a newline: {tail[:200]!r}")
    out = []
    for n, raw in enumerate(lines, 1):
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise AssertionError(f"{path}:{n}: not a JSON line ({e}): {raw[:300]!r}")
        if not isinstance(obj, dict):
            raise AssertionError(f"{path}:{n}: not a JSON object: {raw[:300]!r}")
        out.append(obj)
    return out


def wait_jsonl(path, pred, timeout=5.0, what="a matching line"):
    deadline = time.monotonic() + timeout
    while True:
        for line in read_jsonl(path):
            if pred(line):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in {path} within {timeout}s; it has:\n"
                                 + "\n".join(json.dumps(l) for l in read_jsonl(path)[-30:]))
        time.sleep(0.02)


def assert_auth_refused(resp, reason):
    """A 407 as SPEC and the lead's decisions say: Proxy-Authenticate
    `Basic realm="sluice"`, and a refusal like every other (Sluice-Decision,
    text/plain body naming the reason, Connection: close)."""
    from .checks import assert_refused
    assert_refused(resp, 407, reason)
    got = resp.header_all("Proxy-Authenticate")
    assert got == [REALM], f"Proxy-Authenticate is {got!r}, expected [{REALM!r}]: {resp!r}"


def metrics(admin_port):
    """{(sample name, ((label, value), ...)): value} from /metrics, parsed
    with prometheus_client's strict parser."""
    import http.client
    from prometheus_client.parser import text_string_to_metric_families
    c = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=10)
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    assert r.status == 200, (r.status, body[:300])
    samples = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, body


def session_counts(samples, name="sluice_session_decisions_total"):
    """{(session, decision): value} of the per-session counter."""
    out = {}
    for (sample, labels), v in samples.items():
        if sample == name:
            d = dict(labels)
            out[(d.get("session"), d.get("decision"))] = v
    return out


def tls_through_as(port, host, ca, headers, alpn=("http/1.1",), timeout=15.0):
    """tlsclient.tls_through with credentials on the CONNECT: (TLS socket,
    Conn over it, the raw tunnel Conn). The 200 is required."""
    from .client import Conn, connect
    from .tlsclient import context
    resp, raw = connect(port, f"{host}:443", timeout=timeout, extra_headers=headers)
    assert resp.status == 200, f"CONNECT {host}:443 with {headers[0][0] if headers else 'no credentials'} got {resp!r}"
    tsock = context(ca, alpn).wrap_socket(raw.sock, server_hostname=host)
    return tsock, Conn.wrap(tsock), raw


def start_gate(factory, tmp_path, sessions, allow=(), require=True, config=None, name="gate"):
    """Write the sessions ({name: allowlist lines, or write_session's
    keywords}) under tmp_path/sessions.d and start a gate with the factory
    (`sluice` or `sluice_inspecting`), [sessions] dir there. Returns
    (gate, {name: Session}, dir)."""
    sdir = Path(tmp_path) / "sessions.d"
    sdir.mkdir(exist_ok=True)
    made = {}
    for sname, spec in sessions.items():
        kw = spec if isinstance(spec, dict) else {"allow": spec}
        made[sname] = write_session(sdir, sname, **kw)
    s = factory(allow=allow, config=session_config(sdir, require, config), name=name)
    return s, made, sdir
