"""`sluice audit` on the logs a real gate writes: the summary adds up to what
was sent, --suggest output fed back into the allowlist lets the refused
requests through, and --verify accepts the log, across a SIGUSR1 rotation,
and names the line for each kind of tampering."""

import gzip
import hashlib
import json
import os
import re
import signal
import subprocess
import time

import pytest

from sluicetest.checks import STANDARD_ALLOW
from sluicetest.client import Conn, connect, echo_both_ways
from sluicetest.pattern import pattern
from sluicetest.proc import SANITIZER_MARKERS, sanitizer_env


def audit(sluice_bin, *args, timeout=120):
    """Run `sluice audit ARGS`; fail on a sanitizer report."""
    r = subprocess.run([str(sluice_bin), "audit", *map(str, args)], capture_output=True,
                       env=sanitizer_env(), timeout=timeout)
    err = r.stderr.decode("utf-8", "replace")
    assert not any(m in err for m in SANITIZER_MARKERS), f"sanitizer report from audit:\n{err}"
    return r.returncode, r.stdout.decode("utf-8", "replace"), err


def tunnel(s, target, payload):
    """CONNECT to an echo service, send payload, read it back; close."""
    resp, conn = connect(s.port, target)
    assert resp.status == 200, resp
    assert echo_both_ways(conn.sock, payload) == payload
    conn.close()
    return conn.local_port


def refused(s, target):
    resp, conn = connect(s.port, target)
    conn.close()
    assert resp.status in (403, 502, 504), resp
    return resp.decision[1] if resp.decision else None


def mixed_traffic(s):
    """Three echo tunnels and four refusals. Returns what was sent."""
    sizes = [1000, 23456, 77]
    for i, n in enumerate(sizes):
        tunnel(s, "origin.test:9000", pattern(n, seed=i))
    assert refused(s, "denied.test:443") == "not_allowlisted"
    assert refused(s, "denied.test:443") == "not_allowlisted"
    assert refused(s, "origin.test:8443") == "port_not_allowed"
    with Conn(s.port) as c:
        assert c.request("GET", "http://private.test/").status == 403
    s.wait_count(lambda l: l.get("event") == "close", len(sizes), what="close lines")
    return sizes


def test_summary_json_totals_equal_what_was_sent(sluice, sluice_bin):
    s = sluice(allow=STANDARD_ALLOW)
    sizes = mixed_traffic(s)
    s.stop()
    rc, out, err = audit(sluice_bin, "--summary", "--json", s.log_path)
    assert rc == 0, err
    j = json.loads(out)
    t = j["totals"]
    assert t["requests"] == len(sizes) + 4
    assert t["allowed"] == len(sizes)
    assert t["denied"] == 4
    assert t["bytes_up"] == sum(sizes)
    assert t["bytes_down"] == sum(sizes)
    assert t["closes"] == len(sizes)
    assert j["clients"] == 1
    assert j["lines"] == len(s.log_lines(complete=True))
    assert j["malformed_lines"] == 0 and j["unmatched_closes"] == 0
    hosts = {(h["host"], h["port"]): h for h in j["hosts"]}
    o = hosts[("origin.test", 9000)]
    assert (o["allowed"], o["denied"], o["bytes_up"], o["bytes_down"]) == (3, 0, sum(sizes), sum(sizes))
    assert o["reasons"] == {"allowlisted": 3}
    assert hosts[("denied.test", 443)]["reasons"] == {"not_allowlisted": 2}
    assert hosts[("origin.test", 8443)]["reasons"] == {"port_not_allowed": 1}
    assert hosts[("private.test", 80)]["reasons"] == {"non_public_address": 1}
    lines = s.log_lines()
    assert j["from"] == lines[0]["ts"] and j["to"] == max(l["ts"] for l in lines)

    # --denied: most frequent first; the table names the same
    rc, out, err = audit(sluice_bin, "--denied", "--json", s.log_path)
    assert rc == 0, err
    d = json.loads(out)["denied"]
    assert (d[0]["host"], d[0]["port"], d[0]["reason"], d[0]["count"]) == \
        ("denied.test", 443, "not_allowlisted", 2)
    assert {(r["host"], r["reason"]) for r in d[1:]} == \
        {("origin.test", "port_not_allowed"), ("private.test", "non_public_address")}
    rc, out, err = audit(sluice_bin, s.log_path)
    assert rc == 0, err
    assert f"{len(sizes) + 4} requests: {len(sizes)} allowed, 4 denied; 1 client" in out


