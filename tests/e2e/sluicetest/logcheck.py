"""Checks that a decision log lost nothing: refusals a client saw, each
with its one log line, and the hash chain recomputed independently."""

import hashlib
import json
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from .client import Closed, Conn
from .proc import sanitizer_env


def refused(port, i):
    """One request for a name not on the allowlist (denied-I.test). Returns
    what the client saw: (client port, status, Sluice-Decision reason,
    host, seconds); status None if no answer came."""
    host = f"denied-{i}.test"
    t0 = time.monotonic()
    with Conn(port, timeout=20) as c:
        try:
            resp = c.request("GET", f"http://{host}/")
        except (Closed, OSError) as e:
            return (c.local_port, None, repr(e), host, time.monotonic() - t0)
        d = resp.decision
        return (c.local_port, resp.status, d[1] if d else None, host, time.monotonic() - t0)


def refuse_many(port, start, n, concurrency=10):
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda i: refused(port, i), range(start, start + n)))


def assert_answered(results, within=5.0):
    """Each a refusal, 403 not_allowlisted or 503 log_unavailable, in time."""
    for port, status, reason, host, secs in results:
        assert (status, reason) in ((403, "not_allowlisted"), (503, "log_unavailable")), \
            f"client port {port} ({host}): {status} {reason}"
        assert secs < within, f"client port {port} ({host}) waited {secs:.1f} s for its answer"


def parse(data):
    assert data.endswith(b"\n"), f"the log does not end with a newline: {data[-200:]!r}"
    return [json.loads(l) for l in data.split(b"\n")[:-1]]


def assert_chain(files, sluice_bin):
    """The log files (in order) chain: seq 1, 2, 3... with no gap; each line's
    SHA-256 recomputed with hashlib; a later file's first line continues
    from the last of the one before; and `sluice audit --verify` agrees.
    Returns every line, parsed."""
    out = []
    prev = None
    for f in files:
        data = f.read_bytes()
        lines = parse(data)
        if prev is None:
            prev = lines[0]["stream"].encode()
        else:
            assert lines[0].get("continues_seq") == out[-1]["seq"], (lines[0], out[-1])
            assert lines[0].get("continues_chain") == out[-1]["chain"], (lines[0], out[-1])
        for raw in data.split(b"\n")[:-1]:
            m = re.fullmatch(rb'(.*),"chain":"([0-9a-f]{64})"\}', raw)
            assert m, raw
            assert hashlib.sha256(prev + m.group(1) + b"}").hexdigest() == m.group(2).decode(), raw
            prev = m.group(2)
        out += lines
    assert [l["seq"] for l in out] == list(range(1, len(out) + 1)), "a gap or a repeat in seq"
    r = subprocess.run([str(sluice_bin), "audit", "--verify", *map(str, files)],
                       capture_output=True, env=sanitizer_env(), timeout=120)
    assert r.returncode == 0, (r.stdout + r.stderr).decode(errors="replace")
    return out


def assert_each_answer_logged_once(results, lines):
    """Every refusal a client got has its decision line, once; and no deny
    line is there for a request the test did not make."""
    # A 503 log_unavailable names the host when the request was read
    # (decided while failing), none when refused at accept: it is known by
    # the client's port alone.
    def key(port, reason, host):
        return (port, reason, host if reason != "log_unavailable" else "")

    logged = {}
    for l in lines:
        if l["event"] == "decision" and l["decision"] == "deny":
            k = key(int(l["client"].rsplit(":", 1)[1]), l["reason"], l["host"])
            logged[k] = logged.get(k, 0) + 1
    answered = {}
    for port, status, reason, host, _ in results:
        k = key(port, reason, host)
        answered[k] = answered.get(k, 0) + 1
    missing = [k for k in answered if logged.get(k, 0) < answered[k]]
    assert not missing, f"{len(missing)} answered refusals have no log line, e.g. {missing[:5]}"
    extra = [k for k, n in logged.items() if n > answered.get(k, 0)]
    assert not extra, f"{len(extra)} deny lines that no answer accounts for, e.g. {extra[:5]}"
