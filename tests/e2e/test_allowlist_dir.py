"""[policy] allowlist_dir / --allowlist-dir: every *.txt file of a directory,
in name order, with FILE:LINE provenance; dot-names and other files skipped."""

import subprocess

import pytest

from sluicetest.checks import assert_refused
from sluicetest.client import connect
from sluicetest.proc import sanitizer_env


def test_allowlist_dir_loads_txt_files_in_order(sluice, tmp_path):
    d = tmp_path / "allowlist.d"
    d.mkdir()
    (d / "20-origin.txt").write_text("# second\norigin.test:9000\n")
    (d / "10-other.txt").write_text("origin2.test:9000\n")
    (d / ".hidden.txt").write_text("origin.test:8080\n")
    (d / "notes.md").write_text("origin.test:81\n")
    s = sluice(config={"policy": {"allowlist_dir": str(d)}})
    resp, conn = connect(s.port, "origin.test:9000")
    conn.close()
    assert resp.status == 200
    assert s.decision_for(conn.local_port)["rule"] == f"{d}/20-origin.txt:2"
    for skipped in ("origin.test:8080", "origin.test:81"):
        resp, conn = connect(s.port, skipped)
        conn.close()
        assert_refused(resp, 403, "port_not_allowed")


def test_check_lists_dir_entries_and_refuses_a_missing_dir(sluice_bin, tmp_path):
    d = tmp_path / "allowlist.d"
    d.mkdir()
    (d / "a.txt").write_text("origin.test:9000\n")
    (d / "b.txt").write_text("*.com\n")
    base = [str(sluice_bin), "check", "--dns-server", "127.0.0.53"]
    r = subprocess.run(base + ["--allowlist-dir", str(d)], capture_output=True, text=True,
                       env=sanitizer_env(), timeout=60)
    assert r.returncode == 2 and f"{d}/b.txt:1:" in r.stderr, r.stderr
    (d / "b.txt").unlink()
    r = subprocess.run(base + ["--allowlist-dir", str(d)], capture_output=True, text=True,
                       env=sanitizer_env(), timeout=60)
    assert r.returncode == 0 and f"{d}/a.txt:1" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(base + ["--allowlist-dir", str(tmp_path / "nope")], capture_output=True, text=True,
                       env=sanitizer_env(), timeout=60)
    assert r.returncode == 2 and "nope" in r.stderr


def test_no_dns_server_is_fine_when_nothing_needs_dns(sluice_bin, tmp_path):
    # With no nameserver anywhere (an empty resolv.conf, bind-mounted inside
    # the suite's own mount namespace), an IP-literal-only policy still
    # loads, and a policy that names a host is refused.
    from test_log_failure import _in_private_mount_namespace
    if not _in_private_mount_namespace():
        pytest.fail("the e2e suite must run under `unshare --mount` (make e2e does)")
    empty = tmp_path / "resolv.conf"
    empty.write_text("")
    subprocess.run(["mount", "--bind", str(empty), "/etc/resolv.conf"], check=True)
    try:
        env = sanitizer_env()
        ini = tmp_path / "s.ini"
        ini.write_text("[policy]\nallow = 11.0.0.1:9000\n")
        r = subprocess.run([str(sluice_bin), "check", "-c", str(ini)], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        ini.write_text("[policy]\nallow = origin.test:9000\n")
        r = subprocess.run([str(sluice_bin), "check", "-c", str(ini)], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 2 and "no DNS server" in r.stderr, r.stderr
    finally:
        subprocess.run(["umount", "/etc/resolv.conf"], check=False)
