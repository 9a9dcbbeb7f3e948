"""The admin endpoint: /healthz, /metrics (checked with a strict Prometheus
text parser, and against what the test did), /pins, and 404 for the rest."""

import http.client
import signal
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sluicetest.checks import STANDARD_ALLOW, assert_refused
from sluicetest.client import connect, echo_both_ways
from sluicetest.proc import sanitizer_env

ADMIN = {"admin": {"listen": "127.0.0.1:0"}}


def _admin_port(s):
    return int(s.wait_stderr(r"sluice: admin on 127\.0\.0\.1:(\d+)").group(1))


def _get(port, path, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path)
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return r.status, r.getheader("Content-Type"), body


def _metrics(port):
    status, ctype, body = _get(port, "/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    samples = {}
    helped, typed = set(), set()
    for line in body.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            typed.add(line.split()[2])
    # The parser raises on any malformed line.
    for fam in text_string_to_metric_families(body):
        assert fam.name in helped or fam.name + "_total" in helped, f"{fam.name} has no HELP"
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, f"duplicate sample {key}"
            samples[key] = s.value
    return samples


def _req(samples, decision, reason):
    return samples[("sluice_requests_total", (("decision", decision), ("reason", reason)))]


def test_healthz_and_unknown_paths(sluice):
    s = sluice(allow=STANDARD_ALLOW, config=ADMIN)
    port = _admin_port(s)
    assert port != s.port
    assert _get(port, "/healthz")[0] == 200
    assert _get(port, "/nope")[0] == 404
    assert _get(port, "/metrics", method="POST")[0] == 404
    assert _get(port, "/")[0] == 404


def test_metrics_parse_and_count_the_run(sluice, dns):
    s = sluice(allow=STANDARD_ALLOW, config=ADMIN)
    port = _admin_port(s)
    sent = 0
    for i in range(4):
        resp, conn = connect(s.port, "origin.test:9000")
        assert resp.status == 200
        payload = b"x" * (1000 * (i + 1))
        assert echo_both_ways(conn.sock, payload) == payload
        sent += len(payload)
        conn.close()
    for _ in range(3):
        resp, conn = connect(s.port, "denied.test:443")
        conn.close()
        assert_refused(resp, 403, "not_allowlisted")
    resp, conn = connect(s.port, "private.test:443")
    conn.close()
    assert resp.status == 403
    s.wait_count(lambda l: l["event"] == "close", 4)
    s.write_allowlist(["this is not an allowlist line at all ***"])
    s.signal(signal.SIGHUP)
    s.wait_stderr(r"reload failed; keeping the old policy")

    m = _metrics(port)
    assert _req(m, "allow", "allowlisted") == 4
    assert _req(m, "deny", "not_allowlisted") == 3
    assert _req(m, "deny", "non_public_address") == 1
    assert m[("sluice_bytes_up_total", ())] == sent
    assert m[("sluice_bytes_down_total", ())] == sent
    assert m[("sluice_active_tunnels", ())] == 0
    assert m[("sluice_reloads_total", ())] == 1
    assert m[("sluice_reload_failures_total", ())] == 1
    assert m[("sluice_log_write_errors_total", ())] == 0
    # Every allowed tunnel and the private name were resolved or cache hits.
    assert m[("sluice_dns_seconds_count", ())] == 5
    assert m[("sluice_connect_seconds_count", ())] == 4
    inf = m[("sluice_connect_seconds_bucket", (("le", "+Inf"),))]
    assert inf == 4


def test_metrics_render_the_inspection_series_at_zero(sluice):
    """Before any inspection (no rule in this policy) every inspection series
    is there, at 0, so a dashboard or an alert on it works from the start;
    the run's refusals do not leak into them."""
    s = sluice(allow=STANDARD_ALLOW, config=ADMIN)
    port = _admin_port(s)
    resp, conn = connect(s.port, "denied.test:443")
    conn.close()
    assert_refused(resp, 403, "not_allowlisted")
    m = _metrics(port)
    assert _req(m, "deny", "not_allowlisted") == 1
    for decision, reason in [("allow", "inspected"), ("allow", "rule"), ("deny", "rule_not_matched"),
                             ("deny", "upstream_tls_failed")]:
        assert _req(m, decision, reason) == 0, (decision, reason)
    inspected = {labels: v for (name, labels), v in m.items() if name == "sluice_inspected_requests_total"}
    want = {(("decision", "allow"), ("reason", "rule")), (("decision", "deny"), ("reason", "rule_not_matched")),
            (("decision", "deny"), ("reason", "bad_request")), (("decision", "deny"), ("reason", "upstream_tls_failed"))}
    assert want <= set(inspected), inspected
    assert all(v == 0 for v in inspected.values()), inspected
    for side in ("client", "upstream"):
        assert m[("sluice_tls_handshake_failures_total", (("side", side),))] == 0
    assert m[("sluice_tls_certs_cached", ())] == 0


def test_active_tunnels_gauge_counts_open_tunnels(sluice):
    s = sluice(allow=STANDARD_ALLOW, config=ADMIN)
    port = _admin_port(s)
    conns = []
    for _ in range(3):
        resp, conn = connect(s.port, "origin.test:9000")
        assert resp.status == 200
        assert echo_both_ways(conn.sock, b"hi") == b"hi"
        conns.append(conn)
    assert _metrics(port)[("sluice_active_tunnels", ())] == 3
    for c in conns:
        c.close()
    s.wait_count(lambda l: l["event"] == "close", 3)
    assert _metrics(port)[("sluice_active_tunnels", ())] == 0


def test_pins_show_the_pinned_answers(sluice):
    s = sluice(allow=STANDARD_ALLOW, config=ADMIN)
    port = _admin_port(s)
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    conn.close()
    status, ctype, body = _get(port, "/pins")
    assert status == 200 and ctype == "application/json"
    import json
    pins = {p["name"]: p for p in json.loads(body)["pins"]}
    assert "origin.test" in pins, pins
    assert "11.0.0.1" in pins["origin.test"]["addrs"]
    assert pins["origin.test"]["expires_in_s"] > 0


def test_healthz_is_503_while_draining(sluice):
    s = sluice(allow=STANDARD_ALLOW, config={**ADMIN, "proxy": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 5000}})
    port = _admin_port(s)
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    s.signal(signal.SIGTERM)
    s.wait_stderr(r"draining")
    assert _get(port, "/healthz")[0] == 503
    conn.close()
    assert s.wait_exit(10) == 0


def test_admin_may_not_share_the_proxy_port(sluice_bin, tmp_path):
    ini = tmp_path / "s.ini"
    ini.write_text("[proxy]\nlisten = 127.0.0.1:3128\n[dns]\nserver = 127.0.0.53\n"
                   "[admin]\nlisten = 127.0.0.1:3128\n")
    r = subprocess.run([str(sluice_bin), "check", "-c", str(ini)], capture_output=True, text=True,
                       env=sanitizer_env(), timeout=30)
    assert r.returncode == 2
    assert f"{ini}:6:" in r.stderr and "admin" in r.stderr, r.stderr
