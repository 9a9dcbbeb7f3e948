#!/bin/sh
# Seed corpora for the fuzz targets: tests/fuzz/corpus/<target>/, made from
# the committed hand-written seeds (tests/fuzz/seeds/<target>/) and from the
# project's fixtures (tests/lockfiles/**, proxy/example/). Generated at test
# time, never committed (tests/fuzz/.gitignore); rebuilt from scratch each
# time. One python3 process (a dependency of the test suite already) does
# the work: a shell loop forking per file took minutes.
#
#   tests/fuzz/make_corpus.sh            (from anywhere)
set -eu
cd "$(dirname "$0")/../.."
exec /usr/bin/python3 - <<'EOF'
import fnmatch
import hashlib
import os
import re
import shutil

FUZZ = "tests/fuzz"
OUT = os.path.join(FUZZ, "corpus")
shutil.rmtree(OUT, ignore_errors=True)
os.makedirs(OUT)


def put(target, data):
    """Add an input to a corpus, named by its content hash (dedups)."""
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def walk_files(top):
    out = []
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for n in sorted(files):
            out.append(os.path.join(root, n))
    return out


# 1. Hand-written seeds.
seeds = os.path.join(FUZZ, "seeds")
for t in sorted(os.listdir(seeds)):
    d = os.path.join(seeds, t)
    if t.startswith("fuzz_") and os.path.isdir(d):
        for f in sorted(os.listdir(d)):
            put(t, read(os.path.join(d, f)))

# Files of a fixture case that are the test's, not the project's.
META = {"expected.txt", "expected.exit", "expected.err", "expected.out", "existing.out", "args"}
# The lockfile names some reader recognises (allowlist/lockfiles/lock_*.c); another
# main file would be dropped by fuzz_lockfile itself anyway.
LOCK_PATTERNS = [
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "pip.conf",
    "*requirements*.txt", "Pipfile.lock", "poetry.lock", "uv.lock", "pdm.lock", "Cargo.lock",
    "go.mod", "go.sum", "go.env", "Gemfile.lock", "gems.locked", "composer.lock",
    "packages.lock.json", "pom.xml", "gradle.lockfile", "settings.gradle", "settings.gradle.kts",
    "build.gradle", "build.gradle.kts", "Dockerfile", "dockerfile", "Containerfile",
    "Dockerfile.*", "Containerfile.*", "*.Dockerfile", "*.dockerfile",
]


def is_lockfile(base):
    return any(fnmatch.fnmatchcase(base, p) for p in LOCK_PATTERNS)


# 2. fuzz_lockfile: one input per lockfile of every fixture directory: the
# lockfile, then every other file under that directory by its relative path
# (config files, included requirement files, Gradle subprojects...), in the
# NAME\0DATA(\0\0NAME\0DATA)* form of fuzz_util.h.
FIX = "tests/lockfiles"
for root, dirs, files in sorted(os.walk(FIX)):
    dirs.sort()
    if os.path.relpath(root, FIX).count(os.sep) < 1:
        continue                      # tests/lockfiles and tests/lockfiles/<format>
    for base in sorted(files):
        if base in META or not is_lockfile(base):
            continue
        lock = os.path.join(root, base)
        data = base.encode() + b"\0" + read(lock)
        for other in walk_files(root):
            if other == lock or os.path.basename(other) in META:
                continue
            data += b"\0\0" + os.path.relpath(other, root).encode() + b"\0" + read(other)
        put("fuzz_lockfile", data)

# 3. fuzz_toml: every TOML file of the fixtures.
TOML = {"Cargo.lock", "poetry.lock", "uv.lock", "pdm.lock"}
for f in walk_files(FIX):
    b = os.path.basename(f)
    if b.endswith(".toml") or b in TOML or f.endswith("/.cargo/config"):
        put("fuzz_toml", read(f))

# 4. fuzz_allowlist: expected outputs are allowlists ("host:port  # files"),
# and the example policy's allowlist. fuzz_host: every host:port in them,
# and the host alone. fuzz_url: every URL the fixtures hold.
hosts = set()
for f in walk_files(FIX):
    if os.path.basename(f) == "expected.txt":
        data = read(f)
        if data:
            put("fuzz_allowlist", data)
        for line in data.decode("utf-8", "replace").splitlines():
            hp = line.split("#", 1)[0].strip()
            if hp:
                hosts.add(hp)
                hosts.add(hp.rsplit(":", 1)[0])
if os.path.isfile("proxy/example/allowlist.txt"):
    put("fuzz_allowlist", read("proxy/example/allowlist.txt"))
for h in sorted(hosts):
    put("fuzz_host", h)

URL = re.compile(rb"""(?:[a-z][a-z0-9+.-]*://|git@)[^"' <>,;)\s]+""")
urls = set()
for f in walk_files(FIX):
    urls.update(URL.findall(read(f)))
for u in sorted(urls):
    put("fuzz_url", u)

# 5. fuzz_config: the example policy with its allowlist.
if os.path.isfile("proxy/example/sluice.ini"):
    data = b"sluice.ini\0" + read("proxy/example/sluice.ini")
    if os.path.isfile("proxy/example/allowlist.txt"):
        data += b"\0\0allowlist.txt\0" + read("proxy/example/allowlist.txt")
    put("fuzz_config", data)

# 6. fuzz_jsonload: every JSON file of the fixtures (package-lock.json,
# npm-shrinkwrap.json, composer.lock, composer.json, Pipfile.lock,
# packages.lock.json, ...).
JSONS = {"composer.lock", "Pipfile.lock"}
for f in walk_files(FIX):
    b = os.path.basename(f)
    if b.endswith(".json") or b in JSONS:
        put("fuzz_jsonload", read(f))

for t in sorted(os.listdir(OUT)):
    print("%-22s %5d seeds" % (t, len(os.listdir(os.path.join(OUT, t)))))
EOF
