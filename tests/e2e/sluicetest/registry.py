"""An npm registry stand-in, served by the inspecting origins
(sluicetest/inspecting.py) for registry.inspect.test: packuments and
tarballs of packages the session makes with `npm pack`, and `PUT /<name>`
accepted (so that only the gate's rules refuse a publish).

npm runs with a tmp HOME and cache, update-notifier, audit and fund off,
and a registry and proxy of the test's own (npm_env): it never names any
other host."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import threading

from .proc import client_env

REGISTRY = "https://registry.inspect.test/"


class NpmRegistry:
    def __init__(self, base):
        self.base = base.rstrip("/")
        self.lock = threading.Lock()
        self.packages = {}          # name -> {version: tarball bytes}
        self.published = []         # (name, parsed body) of each accepted PUT

    def add(self, name, version, tarball):
        with self.lock:
            self.packages.setdefault(name, {})[version] = tarball

    def tarball_url(self, name, version):
        """npm's layout: /NAME/-/NAME-V.tgz; for @scope/name, /@scope/name/-/name-V.tgz."""
        return f"{self.base}/{name}/-/{name.rpartition('/')[2]}-{version}.tgz"

    @staticmethod
    def integrity(tarball):
        return "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()

    def packument(self, name):
        versions = self.packages[name]
        latest = sorted(versions)[-1]
        return {"_id": name, "name": name, "dist-tags": {"latest": latest},
                "versions": {v: {"name": name, "version": v,
                                 "dist": {"tarball": self.tarball_url(name, v),
                                          "integrity": self.integrity(t),
                                          "shasum": hashlib.sha1(t).hexdigest()}}
                             for v, t in versions.items()}}

    def handle(self, req):
        """(status, headers, body, close) for a request to the registry."""
        js = [("Content-Type", "application/json")]
        parts = req.path.lstrip("/").split("/")
        # a scoped name is one part: /@scope%2fname (packument), /@scope/name/-/... (tarball)
        if parts and parts[0].startswith("@"):
            if len(parts) == 1 and "%2f" in parts[0].lower():
                i = parts[0].lower().index("%2f")
                parts = [parts[0][:i] + "/" + parts[0][i + 3:]]
            elif len(parts) >= 2:
                parts = [parts[0] + "/" + parts[1]] + parts[2:]
        with self.lock:
            if req.method in ("GET", "HEAD") and len(parts) == 1 and parts[0] in self.packages:
                return "200 OK", js, json.dumps(self.packument(parts[0])).encode(), False
            if req.method in ("GET", "HEAD") and len(parts) == 3 and parts[1] == "-" and parts[0] in self.packages:
                name = parts[0]
                for v, t in self.packages[name].items():
                    if parts[2] == f"{name.rpartition('/')[2]}-{v}.tgz":
                        return "200 OK", [("Content-Type", "application/octet-stream")], t, False
            if req.method == "PUT" and len(parts) == 1 and parts[0]:
                try:
                    doc = json.loads(req.body)
                except ValueError:
                    return "400 Bad Request", js, b'{"error":"not JSON"}', False
                self.published.append((parts[0], doc))
                return "201 Created", js, b'{"ok":"created new package"}', False
        return "404 Not Found", js, b'{"error":"not found"}', False


def npm_env(home, **extra):
    """The environment npm runs in: a tmp HOME and cache, nothing from the
    user's config, no proxy from the environment, nothing that phones home."""
    env = client_env(HOME=str(home), npm_config_userconfig=str(home / ".npmrc"),
                    npm_config_globalconfig=str(home / "npmrc-global"),
                    npm_config_cache=str(home / "npm-cache"), npm_config_update_notifier="false",
                    npm_config_audit="false", npm_config_fund="false", npm_config_registry=REGISTRY,
                    npm_config_loglevel="warn", NO_UPDATE_NOTIFIER="1")
    for k in list(env):
        if k.lower().startswith("npm_config_") and k not in (
                "npm_config_userconfig", "npm_config_globalconfig", "npm_config_cache",
                "npm_config_update_notifier", "npm_config_audit", "npm_config_fund",
                "npm_config_registry", "npm_config_loglevel"):
            del env[k]
    env.update(extra)
    return env


