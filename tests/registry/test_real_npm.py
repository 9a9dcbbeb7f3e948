"""npm ci from the real registry through the inspecting gate with the
allowlist `sluice allow-from-lockfile --pins` derives (issue 12): what a
user runs first. The one test that sends traffic to a real host, and only
to registry.npmjs.org:443, so it runs outside the end-to-end suite's
network namespace (make registry-check).

The project (npm-app/) locks two small packages without dependencies; its
package-lock.json was written by hand from the integrity the registry
publishes for them. Before anything is sent, the test checks the derived
allowlist names no host but registry.npmjs.org. It skips, saying why, when
the registry cannot be reached (a TCP connect, 5 s), or when its name
resolves to an address the gate refuses as not public (a machine whose
egress goes through an intercepting proxy on a private or documentation
address): set SLUICE_REGISTRY_ALLOW_CIDR to that address (a CIDR) to let
the gate reach it through [policy] allow_cidr."""

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))

from sluicetest.pins import derive, rule_for, rule_is, request_lines, rules, show  # noqa: E402
from sluicetest.proc import Sluice, binary, client_env  # noqa: E402

HOST = "registry.npmjs.org"
APP = HERE / "npm-app"
LOCKED = [("is-number", "7.0.0"), ("ms", "2.1.3")]
ALLOW_CIDR = os.environ.get("SLUICE_REGISTRY_ALLOW_CIDR", "")


def _tarball_path(name, version):
    return f"/{name}/-/{name}-{version}.tgz"


def _reachable():
    """None, or why the registry cannot be reached as the gate would."""
    try:
        infos = socket.getaddrinfo(HOST, 443, type=socket.SOCK_STREAM)
    except OSError as e:
        return f"{HOST} does not resolve: {e}"
    allowed = [ipaddress.ip_network(c.strip()) for c in ALLOW_CIDR.split(",") if c.strip()]
    for *_, addr in infos:
        ip = ipaddress.ip_address(addr[0])
        if not ip.is_global and not any(ip in n for n in allowed):
            return (f"{HOST} resolves to {ip}, which is not a public address: the gate refuses it "
                    f"(non_public_address), as it should. If that is this machine's way to the registry "
                    f"(an intercepting proxy), set SLUICE_REGISTRY_ALLOW_CIDR={ip}/{ip.max_prefixlen}")
    try:
        socket.create_connection((HOST, 443), timeout=5).close()
    except OSError as e:
        return f"cannot reach {HOST}:443 within 5 s: {e}"
    return None


@pytest.fixture
def gate(tmp_path):
    started = []

    def start(allow, config):
        s = Sluice(tmp_path / "gate", allow=allow, config=config)
        started.append(s)
        return s.start()

    yield start
    for s in started:
        if s.proc is not None and not s.stopped:
            s.stop()
        report = s.sanitizer_report()
        assert not report, f"sanitizer report in sluice's stderr:\n{report}"
        s.log_lines(complete=True)
        print(f"--- sluice stderr ---\n{s.stderr}")


def test_npm_ci_from_the_real_registry_through_a_pins_allowlist(gate, tmp_path):
    allow = derive(APP)
    # nothing is sent before this: the allowlist names only the registry
    for r in rules(allow):
        assert r.host == HOST, f"the derived allowlist names another host: {r}\n" + "\n".join(allow)
    for name, version in LOCKED:
        r = rule_for(allow, "GET", HOST, 443, _tarball_path(name, version))
        assert r is not None and r.digests, f"no pinned rule for {name}@{version}:\n" + "\n".join(allow)
    why = _reachable()
    if why:
        pytest.skip(why)

    ca = tmp_path / "ca"
    made = subprocess.run([str(binary()), "ca", "init", str(ca), "--days", "2", "--permit", HOST],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    policy = {"allow_cidr": ALLOW_CIDR} if ALLOW_CIDR else {}
    s = gate(allow, {"dns": {"server": None},       # the machine's resolvers (/etc/resolv.conf)
                     "policy": policy,
                     "tls": {"ca_cert": str(ca / "ca.pem"), "ca_key": str(ca / "ca.key")}})

    app = tmp_path / "app"
    shutil.copytree(APP, app)
    home = tmp_path / "home"
    home.mkdir()
    proxy = f"http://127.0.0.1:{s.port}/"
    (home / ".npmrc").write_text("\n".join([
        f"registry=https://{HOST}/", f"https-proxy={proxy}", f"proxy={proxy}", f"cafile={ca / 'ca.pem'}",
        "strict-ssl=true", "audit=false", "fund=false", "update-notifier=false", ""]))
    env = {k: v for k, v in client_env(HOME=str(home), npm_config_cache=str(home / "npm-cache"),
                                       npm_config_userconfig=str(home / ".npmrc"),
                                       npm_config_globalconfig=str(home / "npmrc-global"),
                                       NO_UPDATE_NOTIFIER="1").items()
           if not k.lower().startswith("npm_config_") or k in (
               "npm_config_cache", "npm_config_userconfig", "npm_config_globalconfig")}
    npm = shutil.which("npm")
    assert npm, "npm is not installed"
    r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=app, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for name, version in LOCKED:
        assert json.loads((app / "node_modules" / name / "package.json").read_text())["version"] == version

    lines = request_lines(s, len(LOCKED))
    decisions = [l for l in s.log_lines() if l.get("event") == "decision"]
    assert decisions and {(l["host"], l["port"], l["reason"]) for l in decisions} == {(HOST, 443, "inspected")}, \
        show(decisions)
    for name, version in LOCKED:
        path = _tarball_path(name, version)
        rule = rule_for(allow, "GET", HOST, 443, path)
        got = [l for l in lines if l["path"] == path]
        assert got, f"no request line for {path}:\n{show(lines)}"
        for l in got:
            assert (l["host"], l["decision"], l["reason"], l["status"]) == (HOST, "allow", "rule", 200) \
                and rule_is(l, rule), f"{path} should be allowed by {rule}:\n{show([l])}"
    # a complete lockfile: the tarballs and nothing else
    assert {l["path"] for l in lines} == {_tarball_path(n, v) for n, v in LOCKED}, show(lines)
