"""Issue 12 with real clients: a locked install through the inspecting gate
with the allowlist `sluice allow-from-lockfile --pins` derives from the
lockfile (run here, never written by hand). npm ci against the registry
stand-in, pip install --require-hashes against a simple index, and cargo
fetch (Debian's cargo 0.66) against a sparse registry each succeed with
the right artifacts, and fail with `integrity_mismatch` when one artifact
on the origin is swapped (same URL, other bytes), leaving the swapped
package uninstalled; npm install of a package the lockfile lacks is
refused. The harness tests at the end run the same clients through a
CONNECT relay with no policy: when they fail, the failures above are the
harness's."""

import json
import os
import shutil
import uuid

import pytest

from sluicetest import crates, pyindex, realclients, registry
from sluicetest.pattern import pattern
from sluicetest.pins import derive, rule_for, rule_is, request_lines, rules, show, sri
from sluicetest.writes import Trace

REG = "registry.inspect.test"
PYPI = "pypi.inspect.test"
CRATES_INDEX = "index.crates.io"
CRATES_DL = "static.crates.io"


def _copy(src, dst):
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _files_containing(root, marker):
    hits = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            try:
                with open(p, "rb") as fh:
                    if marker in fh.read():
                        hits.append(p)
            except OSError:
                pass
    return hits


def _pinned_requests(o, mark, host, path):
    return [q for q in o.requests_since(mark, host) if q.path == path]


def _asked_identity_whole(reqs, what):
    """Every request the origin got for a pinned artifact asked for the
    identity coding, only it, and never for a Range."""
    assert reqs, f"the origin got no request for {what}"
    for q in reqs:
        assert [v.strip().lower() for v in q.header_all("Accept-Encoding")] == ["identity"], \
            f"{what}: the origin was asked {q.header_all('Accept-Encoding')}: {q}"
        assert not q.header_all("Range"), f"{what}: the origin was asked for a Range: {q}"


def _check_pinned_lines(lines, allow, host, path):
    """The request lines for host+path: each allowed by the rule the test
    finds for it (it must carry digests), reason rule, status 200."""
    rule = rule_for(allow, "GET", host, 443, path)
    assert rule is not None and rule.digests, f"no pinned rule for {host}{path} in:\n" + "\n".join(allow)
    got = [l for l in lines if l.get("host") == host and l.get("path") == path]
    assert got, f"no request line for {host}{path}:\n{show(lines)}"
    for l in got:
        assert (l["decision"], l["reason"], l["status"]) == ("allow", "rule", 200) and rule_is(l, rule), \
            f"{host}{path} should be allowed by {rule}:\n{show([l])}"


def _check_mismatch(lines, host, path, expected, body):
    """The swapped artifact's line: deny integrity_mismatch, `expected` the
    lockfile's digests (as the rule carries them), `actual` the swapped
    bytes' in the same algorithms."""
    got = [l for l in lines if l.get("host") == host and l.get("path") == path]
    assert got, f"no request line for the swapped {host}{path}:\n{show(lines)}"
    actual = " ".join(sri(body, d.split("-", 1)[0]) for d in expected)
    for l in got:
        assert (l["decision"], l["reason"], l.get("expected"), l.get("actual")) == \
            ("deny", "integrity_mismatch", " ".join(expected), actual), \
            f"expected deny integrity_mismatch, expected={' '.join(expected)}, actual={actual}:\n{show([l])}"


def _only_rules_on(allow, hosts):
    """The derived allowlist names these hosts only, and only in request
    rules (a host entry beside a host's rules would allow nothing; one
    for another host would be a way out)."""
    for r in rules(allow):
        assert r.is_rule and r.host in hosts and r.port == 443, f"unexpected line {r}:\n" + "\n".join(allow)


# --- npm -----------------------------------------------------------------------

NPM_LOCKED = [("sluice-pin-left", "1.0.0"), ("@sluice/pin-scoped", "2.0.0"), ("sluice-pin-right", "0.3.1")]
NPM_EXTRA = ("sluice-pin-extra", "1.0.0")
NPM_SWAPPED = "@sluice/pin-scoped"


