"""The inspection tests' reading of the decision log (inspect design, "Log
lines"): a CONNECT's decision line (reason inspected, or deny
upstream_tls_failed), one `request` line per request inside the tunnel
(id = the tunnel's, n from 1), and for plain HTTP to an inspected host a
decision line with reason rule and the request's path."""

import json
import re


def rule_ref(allow, entry):
    """'allowlist.txt:N' for entry, the N-th line of the allowlist the test
    wrote (sluice names the file as configured, with its directory)."""
    return f"allowlist.txt:{list(allow).index(entry) + 1}"


def rule_is(line, allow, entry):
    return str(line.get("rule", "")).endswith("/" + rule_ref(allow, entry))


def show(lines):
    return "\n".join(json.dumps(l) for l in lines)


def requests_of(s, tunnel_id):
    """The request lines of one tunnel, by n."""
    return sorted((l for l in s.log_lines() if l.get("event") == "request" and l.get("id") == tunnel_id),
                  key=lambda l: l.get("n", 0))


def wait_requests(s, tunnel_id, n, timeout=5.0):
    """Wait for n request lines of the tunnel; return them by n."""
    s.wait_count(lambda l: l.get("event") == "request" and l.get("id") == tunnel_id, n, timeout,
                 f"request lines for tunnel {tunnel_id}")
    return requests_of(s, tunnel_id)


def tunnel_line(s, client_port, timeout=5.0):
    """The decision line of the CONNECT from 127.0.0.1:client_port."""
    return s.decision_for(client_port, timeout)


def check_request(line, allow=None, *, n, method, path, decision, reason, status, rule=None,
                  host=None, credential=None, suggest=None):
    """Assert one request line is what the design says; the message shows
    the whole line."""
    want = {"event": "request", "n": n, "method": method, "path": path, "decision": decision,
            "reason": reason, "status": status}
    if host is not None:
        want["host"] = host
    wrong = {k: (line.get(k), v) for k, v in want.items() if line.get(k) != v}
    assert not wrong, f"request line: (got, expected) {wrong}:\n{json.dumps(line)}"
    if decision == "allow":
        assert rule is not None
        assert rule_is(line, allow, rule), \
            f"request line's rule should be {rule_ref(allow, rule)} ({rule!r}):\n{json.dumps(line)}"
        assert "suggest" not in line, json.dumps(line)
    else:
        assert "rule" not in line, f"a refused request's line names a rule:\n{json.dumps(line)}"
        assert line.get("detail"), f"a refused request's line has no detail:\n{json.dumps(line)}"
    if credential is None:
        assert "credential" not in line, f"a credential where none was set:\n{json.dumps(line)}"
    else:
        assert line.get("credential") == credential, json.dumps(line)
    if suggest is not None:
        assert line.get("suggest") == suggest, f"suggest should be {suggest!r}:\n{json.dumps(line)}"
    if decision == "allow":
        for k in ("bytes_up", "bytes_down", "duration_ms"):
            assert isinstance(line.get(k), (int, float)), f"request line without {k}:\n{json.dumps(line)}"


def check_inspected(line, allow, rule, host):
    """The CONNECT's decision line for a tunnel that is inspected."""
    assert line.get("method") == "CONNECT" and line.get("host") == host and line.get("port") == 443, \
        json.dumps(line)
    assert (line.get("decision"), line.get("reason")) == ("allow", "inspected"), \
        f"the CONNECT's decision should be allow/inspected:\n{json.dumps(line)}"
    assert rule_is(line, allow, rule), \
        f"the CONNECT's rule should be {rule_ref(allow, rule)} ({rule!r}):\n{json.dumps(line)}"


def mentions(line, pattern, keys=("reason", "end", "detail")):
    """Whether any of the line's keys matches pattern (a regex, any case)."""
    text = " ".join(str(line.get(k, "")) for k in keys)
    return re.search(pattern, text, re.I) is not None
