"""Sessions with real clients: each is given the proxy URL a sandbox gets,
http://NAME:TOKEN@127.0.0.1:PORT, reaches an origin session A may reach,
and is refused (407, or the client's own error for it) with a wrong token:
curl (plain HTTP, HTTPS through CONNECT, and --proxy-anyauth, which asks
without credentials first), Python urllib and requests, Node 20 (a CONNECT
agent reading the URL like https-proxy-agent does: Node 20 has no
NODE_USE_ENV_PROXY), npm ci from the registry stand-in, git clone from git
http-backend (git's default proxy auth is anyauth, and basic).

Tunnels are not inspected here (plain allowlist entries): each client
trusts the test CA the origins' certificates chain to. The last test runs
the same clients through a gate without [sessions]: when it fails, the
failures above are the harness's."""

import json
import subprocess

import pytest

from sluicetest import sessionclients as sc
from sluicetest.inspectlog import show
from sluicetest.pattern import pattern
from sluicetest.sessions import start_gate

REG = "registry.inspect.test"
GITH = "git.inspect.test"
A_ALLOW = ["origin.test", REG, GITH]
WRONG = "0123456789abcdef0123456789abcdef"

try:
    import requests  # noqa: F401
    HAVE_REQUESTS = True
except ImportError:
    HAVE_REQUESTS = False


@pytest.fixture
def gate(sluice, tmp_path):
    """A gate with session A (A_ALLOW) and B (nothing of its own), nothing
    global: {'s', 'A', 'url' (A's proxy URL), 'wrong' (A's name, a wrong
    token), 'b' (B's proxy URL)}."""
    s, ss, _ = start_gate(sluice, tmp_path, {"A": A_ALLOW, "B": []})
    return {"s": s, "A": ss["A"], "url": ss["A"].proxy_url(s.port),
            "wrong": f"http://A:{WRONG}@127.0.0.1:{s.port}", "b": ss["B"].proxy_url(s.port)}


def _decisions(s, n):
    lines = s.wait_count(lambda l: l.get("event") == "decision", n, what="decision lines")
    return [l for l in lines if l.get("event") == "decision"]


def _all_session_a(s, n, probes=False):
    """At least n allowed decision lines, every one session A's, and every
    line of their connections (closes too) carries session A. probes: a
    client that asks without credentials first (anyauth) may have been
    refused auth_required, and only that."""
    lines = s.wait_count(lambda l: l.get("event") == "decision" and l.get("decision") == "allow", n,
                         what="allowed decision lines")
    ds = [l for l in lines if l.get("event") == "decision"]
    allowed = [l for l in ds if l.get("decision") == "allow"]
    others = [l for l in ds if l.get("decision") != "allow"]
    assert all(l.get("session") == "A" for l in allowed), show(ds)
    if probes:
        # a probe on a connection already A's is logged as A's (proxy/README)
        assert all(l.get("reason") == "auth_required" and l.get("session") in (None, "A") for l in others), \
            show(others)
    else:
        assert others == [], show(others)
    ids = {l["id"] for l in allowed}
    assert all(l.get("session") == "A" for l in lines if l.get("id") in ids), show(lines)
    return allowed


def _all_auth_failed(s, n=1):
    """At least n decision lines, each refused auth_required or auth_failed,
    at least one auth_failed claiming A; no session field, no allow."""
    ds = _decisions(s, n)
    assert all(l.get("decision") == "deny" and l.get("reason") in ("auth_required", "auth_failed")
               and "session" not in l for l in ds), show(ds)
    assert any(l.get("reason") == "auth_failed" for l in ds), show(ds)
    return ds


def _origin_saw_no_proxy_auth(body):
    names = [k.lower() for k, _ in json.loads(body)["headers"]]
    assert "proxy-authorization" not in names, f"the origin got Proxy-Authorization: {body[:300]!r}"


# --- curl ----------------------------------------------------------------------

