"""Sessions from the operator's side (SPEC part 2): `sluice check` lists the
session files and never a whole token hash; `sluice session new` writes a
file holding only the SHA-256 of the token it prints once, in a proxy URL,
and never replaces a session; `sluice audit --session` keeps one session's
lines. No gate is started for traffic here (the sessions' hot path has its
own tests)."""

import hashlib
import json
import os
import re
import stat
import subprocess
import time
import urllib.parse
from datetime import datetime, timezone

from sluicetest.proc import SANITIZER_MARKERS, render_ini, sanitizer_env
from test_audit import ChainedLog


def run(sluice_bin, *args, cwd="/"):
    r = subprocess.run([str(sluice_bin), *map(str, args)], capture_output=True, env=sanitizer_env(),
                       timeout=60, cwd=cwd)
    out, err = r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
    assert not any(m in err for m in SANITIZER_MARKERS), f"sanitizer report:\n{err}"
    return r.returncode, out, err


def sha256_hex(text):
    return hashlib.sha256(text.encode()).hexdigest()


def write_config(tmp_path, sessions=True, listen="127.0.0.1:3999"):
    (tmp_path / "allow.txt").write_text("global.test\n")
    (tmp_path / "sessions.d").mkdir(exist_ok=True)
    sections = {"proxy": {"listen": listen}, "policy": {"allowlist": "allow.txt"},
                "dns": {"server": "127.0.0.53:53"}, "log": {"path": "decisions.log"}}
    if sessions:
        sections["sessions"] = {"dir": "sessions.d"}
    cfg = tmp_path / "sluice.ini"
    cfg.write_text(render_ini(sections))
    return cfg


def write_session(tmp_path, name, token, extra=""):
    (tmp_path / "sessions.d" / f"{name}.ini").write_text(
        f"[session]\ntoken_sha256 = {sha256_hex(token)}\n{extra}")


# ---- sluice check ----

def test_check_lists_sessions_and_never_a_whole_hash(sluice_bin, tmp_path):
    cfg = write_config(tmp_path)
    (tmp_path / "sessions.d" / "build-42.allow").write_text("pypi.test\nbuild42-only.test:8443\n")
    write_session(tmp_path, "build-42", "token-42",
                  "allowlist = build-42.allow\nlog = build-42.jsonl\nexpires = 2099-12-31T00:00:00Z\n")
    write_session(tmp_path, "other", "token-other")
    (tmp_path / "sessions.d" / ".other.ini.swp").write_text("not a session\n")
    rc, out, err = run(sluice_bin, "check", "-c", cfg)
    assert rc == 0, err
    section = out[out.index("sessions: 2"):]
    assert re.search(r"^  build-42$", section, re.M) and re.search(r"^  other$", section, re.M), section
    assert "build42-only.test:8443" in section and "pypi.test" in section
    assert "2099-12-31T00:00:00Z" in section
    assert str(tmp_path / "sessions.d" / "build-42.jsonl") in section
    for token in ("token-42", "token-other"):
        h = sha256_hex(token)
        assert h[:8] in section
        assert h[:9] not in out + err and h not in out + err and token not in out + err


def test_check_names_the_line_of_a_bad_session_file_and_never_its_hash(sluice_bin, tmp_path):
    cfg = write_config(tmp_path)
    write_session(tmp_path, "good", "t")
    bad_hash = sha256_hex("t")[:63] + "g"
    (tmp_path / "sessions.d" / "bad.ini").write_text(
        f"[session]\nallowlist = nowhere.allow\ntoken_sha256 = {bad_hash}\ncolour = blue\n")
    for cmd in ("check", "run"):
        rc, out, err = run(sluice_bin, cmd, "-c", cfg)
        assert rc == 2, (cmd, err)
        bad = str(tmp_path / "sessions.d" / "bad.ini")
        assert f"{bad}:2: allowlist" in err and "nowhere.allow" in err, err
        assert f"{bad}:3: token_sha256" in err and f"{bad}:4: unknown key 'colour'" in err, err
        assert bad_hash not in err and bad_hash[:16] not in err
        assert "good.ini" not in err


# ---- sluice session new ----

def new_session(sluice_bin, *args):
    rc, out, err = run(sluice_bin, "session", "new", *args)
    return rc, out, err


