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

import resource
import shutil

import pytest

from sluicetest import netns
from sluicetest.dns import Blackhole, Dnsmasq
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