@pytest.mark.parametrize("how", ["basic", "anyauth"])
def test_curl_http_and_https_with_the_sessions_proxy_url(gate, tls, how):
    s = gate["s"]
    extra = ["--proxy-anyauth"] if how == "anyauth" else []
    r = sc.curl(gate["url"], *extra, "-w", "\n%{http_code} %{num_connects}\n",
                "http://origin.test/headers", "http://origin.test/bytes/100")
    assert r.returncode == 0, r.stderr
    first, rest = r.stdout.split(b"\n", 1)
    _origin_saw_no_proxy_auth(first)
    assert json.loads(first)["target"] == "/headers"
    assert rest.startswith(b"200 "), rest[:200]
    assert pattern(100) in rest and rest.rstrip()[-5:-2] == b"200", rest[-40:]
    if how == "basic":
        # credentials on every request: the connection is reused. (anyauth
        # asks each URL without them first, which the gate refuses with
        # auth_required and a close, so it takes a connection more.)
        assert rest.rstrip().endswith(b"200 0"), f"the second request did not reuse the connection: {rest[-40:]!r}"
    r = sc.curl(gate["url"], *extra, "--cacert", str(tls["ca"]), "-w", "\n%{http_code}\n",
                "https://origin.test/bytes/1000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == pattern(1000) + b"\n200\n", r.stdout[-40:]
    ds = _all_session_a(s, 3, probes=how == "anyauth")
    assert sorted((l["method"], l["host"]) for l in ds) == \
        [("CONNECT", "origin.test"), ("GET", "origin.test"), ("GET", "origin.test")], show(ds)


@pytest.mark.parametrize("how", ["basic", "anyauth"])
def test_curl_with_a_wrong_token_is_refused(gate, origins, tls, tmp_path, how):
    s = gate["s"]
    extra = ["--proxy-anyauth"] if how == "anyauth" else []
    before = origins.http_requests
    r = sc.curl(gate["wrong"], *extra, "-D", str(tmp_path / "head"), "-w", "\n%{http_code}\n",
                "http://origin.test/headers")
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith(b"407"), r.stdout
    head = (tmp_path / "head").read_text().lower()
    assert 'proxy-authenticate: basic realm="sluice"' in head and "reason=auth_failed" in head, head
    r = sc.curl(gate["wrong"], *extra, "--cacert", str(tls["ca"]), "https://origin.test/bytes/10")
    assert r.returncode != 0 and b"407" in r.stderr, (r.returncode, r.stderr)
    assert origins.http_requests == before, "a request with a wrong token reached the origin"
    _all_auth_failed(s, 2)


# --- Python ----------------------------------------------------------------------

def test_python_urllib_with_the_sessions_proxy_url(gate, origins, tls):
    s = gate["s"]
    status, headers, body = sc.urllib_get(gate["url"], tls["ca"], "http://origin.test/headers")
    assert status == 200, (status, body)
    _origin_saw_no_proxy_auth(body)
    status, headers, body = sc.urllib_get(gate["url"], tls["ca"], "https://origin.test/bytes/500")
    assert status == 200 and body == pattern(500), (status, body[:200])
    _all_session_a(s, 2)
    before = origins.http_requests
    status, headers, body = sc.urllib_get(gate["wrong"], tls["ca"], "http://origin.test/headers")
    assert status == 407 and headers["Proxy-Authenticate"] == 'Basic realm="sluice"', (status, body)
    status, headers, err = sc.urllib_get(gate["wrong"], tls["ca"], "https://origin.test/bytes/500")
    assert status is None and "407" in err, (status, err)
    assert origins.http_requests == before
    assert len([l for l in _decisions(s, 4) if l.get("reason") == "auth_failed"]) == 2, show(_decisions(s, 4))


@pytest.mark.skipif(not HAVE_REQUESTS, reason="python3-requests is not installed for /usr/bin/python3")
def test_python_requests_with_the_sessions_proxy_url(gate, origins, tls):
    s = gate["s"]
    status, headers, body = sc.requests_get(gate["url"], tls["ca"], "http://origin.test/headers")
    assert status == 200, (status, body)
    _origin_saw_no_proxy_auth(body)
    status, headers, body = sc.requests_get(gate["url"], tls["ca"], "https://origin.test/bytes/500")
    assert status == 200 and body == pattern(500), (status, body[:200])
    _all_session_a(s, 2)
    before = origins.http_requests
    status, headers, body = sc.requests_get(gate["wrong"], tls["ca"], "http://origin.test/headers")
    assert status == 407 and headers["Proxy-Authenticate"] == 'Basic realm="sluice"', (status, body)
    status, headers, err = sc.requests_get(gate["wrong"], tls["ca"], "https://origin.test/bytes/500")
    assert status is None and "407" in err, (status, err)
    assert origins.http_requests == before
    assert len([l for l in _decisions(s, 4) if l.get("reason") == "auth_failed"]) == 2, show(_decisions(s, 4))


# --- Node -------------------------------------------------------------------------

def test_node_with_the_sessions_proxy_url(gate, origins, tls):
    s = gate["s"]
    out = sc.node(gate["url"], tls["ca"], ["http://origin.test/headers", "https://origin.test/bytes/300",
                                           "https://origin.test/bytes/7"])
    assert out["exit"] == 0 and "error" not in out, out
    res = out["results"]
    assert [r.get("status") for r in res] == [200, 200, 200], res
    _origin_saw_no_proxy_auth(res[0]["body"].encode("latin-1"))
    assert res[1]["body"].encode("latin-1") == pattern(300) and out["tunnels"] == 1, out
    _all_session_a(s, 2)
    before = origins.http_requests
    out = sc.node(gate["wrong"], tls["ca"], ["http://origin.test/headers", "https://origin.test/bytes/300"])
    res = out["results"]
    assert res[0].get("status") == 407 and res[0]["headers"].get("proxy-authenticate") == 'Basic realm="sluice"', res
    assert "407" in res[1].get("error", ""), res
    assert origins.http_requests == before


# --- npm -------------------------------------------------------------------------

def test_npm_ci_with_the_sessions_proxy_url(gate, inspect_origins, npm_packages, tls, tmp_path):
    s, o = gate["s"], inspect_origins
    app = tmp_path / "app"
    subprocess.run(["cp", "-r", str(npm_packages["app"]), str(app)], check=True)
    mark = o.mark()
    r = sc.npm(tmp_path / "home", app, "ci", proxy_url=gate["url"], ca=tls["ca"])
    assert r.returncode == 0, r.stdout + r.stderr
    for name, version, _ in npm_packages["packages"]:
        assert json.loads((app / "node_modules" / name / "package.json").read_text())["version"] == version
    assert o.requests_since(mark), "npm ci fetched nothing from the registry"
    ds = _all_session_a(s, 1)
    assert {(l["method"], l["host"]) for l in ds} == {("CONNECT", REG)}, show(ds)


def test_npm_ci_with_a_wrong_token_is_refused(gate, inspect_origins, npm_packages, tls, tmp_path):
    s, o = gate["s"], inspect_origins
    app = tmp_path / "app"
    subprocess.run(["cp", "-r", str(npm_packages["app"]), str(app)], check=True)
    mark = o.mark()
    r = sc.npm(tmp_path / "home", app, "ci", "--cache", str(tmp_path / "empty-cache"), proxy_url=gate["wrong"],
               ca=tls["ca"])
    assert r.returncode != 0, f"npm ci with a wrong token succeeded:\n{r.stdout}{r.stderr}"
    assert "407" in r.stdout + r.stderr or "Proxy Authentication" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not (app / "node_modules" / npm_packages["packages"][0][0]).exists()
    assert o.conns_since(mark) == [], "npm with a wrong token reached the registry"
    _all_auth_failed(s)


# --- git -------------------------------------------------------------------------

@pytest.mark.parametrize("method", [None, "basic"], ids=["anyauth", "basic"])
def test_git_clone_with_the_sessions_proxy_url(gate, inspect_origins, git_repo, tls, tmp_path, method):
    s = gate["s"]
    url = f"https://{GITH}/git/{git_repo['name']}"
    work = tmp_path / "clone"
    r = sc.git(git_repo["home"], "clone", url, str(work), proxy_url=gate["url"], ca=tls["ca"], auth_method=method)
    assert r.returncode == 0, r.stderr
    for f, content in git_repo["files"].items():
        assert (work / f).read_text() == content
    # anyauth asks without credentials first: refused auth_required, nothing else
    allowed = _all_session_a(s, 1, probes=method is None)
    assert all(l["host"] == GITH for l in allowed), show(allowed)


@pytest.mark.parametrize("method", [None, "basic"], ids=["anyauth", "basic"])
def test_git_with_a_wrong_token_is_refused(gate, inspect_origins, git_repo, tls, tmp_path, method):
    s, o = gate["s"], inspect_origins
    mark = o.mark()
    url = f"https://{GITH}/git/{git_repo['name']}"
    r = sc.git(git_repo["home"], "ls-remote", url, proxy_url=gate["wrong"], ca=tls["ca"], auth_method=method)
    assert r.returncode != 0, f"git ls-remote with a wrong token succeeded: {r.stdout}"
    assert "407" in r.stderr, r.stderr
    assert o.conns_since(mark) == [], "git with a wrong token reached the origin"
    _all_auth_failed(s)


# --- the harness: the same clients through a gate without sessions -----------------

def test_harness_the_clients_work_through_a_gate_without_sessions(sluice, inspect_origins, npm_packages,
                                                                 git_repo, tls, tmp_path):
    """No [sessions]: the credentials in the URL are the clients' own
    business (the gate drops Proxy-Authorization on plain HTTP); every
    client above reaches its origin."""
    s = sluice(allow=A_ALLOW)
    url = f"http://A:{WRONG}@127.0.0.1:{s.port}"
    r = sc.curl(url, "--cacert", str(tls["ca"]), "https://origin.test/bytes/10", "http://origin.test/headers")
    assert r.returncode == 0 and r.stdout.startswith(pattern(10)), r.stderr
    _origin_saw_no_proxy_auth(r.stdout[10:])
    for get in (sc.urllib_get, sc.requests_get) if HAVE_REQUESTS else (sc.urllib_get,):
        status, _, body = get(url, tls["ca"], "https://origin.test/bytes/5")
        assert status == 200 and body == pattern(5), (get.__name__, status, body)
        status, _, body = get(url, tls["ca"], "http://origin.test/headers")
        assert status == 200, (get.__name__, status, body)
    out = sc.node(url, tls["ca"], ["http://origin.test/headers", "https://origin.test/bytes/3"])
    assert [r.get("status") for r in out["results"]] == [200, 200], out
    app = tmp_path / "app"
    subprocess.run(["cp", "-r", str(npm_packages["app"]), str(app)], check=True)
    r = sc.npm(tmp_path / "home", app, "ci", proxy_url=url, ca=tls["ca"])
    assert r.returncode == 0, r.stdout + r.stderr
    r = sc.git(git_repo["home"], "ls-remote", f"https://{GITH}/git/{git_repo['name']}", proxy_url=url, ca=tls["ca"])
    assert r.returncode == 0 and git_repo["head"] in r.stdout, r.stderr
