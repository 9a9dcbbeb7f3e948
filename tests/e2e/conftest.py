"""Fixtures for sluice's end-to-end tests.

The suite runs as `unshare --net -- python3 -m pytest tests/e2e` (make e2e):
every process it starts lives in a fresh network namespace. Before anything
sends a packet, the session checks that it is in such a namespace and stops
otherwise. Then it brings up lo with the test's addresses, starts dnsmasq
(127.0.0.53), a DNS server that never answers (127.0.0.54), and the origin
servers (see sluicetest/origins.py). Each test starts its own sluice with a
config written for it (the `sluice` factory), and fails if sluice's stderr
shows a sanitizer report or its decision log has a line that is not JSON.
"""

import os
import resource
import shutil

import pytest

from sluicetest import gitbackend, inspecting, netns, registry
from sluicetest.dns import Blackhole, Dnsmasq
from sluicetest.relay import Relay
from sluicetest.origins import Origins
from sluicetest.proc import Sluice, binary
from sluicetest.scripted import ScriptedOrigin
from sluicetest.slowdns import SlowDNS
from sluicetest import tlsmaterial


@pytest.fixture(scope="session", autouse=True)
def network():
    """Verify the namespace, then set up lo. Nothing sends before this."""
    try:
        netns.verify()
    except netns.NotIsolated as e:
        pytest.exit(f"refusing to run the end-to-end tests: {e}", returncode=2)
    except Exception as e:      # no `ip`, unreadable /proc: not provably isolated
        pytest.exit(f"refusing to run the end-to-end tests: cannot verify the network "
                    f"namespace: {e!r}", returncode=2)
    netns.setup_loopback()
    # 1,000 concurrent tunnels need ~2,000 descriptors here and in sluice
    # (which inherits this limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    want = min(want, 65536)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return True


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("session")


@pytest.fixture(scope="session")
def tls(session_dir, network):
    """{'ca', 'cert', 'key'}: a test CA and origin.test's certificate."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is not installed")
    return tlsmaterial.make(session_dir)


@pytest.fixture(scope="session")
def dns(session_dir, network):
    """dnsmasq on 127.0.0.53:53 with the test names (sluicetest/dns.py)."""
    d = Dnsmasq(session_dir).start()
    yield d
    d.stop()


@pytest.fixture(scope="session")
def blackhole_dns(network):
    """A DNS server on 127.0.0.54:53 that reads queries and never answers."""
    b = Blackhole()
    yield b
    b.close()


@pytest.fixture(scope="session")
def origins(tls, network):
    o = Origins(str(tls["cert"]), str(tls["key"])).start()
    yield o
    o.stop()


@pytest.fixture
def recorder(origins):
    return origins.recorder


@pytest.fixture(scope="session")
def _scripted_origin(network):
    o = ScriptedOrigin()
    yield o
    o.close()


@pytest.fixture
def scripted(_scripted_origin):
    """The scriptable origin (sluicetest/scripted.py) at 11.0.0.5:80
    (h1.hostile.test) and 11.0.0.6:80 (h2.hostile.test). At teardown its
    open connections are reset and queued scripts dropped; an exception in
    a script's own code fails the test."""
    _scripted_origin.reset()
    yield _scripted_origin
    errors = _scripted_origin.reset()
    if errors:
        pytest.fail("scripted origin: " + "; ".join(f"conn {c.index}: {c.outcome}" for c in errors),
                    pytrace=False)


@pytest.fixture(scope="session")
def _slow_dns(network):
    d = SlowDNS()
    yield d
    d.close()


@pytest.fixture
def slow_dns(_slow_dns):
    """A DNS server on 127.0.0.55:53 whose answers the test holds or delays
    (sluicetest/slowdns.py); its rules are cleared around each test."""
    _slow_dns.reset()
    yield _slow_dns
    _slow_dns.reset()


@pytest.fixture
def sluice(tmp_path, dns, origins, request):
    """Factory: sluice(allow=[...], config={section: {key: value}}) writes the
    config and allowlist in a tmp dir, starts `sluice run -c FILE` and waits for
    its listening line. Defaults: listen 127.0.0.1:0, the test resolver, the
    decision log in the tmp dir. A value None removes a default key."""
    started = []

    def start(allow=(), config=None, args=(), start=True, name=None, cwd="/", listeners=1, env=None,
              stdout_pipe=False):
        workdir = tmp_path / (name or f"sluice{len(started)}")
        s = Sluice(workdir, allow=allow, config=config, args=args, cwd=cwd, env=env,
                   stdout_pipe=stdout_pipe)
        started.append(s)
        if start:
            s.start(listeners=listeners)
        return s

    yield start

    problems = []
    for s in started:
        if s.proc is None:
            continue
        try:
            if not s.stopped:
                s.stop()
        except AssertionError as e:
            problems.append(str(e))
            s.kill()
        report = s.sanitizer_report()
        if report:
            problems.append(f"sanitizer report in sluice's stderr:\n{report}")
        try:
            s.log_lines(complete=True)
        except AssertionError as e:
            problems.append(str(e))
        print(f"--- sluice stderr ({s.workdir}) ---\n{s.stderr}")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture
