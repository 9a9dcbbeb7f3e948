"""A cargo sparse registry stand-in (RFC 2789), served by the inspecting
origins under crates.io's own names, which resolve to namespace addresses
only (dns.py): index.crates.io has /config.json (its `dl`) and the index
files PREFIX/NAME (one JSON line per version, the .crate's sha256 as
`cksum`), static.crates.io the .crate files at DL/NAME/VERSION/download.
crates.io because `allow-from-lockfile --pins` can pin only its packages:
another registry's download URL is in its own config.json, unknown offline.
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
    """A sparse index at index_base (config.json's dl = dl, no markers: cargo
    appends /{crate}/{version}/download) and the .crate files under dl.
    `index` and `files` are the two origins' handlers."""

    def __init__(self, index_base, dl):
        self.index_base = index_base if index_base.endswith("/") else index_base + "/"
        self.dl = dl.rstrip("/")
        self.dl_path = "/" + self.dl.split("://", 1)[1].partition("/")[2]
        self.lock = threading.Lock()
        self.crates = {}        # name -> {version: .crate bytes}
        self.listed = {}        # name -> {version: cksum the index lists}
        self.index = _Handler(self._index)
        self.files = _Handler(self._files)

    def crate_url(self, name, version):
        return f"{self.dl}/{name}/{version}/download"

    def crate_path(self, name, version):
        return f"{self.dl_path}/{name}/{version}/download"

    def add(self, name, version, crate, listed=True):
        """Serve crate at its download URL; with listed, also list it (with
        its sha256) in the index. listed=False replaces the bytes only: same
        URL, other bytes, the index unchanged."""
        with self.lock:
            self.crates.setdefault(name, {})[version] = crate
            if listed:
                self.listed.setdefault(name, {})[version] = hashlib.sha256(crate).hexdigest()

    def _index(self, req):
        with self.lock:
            if req.path == "/config.json":
                return "200 OK", JSON, json.dumps({"dl": self.dl, "api": None}).encode(), False
            for name, versions in self.listed.items():
                if req.path == "/" + index_path(name):
                    lines = [json.dumps({"name": name, "vers": v, "deps": [], "cksum": ck,
                                         "features": {}, "yanked": False})
                             for v, ck in sorted(versions.items())]
                    return "200 OK", TEXT, ("\n".join(lines) + "\n").encode(), False
        return NOT_FOUND

    def _files(self, req):
        with self.lock:
            for name, versions in self.crates.items():
                for v, data in versions.items():
                    if req.path == self.crate_path(name, v):
                        return "200 OK", [("Content-Type", "application/gzip")], data, False
        return NOT_FOUND


JSON = [("Content-Type", "application/json")]
TEXT = [("Content-Type", "text/plain")]
NOT_FOUND = ("404 Not Found", TEXT, b"not found\n", False)


class _Handler:
    def __init__(self, fn):
        self.fn = fn

    def handle(self, req):
        if req.method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", TEXT, b"read only\n", False
        return self.fn(req)


def cargo_env(home, **extra):
    """Debian's cargo 0.66 with a tmp CARGO_HOME and nothing of the user's.
    Sparse registries are unstable in 0.66: -Z sparse-registry is let
    through on a stable toolchain by cargo's own channel override."""
    env = client_env(CARGO_HOME=str(home), HOME=str(home),
                     __CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS="nightly",
                     CARGO_TERM_COLOR="never", CARGO_NET_RETRY="0", CARGO_HTTP_TIMEOUT="30")
    for k in list(env):
        if k.startswith(("CARGO_", "RUSTUP_", "RUSTC")) and k not in (
                "CARGO_HOME", "CARGO_TERM_COLOR", "CARGO_NET_RETRY", "CARGO_HTTP_TIMEOUT"):
            del env[k]
    env["PATH"] = "/usr/bin:/bin"     # Debian's cargo and rustc, not rustup's (~/.cargo/bin)
    env.update(extra)
    return env


def cargo(home, project, *args, proxy_port, ca, timeout=120):
    """cargo ARGS in project through the proxy (http.proxy), trusting only
    ca (http.cainfo). With -Z sparse-registry, cargo 0.66 reads crates.io
    from its sparse index, https://index.crates.io/, as cargo >= 1.70 does
    by default."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[http]\nproxy = "127.0.0.1:{proxy_port}"\ncainfo = "{ca}"\ncheck-revoke = false\n'
        '\n[net]\nretry = 0\n')
    cmd = [CARGO, "-Z", "sparse-registry", *args]
    return subprocess.run(cmd, cwd=project, env=cargo_env(home), capture_output=True, text=True,
                          timeout=timeout)