def test_session_new_stores_only_the_hash_of_the_token_it_prints(sluice_bin, tmp_path):
    cfg = write_config(tmp_path, listen="127.0.0.1:3999")
    rc, out, err = new_session(sluice_bin, "build-7", "-c", cfg)
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 1, out
    url = urllib.parse.urlsplit(lines[0])
    assert (url.scheme, url.hostname, url.port, url.username) == ("http", "127.0.0.1", 3999, "build-7")
    token = url.password
    assert re.fullmatch(r"[0-9a-f]{32}", token), token
    path = tmp_path / "sessions.d" / "build-7.ini"
    assert str(path) in err and token not in err
    text = path.read_text()
    assert token not in text
    m = re.search(r"^token_sha256 = ([0-9a-f]{64})$", text, re.M)
    assert m and m.group(1) == sha256_hex(token), text
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "expires" not in text
    # nothing but the session is left in the directory (no temporary file)
    assert sorted(os.listdir(tmp_path / "sessions.d")) == ["build-7.ini"]
    # the gate reads it, and lists it
    rc, out, err = run(sluice_bin, "check", "-c", cfg)
    assert rc == 0, err
    assert re.search(r"^  build-7$", out, re.M) and sha256_hex(token)[:8] in out
    # a second one gets another token
    rc, out2, err = new_session(sluice_bin, "build-8", "--dir", tmp_path / "sessions.d")
    assert rc == 0, err
    assert urllib.parse.urlsplit(out2.strip()).password != token
    assert out2.strip().endswith("@127.0.0.1:3128")   # no -c: the default listen


def test_session_new_refuses_an_existing_session(sluice_bin, tmp_path):
    cfg = write_config(tmp_path)
    write_session(tmp_path, "taken", "first-token")
    before = (tmp_path / "sessions.d" / "taken.ini").read_bytes()
    rc, out, err = new_session(sluice_bin, "taken", "-c", cfg)
    assert rc == 2 and out == "", (out, err)
    assert "exists" in err
    assert (tmp_path / "sessions.d" / "taken.ini").read_bytes() == before
    assert sorted(os.listdir(tmp_path / "sessions.d")) == ["taken.ini"]


def test_session_new_ttl_sets_expires(sluice_bin, tmp_path):
    cfg = write_config(tmp_path)
    for ttl, seconds in (("90s", 90), ("30m", 1800), ("8h", 8 * 3600), ("7d", 7 * 86400)):
        name = f"ttl-{ttl}"
        t0 = time.time()
        rc, out, err = new_session(sluice_bin, name, "--ttl", ttl, "-c", cfg)
        t1 = time.time()
        assert rc == 0, err
        text = (tmp_path / "sessions.d" / f"{name}.ini").read_text()
        m = re.search(r"^expires = (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$", text, re.M)
        assert m, text
        exp = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
        assert int(t0) + seconds - 1 <= exp <= t1 + seconds + 1, (ttl, m.group(1))
    rc, out, err = run(sluice_bin, "check", "-c", cfg)
    assert rc == 0, err
    assert out.count("expires        20") == 4
    for bad in ("0s", "8", "8x", "-1h", "1.5h", "h", "3651d", "99999999999999999999s"):
        rc, out, err = new_session(sluice_bin, "never", "--ttl", bad, "-c", cfg)
        assert rc == 2 and "--ttl" in err, (bad, err)
    assert not (tmp_path / "sessions.d" / "never.ini").exists()


def test_session_new_allowlist_must_load_from_the_sessions_dir(sluice_bin, tmp_path):
    cfg = write_config(tmp_path)
    (tmp_path / "here.allow").write_text("x.test\n")   # relative to the cwd, not to the sessions dir
    rc, out, err = run(sluice_bin, "session", "new", "s1", "-c", cfg, "--allowlist", "here.allow",
                       cwd=tmp_path)
    assert rc == 2 and out == "" and "here.allow" in err, err
    (tmp_path / "sessions.d" / "bad.allow").write_text("ok.test\nbad host!\n")
    rc, out, err = new_session(sluice_bin, "s1", "-c", cfg, "--allowlist", "bad.allow")
    assert rc == 2 and "bad.allow:2:" in err, err
    assert not (tmp_path / "sessions.d" / "s1.ini").exists()

    (tmp_path / "sessions.d" / "s1.allow").write_text("s1-only.test\n")
    rc, out, err = new_session(sluice_bin, "s1", "-c", cfg, "--allowlist", "s1.allow",
                               "--allowlist", tmp_path / "here.allow")
    assert rc == 0, err
    rc, out, err = run(sluice_bin, "check", "-c", cfg)
    assert rc == 0, err
    section = out[out.index("sessions: 1"):]
    assert "s1-only.test" in section and "x.test" in section