def test_suggest_appended_to_the_allowlist_and_reloaded_lets_the_refused_requests_pass(sluice, sluice_bin):
    s = sluice(allow=["origin.test:9000", "private.test:9000"])
    assert refused(s, "origin2.test:9000") == "not_allowlisted"
    assert refused(s, "origin.test:8080") == "port_not_allowed"
    assert refused(s, "[2c0f:fff0::1]:9000") == "not_allowlisted"
    assert refused(s, "private.test:9000") == "non_public_address"
    with Conn(s.port) as c:
        r = c.request("GET", "http://origin2.test/bytes/10")
        assert r.status == 403 and r.decision == ("deny", "not_allowlisted"), r

    rc, out, err = audit(sluice_bin, "--suggest", s.log_path)
    assert rc == 0, err
    entries = [l.split("#")[0].strip() for l in out.splitlines() if l.split("#")[0].strip()]
    assert sorted(entries) == sorted(["origin2.test:9000", "origin.test:8080", "[2c0f:fff0::1]:9000",
                                      "origin2.test"]), out
    for line in out.splitlines():
        if not line.startswith("#"):
            assert "#" in line and re.search(r"# \d+ requests?, (not_allowlisted|port_not_allowed)", line), line
            assert "private" not in line, line

    s.write_allowlist(["origin.test:9000", "private.test:9000"] + out.splitlines())
    ok, line = s.reload()
    assert ok, line
    tunnel(s, "origin2.test:9000", b"now allowed")
    resp, conn = connect(s.port, "origin.test:8080")     # an HTTP origin: the tunnel opens
    assert resp.status == 200, resp
    conn.close()
    tunnel(s, "[2c0f:fff0::1]:9000", b"v6 too")
    with Conn(s.port) as c:
        r = c.request("GET", "http://origin2.test/bytes/10")
        assert r.status == 200, r
    assert refused(s, "private.test:9000") == "non_public_address"

    # nothing left to suggest: each was allowed after it was refused
    rc, out, err = audit(sluice_bin, "--suggest", "--json", s.log_path)
    assert rc == 0, err
    assert json.loads(out)["suggestions"] == []


def _decision(i, method, host, port, reason):
    return json.dumps({"ts": f"2026-05-01T10:00:{i:02d}.000000Z", "event": "decision",
                       "id": f"{i:016x}", "client": "127.0.0.1:40000", "method": method,
                       "host": host, "port": port, "decision": "deny", "reason": reason})


