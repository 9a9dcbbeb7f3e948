"""The inspection tests' own tools, without sluice: the origin certificates
fail exactly as their names say (and only in that), the inspecting origins
record what they receive, git http-backend clones and accepts a push, the
npm stand-in serves `npm ci` and accepts `npm publish`, the Node agent and
urllib reach the origins through a CONNECT relay, the hand-built
ClientHellos are valid TLS, and the sluice_inspecting fixture writes what
SPEC asks for. If these fail, the inspection tests' failures are the
harness's."""

import datetime
import json
import os
import socket
import ssl
import stat
import subprocess
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sluicetest import gitbackend, realclients, tlshello, tlsmaterial
from sluicetest.client import Conn
from sluicetest.inspecting import ORIGINS
from sluicetest.pattern import pattern
from sluicetest.proc import client_env
from sluicetest.tlsclient import MemTLS, context, reframer

# What OpenSSL says about each kind of certificate: each bad origin fails
# verification for its own reason and no other.
VERIFY_MESSAGE = {
    "expired": "certificate has expired",
    "not_yet_valid": "certificate is not yet valid",
    "self_signed": "self-signed certificate",
    "wrong_name": "Hostname mismatch",
    "untrusted_ca": "unable to get local issuer certificate",
}


def _direct(name, ctx):
    addr = ORIGINS[name][0]
    return ctx.wrap_socket(socket.create_connection((addr, 443), timeout=10), server_hostname=name)


@pytest.mark.parametrize("name", sorted(ORIGINS))
def test_each_origin_certificate_verifies_or_fails_for_its_own_reason(inspect_tls, inspect_origins, name):
    kind = ORIGINS[name][1]
    ctx = context(inspect_tls["upstream_ca"])
    if kind == "good":
        with _direct(name, ctx) as s:
            assert Conn.wrap(s).request("GET", "/bytes/10", host=name).body == pattern(10)
        return
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        _direct(name, ctx).close()
    assert VERIFY_MESSAGE[kind] in e.value.verify_message, (name, e.value.verify_message)
    # Without verification the origin answers: its certificate is all that is wrong.
    loose = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    loose.check_hostname, loose.verify_mode = False, ssl.CERT_NONE
    with _direct(name, loose) as s:
        assert Conn.wrap(s).request("GET", "/bytes/10", host=name).body == pattern(10)


def test_origin_records_one_connection_with_each_request_curl_sent(inspect_tls, inspect_origins):
    o = inspect_origins
    mark = o.mark()
    r = subprocess.run(["curl", "-sS", "--noproxy", "*", "--http1.1", "--cacert", str(inspect_tls["upstream_ca"]),
                        "--resolve", "registry.inspect.test:443:11.0.1.1",
                        "-H", "Authorization: Bearer from-curl",
                        "https://registry.inspect.test/echo?q=1", "https://registry.inspect.test/bytes/5"],
                       capture_output=True, env=client_env(), timeout=30)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout[:-5])
    assert r.stdout[-5:] == pattern(5)
    assert doc["method"] == "GET" and doc["target"] == "/echo?q=1" and doc["path"] == "/echo"
    assert ["Authorization", "Bearer from-curl"] in doc["headers"]
    conns = o.wait_closed(mark)
    assert len(conns) == 1, conns
    c = conns[0]
    assert c.origin == "registry.inspect.test" and c.tls and c.handshake == "ok"
    assert c.hello["sni"] == "registry.inspect.test" and "http/1.1" in c.hello["alpn"]
    assert c.alpn == "http/1.1" and c.version in ("TLSv1.2", "TLSv1.3")
    assert [(q.method, q.target, q.n) for q in c.requests] == [("GET", "/echo?q=1", 1), ("GET", "/bytes/5", 2)]
    assert c.requests[0].header_all("authorization") == ["Bearer from-curl"]


def test_plain_listener_records_requests_and_echo_returns_the_body(inspect_origins):
    o = inspect_origins
    mark = o.mark()
    with Conn(80, host="11.0.1.1") as c:
        r = c.request("PUT", "/echo/x", host="registry.inspect.test", body=b"a" * 70000, chunked=True)
        doc = json.loads(r.body)
        assert doc["method"] == "PUT" and doc["body"] == "a" * 70000 and doc["tls"] is False
        r = c.request("GET", "/drop", host="registry.inspect.test")
        assert r.status == 200 and r.conn_close and c.at_eof()
    with Conn(80, host="11.0.1.1") as c:
        r = c.request("GET", "/hangup", host="registry.inspect.test")
        assert r.status == 200 and not r.conn_close and c.at_eof()   # closed without saying so
    conns = o.wait_closed(mark)
    assert len(conns) == 2 and not conns[0].tls and conns[0].first_bytes.startswith(b"PUT /echo/x ")
    assert [[(q.method, q.path) for q in c.requests] for c in conns] == \
        [[("PUT", "/echo/x"), ("GET", "/drop")], [("GET", "/hangup")]]