def test_session_new_usage_errors(sluice_bin, tmp_path):
    cfg = write_config(tmp_path, sessions=False)
    rc, out, err = new_session(sluice_bin, "nodir")
    assert rc == 2 and "--dir" in err, err
    rc, out, err = new_session(sluice_bin, "nodir", "-c", cfg)
    assert rc == 2 and "no [sessions] dir" in err, err
    for bad in (".hidden", "a/b", "a:b", "x" * 65, ""):
        rc, out, err = new_session(sluice_bin, bad, "--dir", tmp_path)
        assert rc == 2 and out == "", (bad, err)
    rc, out, err = new_session(sluice_bin, "ok", "--dir", tmp_path / "missing")
    assert rc == 2 and "missing" in err, err
    rc, out, err = run(sluice_bin, "session", "new", "--help")
    assert rc == 0 and "--ttl" in out
    assert os.listdir(tmp_path / "sessions.d") == []


# ---- sluice audit --session ----

def _sessions_log(path):
    """Two sessions' and an anonymous client's lines in one chained log:
    CONNECTs, an inspected tunnel's requests, closes, and an auth_failed
    line claiming session a."""
    log = ChainedLog(path)

    def decision(tid, host, port, allow, reason, session=None, **kw):
        f = dict(event="decision", id=tid, client="127.0.0.1:40000", method="CONNECT", host=host, port=port,
                 decision="allow" if allow else "deny", reason=reason, **kw)
        if session:
            f["session"] = session
        log.put(**f)

    decision("a1", "a-allowed.test", 443, True, "allowlisted", "a")
    log.put(event="close", id="a1", session="a", bytes_up=10, bytes_down=20, duration_ms=1.0, end="client_eof")
    decision("a2", "a-denied.test", 443, False, "not_allowlisted", "a")
    decision("a3", "a-denied.test", 443, False, "not_allowlisted", "a")
    decision("a4", "reg.test", 443, True, "inspected", "a")
    log.put(event="request", id="a4", n=1, method="PUT", host="reg.test", path="/a/secret", decision="deny",
            reason="rule_not_matched", status=403, session="a")
    log.put(event="close", id="a4", session="a", bytes_up=1, bytes_down=2, duration_ms=1.0, end="client_eof")
    decision("b1", "b-denied.test", 443, False, "not_allowlisted", "b")
    decision("b2", "reg.test", 443, True, "inspected", "b")
    log.put(event="request", id="b2", n=1, method="GET", host="reg.test", path="/b/other", decision="deny",
            reason="rule_not_matched", status=403, session="b")
    decision("n1", "anon-denied.test", 443, False, "not_allowlisted")
    decision("x1", "claimed.test", 443, False, "auth_failed", session_claimed="a")
    # a name that differs from "a" only once decoded is another session
    decision("e1", "escaped.test", 443, False, "not_allowlisted", "\u00e1")
    log.close()
    return log


def test_audit_session_filters_every_report(sluice_bin, tmp_path):
    path = tmp_path / "gate.log"
    log = _sessions_log(path)

    rc, out, err = run(sluice_bin, "audit", "--denied", "--session", "a", path)
    assert rc == 0, err
    assert "a-denied.test:443" in out and "reg.test:443" in out
    for other in ("b-denied", "anon-denied", "claimed", "escaped"):
        assert other not in out, out
    rc, out, err = run(sluice_bin, "audit", "--denied", "--json", "--session", "b", path)
    assert rc == 0, err
    assert "b-denied.test" in out and "a-denied" not in out and "anon" not in out

    rc, out, err = run(sluice_bin, "audit", "--summary", "--json", "--session", "a", path)
    assert rc == 0, err
    j = json.loads(out)
    # 4 CONNECTs and 1 request inside a tunnel; 7 lines with the closes
    assert j["lines"] == 7
    assert j["totals"]["requests"] == 5 and j["totals"]["allowed"] == 2 and j["totals"]["denied"] == 3
    assert j["totals"]["closes"] == 2 and j["totals"]["bytes_up"] == 11
    assert j["totals"]["inspected_requests"] == 1 and j["unmatched_closes"] == 0
    assert {(h["host"], h["port"]) for h in j["hosts"]} == {("a-allowed.test", 443), ("a-denied.test", 443),
                                                            ("reg.test", 443)}
    rc, out, err = run(sluice_bin, "audit", "--summary", "--json", path)
    assert json.loads(out)["totals"]["requests"] == 11   # unfiltered: everyone's

    rc, out, err = run(sluice_bin, "audit", "--suggest", "--session", "a", path)
    assert rc == 0, err
    assert "a-denied.test" in out and "PUT reg.test/a/secret" in out
    assert "b-denied" not in out and "/b/other" not in out and "anon" not in out

    # --verify checks the chain whole, whatever --session says
    rc, out, err = run(sluice_bin, "audit", "--verify", "--session", "b", path)
    assert rc == 0 and out == f"ok: {log.seq} lines, stream {log.stream}\n", (out, err)

    rc, out, err = run(sluice_bin, "audit", "--session", "no/such", path)
    assert rc == 2 and "--session" in err
