"""`run --allow-from-lockfile`: the derived entries join the policy, with
their provenance, and nothing broader."""

import json
import subprocess

from sluicetest.checks import assert_refused
from sluicetest.client import connect
from sluicetest.proc import sanitizer_env


def _project(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "package-lock.json").write_text(json.dumps({
        "name": "p", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
        "packages": {
            "": {"name": "p", "version": "1.0.0", "dependencies": {"left-pad": "1.3.0"}},
            "node_modules/left-pad": {
                "version": "1.3.0",
                "resolved": "https://origin.test:9000/left-pad/-/left-pad-1.3.0.tgz",
                "integrity": "sha512-AAAA"},
        }}))
    return proj


def test_derived_entries_are_enforced(sluice, tmp_path):
    proj = _project(tmp_path)
    s = sluice(args=["--allow-from-lockfile", str(proj)])
    resp, conn = connect(s.port, "origin.test:9000")
    conn.close()
    assert resp.status == 200
    d = s.decision_for(conn.local_port)
    assert d["rule"] == f"derived from {proj}/package-lock.json", d
    # A bare entry would have opened 443 too; the derived one is port-exact.
    resp, conn = connect(s.port, "origin.test:443")
    conn.close()
    assert_refused(resp, 403, "port_not_allowed")


def test_check_shows_provenance_and_refuses_a_broken_lockfile(sluice_bin, tmp_path):
    proj = _project(tmp_path)
    r = subprocess.run([str(sluice_bin), "check", "--dns-server", "127.0.0.53", "--allow-from-lockfile", str(proj)],
                       capture_output=True, text=True, env=sanitizer_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"origin.test:9000" in r.stdout and f"derived from {proj}/package-lock.json" in r.stdout
    (proj / "package-lock.json").write_text('{"lockfileVersion": 3, "packages": {')
    r = subprocess.run([str(sluice_bin), "check", "--dns-server", "127.0.0.53", "--allow-from-lockfile", str(proj)],
                       capture_output=True, text=True, env=sanitizer_env(), timeout=60)
    assert r.returncode == 2
    assert f"{proj}/package-lock.json:1:" in r.stderr, r.stderr