def test_suggest_on_an_old_log_never_proposes_a_non_public_address(sluice_bin, tmp_path):
    """A log written by hand, as gates wrote it before non-public IP literals
    were refused ahead of the allowlist: they appear as not_allowlisted. No
    gate runs; audit only reads the file."""
    rows = [
        ("GET", "169.254.169.254", 80, "not_allowlisted"),       # cloud metadata
        ("GET", "169.254.169.254", 80, "not_allowlisted"),
        ("CONNECT", "fd00:ec2::254", 443, "not_allowlisted"),    # AWS metadata, IPv6
        ("CONNECT", "168.63.129.16", 443, "not_allowlisted"),    # Azure
        ("CONNECT", "10.20.0.5", 443, "not_allowlisted"),        # a private mirror
        ("GET", "192.168.1.1", 8080, "port_not_allowed"),
        ("CONNECT", "::1", 443, "not_allowlisted"),
        ("CONNECT", "11.0.0.9", 443, "not_allowlisted"),         # public: suggested
        ("CONNECT", "registry.example", 443, "not_allowlisted"),
    ]
    log = tmp_path / "old.log"
    log.write_text("".join(_decision(i, *r) + "\n" for i, r in enumerate(rows)))

    rc, out, err = audit(sluice_bin, "--suggest", log)
    assert rc == 0 and err == "", err
    entries = [l.split("#")[0].strip() for l in out.splitlines() if l.split("#")[0].strip()]
    assert sorted(entries) == ["11.0.0.9", "registry.example"], out
    for meta in ("169.254.169.254", "fd00:ec2::254", "168.63.129.16"):
        assert meta not in out, out
    notes = {l.split(" (")[0]: l for l in out.splitlines() if l.startswith("# not suggested: ")}
    for dest in ("10.20.0.5:443", "192.168.1.1:8080", "[::1]:443"):
        note = notes.get("# not suggested: " + dest)
        assert note and "not a public address" in note and "allow_cidr" in note, out

    rc, out, err = audit(sluice_bin, "--suggest", "--json", log)
    assert rc == 0, err
    j = json.loads(out)
    assert sorted(s["line"] for s in j["suggestions"]) == ["11.0.0.9", "registry.example"]
    assert {(k["host"], k["port"]) for k in j["skipped"]} == {
        ("10.20.0.5", 443), ("192.168.1.1", 8080), ("::1", 443)}, j["skipped"]
    assert all("allow_cidr" in k["why"] for k in j["skipped"]), j["skipped"]


