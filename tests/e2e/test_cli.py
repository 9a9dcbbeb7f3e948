"""`sluice check` and start-up errors: exit 2 naming FILE:LINE."""

import subprocess

from sluicetest.proc import render_ini, sanitizer_env


def _run(sluice_bin, *args, cwd="/"):
    return subprocess.run([str(sluice_bin), *args], capture_output=True, env=sanitizer_env(),
                          timeout=60, cwd=cwd)


def _write(tmp_path, allow, extra=None):
    (tmp_path / "allowlist.txt").write_text("".join(f"{l}\n" for l in allow))
    sections = {"proxy": {"listen": "127.0.0.1:0"}, "policy": {"allowlist": "allowlist.txt"},
                "dns": {"server": "127.0.0.53:53"}, "log": {"path": "decisions.log"}}
    for k, v in (extra or {}).items():
        sections.setdefault(k, {}).update(v)
    cfg = tmp_path / "sluice.ini"
    cfg.write_text(render_ini(sections))
    return cfg


def _no_sanitizer(r):
    text = r.stderr.decode(errors="replace")
    assert "AddressSanitizer" not in text and "LeakSanitizer" not in text \
        and "runtime error:" not in text, text


def test_check_accepts_a_good_config_and_prints_the_policy(sluice_bin, tmp_path):
    cfg = _write(tmp_path, ["origin.test", "origin.test:9000"])
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 0, r.stderr
    assert b"origin.test" in r.stdout + r.stderr


def test_check_names_file_and_line_of_a_bad_allowlist_entry(sluice_bin, tmp_path):
    cfg = _write(tmp_path, ["origin.test", "# fine", "bad host!", "origin2.test"])
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 2, r.stderr
    assert b"allowlist.txt:3:" in r.stderr, r.stderr


def test_check_refuses_a_wildcard_over_a_public_suffix(sluice_bin, tmp_path):
    cfg = _write(tmp_path, ["origin.test", "*.com"])
    r = _run(sluice_bin, "check", "-c", str(cfg))
    _no_sanitizer(r)
    assert r.returncode == 2, r.stderr
    assert b"allowlist.txt:2:" in r.stderr, r.stderr


def test_unknown_config_key_is_exit_2(sluice_bin, tmp_path):
    cfg = _write(tmp_path, ["origin.test"], extra={"proxy": {"no_such_key": "1"}})
    for cmd in ("check", "run"):
        r = _run(sluice_bin, cmd, "-c", str(cfg))
        _no_sanitizer(r)
        assert r.returncode == 2, (cmd, r.stderr)
        assert b"sluice.ini:" in r.stderr, r.stderr


def test_version_names_the_libraries(sluice_bin):
    r = _run(sluice_bin, "version")
    _no_sanitizer(r)
    assert r.returncode == 0
    out = (r.stdout + r.stderr).decode().lower()
    for lib in ("libevent", "c-ares", "mbedtls"):
        assert lib in out, out
