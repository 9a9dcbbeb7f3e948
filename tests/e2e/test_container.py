"""The gate image, the per-session gate and the named gate, run with podman.

The image is built here from build/static/sluice (make static) with
docker/build-image.sh, and a "sandbox" image holding only a static probe
program (docker/testbin/probe.c) is built beside it. Both are FROM scratch;
nothing is pulled. podman runs with its own config and storage under a temp
dir (sluicetest/podman.py): runc, cgroupfs, explicit ulimits.

Everything runs inside the suite's network namespace. The origins are the
suite's (11.0.0.1 on lo), the gate's resolver is a dnsmasq on the host side
of podman's default network, and the sandbox network is the internal one the
quadlet unit names. Nothing reaches a real host.

What is tested:
- the image: contents (nothing but the binary, config, empty allowlist dir,
  log dir and the PSL), numeric non-root user, volumes, size under 5 MB;
- `sluice run` as the entrypoint with no config: starts, says every request
  will be denied, denies; read-only root, no capabilities, no new privileges;
- the per-session podman run line of docker/README.md, as written: fetch,
  refusal, decision log in the mounted dir, stop, and exit_idle_s;
- the named gate, run with the flags docker/quadlet/sluice-gate.container
  translates to: READY=1 through sd_notify, the sandbox (only on the internal
  network) fetches an allowlisted origin through the gate, is refused for
  another name, cannot connect directly, cannot resolve, has no route; reload
  by the unit's ExecReload; the health check; and after the gate stops, the
  sandbox has no way out at all.
"""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from sluicetest import client
from sluicetest.pattern import pattern
from sluicetest.podman import PODMAN, Dnsmasq, Podman, proc_status, root_mount_options
from sluicetest.quadlet import CONTAINER_UNIT, README, ContainerUnit, readme_run_line, split_run_line

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
STATIC_BIN = Path(os.environ.get("SLUICE_STATIC_BIN", REPO / "build" / "static" / "sluice"))
PROBE_IMAGE = "localhost/sluice-probe:test"
GATE_UID = 65532
MAX_IMAGE_BYTES = 5_000_000

UNIT = ContainerUnit()
GATE_IMAGE = UNIT.image


def _need_podman():
    if PODMAN is None:
        pytest.skip("podman is not installed; `make deps` installs it (Debian packages podman, runc)")


# --- fixtures -------------------------------------------------------------------

