"""Pinned artifacts (SPEC part 2) as the tests see them: SRI digests of
bytes, `sluice allow-from-lockfile --pins` run on a project, and the
test's own reading of the allowlist it printed (which rule a request
matches, and the digests that rule pins), independent of sluice's."""

import base64
import hashlib
import json
import re
import subprocess

from .proc import binary

ALGS = ("sha256", "sha384", "sha512")


def sri(data, alg="sha512"):
    return f"{alg}-" + base64.b64encode(hashlib.new(alg, data).digest()).decode()


def derive(*paths, cwd=None):
    """The lines `sluice allow-from-lockfile --pins PATH...` prints (it
    must exit 0)."""
    r = subprocess.run([str(binary()), "allow-from-lockfile", "--pins", *map(str, paths)],
                       capture_output=True, text=True, cwd=cwd, timeout=60)
    assert r.returncode == 0, f"allow-from-lockfile --pins {paths} exited {r.returncode}: {r.stderr}"
    return r.stdout.splitlines()


class Rule:
    """One allowlist line: a request rule (methods, host, port, path
    pattern, digests) or a host entry (methods None)."""

    def __init__(self, lineno, text):
        self.lineno, self.text = lineno, text
        body = text.split("#", 1)[0].split()
        self.methods = self.host = self.port = self.pattern = None
        self.digests = []
        authority = None
        if len(body) >= 2 and re.fullmatch(r"\*|[A-Z]+(,[A-Z]+)*", body[0]):
            self.methods = body[0].split(",")
            authority, slash, path = body[1].partition("/")
            self.pattern = slash + path
            self.digests = body[2:]
        elif body:
            authority = body[0]
        if authority is not None:
            host, colon, port = authority.rpartition(":")
            if colon and port.isdigit():
                self.host, self.port = host, int(port)
            else:
                self.host = authority

    @property
    def is_rule(self):
        return self.methods is not None

    def matches(self, method, host, port, path):
        """SPEC's matching: method in the list (or *), the exact host (the
        tests' rules name exact hosts), the port when written, `*` in the
        path any run of characters; the query is not part of the path."""
        if not self.is_rule or self.host != host.lower() or (self.port is not None and self.port != port):
            return False
        if self.methods != ["*"] and method not in self.methods:
            return False
        regex = "".join(".*" if ch == "*" else re.escape(ch) for ch in self.pattern)
        return re.fullmatch(regex, path.partition("?")[0], re.S) is not None

    def __repr__(self):
        return f"<allowlist.txt:{self.lineno} {self.text!r}>"


def rules(lines):
    """[Rule] of the non-blank, non-comment lines, numbered as the lines
    of the file the gate reads (allowlist.txt, one line each)."""
    return [Rule(i, l) for i, l in enumerate(lines, 1) if l.split("#", 1)[0].strip()]


def rule_for(lines, method, host, port, path):
    """The rule the gate must apply: the first request rule for the host
    that matches (rules for one host are tried in order), or None."""
    for r in rules(lines):
        if r.matches(method, host, port, path):
            return r
    return None


def ref(rule):
    return f"allowlist.txt:{rule.lineno}"


def rule_is(line, rule):
    """Whether a log line's `rule` names this rule (sluice writes the
    allowlist's path as configured, then :LINE)."""
    return str(line.get("rule", "")).endswith("/" + ref(rule))


def request_lines(s, n=0, timeout=10.0):
    """Every `request` line of the gate's log, after waiting for n."""
    lines = s.wait_count(lambda l: l.get("event") == "request", n, timeout, "request lines")
    return [l for l in lines if l.get("event") == "request"]


def show(lines):
    return "\n".join(json.dumps(l) for l in lines)