def sluice_bin():
    b = binary()
    if not b.exists():
        pytest.fail(f"sluice binary {b} does not exist (make build/san/sluice, or set SLUICE_BIN)")
    return b


# --- inspection (sluicetest/inspecting.py) ------------------------------------

@pytest.fixture(scope="session")
def inspect_tls(session_dir, tls):
    """The inspecting origins' certificates (tlsmaterial.make_inspect):
    upstream_ca is the test CA (tls['ca'])."""
    return tlsmaterial.make_inspect(session_dir, tls, inspecting.ORIGINS)


@pytest.fixture(scope="session")
def _inspect_origins(inspect_tls, session_dir, network):
    o = inspecting.InspectOrigins(inspect_tls, session_dir).start()
    yield o
    o.stop()


@pytest.fixture
def inspect_origins(_inspect_origins):
    """The inspecting origins (HTTPS on 11.0.1.x:443, registry.inspect.test
    also on :80), recording every connection and request; tests take a
    mark() first and read what came after it."""
    return _inspect_origins


@pytest.fixture(scope="session")
def npm_packages(_inspect_origins, session_dir):
    """Two packages made with `npm pack`, served by the registry stand-in,
    an app that locks both (for npm ci) and a package to publish."""
    return registry.make_packages(session_dir / "npm", _inspect_origins.npm)


@pytest.fixture
def git_repo(_inspect_origins, tmp_path):
    """A new bare repository behind git http-backend, one commit on main,
    http.receivepack true: {'name', 'path', 'head', 'files', 'url', 'home'}."""
    home = tmp_path / "git-home"
    home.mkdir(exist_ok=True)
    info = gitbackend.make_repo(_inspect_origins.git_root, home)
    info["url"] = f"https://git.inspect.test/git/{info['name']}"
    info["home"] = home
    return info


@pytest.fixture
def relay(network):
    """A CONNECT relay with no policy, for the harness checks (sluicetest/relay.py)."""
    r = Relay()
    yield r
    r.close()


@pytest.fixture
def sluice_inspecting(sluice, tmp_path, inspect_tls, inspect_origins, sluice_bin):
    """Factory: like `sluice`, plus what inspection needs in the gate's
    directory: its CA (ca/ca.pem, ca/ca.key: `sluice ca init`, or openssl
    while the binary has no `ca` command), upstream.pem (the test CA) and,
    with credentials=[(NAME, HOST, HEADER, TEMPLATE, SECRET)], credentials.txt
    and secrets/NAME (0600). The [tls] and [credentials] sections use
    relative paths, as SPEC's example does. The Sluice it returns has .ca
    (the PEM a client must trust), .ca_made_by, .secrets {NAME: SECRET}."""
    made = []

    def start(allow=(), credentials=(), config=None, name=None, **kw):
        name = name or f"inspecting{len(made)}"
        workdir = tmp_path / name
        workdir.mkdir(parents=True, exist_ok=True)
        made_by = tlsmaterial.sluice_ca(sluice_bin, workdir / "ca")
        shutil.copy(inspect_tls["upstream_ca"], workdir / "upstream.pem")
        cfg = {"tls": {"ca_cert": "ca/ca.pem", "ca_key": "ca/ca.key", "upstream_ca": "upstream.pem",
                       "leaf_days": 7}}
        secrets = {}
        if credentials:
            (workdir / "secrets").mkdir(mode=0o700, exist_ok=True)
            lines = ["# NAME HOST HEADER TEMPLATE"]
            for cname, host, header, template, secret in credentials:
                lines.append(f"{cname} {host} {header} {template}")
                path = workdir / "secrets" / cname
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.write(fd, (secret + "\n").encode())
                os.close(fd)
                os.chmod(path, 0o600)
                secrets[cname] = secret
            (workdir / "credentials.txt").write_text("\n".join(lines) + "\n")
            cfg["credentials"] = {"file": "credentials.txt", "secret_dir": "secrets"}
        for section, keys in (config or {}).items():
            cfg.setdefault(section, {}).update(keys)
        made.append(name)
        s = sluice(allow=allow, config=cfg, name=name, **kw)
        s.ca = workdir / "ca" / "ca.pem"
        s.ca_made_by = made_by
        s.secrets = secrets
        return s

    return start