def _open_positions(pid, path):
    """Read offsets of the descriptors process pid has open on path."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != str(path):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                out.append(int(re.search(r"^pos:\s*(\d+)", f.read(), re.M).group(1)))
        except (OSError, AttributeError):
            continue
    return out


def wait_open(p, path, timeout=15.0):
    """Wait until process p has path open."""
    deadline = time.monotonic() + timeout
    while not _open_positions(p.pid, path):
        assert p.poll() is None, f"audit exited early: {p.communicate()}"
        assert time.monotonic() < deadline, f"audit did not open {path}"
        time.sleep(0.02)


def wait_caught_up(pid, path, timeout=15.0):
    """Wait until process pid has path open and has read it to its end."""
    size = path.stat().st_size
    deadline = time.monotonic() + timeout
    while size not in _open_positions(pid, path):
        assert time.monotonic() < deadline, f"audit --follow did not read {path} to its end"
        time.sleep(0.05)


def _run_for_verify(s):
    tunnel(s, "origin.test:9000", b"a" * 500)
    for target in ("denied.test:443", "origin.test:8443", "denied.test:443"):
        refused(s, target)
    tunnel(s, "origin.test:9000", b"b" * 1500)
    s.wait_count(lambda l: l.get("event") == "close", 2, what="close lines")


def _ok_line(out, n, stream):
    return out == f"ok: {n} lines, stream {stream}\n"


TAMPERING = ["edited", "deleted", "swapped", "inserted", "truncated"]


@pytest.mark.parametrize("kind", TAMPERING)
def test_verify_passes_on_the_real_log_and_names_the_tampered_line(sluice, sluice_bin, tmp_path, kind):
    s = sluice(allow=STANDARD_ALLOW)
    _run_for_verify(s)
    s.stop()
    lines = s.log_lines(complete=True)
    rc, out, err = audit(sluice_bin, "--verify", s.log_path)
    assert rc == 0, err
    assert _ok_line(out, len(lines), lines[0]["stream"]), out

    raw = s.log_path.read_bytes().split(b"\n")[:-1]
    assert len(raw) >= 7
    tail = b"\n"
    if kind == "edited":
        k = next(i for i, l in enumerate(raw) if b'"event":"close"' in l)
        raw[k] = re.sub(rb'"bytes_up":(\d+)', lambda m: b'"bytes_up":%d' % (int(m.group(1)) + 1), raw[k])
        bad, what = k + 1, "chain mismatch"
    elif kind == "deleted":
        del raw[3]
        bad, what = 4, "seq 5 follows seq 3"
    elif kind == "swapped":
        raw[2], raw[3] = raw[3], raw[2]
        bad, what = 3, "seq 4 follows seq 2"
    elif kind == "inserted":
        raw.insert(4, raw[1])
        bad, what = 5, "seq 2 follows seq 4"
    else:
        raw[-1] = raw[-1][: len(raw[-1]) // 2]
        tail = b""
        bad, what = len(raw), "last line is incomplete (truncated)"
    tampered = tmp_path / f"{kind}.log"
    tampered.write_bytes(b"\n".join(raw) + tail)
    rc, out, err = audit(sluice_bin, "--verify", tampered)
    assert rc == 1, (out, err)
    assert err.startswith(f"{tampered}:{bad}: "), err
    assert what in err, err
    assert "ok:" not in out

    rc, out, err = audit(sluice_bin, "--verify", "--json", tampered)
    assert rc == 1
    j = json.loads(out)
    assert j["ok"] is False and j["line"] == bad and j["file"] == str(tampered), j


def test_verify_across_a_log_rotated_with_sigusr1(sluice, sluice_bin, tmp_path):
    s = sluice(allow=STANDARD_ALLOW)
    _run_for_verify(s)
    rotated = s.log_path.with_suffix(".1")
    s.log_path.rename(rotated)
    s.signal(signal.SIGUSR1)
    deadline = time.monotonic() + 5
    while not (s.log_path.exists() and s.log_lines()):
        refused(s, "denied.test:443")
        assert time.monotonic() < deadline, "no new log file after SIGUSR1"
    _run_for_verify(s)
    s.stop()
    old = [json.loads(l) for l in rotated.read_bytes().splitlines()]
    new = s.log_lines(complete=True)
    assert "continues_seq" in new[0], new[0]
    total = len(old) + len(new)
    stream = old[0]["stream"]

    for files in ([rotated, s.log_path], [s.log_path, rotated]):
        rc, out, err = audit(sluice_bin, "--verify", *files)
        assert rc == 0, err
        assert _ok_line(out, total, stream), out

    # logrotate's compress: the older file gzip'd, read as is
    gz = tmp_path / "decisions.log.1.gz"
    gz.write_bytes(gzip.compress(rotated.read_bytes()))
    rc, out, err = audit(sluice_bin, "--verify", s.log_path, gz)
    assert rc == 0, err
    assert _ok_line(out, total, stream), out
    rc, out, err = audit(sluice_bin, "--summary", "--json", gz, s.log_path)
    assert rc == 0, err
    j = json.loads(out)
    assert j["lines"] == total and j["unmatched_closes"] == 0
    assert j["totals"]["closes"] == 4

    # the newer file alone: checked from where it starts, and says so
    rc, out, err = audit(sluice_bin, "--verify", s.log_path)
    assert rc == 0, err
    assert f"ok: {len(new)} lines, stream {stream} (seq {new[0]['seq']}.." in out

    # the line that carries the continuation deleted: named in the new file
    raw = s.log_path.read_bytes().split(b"\n")
    cut = tmp_path / "decisions.log"
    cut.write_bytes(b"\n".join(raw[1:]))
    rc, out, err = audit(sluice_bin, "--verify", rotated, cut)
    assert rc == 1, out
    assert err.startswith(f"{cut}:1: seq {new[1]['seq']} follows seq {old[-1]['seq']}"), err


def test_follow_verifies_a_growing_log_across_rotation(sluice, sluice_bin):
    s = sluice(allow=STANDARD_ALLOW)
    refused(s, "denied.test:443")      # a refusal's line is on disk before its reply
    p = subprocess.Popen([str(sluice_bin), "audit", "--verify", "--follow", str(s.log_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sanitizer_env())
    try:
        wait_open(p, s.log_path)
        _run_for_verify(s)
        s.log_path.rename(s.log_path.with_suffix(".1"))
        s.signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while not (s.log_path.exists() and s.log_lines()):
            refused(s, "denied.test:443")
            assert time.monotonic() < deadline, "no new log file after SIGUSR1"
        _run_for_verify(s)
        s.stop()
        total = len(s.log_lines()) + len(s.log_path.with_suffix(".1").read_bytes().splitlines())
        wait_caught_up(p.pid, s.log_path)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    err = err.decode("utf-8", "replace")
    assert not any(m in err for m in SANITIZER_MARKERS), err
    assert p.returncode == 0, err
    assert out.decode() == f"ok: {total} lines, stream {s.log_lines()[0]['stream']}\n"


# ---- inspected tunnels: request lines, in logs the test writes itself ----

class ChainedLog:
    """Writes a decision log as SPEC says a gate does: one JSON object a
    line, `seq` 1, 2, 3..., the first line with `stream`, each line's
    `chain` the SHA-256 of the previous chain (the stream id for the first)
    and the line as written without its chain field."""

    def __init__(self, path, stream="00112233445566778899aabbccddeeff"):
        self.path, self.stream, self.seq, self.prev, self.n = path, stream, 0, stream, 0
        self.f = open(path, "w", encoding="utf-8", newline="\n")

    def put(self, **fields):
        self.n += 1
        fields.setdefault("ts", f"2026-12-02T09:{self.n // 60:02d}:{self.n % 60:02d}.000000Z")
        if self.seq == 0:
            fields["stream"] = self.stream
        self.seq += 1
        fields["seq"] = self.seq
        text = json.dumps(fields, separators=(",", ":"))   # ASCII: every other character escaped
        chain = hashlib.sha256((self.prev + text).encode()).hexdigest()
        self.f.write(text[:-1] + f',"chain":"{chain}"}}\n')
        self.prev = chain

    def tunnel(self, tid, host, port=443):
        self.put(event="decision", id=tid, client="127.0.0.1:40000", method="CONNECT", host=host, port=port,
                 decision="allow", reason="inspected", rule="allow.txt:1", addr="11.0.0.1")

    def request(self, tid, n, method, host, path, allow, reason, credential=None):
        f = dict(event="request", id=tid, n=n, method=method, host=host, path=path,
                 decision="allow" if allow else "deny", reason=reason)
        if allow:
            f["rule"] = "allow.txt:4"
        if credential:
            f["credential"] = credential
        f.update(status=200 if allow else 403, bytes_up=311, bytes_down=1830, duration_ms=41.2)
        self.put(**f)

    def close_line(self, tid):
        self.put(event="close", id=tid, bytes_up=1000, bytes_down=5000, duration_ms=99.5, end="client_eof")

    def close(self):
        self.f.close()


HOSTILE_PATHS = [
    "/\x1b]0;pwned\x07/x",          # OSC: sets a terminal's title
    "/\x1b[2J\x1b[H/clear/all",      # clears the screen
    "/new\nline/\r\n/x",             # a newline must not make a report line
    "/nul\x00/x",
    "/lone\ud800/surrogate",          # written as the escape \ud800: not UTF-8
    "/caf\u00e9/x",
    "/%ff%fe/x",
    "/star*/x/y",
    "/" + "a" * 5000,                 # longer than the gate ever logs
    "/deep" * 1500,
]


def _terminal_safe(text):
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) >= 0x7f]
    assert not bad, f"bytes that could drive a terminal: {bad[:5]!r}"


def _inspected_log(path):
    log = ChainedLog(path)
    log.tunnel("t1", "registry.test")
    log.request("t1", 1, "GET", "registry.test", "/is-number", True, "rule", "npm")
    log.request("t1", 2, "GET", "registry.test", "/is-number/-/is-number-7.0.0.tgz", True, "rule", "npm")
    log.request("t1", 3, "PUT", "registry.test", "/is-number", False, "rule_not_matched")
    log.request("t1", 4, "GET", "registry.test", "/repos/acme/widgets", False, "rule_not_matched")
    log.request("t1", 5, "GET", "registry.test", "/repos/acme/gadgets/issues", False, "rule_not_matched")
    log.request("t1", 6, "GET", "registry.test", "/a/%2e%2e/b", False, "bad_request")
    for i, p in enumerate(HOSTILE_PATHS):
        log.request("t1", 10 + i, "GET", "registry.test", p, False, "rule_not_matched")
    log.close_line("t1")
    log.tunnel("t2", "api.test", 8443)
    log.request("t2", 1, "GET", "api.test", "/user", False, "rule_not_matched")
    log.close_line("t2")
    log.close()
    return log


def test_audit_reads_request_lines_and_suggests_request_rules(sluice_bin, tmp_path):
    path = tmp_path / "inspected.log"
    log = _inspected_log(path)

    rc, out, err = audit(sluice_bin, "--verify", path)
    assert rc == 0, err
    assert out == f"ok: {log.seq} lines, stream {log.stream}\n"

    rc, out, err = audit(sluice_bin, "--summary", "--json", path)
    assert rc == 0 and err == "", err
    j = json.loads(out)
    assert j["totals"]["inspected_requests"] == 6 + len(HOSTILE_PATHS) + 1
    assert j["malformed_lines"] == 0
    rows = {(r["host"], r["port"], r["method"], r["path"]): r for r in j["inspected"]}
    assert rows[("registry.test", 443, "GET", "/is-number")]["credentials"] == ["npm"]
    assert rows[("registry.test", 443, "GET", "/repos/acme/*")]["denied"] == 2
    assert rows[("registry.test", 443, "PUT", "/is-number")]["denied"] == 1
    assert rows[("registry.test", 443, "GET", "/\x1b]0;pwned\x07/x")]["denied"] == 1   # exact in JSON
    assert rows[("registry.test", 443, "GET", "/deep/deep/*")]["denied"] == 1
    assert ("api.test", 8443, "GET", "/user") in rows
    reg = next(h for h in j["hosts"] if (h["host"], h["port"]) == ("registry.test", 443))
    assert reg["reasons"]["rule_not_matched"] == 3 + len(HOSTILE_PATHS)
    assert reg["reasons"]["inspected"] == 1

    for mode in ("--summary", "--denied", "--suggest"):
        rc, out, err = audit(sluice_bin, mode, path)
        assert rc == 0, err
        _terminal_safe(out)
        _terminal_safe(err)
    rc, out, err = audit(sluice_bin, "--summary", path)
    table = out[out.index("INSPECTED HOST:PORT"):]
    assert len([l for l in table.splitlines() if l.startswith(("registry.test:443 ", "api.test:8443 "))]) \
        == len(j["inspected"])

    rc, out, err = audit(sluice_bin, "--suggest", path)
    lines = [l.split("#")[0].strip() for l in out.splitlines() if not l.startswith("#")]
    assert sorted(lines) == sorted([
        "GET registry.test/repos/acme/*",
        "PUT registry.test/is-number",
        "GET registry.test/%ff%fe/x",
        "GET registry.test/star*",
        "GET registry.test/deep/deep/*",
        "GET api.test:8443/user",
    ]), out
    for l in lines:
        assert re.fullmatch(r"[A-Z]+ [a-z0-9.:-]+/[A-Za-z0-9\-._~!$&'()+,;=:@/%]*\*?", l), l
    assert "npm" not in out and "%2e" not in out
    rc, out, err = audit(sluice_bin, "--suggest", "--json", path)
    assert rc == 0, err
    sug = json.loads(out)["suggestions"]
    assert all(s["rule"] and set(s["reasons"]) == {"rule_not_matched"} for s in sug), sug

    # a request line's path edited: the chain names that line
    raw = path.read_bytes().split(b"\n")
    k = next(i for i, l in enumerate(raw) if b'"path":"/repos/acme/widgets"' in l)
    raw[k] = raw[k].replace(b"/repos/acme/widgets", b"/repos/acme/widgetz")
    tampered = tmp_path / "tampered.log"
    tampered.write_bytes(b"\n".join(raw))
    rc, out, err = audit(sluice_bin, "--verify", tampered)
    assert rc == 1 and err.startswith(f"{tampered}:{k + 1}: ") and "chain mismatch" in err, err

    # gzip'd, as logrotate leaves it: read the same
    gz = tmp_path / "inspected.log.1.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    rc, out, err = audit(sluice_bin, "--summary", "--json", gz)
    assert rc == 0, err
    assert json.loads(out)["inspected"] == j["inspected"]
