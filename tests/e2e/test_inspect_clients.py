"""Real clients through the inspecting gate, trusting sluice's CA: curl,
Python urllib, Node's https (with a CONNECT agent, sluicetest/node_client.js),
git over HTTPS against git http-backend (clone allowed, push refused by the
rules) and npm against a registry stand-in (npm ci allowed, npm publish
refused). Each checks what the client got, what the origin got, and the
log's request lines. test_harness_inspect.py runs the same clients without
sluice."""

import json
import subprocess

from sluicetest import gitbackend, realclients
from sluicetest.checks import shows_line
from sluicetest.client import curl
from sluicetest.inspectlog import check_inspected, check_request, rule_is, show, wait_requests
from sluicetest.pattern import pattern

REG = "registry.inspect.test"
API = "api.inspect.test"
GITH = "git.inspect.test"


def _decisions(s, n=0):
    """The decision lines, after waiting for at least n of them (a line may
    reach the log a moment after the client got its reply)."""
    lines = s.wait_count(lambda l: l.get("event") == "decision", n, what="decision lines")
    return [l for l in lines if l.get("event") == "decision"]


def _requests(s, n=0):
    """The request lines, after waiting for at least n of them."""
    lines = s.wait_count(lambda l: l.get("event") == "request", n, what="request lines")
    return sorted((l for l in lines if l.get("event") == "request"), key=lambda l: (l["id"], l["n"]))


def test_curl_through_the_inspecting_gate(sluice_inspecting, inspect_origins, tmp_path):
    o = inspect_origins
    allow = [f"GET,HEAD {REG}/*"]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    r = curl(s.port, "--cacert", str(s.ca), "-w", "\n%{http_code} %{num_connects}",
             f"https://{REG}/echo/curl?x=1", f"https://{REG}/bytes/1000")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    doc, rest = out.split(b"\n", 1)
    assert json.loads(doc)["target"] == "/echo/curl?x=1"
    assert rest == b"200 1" + pattern(1000) + b"\n200 0", rest[:100]   # the second reused the tunnel
    r = curl(s.port, "--cacert", str(s.ca), "-X", "PUT", "--data-binary", "x", "-w", "\n%{http_code}",
             "-D", str(tmp_path / "head"), f"https://{REG}/echo/curl")
    assert r.returncode == 0, r.stderr
    body, status = r.stdout.rsplit(b"\n", 1)
    assert status == b"403", r.stdout
    assert shows_line(body.decode(), f"PUT {REG}/echo/curl"), body
    assert "sluice-decision: deny; reason=rule_not_matched" in (tmp_path / "head").read_text().lower()
    o.wait_closed(mark)
    assert [(q.method, q.target) for q in o.requests_since(mark)] == [("GET", "/echo/curl?x=1"), ("GET", "/bytes/1000")]
    d1, d2 = _decisions(s, 2)
    check_inspected(d1, allow, allow[0], REG)
    lines = wait_requests(s, d1["id"], 2)
    check_request(lines[0], allow, n=1, method="GET", path="/echo/curl", decision="allow", reason="rule",
                  status=200, rule=allow[0])
    check_request(lines[1], allow, n=2, method="GET", path="/bytes/1000", decision="allow", reason="rule",
                  status=200, rule=allow[0])
    [line] = wait_requests(s, d2["id"], 1)
    check_request(line, allow, n=1, method="PUT", path="/echo/curl", decision="deny", reason="rule_not_matched",
                  status=403, suggest=f"PUT {REG}/echo/curl")


