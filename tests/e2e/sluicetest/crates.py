"""A cargo sparse registry stand-in (RFC 2789), served by the inspecting
origins for crates.inspect.test: /index/config.json (with its `dl`
template), /index/PREFIX/NAME index files (one JSON line per version, the
.crate's sha256 as `cksum`) and the .crate files at the URL `dl` gives.
Crates are made here (make_crate: a gzipped tar, as `cargo package`
writes), so a test can serve other bytes at the same URL.

cargo is Debian's (/usr/bin/cargo, 0.66 in Debian 12: sparse registries
are unstable there, see cargo_env), with a tmp CARGO_HOME and only the
proxy and CA the test gives it."""

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
import threading

from .proc import client_env

CARGO = "/usr/bin/cargo"
INDEX = "/index/"
DL_PATH = "/crates/{crate}/{crate}-{version}.crate"


def index_path(name):
    """The sparse index file of a crate: 1/a, 2/ab, 3/a/abc, ab/cd/abcd..."""
    n = name.lower()
    if len(n) <= 2:
        return f"{len(n)}/{n}"
    if len(n) == 3:
        return f"3/{n[0]}/{n}"
    return f"{n[:2]}/{n[2:4]}/{n}"


def make_crate(name, version, code):
    """The bytes of NAME-VERSION.crate: NAME-VERSION/Cargo.toml and
    src/lib.rs, fixed timestamps (same input, same bytes)."""
    files = [
        ("Cargo.toml", f'[package]\nname = "{name}"\nversion = "{version}"\nedition = "2018"\n'
                       f'description = "a crate the sluice tests make"\nlicense = "MIT"\n'.encode()),
        ("src/lib.rs", code.encode()),
    ]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for path, data in files:
            ti = tarfile.TarInfo(f"{name}-{version}/{path}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 1767225600
            t.addfile(ti, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


class CratesRegistry:
    def __init__(self, base):
        self.base = base.rstrip("/")
        self.lock = threading.Lock()
        self.crates = {}        # name -> {version: .crate bytes}
        self.listed = {}        # name -> {version: cksum the index lists}

    @property
    def index_url(self):
        return f"{self.base}{INDEX}"

    @property
    def dl(self):
        return f"{self.base}{DL_PATH}"

    def crate_url(self, name, version):
        return f"{self.base}{DL_PATH.format(crate=name, version=version)}"

    def add(self, name, version, crate, listed=True):
        """Serve crate at its dl URL; with listed, also list it (with its
        sha256) in the index. listed=False replaces the bytes only: same
        URL, other bytes, the index unchanged."""
        with self.lock:
            self.crates.setdefault(name, {})[version] = crate
            if listed:
                self.listed.setdefault(name, {})[version] = hashlib.sha256(crate).hexdigest()

    def handle(self, req):
        js = [("Content-Type", "application/json")]
        path = req.path
        with self.lock:
            if req.method not in ("GET", "HEAD"):
                return "405 Method Not Allowed", js, b'{"errors":[{"detail":"read only"}]}', False
            if path == f"{INDEX}config.json":
                return "200 OK", js, json.dumps({"dl": self.dl, "api": self.base}).encode(), False
            if path.startswith(INDEX):
                for name, versions in self.listed.items():
                    if path == INDEX + index_path(name):
                        lines = [json.dumps({"name": name, "vers": v, "deps": [], "cksum": ck,
                                             "features": {}, "yanked": False})
                                 for v, ck in sorted(versions.items())]
                        return "200 OK", [("Content-Type", "text/plain")], ("\n".join(lines) + "\n").encode(), False
            for name, versions in self.crates.items():
                for v, data in versions.items():
                    if path == DL_PATH.format(crate=name, version=v):
                        return "200 OK", [("Content-Type", "application/x-tar")], data, False
        return "404 Not Found", [("Content-Type", "text/plain")], b"not found\n", False


def cargo_env(home, **extra):
    """Debian's cargo 0.66: a tmp CARGO_HOME; sparse registries are
    unstable in 0.66, so -Z sparse-registry is let through on a stable
    toolchain (cargo's own channel override), and nothing of the user's."""
    env = client_env(CARGO_HOME=str(home), HOME=str(home),
                     __CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS="nightly",
                     CARGO_UNSTABLE_SPARSE_REGISTRY="true", CARGO_TERM_COLOR="never",
                     CARGO_NET_RETRY="0", CARGO_HTTP_TIMEOUT="30")
    for k in list(env):
        if k.startswith(("CARGO_", "RUSTUP_")) and k not in (
                "CARGO_HOME", "CARGO_UNSTABLE_SPARSE_REGISTRY", "CARGO_TERM_COLOR", "CARGO_NET_RETRY",
                "CARGO_HTTP_TIMEOUT"):
            del env[k]
    env["PATH"] = "/usr/bin:/bin"     # Debian's cargo and rustc, not rustup's (~/.cargo/bin)
    env.update(extra)
    return env


def cargo(home, project, *args, proxy_port, ca, timeout=120):
    """cargo ARGS in project, through the proxy (http.proxy), trusting
    only ca (http.cainfo)."""
    cmd = [CARGO, "-Z", "sparse-registry", *args, "--config", f'http.proxy="127.0.0.1:{proxy_port}"',
           "--config", f'http.cainfo="{ca}"', "--config", "http.check-revoke=false"]
    return subprocess.run(cmd, cwd=project, env=cargo_env(home), capture_output=True, text=True,
                          timeout=timeout)
