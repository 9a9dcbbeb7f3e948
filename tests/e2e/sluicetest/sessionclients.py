"""Real clients given a proxy URL with a session's credentials in it,
http://NAME:TOKEN@127.0.0.1:PORT, as a sandbox would be: curl, Python
urllib and requests, Node (node_proxy_url_client.js), npm and git. Each
runs with a tmp HOME, no proxy or CA from the environment, and trusts only
the CA it is given."""

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

NODE_CLIENT = Path(__file__).with_name("node_proxy_url_client.js")


def curl(proxy_url, *args, timeout=60):
    cmd = ["curl", "-sS", "--noproxy", "", "-x", proxy_url, "--max-time", str(timeout), *args]
    return subprocess.run(cmd, capture_output=True, env=client_env(), timeout=timeout + 10)


def urllib_get(proxy_url, ca, url, timeout=30):
    """(status, headers, body); an HTTP error status is a result. A refused
    CONNECT is urllib's own error: (None, None, the error's text)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"https": proxy_url, "http": proxy_url}),
        urllib.request.HTTPSHandler(context=ctx))
    try:
        with opener.open(urllib.request.Request(url), timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except (urllib.error.URLError, OSError) as e:
        return None, None, str(e)


def requests_get(proxy_url, ca, url, timeout=30):
    """(status, headers, body) with requests, or (None, None, error text)
    for a refused CONNECT (requests raises ProxyError)."""
    import requests
    with requests.Session() as sess:
        sess.trust_env = False
        try:
            r = sess.get(url, proxies={"http": proxy_url, "https": proxy_url}, verify=str(ca), timeout=timeout)
        except requests.exceptions.RequestException as e:
            return None, None, str(e)
        return r.status_code, r.headers, r.content


def node(proxy_url, ca, urls, timeout=60):
    exe = shutil.which("node")
    if exe is None:
        raise AssertionError("node is not installed (Node 20 is needed for the Node client tests)")
    spec = {"proxy": proxy_url, "ca": str(ca), "requests": [{"method": "GET", "url": u} for u in urls]}
    r = subprocess.run([exe, str(NODE_CLIENT), json.dumps(spec)], capture_output=True, text=True,
                       env=client_env(), timeout=timeout)
    try:
        out = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"{NODE_CLIENT.name} printed no JSON (exit {r.returncode}): {r.stdout!r} {r.stderr!r}")
    out["exit"], out["stderr"] = r.returncode, r.stderr
    return out


def npm(home, cwd, *args, proxy_url, ca, timeout=180):
    """npm against the registry stand-in (https://registry.inspect.test/)
    with the proxy URL in .npmrc and on the command line; no retries, so a
    refusal fails at once."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    npmrc = [f"registry={REGISTRY}", f"https-proxy={proxy_url}/", f"proxy={proxy_url}/", f"cafile={ca}",
             "strict-ssl=true", "update-notifier=false", "audit=false", "fund=false", "fetch-retries=0"]
    (home / ".npmrc").write_text("\n".join(npmrc) + "\n")
    cmd = [npm_bin(), *args, f"--registry={REGISTRY}", f"--https-proxy={proxy_url}/", f"--cafile={ca}",
           "--no-audit", "--no-fund", "--update-notifier=false", "--fetch-retries=0"]
    return subprocess.run(cmd, cwd=cwd, env=npm_env(home), capture_output=True, text=True, timeout=timeout)


def git(home, *args, proxy_url, ca, auth_method=None, cwd=None, timeout=120):
    """git with http.proxy = the proxy URL (git's default proxy auth method
    is anyauth: libcurl asks without credentials first and answers the
    407's challenge), or http.proxyAuthMethod = auth_method."""
    cfg = ["-c", f"http.proxy={proxy_url}", "-c", f"http.sslCAInfo={ca}"]
    if auth_method:
        cfg += ["-c", f"http.proxyAuthMethod={auth_method}"]
    return subprocess.run([GIT, *cfg, *args], cwd=cwd, env=git_env(home), capture_output=True, text=True,
                          timeout=timeout)