def test_git_clone_and_push_work_against_the_backend_directly(inspect_tls, inspect_origins, git_repo, tmp_path):
    o = inspect_origins
    home, ca = git_repo["home"], inspect_tls["upstream_ca"]
    mark = o.mark()
    r = realclients.git(home, "clone", git_repo["url"], str(tmp_path / "clone"), ca=ca)
    assert r.returncode == 0, r.stderr
    for f, content in git_repo["files"].items():
        assert (tmp_path / "clone" / f).read_text() == content
    reqs = [(q.method, q.path) for q in o.requests_since(mark, "git.inspect.test")]
    base = f"/git/{git_repo['name']}"
    # the shapes the gate's rules are written for: GET git.inspect.test/* and
    # POST git.inspect.test/*/git-upload-pack
    assert ("GET", f"{base}/info/refs") in reqs and ("POST", f"{base}/git-upload-pack") in reqs, reqs
    assert all(m == "GET" or p.endswith("/git-upload-pack") for m, p in reqs), reqs
    (tmp_path / "clone" / "new.txt").write_text("pushed\n")
    work = tmp_path / "clone"
    for args in (["add", "new.txt"], ["commit", "-q", "-m", "a push"]):
        assert realclients.git(home, *args, cwd=work, ca=ca).returncode == 0
    mark = o.mark()
    r = realclients.git(home, "push", "origin", "main", cwd=work, ca=ca)
    assert r.returncode == 0, r.stderr
    assert ("POST", f"{base}/git-receive-pack") in [(q.method, q.path) for q in o.requests_since(mark)]
    head = realclients.git(home, "rev-parse", "HEAD", cwd=work).stdout.strip()
    assert gitbackend.refs(git_repo["path"], home)["refs/heads/main"] == head


def test_npm_ci_and_publish_work_against_the_stand_in_through_a_plain_relay(inspect_tls, inspect_origins,
                                                                           npm_packages, relay, tmp_path):
    o = inspect_origins
    app = tmp_path / "app"
    subprocess.run(["cp", "-r", str(npm_packages["app"]), str(app)], check=True)
    mark = o.mark()
    r = realclients.npm(tmp_path / "home", app, "ci", proxy_port=relay.port, ca=inspect_tls["upstream_ca"])
    assert r.returncode == 0, r.stdout + r.stderr
    for name, version, _ in npm_packages["packages"]:
        assert json.loads((app / "node_modules" / name / "package.json").read_text())["version"] == version
    reqs = [(q.method, q.path) for q in o.requests_since(mark)]
    assert reqs and all(m in ("GET", "HEAD") for m, _ in reqs), reqs
    assert set(relay.targets) == {"registry.inspect.test:443"}, relay.targets
    pub = tmp_path / "pub"
    subprocess.run(["cp", "-r", str(npm_packages["publishable"]), str(pub)], check=True)
    before = len(o.npm.published)
    r = realclients.npm(tmp_path / "home", pub, "publish", proxy_port=relay.port,
                        ca=inspect_tls["upstream_ca"], auth_token="harness-token")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [n for n, _ in o.npm.published[before:]] == ["sluice-secret-dump"]
    puts = [q for q in o.requests_since(mark) if q.method == "PUT"]
    assert [q.path for q in puts] == ["/sluice-secret-dump"], puts
    assert set(relay.targets) == {"registry.inspect.test:443"}, relay.targets


def test_node_agent_keeps_one_tunnel_for_two_requests(inspect_tls, inspect_origins, relay):
    o = inspect_origins
    mark = o.mark()
    out = realclients.node_requests(relay.port, inspect_tls["upstream_ca"], [
        {"method": "GET", "url": "https://api.inspect.test/echo?a=1"},
        {"method": "POST", "url": "https://api.inspect.test/echo", "body": "node body",
         "headers": {"Content-Type": "text/plain"}},
    ])
    assert out["exit"] == 0 and "error" not in out, out
    docs = [json.loads(r["body"]) for r in out["results"]]
    assert [r["status"] for r in out["results"]] == [200, 200]
    assert [(d["method"], d["n"]) for d in docs] == [("GET", 1), ("POST", 2)] and docs[1]["body"] == "node body"
    assert docs[0]["conn"] == docs[1]["conn"] and out["tunnels"] == 1
    assert relay.targets == ["api.inspect.test:443"]
    conns = o.conns_since(mark)
    assert len(conns) == 1 and len(conns[0].requests) == 2 and conns[0].hello["alpn"] == ["http/1.1"]


def test_urllib_reaches_an_origin_through_a_connect_proxy(inspect_tls, inspect_origins, relay):
    status, headers, body = realclients.urllib_request(relay.port, inspect_tls["upstream_ca"],
                                                       "https://api.inspect.test/echo/u", method="DELETE")
    assert status == 200 and json.loads(body)["method"] == "DELETE"
    assert relay.targets == ["api.inspect.test:443"]