@pytest.fixture(scope="module")
def pin_npm(_inspect_origins, session_dir):
    """Three packages (one scoped) the app locks, one the registry has and
    the lockfile lacks, and other bytes for the scoped one's tarball (its
    code names `marker`)."""
    work = session_dir / "pins-npm"
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    reg = _inspect_origins.npm
    tarballs = {}
    for name, version in NPM_LOCKED + [NPM_EXTRA]:
        code = f"module.exports = {json.dumps(name + '@' + version)};\n"
        tarballs[name] = registry.pack(work, name, version, {"index.js": code}, home)
        reg.add(name, version, tarballs[name])
    # The swapped code comes first in the tarball (npm pack orders files by
    # extension: .js, .json, .txt) and a file of random bytes after it: the
    # code is whole many reads before the body's end (a tiny tarball would
    # come in the gate's last read, and none of it would reach npm at all).
    marker = f"SWAPPED-{uuid.uuid4().hex}"
    swapped = registry.pack(work / "swapped", NPM_SWAPPED, "2.0.0",
                            {"index.js": f"module.exports = '{marker}';\n",
                             "zz-padding.txt": pattern(256 << 10, seed=12)}, home)
    assert len(swapped) > 200 << 10
    assert swapped != tarballs[NPM_SWAPPED]
    app = work / "app"
    app.mkdir(exist_ok=True)
    deps = dict(NPM_LOCKED)
    (app / "package.json").write_text(json.dumps(
        {"name": "sluice-pins-app", "version": "1.0.0", "private": True, "dependencies": deps}, indent=2))
    lock = {"name": "sluice-pins-app", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "sluice-pins-app", "version": "1.0.0", "dependencies": deps}}}
    for name, version in NPM_LOCKED:
        lock["packages"][f"node_modules/{name}"] = {
            "version": version, "resolved": reg.tarball_url(name, version),
            "integrity": reg.integrity(tarballs[name]), "license": "MIT"}
    (app / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    return {"app": app, "tarballs": tarballs, "swapped": swapped, "marker": marker, "registry": reg,
            "integrity": {n: reg.integrity(t) for n, t in tarballs.items()}}


def _tarball_path(reg, name, version):
    return reg.tarball_url(name, version).split(REG, 1)[1]


def _npm_allowlist(pin_npm):
    allow = derive(pin_npm["app"])
    _only_rules_on(allow, {REG})
    reg = pin_npm["registry"]
    for name, version in NPM_LOCKED:
        r = rule_for(allow, "GET", REG, 443, _tarball_path(reg, name, version))
        assert r is not None and r.digests == [pin_npm["integrity"][name]], \
            f"{name}@{version}: no rule pinning its integrity:\n" + "\n".join(allow)
    assert rule_for(allow, "GET", REG, 443, _tarball_path(reg, *NPM_EXTRA)) is None
    assert rule_for(allow, "GET", REG, 443, "/" + NPM_EXTRA[0]) is None
    return allow


def _npm(tmp_path, app, *args, s, **kw):
    return realclients.npm(tmp_path / "home", app, *args, "--fetch-retries=0", proxy_port=s.port, ca=s.ca, **kw)


def test_npm_ci_succeeds_through_a_pins_allowlist(sluice_inspecting, inspect_origins, pin_npm, tmp_path):
    o = inspect_origins
    allow = _npm_allowlist(pin_npm)
    s = sluice_inspecting(allow=allow)
    app = _copy(pin_npm["app"], tmp_path / "app")
    mark = o.mark()
    r = _npm(tmp_path, app, "ci", s=s)
    assert r.returncode == 0, r.stdout + r.stderr
    for name, version in NPM_LOCKED:
        pkg = app / "node_modules" / name
        assert json.loads((pkg / "package.json").read_text())["version"] == version
        assert (pkg / "index.js").read_text() == f"module.exports = {json.dumps(name + '@' + version)};\n"
    lines = request_lines(s, len(o.requests_since(mark)))
    reg = pin_npm["registry"]
    for name, version in NPM_LOCKED:
        path = _tarball_path(reg, name, version)
        _asked_identity_whole(_pinned_requests(o, mark, REG, path), path)
        _check_pinned_lines(lines, allow, REG, path)
    # a complete lockfile: npm ci reads the tarballs and nothing else
    assert {l["path"] for l in lines} == {_tarball_path(reg, n, v) for n, v in NPM_LOCKED}, show(lines)


def test_npm_ci_with_a_swapped_tarball_fails_and_leaves_none_of_it(sluice_inspecting, inspect_origins, pin_npm,
                                                                   tmp_path):
    """The scoped package's tarball on the origin is other bytes (a package
    re-packed with other code) at the same URL: npm ci fails, the line says
    integrity_mismatch with the lockfile's integrity and the swapped bytes'
    digest, and the swapped package is not in node_modules afterwards."""
    o, reg = inspect_origins, pin_npm["registry"]
    allow = _npm_allowlist(pin_npm)
    s = sluice_inspecting(allow=allow)
    app = _copy(pin_npm["app"], tmp_path / "app")
    path = _tarball_path(reg, NPM_SWAPPED, "2.0.0")
    mark = o.mark()
    reg.add(NPM_SWAPPED, "2.0.0", pin_npm["swapped"])
    try:
        r = _npm(tmp_path, app, "ci", s=s)
    finally:
        reg.add(NPM_SWAPPED, "2.0.0", pin_npm["tarballs"][NPM_SWAPPED])
    assert r.returncode != 0, f"npm ci succeeded with a swapped tarball:\n{r.stdout}{r.stderr}"
    s.wait_log(lambda l: l.get("reason") == "integrity_mismatch", what="the integrity_mismatch line")
    _check_mismatch(request_lines(s), REG, path, [pin_npm["integrity"][NPM_SWAPPED]], pin_npm["swapped"])
    _asked_identity_whole(_pinned_requests(o, mark, REG, path), path)
    assert not (app / "node_modules" / NPM_SWAPPED).exists() or \
        not list((app / "node_modules" / NPM_SWAPPED).iterdir()), "the swapped package is in node_modules"
    assert not _files_containing(app, pin_npm["marker"].encode()), "the swapped code is in the app"


def test_npm_ci_never_writes_the_swapped_code_under_the_app(sluice_inspecting, inspect_origins, pin_npm, tmp_path):
    """strace sees every write npm makes: none of the swapped code goes to
    a file under the app, even for a moment. npm extracts a tarball while
    it downloads it (pacote pipes the response through its integrity check
    into tar), so holding back only the body's end would let it write the
    swapped files and remove them at the reset; the gate holds a pinned
    body of up to 8 MiB whole until its digest is known (proxy/README.md,
    "Pinned artifacts")."""
    reg = pin_npm["registry"]
    s = sluice_inspecting(allow=_npm_allowlist(pin_npm))
    app = _copy(pin_npm["app"], tmp_path / "app")
    trace = Trace(tmp_path / "npm.strace")
    reg.add(NPM_SWAPPED, "2.0.0", pin_npm["swapped"])
    try:
        r = _npm(tmp_path, app, "ci", s=s, wrap=trace.wrap)
    finally:
        reg.add(NPM_SWAPPED, "2.0.0", pin_npm["tarballs"][NPM_SWAPPED])
    assert r.returncode != 0, r.stdout + r.stderr
    s.wait_log(lambda l: l.get("reason") == "integrity_mismatch", what="the integrity_mismatch line")
    assert trace.calls(), "strace recorded nothing"
    written = trace.written_containing(pin_npm["marker"], app)
    opened = [p for p in trace.opened_for_writing(app) if f"/node_modules/{NPM_SWAPPED}/" in p]
    assert not written and not opened, \
        f"npm wrote the swapped package under the app: {sorted(set(opened))}; the swapped code into {written}"


def test_npm_install_of_a_package_the_lockfile_lacks_is_refused(sluice_inspecting, inspect_origins, pin_npm,
                                                              tmp_path):
    o = inspect_origins
    s = sluice_inspecting(allow=_npm_allowlist(pin_npm))
    app = _copy(pin_npm["app"], tmp_path / "app")
    before = (app / "package.json").read_text()
    mark = o.mark()
    name = NPM_EXTRA[0]
    r = _npm(tmp_path, app, "install", name, s=s)
    assert r.returncode != 0, f"npm install {name} succeeded:\n{r.stdout}{r.stderr}"
    assert "403" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not (app / "node_modules" / name).exists()
    assert (app / "package.json").read_text() == before
    s.wait_log(lambda l: l.get("event") == "request" and l.get("path") == f"/{name}", what=f"a line for /{name}")
    lines = request_lines(s)
    refused = [l for l in lines if l["decision"] == "deny"]
    assert refused and all((l["path"], l["reason"], l["status"]) == (f"/{name}", "rule_not_matched", 403)
                           for l in refused), show(lines)
    assert not [q for q in o.requests_since(mark, REG) if name in q.path], "the registry was asked for it"


# --- pip -----------------------------------------------------------------------

PIP_LOCKED = [("sluice-pin-a", "1.0.0"), ("pinb", "2.0")]
PIP_SWAPPED = "pinb"


@pytest.fixture(scope="module")
def pin_pip(_inspect_origins, session_dir):
    """Two wheels on the simple index, a requirements.txt that pins both
    with --hash and names the index, and other bytes for pinb's wheel."""
    idx = _inspect_origins.pypi
    wheels = {}
    for name, version in PIP_LOCKED:
        fname, data = pyindex.make_wheel(name, version, f"VALUE = {name + '@' + version!r}\n")
        wheels[name] = (fname, data)
        idx.add(name, fname, data)
    marker = f"SWAPPED-{uuid.uuid4().hex}"
    fname, swapped = pyindex.make_wheel(PIP_SWAPPED, "2.0", f"VALUE = {marker!r}\n")
    assert fname == wheels[PIP_SWAPPED][0] and swapped != wheels[PIP_SWAPPED][1]
    app = session_dir / "pins-pip" / "app"
    app.mkdir(parents=True, exist_ok=True)
    reqs = ["# pinned with hashes: pip install --require-hashes -r requirements.txt",
            f"--index-url https://{PYPI}/simple/"]
    for name, version in PIP_LOCKED:
        reqs += [f"{name}=={version} \\", f"    --hash=sha256:{pyindex.sha256_hex(wheels[name][1])}"]
    (app / "requirements.txt").write_text("\n".join(reqs) + "\n")
    return {"app": app, "wheels": wheels, "swapped": swapped, "marker": marker, "index": idx}


def _wheel_path(pin_pip, name):
    return f"/files/{pin_pip['wheels'][name][0]}"


def _pip_allowlist(pin_pip):
    allow = derive(pin_pip["app"] / "requirements.txt")
    _only_rules_on(allow, {PYPI})
    for name, _ in PIP_LOCKED:
        r = rule_for(allow, "GET", PYPI, 443, _wheel_path(pin_pip, name))
        assert r is not None and sri(pin_pip["wheels"][name][1], "sha256") in r.digests, \
            f"{name}: no rule pinning its wheel's --hash:\n" + "\n".join(allow)
        page = rule_for(allow, "GET", PYPI, 443, f"/simple/{pyindex.normalize(name)}/")
        assert page is not None and not page.digests, f"{name}: no rule for its index page:\n" + "\n".join(allow)
    assert rule_for(allow, "GET", PYPI, 443, "/simple/other-project/") is None
    return allow


def test_pip_install_require_hashes_succeeds_through_a_pins_allowlist(sluice_inspecting, inspect_origins,
                                                                    pin_pip, tmp_path):
    o = inspect_origins
    allow = _pip_allowlist(pin_pip)
    s = sluice_inspecting(allow=allow)
    target = tmp_path / "target"
    mark = o.mark()
    r = pyindex.pip_install(target, pin_pip["app"] / "requirements.txt", s.port, s.ca)
    assert r.returncode == 0, r.stdout + r.stderr
    for name, version in PIP_LOCKED:
        module = name.replace("-", "_")
        assert (target / module / "__init__.py").read_text() == f"VALUE = {name + '@' + version!r}\n"
        assert (target / f"{module}-{version}.dist-info").is_dir()
    lines = request_lines(s, len(o.requests_since(mark)))
    assert all(l["decision"] == "allow" for l in lines), show(lines)
    for name, _ in PIP_LOCKED:
        path = _wheel_path(pin_pip, name)
        _asked_identity_whole(_pinned_requests(o, mark, PYPI, path), path)
        _check_pinned_lines(lines, allow, PYPI, path)
        page = [l for l in lines if l["path"] == f"/simple/{pyindex.normalize(name)}/"]
        assert page and all(l["status"] == 200 for l in page), show(lines)


def test_pip_install_with_a_swapped_wheel_fails_and_installs_none_of_it(sluice_inspecting, inspect_origins,
                                                                       pin_pip, tmp_path):
    o, idx = inspect_origins, pin_pip["index"]
    allow = _pip_allowlist(pin_pip)
    s = sluice_inspecting(allow=allow)
    target = tmp_path / "target"
    path = _wheel_path(pin_pip, PIP_SWAPPED)
    fname = pin_pip["wheels"][PIP_SWAPPED][0]
    mark = o.mark()
    idx.add(PIP_SWAPPED, fname, pin_pip["swapped"])
    try:
        r = pyindex.pip_install(target, pin_pip["app"] / "requirements.txt", s.port, s.ca)
    finally:
        idx.add(PIP_SWAPPED, fname, pin_pip["wheels"][PIP_SWAPPED][1])
    assert r.returncode != 0, f"pip installed a swapped wheel:\n{r.stdout}{r.stderr}"
    s.wait_log(lambda l: l.get("reason") == "integrity_mismatch", what="the integrity_mismatch line")
    rule = rule_for(allow, "GET", PYPI, 443, path)
    _check_mismatch(request_lines(s), PYPI, path, rule.digests, pin_pip["swapped"])
    _asked_identity_whole(_pinned_requests(o, mark, PYPI, path), path)
    installed = sorted(os.listdir(target)) if target.exists() else []
    assert not [f for f in installed if f == PIP_SWAPPED or f.startswith(PIP_SWAPPED + "-")], \
        f"{PIP_SWAPPED} was installed: {installed}"
    assert not (target.exists() and _files_containing(target, pin_pip["marker"].encode()))


# --- cargo ---------------------------------------------------------------------

CARGO_LOCKED = [("pina", "1.0.0"), ("pib", "0.2.0")]    # index paths pi/na/pina and 3/p/pib
CARGO_SWAPPED = "pib"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def _cargo_project(root, deps, checksums):
    """A binary crate depending on deps [(name, version)] from crates.io,
    with its Cargo.lock (version 3, as cargo 0.66 writes it)."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "main.rs").write_text("fn main() {}\n")
    lines = "\n".join(f'{n} = "={v}"' for n, v in deps)
    (root / "Cargo.toml").write_text(f'[package]\nname = "pins-app"\nversion = "0.1.0"\nedition = "2018"\n\n'
                                     f'[dependencies]\n{lines}\n')
    lock = ["# This file is automatically @generated by Cargo.", "# It is not intended for manual editing.",
            "version = 3", ""]
    for n, v in sorted(deps):
        lock += ["[[package]]", f'name = "{n}"', f'version = "{v}"', f'source = "{CRATES_IO}"',
                 f'checksum = "{checksums[n]}"', ""]
    lock += ["[[package]]", 'name = "pins-app"', 'version = "0.1.0"', "dependencies = ["]
    lock += [f' "{n}",' for n, _ in sorted(deps)] + ["]", ""]
    (root / "Cargo.lock").write_text("\n".join(lock))
    return root


@pytest.fixture(scope="module")
def pin_cargo(_inspect_origins, session_dir):
    if not os.access(crates.CARGO, os.X_OK):
        pytest.fail(f"{crates.CARGO} is missing: Debian's cargo (make deps)")
    reg = _inspect_origins.crates
    made = {}
    for name, version in CARGO_LOCKED:
        made[name] = crates.make_crate(name, version, f"pub fn which() -> &'static str {{ \"{name}\" }}\n")
        reg.add(name, version, made[name])
    marker = f"SWAPPED_{uuid.uuid4().hex}"
    swapped = crates.make_crate(CARGO_SWAPPED, "0.2.0", f"pub fn which() -> &'static str {{ \"{marker}\" }}\n")
    app = _cargo_project(session_dir / "pins-cargo" / "app", CARGO_LOCKED,
                         {n: reg.listed[n][v] for n, v in CARGO_LOCKED})
    return {"app": app, "crates": made, "swapped": swapped, "marker": marker, "registry": reg}


def _cargo_allowlist(pin_cargo):
    allow = derive(pin_cargo["app"])
    _only_rules_on(allow, {CRATES_INDEX, CRATES_DL})
    reg = pin_cargo["registry"]
    for name, version in CARGO_LOCKED:
        r = rule_for(allow, "GET", CRATES_DL, 443, reg.crate_path(name, version))
        assert r is not None and r.digests == [sri(pin_cargo["crates"][name], "sha256")], \
            f"{name}: no rule pinning its checksum:\n" + "\n".join(allow)
        idx = rule_for(allow, "GET", CRATES_INDEX, 443, "/" + crates.index_path(name))
        assert idx is not None and not idx.digests, f"{name}: no rule for its index file:\n" + "\n".join(allow)
    return allow


def _cargo_fetch(tmp_path, app, s):
    work = _copy(app, tmp_path / "app")
    home = tmp_path / "cargo-home"
    r = crates.cargo(home, work, "fetch", "--locked", proxy_port=s.port, ca=s.ca)
    return r, work, home


def test_cargo_fetch_succeeds_through_a_pins_allowlist(sluice_inspecting, inspect_origins, pin_cargo, tmp_path):
    o, reg = inspect_origins, pin_cargo["registry"]
    allow = _cargo_allowlist(pin_cargo)
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    r, work, home = _cargo_fetch(tmp_path, pin_cargo["app"], s)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (work / "Cargo.lock").read_text() == (pin_cargo["app"] / "Cargo.lock").read_text()
    for name, version in CARGO_LOCKED:
        [cached] = list(home.glob(f"registry/cache/*/{name}-{version}.crate"))
        assert cached.read_bytes() == pin_cargo["crates"][name]
    lines = request_lines(s, len(o.requests_since(mark)))
    assert all(l["decision"] == "allow" and l["status"] == 200 for l in lines), show(lines)
    for name, version in CARGO_LOCKED:
        path = reg.crate_path(name, version)
        _asked_identity_whole(_pinned_requests(o, mark, CRATES_DL, path), path)
        _check_pinned_lines(lines, allow, CRATES_DL, path)
        assert [l for l in lines if l["host"] == CRATES_INDEX and l["path"] == "/" + crates.index_path(name)], \
            show(lines)


def test_cargo_fetch_with_a_swapped_crate_fails_and_keeps_none_of_it(sluice_inspecting, inspect_origins, pin_cargo,
                                                                    tmp_path):
    """The index still lists the right checksum; only the .crate at its URL
    is other bytes."""
    o, reg = inspect_origins, pin_cargo["registry"]
    allow = _cargo_allowlist(pin_cargo)
    s = sluice_inspecting(allow=allow)
    path = reg.crate_path(CARGO_SWAPPED, "0.2.0")
    mark = o.mark()
    reg.add(CARGO_SWAPPED, "0.2.0", pin_cargo["swapped"], listed=False)
    try:
        r, work, home = _cargo_fetch(tmp_path, pin_cargo["app"], s)
    finally:
        reg.add(CARGO_SWAPPED, "0.2.0", pin_cargo["crates"][CARGO_SWAPPED], listed=False)
    assert r.returncode != 0, f"cargo fetch succeeded with a swapped crate:\n{r.stdout}{r.stderr}"
    s.wait_log(lambda l: l.get("reason") == "integrity_mismatch", what="the integrity_mismatch line")
    _check_mismatch(request_lines(s), CRATES_DL, path, [sri(pin_cargo["crates"][CARGO_SWAPPED], "sha256")],
                    pin_cargo["swapped"])
    _asked_identity_whole(_pinned_requests(o, mark, CRATES_DL, path), path)
    assert not list(home.glob(f"registry/cache/*/{CARGO_SWAPPED}-0.2.0.crate"))
    assert not list(home.glob(f"registry/src/*/{CARGO_SWAPPED}-0.2.0"))
    assert not _files_containing(home, pin_cargo["marker"].encode())


# --- the harness: the same clients through a relay with no policy -----------------

def test_harness_npm_ci_of_the_pinned_app_through_a_plain_relay(inspect_tls, inspect_origins, pin_npm, relay,
                                                                 tmp_path):
    app = _copy(pin_npm["app"], tmp_path / "app")
    r = realclients.npm(tmp_path / "home", app, "ci", proxy_port=relay.port, ca=inspect_tls["upstream_ca"])
    assert r.returncode == 0, r.stdout + r.stderr
    for name, version in NPM_LOCKED:
        assert json.loads((app / "node_modules" / name / "package.json").read_text())["version"] == version
    assert set(relay.targets) == {f"{REG}:443"}, relay.targets


def test_harness_pip_install_through_a_plain_relay(inspect_tls, inspect_origins, pin_pip, relay, tmp_path):
    r = pyindex.pip_install(tmp_path / "t", pin_pip["app"] / "requirements.txt", relay.port,
                            inspect_tls["upstream_ca"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "t" / "pinb" / "__init__.py").exists()
    assert set(relay.targets) == {f"{PYPI}:443"}, relay.targets


def test_harness_cargo_fetch_from_the_sparse_registry_through_a_plain_relay(inspect_tls, inspect_origins,
                                                                            pin_cargo, relay, tmp_path):
    """Debian's cargo 0.66 reads a sparse index (-Z sparse-registry) and
    fetches the crates; the requests are the index's config.json, each
    crate's index file and the .crate files."""
    o = inspect_origins
    mark = o.mark()
    work = _copy(pin_cargo["app"], tmp_path / "app")
    r = crates.cargo(tmp_path / "home", work, "fetch", "--locked", proxy_port=relay.port,
                     ca=inspect_tls["upstream_ca"])
    assert r.returncode == 0, r.stdout + r.stderr
    got = sorted((c.origin, q.path) for c in o.conns_since(mark) for q in c.requests)
    want = sorted([(CRATES_INDEX, "/config.json")] +
                  [(CRATES_INDEX, "/" + crates.index_path(n)) for n, _ in CARGO_LOCKED] +
                  [(CRATES_DL, pin_cargo["registry"].crate_path(n, v)) for n, v in CARGO_LOCKED])
    assert got == want, got
    assert set(relay.targets) == {f"{CRATES_INDEX}:443", f"{CRATES_DL}:443"}, relay.targets


@pytest.mark.parametrize("which", ["npm", "pip", "cargo"])
def test_harness_a_swapped_artifact_is_other_bytes_at_the_same_url(inspect_tls, inspect_origins, pin_npm, pin_pip,
                                                                   pin_cargo, relay, which):
    """What the swap tests rely on: the origin then serves the swapped
    bytes at the artifact's URL, and the right ones again after."""
    if which == "npm":
        reg = pin_npm["registry"]
        url = reg.tarball_url(NPM_SWAPPED, "2.0.0")
        right, bad = pin_npm["tarballs"][NPM_SWAPPED], pin_npm["swapped"]
        swap = lambda b: reg.add(NPM_SWAPPED, "2.0.0", b)   # noqa: E731
    elif which == "pip":
        fname = pin_pip["wheels"][PIP_SWAPPED][0]
        url = pin_pip["index"].file_url(fname)
        right, bad = pin_pip["wheels"][PIP_SWAPPED][1], pin_pip["swapped"]
        swap = lambda b: pin_pip["index"].add(PIP_SWAPPED, fname, b)   # noqa: E731
    else:
        reg = pin_cargo["registry"]
        url = reg.crate_url(CARGO_SWAPPED, "0.2.0")
        right, bad = pin_cargo["crates"][CARGO_SWAPPED], pin_cargo["swapped"]
        swap = lambda b: reg.add(CARGO_SWAPPED, "0.2.0", b, listed=False)   # noqa: E731
    ca = inspect_tls["upstream_ca"]
    assert realclients.urllib_request(relay.port, ca, url)[2] == right
    swap(bad)
    try:
        assert realclients.urllib_request(relay.port, ca, url)[2] == bad
    finally:
        swap(right)
    assert realclients.urllib_request(relay.port, ca, url)[2] == right
