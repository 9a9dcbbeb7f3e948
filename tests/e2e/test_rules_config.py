"""Request rules, [tls] and [credentials] as `sluice check` and a reload see
them: errors name FILE:LINE, check prints the rules under their host and
warns of shadowed entries, secrets are checked and never shown. No TLS is
spoken here, but the policy loads its CA, so the CA is a real one."""

import os
import secrets
import subprocess

from sluicetest.proc import render_ini, sanitizer_env
from sluicetest.tlsmaterial import openssl_ca


def _run(sluice_bin, *args):
    return subprocess.run([str(sluice_bin), *args], capture_output=True, env=sanitizer_env(),
                          timeout=60, cwd="/")


def _no_sanitizer(r):
    text = r.stderr.decode(errors="replace")
    assert "AddressSanitizer" not in text and "LeakSanitizer" not in text \
        and "runtime error:" not in text, text


def _ca(d):
    """A real CA (an inspecting policy loads it), made with openssl."""
    if not (d / "ca" / "ca.key").exists():   # one per test dir
        openssl_ca(d / "ca")


def _secret(d, name, value, mode=0o600):
    (d / "secrets").mkdir(exist_ok=True)
    p = d / "secrets" / name
    p.write_bytes(value if isinstance(value, bytes) else value.encode())
    os.chmod(p, mode)
    return p


def _config(d, allow, tls=True, creds=None, extra=None):
    (d / "allowlist.txt").write_text("".join(f"{l}\n" for l in allow))
    sections = {"proxy": {"listen": "127.0.0.1:0"}, "policy": {"allowlist": "allowlist.txt"},
                "dns": {"server": "127.0.0.53:53"}, "log": {"path": "decisions.log"}}
    if tls:
        _ca(d)
        sections["tls"] = {"ca_cert": "ca/ca.pem", "ca_key": "ca/ca.key"}
    if creds is not None:
        (d / "credentials.txt").write_text("".join(f"{l}\n" for l in creds))
        sections["credentials"] = {"file": "credentials.txt", "secret_dir": "secrets"}
    for k, v in (extra or {}).items():
        sections.setdefault(k, {}).update(v)
    cfg = d / "sluice.ini"
    cfg.write_text(render_ini(sections))
    return cfg


RULES = [
    "registry.npmjs.org",                        # 1: shadowed by line 2
    "GET,HEAD registry.npmjs.org/*",             # 2
    "GET api.github.com/repos/acme/*",           # 3
    "example.org:8443",                          # 4
    "* uploads.example.com/incoming/*",          # 5
    "GET api.github.com/*/issues",               # 6
]


def test_check_prints_rules_under_their_host_and_warns_of_a_shadowed_entry(sluice_bin, tmp_path):
    cfg = _config(tmp_path, RULES)
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 0, r.stderr       # a warning does not change the exit status
    out = r.stdout.decode()
    assert "allowlist: 2 entries, 4 request rules" in out, out
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("inspected hosts: 3"))
    block = lines[start + 1:start + 8]
    assert block[0] == "  registry.npmjs.org", out
    assert block[1].startswith("    GET,HEAD /*") and block[1].endswith("allowlist.txt:2"), out
    assert block[2] == "  api.github.com", out
    assert block[3].startswith("    GET /repos/acme/*") and block[3].endswith("allowlist.txt:3"), out
    assert block[4].startswith("    GET /*/issues") and block[4].endswith("allowlist.txt:6"), out
    assert block[5] == "  uploads.example.com", out
    assert block[6].startswith("    * /incoming/*") and block[6].endswith("allowlist.txt:5"), out
    # plain entries keep their old lines
    assert any(l.startswith("  registry.npmjs.org ") and l.endswith("allowlist.txt:1") for l in lines), out
    assert any(l.startswith("  example.org:8443 ") and l.endswith("allowlist.txt:4") for l in lines), out
    assert f"  ca_key         {tmp_path}/ca/ca.key" in lines, out
    err = r.stderr.decode()
    warnings = [l for l in err.splitlines() if ": warning: " in l]
    assert warnings == [f"{tmp_path}/allowlist.txt:1: warning: 'registry.npmjs.org' is shadowed by the "
                        "request rules for 'registry.npmjs.org' (first: "
                        f"{tmp_path}/allowlist.txt:2): where they apply, only request rules "
                        "allow anything"], err


def test_request_rules_without_the_ca_name_the_first_rule(sluice_bin, tmp_path):
    cfg = _config(tmp_path, RULES, tls=False)
    for cmd in ("check", "run"):
        r = _run(sluice_bin, cmd, "-c", str(cfg))
        _no_sanitizer(r)
        assert r.returncode == 2, (cmd, r.stderr)
        assert b"allowlist.txt:2: request rules need the inspection CA" in r.stderr, r.stderr