def test_a_client_hello_reframed_into_small_records_still_handshakes(inspect_tls, inspect_origins):
    o = inspect_origins
    mark = o.mark()
    sock = socket.create_connection(("11.0.1.3", 443), timeout=10)
    t = MemTLS(sock, context(inspect_tls["upstream_ca"]), "api.inspect.test")
    t.handshake(reframer(64))
    r = Conn.wrap(t).request("GET", "/bytes/100", host="api.inspect.test")
    assert r.body == pattern(100)
    t.close()
    c = o.wait_closed(mark)[0]
    assert c.handshake == "ok" and len(c.hello["records"]) > 3 and max(c.hello["records"]) == 64, c.hello


def test_a_hand_built_client_hello_over_two_records_is_valid_tls(inspect_origins):
    """OpenSSL answers the >16 KiB hello with a ServerHello: it is a valid
    ClientHello, refused by a gate for its size only."""
    msg = tlshello.client_hello_message("api.inspect.test", padding=17000)
    flight = tlshello.frame(msg)
    info = tlshello.parse(flight)
    assert info["length"] > tlshello.RECORD_MAX and len(info["records"]) == 2
    assert info["sni"] == "api.inspect.test" and 0x15 in info["extensions"]
    with socket.create_connection(("11.0.1.3", 443), timeout=10) as s:
        s.sendall(flight)
        got = b""
        while len(got) < 6:
            data = s.recv(4096)
            assert data, f"the origin closed; got {got!r}"
            got += data
    assert got[0] == 0x16 and got[5] == 2, f"no ServerHello: {got[:20]!r}"


def test_an_h2_only_client_offers_only_h2(inspect_tls, inspect_origins):
    o = inspect_origins
    mark = o.mark()
    ctx = context(inspect_tls["upstream_ca"], alpn=("h2",))
    with _direct("api.inspect.test", ctx):
        pass
    c = o.wait_conns(mark, 1)[0]
    assert c.hello["alpn"] == ["h2"], c.hello


def test_relay_refuses_names_outside_the_test_records(relay):
    with Conn(relay.port) as c:
        c.send(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        assert c.read_response("CONNECT").status == 403
    assert relay.targets == ["example.com:443"]


def test_sluice_inspecting_writes_the_tls_and_credentials_config_as_spec_says(sluice_inspecting, inspect_tls):
    s = sluice_inspecting(allow=["GET,HEAD registry.inspect.test/*"], start=False,
                          credentials=[("npm", "registry.inspect.test", "Authorization", "Bearer {secret}",
                                        "s3cr3t-harness")])
    ini = s.config_path.read_text()
    assert "[tls]\nca_cert = ca/ca.pem\nca_key = ca/ca.key\nupstream_ca = upstream.pem\nleaf_days = 7\n" in ini
    assert "[credentials]\nfile = credentials.txt\nsecret_dir = secrets\n" in ini
    assert (s.workdir / "credentials.txt").read_text().splitlines()[1] == \
        "npm registry.inspect.test Authorization Bearer {secret}"
    sec = s.workdir / "secrets" / "npm"
    st = sec.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    assert sec.read_text() == "s3cr3t-harness\n"
    assert s.ca == s.workdir / "ca" / "ca.pem" and s.ca.is_file() and (s.workdir / "ca" / "ca.key").is_file()
    assert (s.workdir / "upstream.pem").read_bytes() == inspect_tls["upstream_ca"].read_bytes()


def test_the_openssl_made_gate_ca_is_what_spec_describes_and_clients_trust_its_leaves(tmp_path):
    """The CA the fixture makes while sluice has no `ca init` (test_inspect.py
    checks `sluice ca init`'s own)."""
    tlsmaterial.openssl_ca(tmp_path / "ca")
    key_mode = stat.S_IMODE((tmp_path / "ca" / "ca.key").stat().st_mode)
    assert key_mode == 0o600, oct(key_mode)
    ca = x509.load_pem_x509_certificate((tmp_path / "ca" / "ca.pem").read_bytes())
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca and bc.value.path_length == 0
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey) and ca.public_key().curve.name == "secp256r1"
    # A leaf signed with that CA's key is trusted by a client that trusts the CA.
    ca_key = serialization.load_pem_private_key((tmp_path / "ca" / "ca.key").read_bytes(), password=None)
    _serve_leaf_and_connect(ca, ca_key, tmp_path / "ca" / "ca.pem", tmp_path)


def _serve_leaf_and_connect(ca, ca_key, ca_path, tmp_path):
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "registry.inspect.test")])
    leaf = (x509.CertificateBuilder().subject_name(name).issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("registry.inspect.test")]), False)
            .sign(ca_key, hashes.SHA256()))
    (tmp_path / "leaf.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "leaf.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                          serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(str(tmp_path / "leaf.pem"), str(tmp_path / "leaf.key"))
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)

    def serve():
        c, _ = ls.accept()
        try:
            with sctx.wrap_socket(c, server_side=True) as t:
                t.recv(1)
        except (OSError, ssl.SSLError):
            pass
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    with context(ca_path).wrap_socket(socket.create_connection(ls.getsockname(), timeout=10),
                                      server_hostname="registry.inspect.test") as t:
        t.sendall(b"x")
    th.join(10)
    ls.close()