def test_python_urllib_through_the_inspecting_gate(sluice_inspecting, inspect_origins):
    o = inspect_origins
    allow = [f"GET {API}/echo/*"]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    status, headers, body = realclients.urllib_request(s.port, s.ca, f"https://{API}/echo/urllib")
    assert status == 200 and json.loads(body)["path"] == "/echo/urllib", (status, body)
    status, headers, body = realclients.urllib_request(s.port, s.ca, f"https://{API}/echo/urllib",
                                                       method="POST", data=b"form=1")
    assert status == 403 and headers["Sluice-Decision"].startswith("deny; reason=rule_not_matched"), \
        (status, dict(headers))
    assert shows_line(body.decode(), f"POST {API}/echo/urllib"), body
    o.wait_closed(mark)
    assert [q.method for q in o.requests_since(mark)] == ["GET"]
    d1, d2 = _decisions(s, 2)
    check_inspected(d1, allow, allow[0], API)
    check_request(wait_requests(s, d1["id"], 1)[0], allow, n=1, method="GET", path="/echo/urllib",
                  decision="allow", reason="rule", status=200, rule=allow[0], host=API)
    check_request(wait_requests(s, d2["id"], 1)[0], allow, n=1, method="POST", path="/echo/urllib",
                  decision="deny", reason="rule_not_matched", status=403, host=API)


def test_node_https_with_a_connect_agent_through_the_inspecting_gate(sluice_inspecting, inspect_origins):
    o = inspect_origins
    allow = [f"GET {API}/*"]
    s = sluice_inspecting(allow=allow)
    mark = o.mark()
    out = realclients.node_requests(s.port, s.ca, [
        {"method": "GET", "url": f"https://{API}/echo/node"},
        {"method": "GET", "url": f"https://{API}/bytes/2000"},
        {"method": "DELETE", "url": f"https://{API}/echo/node"},
        {"method": "GET", "url": f"https://{API}/echo/again"},
    ])
    assert out["exit"] == 0 and "error" not in out, out
    res = out["results"]
    assert [r["status"] for r in res] == [200, 200, 403, 200], [(r["status"], r["body"][:200]) for r in res]
    assert json.loads(res[0]["body"])["path"] == "/echo/node" and res[1]["body"].encode("latin-1") == pattern(2000)
    assert res[2]["headers"]["sluice-decision"].startswith("deny; reason=rule_not_matched")
    assert shows_line(res[2]["body"], f"DELETE {API}/echo/node"), res[2]["body"]
    # the refusal closed the first tunnel: the agent opened a second one
    assert out["tunnels"] == 2, out
    o.wait_closed(mark)
    assert [q.target for q in o.requests_since(mark)] == ["/echo/node", "/bytes/2000", "/echo/again"]
    d1, d2 = _decisions(s, 2)
    lines = wait_requests(s, d1["id"], 3)
    assert [(l["n"], l["method"], l["decision"], l["status"]) for l in lines] == \
        [(1, "GET", "allow", 200), (2, "GET", "allow", 200), (3, "DELETE", "deny", 403)], show(lines)
    check_request(lines[2], allow, n=3, method="DELETE", path="/echo/node", decision="deny",
                  reason="rule_not_matched", status=403, suggest=f"DELETE {API}/echo/node")
    check_request(wait_requests(s, d2["id"], 1)[0], allow, n=1, method="GET", path="/echo/again",
                  decision="allow", reason="rule", status=200, rule=allow[0])