def npm_bin():
    b = shutil.which("npm")
    if b is None:
        raise AssertionError("npm is not installed (Node 20 and npm are needed for the npm tests)")
    return b


PACKAGES = [
    ("sluice-left-pad", "1.0.0", "module.exports = (s, n, c = ' ') => String(s).padStart(n, c);\n"),
    ("sluice-is-even", "2.1.0", "module.exports = (n) => n % 2 === 0;\n"),
]


def pack(workdir, name, version, files, home):
    """`npm pack` of a package NAME@VERSION whose files are {path: text or
    bytes} (package.json is written here, main index.js): the tarball's
    bytes."""
    src = workdir / "npm-src" / name.replace("/", "+") / version
    src.mkdir(parents=True, exist_ok=True)
    (src / "package.json").write_text(json.dumps(
        {"name": name, "version": version, "main": "index.js", "license": "MIT",
         "description": "a package the sluice tests make"}))
    for path, data in files.items():
        if isinstance(data, bytes):
            (src / path).write_bytes(data)
        else:
            (src / path).write_text(data)
    out = workdir / "npm-packed" / name.replace("/", "+") / version
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([npm_bin(), "pack", "--offline", "--json", "--pack-destination", str(out)],
                       cwd=src, env=npm_env(home), capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"npm pack {name}@{version} failed: {r.stderr}")
    return (out / os.path.basename(json.loads(r.stdout)[0]["filename"])).read_bytes()


def make_packages(workdir, registry):
    """Make PACKAGES with `npm pack` and add them to the registry. Returns
    {'packages': [(name, version, integrity)], 'app': a project dir with a
    package.json and package-lock.json that depend on both (for npm ci),
    'publishable': a package dir not in the registry (for npm publish)}."""
    home = workdir / "npm-home"
    home.mkdir(parents=True, exist_ok=True)
    out = []
    for name, version, code in PACKAGES:
        pkg = workdir / "npm-src" / name
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "package.json").write_text(json.dumps(
            {"name": name, "version": version, "main": "index.js", "license": "MIT",
             "description": "a package the sluice tests make"}))
        (pkg / "index.js").write_text(code)
        r = subprocess.run([npm_bin(), "pack", "--offline", "--json", "--pack-destination", str(workdir)],
                           cwd=pkg, env=npm_env(home), capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"npm pack {name} failed: {r.stderr}")
        filename = json.loads(r.stdout)[0]["filename"]
        tarball = (workdir / os.path.basename(filename)).read_bytes()
        registry.add(name, version, tarball)
        out.append((name, version, registry.integrity(tarball)))
    app = workdir / "npm-app"
    app.mkdir(exist_ok=True)
    deps = {n: v for n, v, _ in out}
    (app / "package.json").write_text(json.dumps(
        {"name": "sluice-test-app", "version": "1.0.0", "private": True, "dependencies": deps}))
    lock = {"name": "sluice-test-app", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "sluice-test-app", "version": "1.0.0", "dependencies": deps}}}
    for n, v, integrity in out:
        lock["packages"][f"node_modules/{n}"] = {"version": v, "resolved": registry.tarball_url(n, v),
                                                 "integrity": integrity, "license": "MIT"}
    (app / "package-lock.json").write_text(json.dumps(lock, indent=2))
    pub = workdir / "npm-publishable"
    pub.mkdir(exist_ok=True)
    (pub / "package.json").write_text(json.dumps(
        {"name": "sluice-secret-dump", "version": "0.0.1", "main": "index.js", "license": "MIT"}))
    (pub / "index.js").write_text("module.exports = 'what an agent would publish';\n")
    return {"packages": out, "app": app, "publishable": pub}
