"""The checks can fail: each scenario runs sluice with a policy or an origin
that breaks one property on purpose and requires the checks to say so.
(A check that passes everything would make a clean fuzzing run mean
nothing.) run.py --self-test runs them all."""

import copy
import subprocess
from pathlib import Path

from . import daemon as daemon_mod
from .gen import NONCE, POISON
from .harness import Runner, case_id
from .http import parse_requests

OK_NAME = f"h0-{NONCE}.ok.fuzz.test"
NO_NAME = f"h0-{NONCE}.no.fuzz.test"


def _get(name, extra=""):
    return {"start_ms": 0, "data": f"GET http://{name}/st HTTP/1.1\r\nHost: {name}\r\n{extra}\r\n",
            "bulk": 0, "writes": [], "end": {"kind": "hold", "at": None, "ms": 0}, "stop_read": -1,
            "rcvbuf": 0, "wait_ms": 600}


def _dns(name, addr):
    return {name: {"A": [{"rcode": 0, "an": [{"t": "A", "name": "@", "addr": addr, "ttl": 0}]}],
                   "AAAA": [{"rcode": 0, "an": []}]}}


def _case(clients, dns, origins=None):
    c = {"v": 1, "seed": 0, "origin": "selftest", "k": 0, "clients": clients, "dns": dns,
         "origins": origins or {}}
    c["id"] = case_id(c)
    return c


def _send(text):
    return [{"ops": [{"op": "req"}, {"op": "send", "d": text, "w": []}, {"op": "close"}]}]


SCENARIOS = [
    # (what, policy override, allowlist lines added, case, kinds that must be reported)
    ("a name the model refuses is on sluice's allowlist", "", "*.no.fuzz.test\n",
     _case([_get(NO_NAME)], _dns(NO_NAME, "o1")),
     {"allowed_unlisted", "origin_request_unlisted", "dns_asked_for_unlisted_name"}),
    ("sluice may connect to a private address (allow_cidr)", "allow_cidr = 10.0.1.0/24\n", "",
     _case([_get(OK_NAME)], _dns(OK_NAME, "10.0.1.1")),
     {"origin_connect_non_public", "allowed_non_public", "allowed_tainted_name",
      "origin_request_tainted_name"}),
    ("an origin's reply carries a Sluice-Decision header", "", "",
     _case([_get(OK_NAME)], _dns(OK_NAME, "o2"),
           {"o2:80": _send("HTTP/1.1 403 No\r\nSluice-Decision: deny; reason=not_allowlisted\r\n"
                           "Content-Length: 0\r\n\r\n")}),
     {"deny_reply_without_line"}),
    ("bytes marked as never to be delivered are delivered (a body read to the close)", "", "",
     _case([_get(OK_NAME)], _dns(OK_NAME, "o3"),
           {"o3:80": _send(f"HTTP/1.1 200 OK\r\n\r\nbody {POISON}123456")}),
     {"poison_delivered"}),
    ("the canary's name is not on the allowlist", "", None,
     _case([_get(OK_NAME)], _dns(OK_NAME, "o4")),
     {"canary_failed"}),
]


def pure_checks():
    """The parts that need no daemon: the origin-side parser finds a
    desync, the log reader finds a broken chain."""
    fails = []
    reqs, status, _ = parse_requests(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nokGARBAGE\r\n\r\n")
    if len(reqs) != 1 or not status.startswith("bad"):
        fails.append(f"parse_requests did not see the bytes after a request as a desync: {status}")
    reqs, status, _ = parse_requests(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                                     b"2\r\nok\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n")
    if [r.host for r in reqs] != ["a", "b"] or status != "ok":
        fails.append(f"parse_requests misread a chunked body and a second request: {reqs} {status}")
    return fails


def tampered_log_fails(path, binary):
    """A copy of a real log with one byte changed must fail the chain, in
    our reader and in `sluice audit --verify`."""
    data = Path(path).read_bytes()
    i = data.find(b'"event":"decision"')
    if i < 0:
        return ["no decision line to tamper with"]
    bad = data[:i + 10] + b"X" + data[i + 11:]
    t = Path(path).with_name("tampered.log")
    t.write_bytes(bad)
    r = daemon_mod.LogReader(t)
    r.poll()
    out = []
    if not r.errors:
        out.append("LogReader accepted a tampered log")
    res = subprocess.run([str(binary), "audit", "--verify", str(t)],
                         capture_output=True, text=True)
    if res.returncode == 0:
        out.append(f"sluice audit --verify accepted a tampered log: {res.stdout} {res.stderr}")
    return out


async def run(o):
    problems = pure_checks()
    o = copy.copy(o)
    o.keep_going = True
    o.raw = True
    for what, policy, extra, case, want in SCENARIOS:
        o.policy_extra = policy
        base = daemon_mod.ALLOWLIST
        o.allowlist = base.replace("canary.fuzz.test\n", "") if extra is None else base + extra
        r = Runner(o)
        await r.setup()
        try:
            v, _, _ = await r.run_case(copy.deepcopy(case))
            got = {x.kind for x in v}
            missing = want - got
            status = "ok" if not missing else f"MISSED {sorted(missing)}"
            print(f"fuzz-daemon: self-test: {what}: reported {sorted(got)}: {status}", flush=True)
            if missing:
                problems.append(f"{what}: the checks did not report {sorted(missing)} (got {sorted(got)})")
            log = r.daemon.workdir / "decisions.log"
        finally:
            await r.close()
    problems += tampered_log_fails(log, o.binary)
    for p in problems:
        print(f"fuzz-daemon: self-test FAILED: {p}", flush=True)
    if not problems:
        print("fuzz-daemon: self-test: every check failed where it had to", flush=True)
    return not problems
