#!/usr/bin/python3
"""Write a synthetic npm package-lock.json (lockfileVersion 3) with N packages
(default 100,000), for timing `sluice allow-from-lockfile` (bench/lockfile_speed.sh).

    bench/gen_package_lock.py [-n N] [--seed S] OUT.json

The file looks like what npm 9 writes: a root package, then one entry per
installed package under "packages", keyed by its node_modules path. About 8%
are nested (node_modules/a/node_modules/b), 15% are scoped (@scope/name).
Most tarballs come from registry.npmjs.org; a few from other places, so the
derived allowlist has more than one entry:

    95.0%  https://registry.npmjs.org/...             (the public registry)
     3.0%  https://npm.pkg.example-corp.com/...       (a private registry)
     1.0%  git+ssh / github tarballs (codeload.github.com)
     0.5%  https://registry.yarnpkg.com/...           (a mirror)
     0.5%  "file:" and "link": true entries (no host)

Deterministic for a given N and seed. Python standard library only.
"""

import argparse
import base64
import json
import random
import sys

WORDS = ("core util parse json http stream buffer path glob fs event emitter loader "
         "plugin babel eslint react vue test mock lodash chalk debug color string array "
         "object promise async cache queue log config yaml toml ini crypto hash url "
         "query router server client socket proxy agent retry fetch tar zip gzip").split()


def name(rng, i):
    a, b = rng.choice(WORDS), rng.choice(WORDS)
    base = f"{a}-{b}-{i:05d}"
    if rng.random() < 0.15:
        return f"@{rng.choice(WORDS)}{i % 97}/{base}"
    return base


def version(rng):
    return f"{rng.randint(0, 12)}.{rng.randint(0, 30)}.{rng.randint(0, 40)}"


def integrity(rng):
    return "sha512-" + base64.b64encode(rng.randbytes(64)).decode()


def tarball(host, pkg, ver):
    short = pkg.rsplit("/", 1)[-1]
    return f"https://{host}/{pkg}/-/{short}-{ver}.tgz"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100_000, help="number of packages (default 100000)")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("out")
    a = ap.parse_args()
    rng = random.Random(a.seed)

    names = [name(rng, i) for i in range(a.n)]
    top = names[: max(1, a.n // 20)]
    packages = {
        "": {
            "name": "bench-app",
            "version": "1.0.0",
            "license": "MIT",
            "dependencies": {n: "^" + version(rng) for n in top[:2000]},
        }
    }
    placed = []
    for i, pkg in enumerate(names):
        ver = version(rng)
        if placed and rng.random() < 0.08:
            parent = rng.choice(placed)
            key = f"{parent}/node_modules/{pkg}"
        else:
            key = f"node_modules/{pkg}"
            if len(placed) < 5000:
                placed.append(key)
        r = rng.random()
        entry = {"version": ver}
        if r < 0.95:
            entry["resolved"] = tarball("registry.npmjs.org", pkg, ver)
            entry["integrity"] = integrity(rng)
        elif r < 0.98:
            entry["resolved"] = tarball("npm.pkg.example-corp.com", pkg, ver)
            entry["integrity"] = integrity(rng)
        elif r < 0.99:
            sha = rng.randbytes(20).hex()
            if rng.random() < 0.5:
                entry["resolved"] = f"git+ssh://git@github.com/example-org/{pkg.replace('/', '-')}.git#{sha}"
            else:
                entry["resolved"] = f"https://codeload.github.com/example-org/{pkg.replace('/', '-')}/tar.gz/{sha}"
        elif r < 0.995:
            entry["resolved"] = tarball("registry.yarnpkg.com", pkg, ver)
            entry["integrity"] = integrity(rng)
        else:
            if rng.random() < 0.5:
                entry["resolved"] = f"file:vendor/{pkg.replace('/', '-')}-{ver}.tgz"
            else:
                entry = {"resolved": f"packages/{pkg.replace('/', '-')}", "link": True}
                packages[key] = entry
                continue
        if rng.random() < 0.3:
            entry["dev"] = True
        if rng.random() < 0.4:
            deps = rng.sample(names, k=min(len(names), rng.randint(1, 4)))
            entry["dependencies"] = {d: "^" + version(rng) for d in deps if d != pkg}
        if rng.random() < 0.05:
            entry["engines"] = {"node": ">=14"}
        entry["license"] = rng.choice(("MIT", "ISC", "Apache-2.0", "BSD-3-Clause"))
        packages[key] = entry

    doc = {"name": "bench-app", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
           "packages": packages}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"{a.out}: {len(packages) - 1} packages", file=sys.stderr)


if __name__ == "__main__":
    main()