def test_git_clone_is_allowed_and_git_push_is_refused_by_the_rules(sluice_inspecting, inspect_origins,
                                                                   git_repo, tmp_path):
    o = inspect_origins
    allow = [f"GET {GITH}/*", f"POST {GITH}/*/git-upload-pack"]
    s = sluice_inspecting(allow=allow)
    home, base = git_repo["home"], f"/git/{git_repo['name']}"
    mark = o.mark()
    work = tmp_path / "clone"
    r = realclients.git(home, "clone", git_repo["url"], str(work), proxy_port=s.port, ca=s.ca)
    assert r.returncode == 0, r.stderr
    for f, content in git_repo["files"].items():
        assert (work / f).read_text() == content
    lines = _requests(s, len(o.requests_since(mark)))
    assert lines and all(l["decision"] == "allow" for l in lines), show(lines)
    for l in lines:
        want = allow[1] if l["method"] == "POST" else allow[0]
        assert rule_is(l, allow, want) and l["status"] == 200, show([l])
    assert {(l["method"], l["path"]) for l in lines} >= {("GET", f"{base}/info/refs"),
                                                         ("POST", f"{base}/git-upload-pack")}, show(lines)

    (work / "exfil.txt").write_text("what an agent would push\n")
    assert realclients.git(home, "add", "exfil.txt", cwd=work).returncode == 0
    assert realclients.git(home, "commit", "-q", "-m", "exfil", cwd=work).returncode == 0
    before = gitbackend.refs(git_repo["path"], home)
    mark = o.mark()
    r = realclients.git(home, "push", "origin", "main", cwd=work, proxy_port=s.port, ca=s.ca)
    assert r.returncode != 0, f"git push through the gate succeeded: {r.stderr}"
    assert "403" in r.stderr, r.stderr
    assert gitbackend.refs(git_repo["path"], home) == before
    o.wait_closed(mark)
    assert not [q for q in o.requests_since(mark) if q.path.endswith("/git-receive-pack")], \
        "a receive-pack request reached the origin"
    refused = [l for l in _requests(s) if l["decision"] == "deny"]
    assert refused, show(_requests(s))
    for l in refused:
        assert (l["method"], l["path"], l["reason"], l["status"]) == \
            ("POST", f"{base}/git-receive-pack", "rule_not_matched", 403), show([l])
        assert l.get("suggest") == f"POST {GITH}{base}/git-receive-pack", show([l])


def test_npm_ci_succeeds_and_npm_publish_is_refused_by_get_head_rules(sluice_inspecting, inspect_origins,
                                                                      npm_packages, tmp_path):
    o = inspect_origins
    allow = [f"GET,HEAD {REG}/*"]
    s = sluice_inspecting(allow=allow)
    app = tmp_path / "app"
    subprocess.run(["cp", "-r", str(npm_packages["app"]), str(app)], check=True)
    mark = o.mark()
    r = realclients.npm(tmp_path / "home", app, "ci", proxy_port=s.port, ca=s.ca)
    assert r.returncode == 0, r.stdout + r.stderr
    for name, version, _ in npm_packages["packages"]:
        assert json.loads((app / "node_modules" / name / "package.json").read_text())["version"] == version
    got = [(q.method, q.path) for q in o.requests_since(mark)]
    for name, version, _ in npm_packages["packages"]:
        assert ("GET", f"/{name}/-/{name}-{version}.tgz") in got, got
    lines = _requests(s, len(o.requests_since(mark)))
    assert lines and all(l["decision"] == "allow" and rule_is(l, allow, allow[0]) for l in lines), show(lines)

    pub = tmp_path / "pub"
    subprocess.run(["cp", "-r", str(npm_packages["publishable"]), str(pub)], check=True)
    before = len(o.npm.published)
    mark = o.mark()
    r = realclients.npm(tmp_path / "home", pub, "publish", proxy_port=s.port, ca=s.ca,
                        auth_token="sandbox-token")
    assert r.returncode != 0, f"npm publish through the gate succeeded:\n{r.stdout}{r.stderr}"
    assert "403" in r.stdout + r.stderr, r.stdout + r.stderr
    assert len(o.npm.published) == before
    o.wait_closed(mark)
    assert not [q for q in o.requests_since(mark) if q.method == "PUT"], "the publish reached the registry"
    refused = [l for l in _requests(s) if l["decision"] == "deny"]
    assert [(l["method"], l["path"], l["reason"], l["status"]) for l in refused] == \
        [("PUT", "/sluice-secret-dump", "rule_not_matched", 403)], show(refused)
    # npm named no host but the registry
    assert {l["host"] for l in _decisions(s)} == {REG}, show(_decisions(s))
