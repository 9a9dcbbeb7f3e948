"""Real clients through a proxy on 127.0.0.1:PORT (sluice, or the harness
relay): Node's https with node_client.js, Python urllib, git and npm. Each
runs with a tmp HOME and no proxy from the environment, trusts only the CA
it is given, and names no host but the test's own."""

import json
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from .gitbackend import GIT, git_env
from .proc import client_env
from .registry import REGISTRY, npm_bin, npm_env

NODE_CLIENT = Path(__file__).with_name("node_client.js")


def node_requests(proxy_port, ca, requests, timeout=60):
    """Run node_client.js: {'results': [...], 'tunnels': N} or {'error': ...}."""
    node = shutil.which("node")
    if node is None:
        raise AssertionError("node is not installed (Node 20 is needed for the Node client tests)")
    spec = {"proxy": f"127.0.0.1:{proxy_port}", "ca": str(ca), "requests": requests}
    r = subprocess.run([node, str(NODE_CLIENT), json.dumps(spec)], capture_output=True, text=True,
                       env=client_env(), timeout=timeout)
    try:
        out = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"node_client.js printed no JSON (exit {r.returncode}): {r.stdout!r} {r.stderr!r}")
    out["exit"], out["stderr"] = r.returncode, r.stderr
    return out


def urllib_request(proxy_port, ca, url, method="GET", headers=None, data=None, timeout=30):
    """(status, headers, body) of one request through the proxy with urllib;
    an HTTP error status is a result, not an exception."""
    ctx = ssl.create_default_context(cafile=str(ca))
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"https": f"http://127.0.0.1:{proxy_port}",
                                     "http": f"http://127.0.0.1:{proxy_port}"}),
        urllib.request.HTTPSHandler(context=ctx))
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def git(home, *args, proxy_port=None, ca=None, cwd=None, timeout=120):
    """git through the proxy (http.proxy, http.sslCAInfo), or with
    http.curloptResolve pinning the test names when proxy_port is None."""
    cfg = []
    if proxy_port is not None:
        cfg += ["-c", f"http.proxy=http://127.0.0.1:{proxy_port}"]
    else:
        from .inspecting import ORIGINS
        for name, (addr, _, _) in ORIGINS.items():
            cfg += ["-c", f"http.curloptResolve={name}:443:{addr}"]
    if ca is not None:
        cfg += ["-c", f"http.sslCAInfo={ca}"]
    return subprocess.run([GIT, *cfg, *args], cwd=cwd, env=git_env(home), capture_output=True, text=True,
                          timeout=timeout)


def npm(home, cwd, *args, proxy_port, ca, auth_token=None, timeout=180, wrap=()):
    """npm against the registry stand-in through the proxy; `wrap` is a
    command npm runs under (strace, say)."""
    npmrc = [f"registry={REGISTRY}", f"https-proxy=http://127.0.0.1:{proxy_port}/",
             f"proxy=http://127.0.0.1:{proxy_port}/", f"cafile={ca}", "strict-ssl=true",
             "update-notifier=false", "audit=false", "fund=false"]
    if auth_token:
        npmrc.append(f"//registry.inspect.test/:_authToken={auth_token}")
    Path(home).mkdir(parents=True, exist_ok=True)
    (Path(home) / ".npmrc").write_text("\n".join(npmrc) + "\n")
    cmd = [*wrap, npm_bin(), *args, f"--registry={REGISTRY}", f"--https-proxy=http://127.0.0.1:{proxy_port}/",
           f"--cafile={ca}", "--no-audit", "--no-fund", "--update-notifier=false"]
    return subprocess.run(cmd, cwd=cwd, env=npm_env(Path(home)), capture_output=True, text=True,
                          timeout=timeout)