def test_every_malformed_rule_is_reported_at_its_line(sluice_bin, tmp_path):
    bad = [
        "GET,HEAD registry.npmjs.org/*",       # 1: fine
        "get example.org/x",                   # 2
        "GET,,HEAD example.org/x",             # 3
        "GET example.org",                     # 4
        "GET example.org/a/%2e%2e/b",          # 5
        "GET example.org//x",                  # 6
        "GET example.org/a%2fb",               # 7
        "GET example.org/a\\b",                # 8
        "GET,HEAD example.org/a sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",   # 9
        "GET example.org/a sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=",        # 10
        "GET example.org/a#frag",              # 11
    ]
    cfg = _config(tmp_path, bad)
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode()
    want = {2: "lower-case method", 3: "empty method in the list", 4: "missing path",
            5: "dot segment", 6: "empty segment", 7: "encoded '/'", 8: "backslash",
            9: "only a GET rule may carry digests", 10: "not canonical", 11: "'#' in a rule"}
    for line, frag in want.items():
        assert any(f"allowlist.txt:{line}: " in l and frag in l for l in err.splitlines()), (line, err)
    assert "allowlist.txt:1:" not in err, err


def test_a_secret_readable_by_others_is_refused(sluice_bin, tmp_path):
    value = "tok-" + secrets.token_hex(16)
    sec = _secret(tmp_path, "npm", value + "\n", mode=0o644)
    cfg = _config(tmp_path, RULES, creds=["# NAME HOST HEADER TEMPLATE",
                                         "npm registry.npmjs.org Authorization Bearer {secret}"])
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 2, r.stderr
    assert b"credentials.txt:2: credential 'npm': secret" in r.stderr, r.stderr
    assert b"is open to group or others (mode 0644); chmod 600 it" in r.stderr, r.stderr
    assert value.encode() not in r.stdout + r.stderr
    os.chmod(sec, 0o600)
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 0, r.stderr
    assert b"npm" in r.stdout and b"Authorization: Bearer {secret}" in r.stdout, r.stdout


def test_the_secret_never_appears_in_checks_output_or_errors(sluice_bin, tmp_path):
    value = "tok-" + secrets.token_hex(16)
    _secret(tmp_path, "npm", value + "\n")
    _secret(tmp_path, "gh", value + "\r\n")          # refused: CR
    _secret(tmp_path, "x", value)                    # refused: host not inspected
    creds = ["npm registry.npmjs.org Authorization Bearer {secret}",
             "gh api.github.com Authorization token {secret}",
             "x example.net X-Key {secret}"]
    cfg = _config(tmp_path, RULES, creds=creds)
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode()
    assert "credentials.txt:2: credential 'gh': secret" in err and "carriage return" in err, err
    assert "credentials.txt:3: credential 'x' for example.net would never be used" in err, err
    assert value not in r.stdout.decode() + err
    # and once the config is good, the printout holds the template only
    cfg = _config(tmp_path, RULES, creds=creds[:1])
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 0, r.stderr
    assert value.encode() not in r.stdout + r.stderr
    assert b"Bearer {secret}" in r.stdout, r.stdout


def test_a_reload_reads_the_secrets_again_and_keeps_the_old_policy_when_one_is_bad(sluice, tmp_path):
    value = "tok-" + secrets.token_hex(16)
    d = tmp_path / "inspect"
    d.mkdir()
    _ca(d)
    sec = _secret(d, "npm", value + "\n")
    (d / "credentials.txt").write_text("npm origin.test:9000 Authorization Bearer {secret}\n")
    s = sluice(allow=["GET origin.test:9000/*", "origin2.test:9000"], config={
        "tls": {"ca_cert": str(d / "ca" / "ca.pem"), "ca_key": str(d / "ca" / "ca.key")},
        "credentials": {"file": str(d / "credentials.txt"), "secret_dir": str(d / "secrets")}})
    os.chmod(sec, 0o640)
    ok, line = s.reload()
    assert not ok, line
    s.wait_stderr(r"credentials\.txt:1: credential 'npm': secret .* is open to group or others "
                  r"\(mode 0640\)")
    assert s.alive()
    os.chmod(sec, 0o600)
    sec.write_text(value + "\nX-Injected: 1\n")
    ok, line = s.reload()
    assert not ok, line
    s.wait_stderr(r"credential 'npm': secret .* contains a line break")
    sec.write_text(value + "-2\n")
    ok, line = s.reload()
    assert ok, line
    s.stop()
    assert value not in s.stderr
    assert value not in s.log_path.read_text()