@pytest.fixture(scope="module")
def pod(tmp_path_factory, network):
    """podman with the test's config; the gate and probe images built; the
    sandbox network created with the command the unit file gives."""
    _need_podman()
    if shutil.which("runc") is None:
        pytest.fail("runc is not installed (make deps)")
    if not STATIC_BIN.exists():
        pytest.fail(f"{STATIC_BIN} does not exist: run `make static` (make e2e does)")
    root = tmp_path_factory.mktemp("podman")
    p = Podman(root)
    p.isolate_state()
    try:
        env = dict(p.env, STAGE=str(root / "gate-stage"), ENGINE=PODMAN)
        r = subprocess.run([str(DOCKER / "build-image.sh"), str(STATIC_BIN), GATE_IMAGE], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"build-image.sh failed:\n{r.stdout}\n{r.stderr}"
        p.build_output = r.stdout
        print(r.stdout)

        stage = root / "probe-stage"
        stage.mkdir()
        cc = subprocess.run(["gcc", "-static", "-O2", "-Wall", "-o", str(stage / "probe"),
                             str(DOCKER / "testbin" / "probe.c")], capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr
        p.run("build", "--pull=never", "-q", "-f", DOCKER / "testbin" / "Containerfile",
              "-t", PROBE_IMAGE, stage, timeout=300)

        create = network_create_command()
        p.run(*create[1:])
        yield p
    finally:
        problems = p.teardown()
        if problems:
            print("podman teardown:", problems)


def network_create_command():
    """The `podman network create` line of the unit file's comments."""
    for line in CONTAINER_UNIT.read_text().splitlines():
        m = re.match(r"^#\s*(podman network create .*)$", line)
        if m:
            return shlex.split(m.group(1))
    raise AssertionError(f"{CONTAINER_UNIT}: no `podman network create` line")


def sandbox_network():
    return network_create_command()[-1]


def probe(pod, *args, network=None, dns=None, timeout=60):
    """Run the probe in a sandbox container attached only to `network`."""
    flags = ["--rm", "--pull=never", f"--network={network or sandbox_network()}"]
    if dns:
        flags.append(f"--dns={dns}")
    r = subprocess.run(pod.cmd("run", *flags, PROBE_IMAGE, *args), capture_output=True,
                       env=pod.env, timeout=timeout, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def fetch(pod, proxy_ip, proxy_port, url, **kw):
    """(status or None, body bytes, text output) of a GET through the gate."""
    rc, out, err = probe(pod, "fetch", proxy_ip, str(proxy_port), url, "15000", **kw)
    m = re.match(rb"status (\d{3})\nbody (\d+)\n", out)
    if rc != 0 or not m:
        return None, b"", (out.decode(errors="replace") + err)
    return int(m.group(1)), out[m.end():], err


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_log(path):
    lines = Path(path).read_text().splitlines() if Path(path).exists() else []
    return [json.loads(l) for l in lines]


def wait_file(path, needle, proc=None, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        text = Path(path).read_text(errors="replace") if Path(path).exists() else ""
        if needle in text:
            return text
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before printing {needle!r}:\n{text}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} not printed within {timeout}s:\n{text}")
        time.sleep(0.1)


def assert_confined(pid):
    """The gate's process: numeric non-root, no capabilities at all, no new
    privileges, read-only root filesystem."""
    st = proc_status(pid)
    assert st["Uid"].split() == [str(GATE_UID)] * 4, st["Uid"]
    assert st["Gid"].split() == [str(GATE_UID)] * 4, st["Gid"]
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, f"{cap} = {st[cap]}"
    assert st["NoNewPrivs"] == "1"
    assert "ro" in root_mount_options(pid)


def sluice_has_health_command():
    r = subprocess.run([str(STATIC_BIN), "help"], capture_output=True, text=True)
    return re.search(r"^\s*(sluice )?health\b", r.stdout + r.stderr, re.M) is not None


# --- the unit file and the README agree (no podman needed) --------------------------

def test_quadlet_unit_and_readme_agree():
    assert not UNIT.unknown, (f"{CONTAINER_UNIT}: keys the test cannot map to podman run flags: "
                              f"{UNIT.unknown}; add them to sluicetest/quadlet.py FLAGS")
    flags = set(UNIT.flags)
    for want in ("--read-only", "--security-opt=no-new-privileges", "--cap-drop=all",
                 "--sdnotify=container"):
        assert want in flags, f"{CONTAINER_UNIT} lacks {want}"
    assert any(f.startswith("--ulimit=nofile=") for f in flags)
    health = UNIT.values("--health-cmd")
    assert health and json.loads(health[0])[0] == "/usr/bin/sluice", \
        "HealthCmd must be the exec form (a JSON array): the image has no shell"
    assert UNIT.service.get("Restart") == ["on-failure"]
    reload = shlex.split(UNIT.service["ExecReload"][0])
    assert reload[1:] == ["kill", "--signal", "HUP", UNIT.name], reload
    # the gate listens on its sandbox-side address only
    sandbox = [n for n in UNIT.values("--network") if n.startswith(sandbox_network() + ":")]
    assert len(sandbox) == 1, UNIT.values("--network")
    ip = re.search(r":ip=([0-9.]+)", sandbox[0]).group(1)
    assert UNIT.exec_args == ["--listen", f"{ip}:3128"], UNIT.exec_args
    create = network_create_command()
    assert "--internal" in create and "--disable-dns" in create
    assert " ".join(create) in README.read_text(), "README's network create line differs from the unit's"
    # the per-session line carries every hardening flag of the unit
    argv = readme_run_line({"SESSION": "s", "GATE": "/g", "PORT": "1"})
    rflags, image, args = split_run_line(argv)
    missing = [f for f in UNIT.hardening() if f not in rflags]
    assert not missing, f"the README's per-session podman run line lacks {missing} (the unit has them)"
    assert image == GATE_IMAGE
    assert "--network=host" in rflags and "--rm" in rflags
    assert args[:2] == ["--listen", "127.0.0.1:1"]
    # make image and the unit name the same image
    assert f"tag=${{2:-{GATE_IMAGE}}}" in (DOCKER / "build-image.sh").read_text()


# --- the image ------------------------------------------------------------------------

def test_image_contents_user_volumes_and_size(pod):
    info = pod.inspect("image", GATE_IMAGE)
    cfg = info["Config"]
    assert cfg["User"] == f"{GATE_UID}:{GATE_UID}"
    assert cfg["Entrypoint"] == ["/usr/bin/sluice", "run", "-c", "/etc/sluice/sluice.ini"]
    assert not cfg.get("Cmd")
    assert set(cfg["Volumes"]) == {"/etc/sluice", "/var/log/sluice"}
    size = info["Size"]
    print(f"gate image {GATE_IMAGE}: {size} bytes")
    assert size < MAX_IMAGE_BYTES, f"image is {size} bytes"

    mnt = pod.run("image", "mount", GATE_IMAGE).stdout.strip()
    try:
        root = Path(mnt)
        found = {}
        for dirpath, dirnames, filenames in os.walk(root):
            for n in dirnames + filenames:
                p = Path(dirpath) / n
                found["/" + str(p.relative_to(root))] = p
        files = {k for k, p in found.items() if not p.is_dir()}
        assert files == {"/usr/bin/sluice", "/etc/sluice/sluice.ini",
                         "/usr/share/publicsuffix/public_suffix_list.dafsa"}, sorted(found)
        assert not (root / "bin").exists() and not (root / "etc" / "passwd").exists()
        assert list((root / "etc/sluice/allowlist.d").iterdir()) == []
        assert (root / "var/log/sluice").stat().st_uid == GATE_UID
        assert (root / "usr/share/publicsuffix/public_suffix_list.dafsa").read_bytes() == \
            Path("/usr/share/publicsuffix/public_suffix_list.dafsa").read_bytes()
        elf = subprocess.run(["readelf", "-lW", str(root / "usr/bin/sluice")], capture_output=True,
                             text=True).stdout
        assert "program interpreter" not in elf, "the image's sluice is not static"
        assert (root / "etc/sluice/sluice.ini").read_text() == (DOCKER / "sluice.ini").read_text()
    finally:
        pod.run("image", "unmount", GATE_IMAGE, check=False)


def test_no_config_starts_denies_everything_and_says_so(pod):
    """`sluice run` as the entrypoint, nothing mounted, hardened as in
    production: starts, says it denies everything, and does."""
    name = "noconf"
    # --dns: an address of the test's own network, never the machine's resolver.
    pod.run("run", "-d", "--pull=never", f"--name={name}", f"--network={sandbox_network()}",
            "--dns=10.89.7.1", *UNIT.hardening(), GATE_IMAGE)
    try:
        logs = pod.wait_logs(name, "sluice: listening on 127.0.0.1:3128")
        assert "sluice: the allowlist is empty: every request will be denied" in logs, logs
        assert_confined(pod.pid(name))
        # a client in the gate's own network namespace
        rc, out, err = probe(pod, "fetch", "127.0.0.1", "3128", "http://origin.test/bytes/16", "10000",
                             network=f"container:{name}")
        assert out.startswith(b"status 403\n"), (out, err)
        assert b"not_allowlisted" in out and "Sluice-Decision: deny; reason=not_allowlisted" in err
        pod.run("stop", "-t", "15", name)
        assert pod.run("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip() == "0"
        assert "sluice: stopped" in pod.logs(name)
    finally:
        pod.run("rm", "-f", "-v", "-t", "0", name, check=False)


def test_no_config_no_network_starts(pod):
    name = "nonet"
    try:
        pod.run("run", "-d", "--pull=never", f"--name={name}", "--network=none", *UNIT.hardening(),
                GATE_IMAGE)
        pod.wait_logs(name, "sluice: listening on 127.0.0.1:3128", timeout=15)
    finally:
        pod.run("rm", "-f", "-v", "-t", "0", name, check=False)


# --- the per-session gate (docker/README.md) -------------------------------------------

def _session_dir(tmp_path, extra_proxy=""):
    gate = tmp_path / "gate"
    (gate / "allowlist.d").mkdir(parents=True)
    (gate / "log").mkdir()
    os.chown(gate / "log", GATE_UID, GATE_UID)
    (gate / "allowlist.d" / "session.txt").write_text("origin.test\n")
    (gate / "sluice.ini").write_text(f"[proxy]\n{extra_proxy}\n[policy]\nallowlist = allowlist.d/session.txt\n"
                                     "[dns]\nserver = 127.0.0.53:53\n")
    return gate


def _start_session(pod, gate, session):
    port = free_port()
    argv = readme_run_line({"SESSION": session, "GATE": str(gate), "PORT": str(port)})
    stderr = open(gate / "stderr", "wb")
    proc = pod.popen(argv, stdout=subprocess.DEVNULL, stderr=stderr)
    stderr.close()
    wait_file(gate / "stderr", f"sluice: listening on 127.0.0.1:{port}", proc)
    return proc, port


def test_per_session_gate_as_the_readme_runs_it(pod, dns, origins, tmp_path):
    gate = _session_dir(tmp_path)
    session = "t1"
    proc, port = _start_session(pod, gate, session)
    name = f"sluice-{session}"
    try:
        assert_confined(pod.pid(name))
        ok = client.get(port, "http://origin.test/bytes/64")
        assert ok.status == 200 and ok.body == pattern(64), ok
        no = client.get(port, "http://origin2.test/bytes/8")
        assert no.status == 403 and no.decision == ("deny", "not_allowlisted"), no
        # stop and remove, as the README says
        pod.run("stop", "-t", "15", name)
        assert proc.wait(30) == 0
        pod.wait_gone(name)
    finally:
        if proc.poll() is None:
            pod.run("rm", "-f", "-v", "-t", "0", name, check=False)
            proc.wait(30)
    err = (gate / "stderr").read_text()
    assert "sluice: stopped" in err, err
    log = read_log(gate / "log" / "decisions.log")
    decisions = [(l["host"], l["decision"], l["reason"]) for l in log if l["event"] == "decision"]
    assert decisions == [("origin.test", "allow", "allowlisted"),
                         ("origin2.test", "deny", "not_allowlisted")], decisions


def test_per_session_gate_exits_by_itself_after_exit_idle_s(pod, dns, tmp_path):
    gate = _session_dir(tmp_path, extra_proxy="exit_idle_s = 2")
    session = "t2"
    proc, port = _start_session(pod, gate, session)
    try:
        assert proc.wait(30) == 0
        pod.wait_gone(f"sluice-{session}")      # --rm: nothing left behind
    finally:
        if proc.poll() is None:
            pod.run("rm", "-f", "-v", "-t", "0", f"sluice-{session}", check=False)
    assert "sluice: no client for 2 s (exit_idle_s): exiting" in (gate / "stderr").read_text()


# --- the named gate (docker/quadlet/sluice-gate.container) -----------------------------

class NamedGate:
    pass


@pytest.fixture(scope="module")
def named_gate(pod, origins, tmp_path_factory):
    """The gate run with the unit's flags, as quadlet would run it; the
    host-side paths of its Volume= lines are replaced by the test's."""
    work = tmp_path_factory.mktemp("named-gate")
    etc, logdir = work / "etc-sluice", work / "log"
    (etc / "allowlist.d").mkdir(parents=True)
    logdir.mkdir()
    os.chown(logdir, GATE_UID, GATE_UID)
    g = NamedGate()
    g.etc, g.logdir, g.name = etc, logdir, UNIT.name
    g.outside = "podman"
    assert f"--network={g.outside}" in UNIT.flags
    g.resolver = pod.gateway(g.outside)
    # the unit's config, plus the test's resolver
    (etc / "sluice.ini").write_text((DOCKER / "quadlet" / "sluice.ini").read_text()
                                    + f"\n[dns]\nserver = {g.resolver}\n")
    (etc / "allowlist.d" / "allowlist.txt").write_text("origin.test\n")
    host_paths = {"/etc/sluice": str(etc), "/var/log/sluice": str(logdir)}
    flags = []
    for f in UNIT.flags:
        if f.startswith("--volume="):
            host, rest = f[len("--volume="):].split(":", 1)
            assert host in host_paths, f"unit mounts {host}: the test has no stand-in for it"
            f = f"--volume={host_paths[host]}:{rest}"
        flags.append(f)
    g.listen_ip, g.port = UNIT.exec_args[1].rsplit(":", 1)

    # Notify=true: a socket standing in for systemd's
    g.notify_path = str(work / "notify.sock")
    g.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    g.notify.bind(g.notify_path)
    os.chmod(g.notify_path, 0o777)
    g.notify.settimeout(30)
    env = dict(pod.env, NOTIFY_SOCKET=g.notify_path)
    # quadlet adds -d/--rm/--replace/--cidfile/--cgroups=split around these; -d is what matters here
    pod.run("run", "-d", "--pull=never", *flags, UNIT.image, *UNIT.exec_args, env=env)
    g.dns = None
    try:
        g.ready = g.notify.recv(4096).decode()
        while "READY=1" not in g.ready:
            g.ready = g.notify.recv(4096).decode()
        pod.wait_logs(g.name, f"sluice: listening on {g.listen_ip}:{g.port}")
        g.outside_ip = pod.inspect("container", g.name)["NetworkSettings"]["Networks"][g.outside]["IPAddress"]
        # the gate's resolver, on the host side of the outside network (its bridge exists now)
        g.dns = Dnsmasq(work, g.resolver).start()
        yield g
    finally:
        print(f"--- {g.name} logs ---\n{pod.logs(g.name)}")
        pod.run("rm", "-f", "-v", "-t", "0", g.name, check=False)
        if g.dns:
            g.dns.stop()
        g.notify.close()


def test_named_gate_ready_and_confined(pod, named_gate):
    assert "READY=1" in named_gate.ready
    assert "sluice: admin on 127.0.0.1:9090" in pod.logs(named_gate.name)
    assert_confined(pod.pid(named_gate.name))
    info = pod.inspect("container", named_gate.name)
    assert info["HostConfig"]["ReadonlyRootfs"] is True
    assert set(info["NetworkSettings"]["Networks"]) == {sandbox_network(), named_gate.outside}


def test_sandbox_fetches_allowlisted_origin_through_the_gate(pod, named_gate):
    status, body, err = fetch(pod, named_gate.listen_ip, named_gate.port, "http://origin.test/bytes/64",
                              dns=named_gate.resolver)
    assert status == 200 and body == pattern(64), (status, body, err)
    assert named_gate.dns.queried("origin.test")
    log = read_log(named_gate.logdir / "decisions.log")
    allow = [l for l in log if l["event"] == "decision" and l["host"] == "origin.test"]
    assert allow and allow[-1]["decision"] == "allow" and allow[-1]["addr"] == "11.0.0.1"
    assert allow[-1]["client"].startswith("10.89.7."), allow[-1]


def test_sandbox_is_refused_another_name(pod, named_gate):
    status, body, err = fetch(pod, named_gate.listen_ip, named_gate.port, "http://origin2.test/bytes/8",
                              dns=named_gate.resolver)
    assert status == 403, (status, body, err)
    assert "Sluice-Decision: deny; reason=not_allowlisted" in err
    assert not named_gate.dns.queried("origin2.test")


def test_sandbox_cannot_connect_directly(pod, named_gate):
    targets = [("11.0.0.1", "80"),                       # the origin
               (named_gate.outside_ip, named_gate.port),   # the gate's outside address
               (named_gate.resolver, "53")]                 # the host, on the outside network
    for ip, port in targets:
        rc, out, err = probe(pod, "connect", ip, port, "3000")
        assert rc != 0 and out.startswith(b"error ENETUNREACH"), (ip, port, out, err)
    # the internal network's own gateway address is nobody's (CNI: no address on the bridge)
    rc, out, err = probe(pod, "connect", "10.89.7.1", "80", "3000")
    assert rc != 0, (out, err)


def test_sandbox_cannot_resolve_any_name(pod, named_gate):
    # resolv.conf names the very resolver the gate uses: it is out of reach
    rc, out, err = probe(pod, "dns", "origin.test", "1500", dns=named_gate.resolver)
    assert rc == 1 and f"{named_gate.resolver} error ENETUNREACH".encode() in out, (out, err)
    # nor does the gate answer DNS
    rc, out, err = probe(pod, "dns", "origin.test", "1500", named_gate.listen_ip)
    assert rc == 1 and b"answer" not in out, (out, err)


def test_sandbox_has_no_route_off_its_network(pod, named_gate):
    rc, out, err = probe(pod, "routes")
    routes = out.decode().split("\n")
    v4 = [r for r in routes if r.startswith("route4 ")]
    v6 = [r for r in routes if r.startswith("route6 ") and not r.split()[1].startswith("fe80:")]
    assert v4 == ["route4 10.89.7.0/24 eth0"], routes
    assert v6 == [], routes


def test_named_gate_reload_by_exec_reload(pod, named_gate):
    (named_gate.etc / "allowlist.d" / "allowlist.txt").write_text("origin.test\norigin2.test\n")
    argv = shlex.split(UNIT.service["ExecReload"][0])
    pod.run(*argv[1:])
    deadline = time.monotonic() + 15
    while "sluice: reloaded policy (2 allowlist entries)" not in pod.logs(named_gate.name):
        if time.monotonic() > deadline:
            raise AssertionError(pod.logs(named_gate.name))
        time.sleep(0.2)
    status, body, err = fetch(pod, named_gate.listen_ip, named_gate.port, "http://origin2.test/bytes/8",
                              dns=named_gate.resolver)
    assert status == 200 and body == pattern(8), (status, err)


def test_named_gate_health_check(pod, named_gate):
    assert sluice_has_health_command(), "the image's sluice lacks the health command the unit's HealthCmd runs"
    r = pod.run("healthcheck", "run", named_gate.name, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_sandbox_has_no_way_out_when_the_gate_stops(pod, named_gate):
    pod.run("stop", "-t", "15", named_gate.name)
    assert pod.run("inspect", "--format", "{{.State.ExitCode}}", named_gate.name).stdout.strip() == "0"
    assert "sluice: stopped" in pod.logs(named_gate.name)
    status, body, err = fetch(pod, named_gate.listen_ip, named_gate.port, "http://origin.test/bytes/8")
    assert status is None, (status, body)
    for ip, port in (("11.0.0.1", "80"), (named_gate.resolver, "53")):
        rc, out, err = probe(pod, "connect", ip, port, "3000")
        assert rc != 0 and out.startswith(b"error ENETUNREACH"), (ip, out, err)
    rc, out, err = probe(pod, "routes")
    assert [r for r in out.decode().split("\n") if r.startswith("route4 ")] == ["route4 10.89.7.0/24 eth0"]
