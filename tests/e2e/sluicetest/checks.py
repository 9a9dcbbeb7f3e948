"""Shared assertions and the allowlist most tests use."""

import re

# The allowlist most tests run with. Bare names: CONNECT on 443, HTTP on 80.
STANDARD_ALLOW = [
    "# the test's public origins",
    "origin.test",
    "origin.test:9000",
    "origin.test:8080",
    "origin.test:81            # nothing listens there",
    "origin2.test",
    "origin2.test:9000",
    "v6.test",
    "v6.test:9000",
    "dual.test:9000",
    "recorder.test",
    "stall.test",
    "nxdomain.test:9000",
    "11.0.0.1:9000",
    "[2c0f:fff0::1]:9000",
    "",
    "# names whose answers are not public",
    "private.test",
    "private.test:9000",
    "metadata.test",
    "metadata6.test",
    "mixed.test",
    "mixed46.test",
    "mapped.test",
    "nat64.test",
    "10.0.0.1:9000",
]

REASONS = {"allowlisted", "not_allowlisted", "port_not_allowed", "bad_request",
           "non_public_address", "dns_error", "dns_timeout", "connect_failed",
           "connect_timeout", "sni_mismatch", "too_many_clients", "log_unavailable",
           "shutdown"}   # sluice adds: a request the gate stopped before deciding it


def assert_refused(resp, status, reason):
    """A refusal as SPEC says: status, Sluice-Decision, text/plain,
    Connection: close, a body that names the reason."""
    assert resp.status == status, f"expected {status} {reason}, got {resp!r}"
    assert resp.decision == ("deny", reason), \
        f"Sluice-Decision is {resp.header('Sluice-Decision')!r}, expected deny; reason={reason}"
    ctype = (resp.header("Content-Type") or "").lower()
    assert ctype.startswith("text/plain"), f"Content-Type {ctype!r}"
    assert resp.conn_close, f"refusal without Connection: close: {resp!r}"
    assert resp.body.strip(), "refusal without a body"
    assert reason in resp.text, f"body does not name the reason {reason}: {resp.text!r}"


def shows_line(body, line):
    """Whether `line` appears in body as a whole token: not as part of a
    longer name or with a port after it."""
    pat = r"(?<![A-Za-z0-9.:\[-])" + re.escape(line) + r"(?![A-Za-z0-9:\]-]|\.[A-Za-z0-9])"
    return re.search(pat, body) is not None


def assert_decision(line, decision, reason, host=None, port=None, method=None):
    assert line.get("decision") == decision, line
    assert line.get("reason") == reason, line
    if host is not None:
        assert str(line.get("host", "")).lower() == host.lower(), line
    if port is not None:
        assert line.get("port") == port, line
    if method is not None:
        assert line.get("method") == method, line
