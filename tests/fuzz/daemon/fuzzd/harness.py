"""The fuzzing loop: run cases against one sluice at a time, check each,
keep the ones that reach new edges (or, without a coverage build, new
behaviour), write failing ones out for replay."""

import asyncio
import collections
import copy
import hashlib
import ipaddress
import json
import os
import random
import re
import shutil
import time
from pathlib import Path

from . import checks, codec, gen, net, pki, rules, sess
from .clients import ClientResult, run_client
from .daemon import Daemon, first_frames, sanitizer_report
from .dnsserver import DnsServer
from .origins import Origins
from .tls import client_hello
from .tlsclient import run_tls_client

# 1 bit per hit-count class, as AFL does: 1, 2, 3, 4-7, 8-15, 16-31, 32-127, 128+.
_BUCKET = bytes([0, 1, 2, 4] + [8] * 4 + [16] * 8 + [32] * 16 + [64] * 96 + [128] * 128)
# --merge keeps a case for new edges only, not new hit counts: a smaller set.
_EDGE = bytes([0] + [1] * 255)
_NONCE_RE = re.compile(re.escape(gen.NONCE), re.I)
COUNT_KINDS = {"origin_conn_without_allow", "origin_request_without_allow", "deny_reply_without_line"}


def case_id(case):
    body = {k: v for k, v in case.items() if k not in ("id", "found")}
    return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def load_cases(path):
    """A case, a crash file ({"case": ...} or {"cases": [...]}) or a directory of them."""
    p = Path(path)
    if p.is_dir():
        out = []
        for f in sorted(p.glob("*.json")):
            out += load_cases(f)
        return out
    obj = codec.unpack(json.loads(p.read_text()))
    if "cases" in obj:
        cases = obj["cases"]
    elif "case" in obj:
        cases = [obj["case"]]
    else:
        cases = [obj]
    for c in cases:
        c.setdefault("id", case_id(c))
        c["_file"] = str(p)
    return cases


def _addr_key(key):
    slot, _, port = key.rpartition(":")
    addr = net.slot_addr(slot)
    try:
        addr = str(ipaddress.ip_address(addr.strip("[]")))
    except ValueError:
        pass
    return addr, int(port)


class Failure:
    def __init__(self, kind, detail, case, extra=None):
        self.kind, self.detail, self.case, self.extra = kind, detail, case, extra or {}

    def key(self):
        frames = self.extra.get("frames")
        return (self.kind, tuple(frames) if frames else None)


class Runner:
    def __init__(self, opts):
        self.o = opts
        self.binary = Path(opts.binary).resolve()
        self.workroot = Path(opts.workdir)
        self.crash_dir = Path(opts.crashes)
        self.virgin = 0
        self.nguards = 0
        self.sigs = set()
        self.corpus = []
        self.exec_id = 0
        self.instance = 0
        self.stats = collections.Counter()
        self.failures = []
        self.failure_keys = set()
        self.recent = collections.OrderedDict()   # case id -> case, for late findings
        self.port_owner = {}                      # client port -> (case id, finish time)
        self.canary_fail = []
        self.lag = []                              # (time, seconds) of loop stalls
        self.daemon = None
        self.cases_since_start = []
        self.t0 = time.monotonic()
        self.hello = client_hello(random.Random(0), "canary.fuzz.test")
        self.timeouts = {"header": opts.timeout_ms, "connect": opts.timeout_ms,
                         "idle": opts.timeout_ms, "dns": opts.timeout_ms}
        self.inspect = False      # the gate inspects: its config has rules.py's rules, [tls], [credentials]
        self.gate_tls = None      # (the gate's CA cert, its key, the origins' CA)
        self.pki = None
        # The credential's secret: distinctive, fresh each run, never to be seen.
        self.secret = "fzS3cr3t" + os.urandom(12).hex()
        self.tls_sessions = collections.OrderedDict()   # host -> its tunnels' last TLS session
        # The canaries' session (every [sessions] the gate gets has it): its
        # credentials go with every canary, and a gate without sessions
        # ignores them.
        self.canary_token = os.urandom(16).hex()
        self.canary_cred = sess.cred(sess.CANARY_NAME, self.canary_token)
        self.sess_key = None      # the [sessions] the gate has now (a case's spec as JSON), or None
        # No canary is in flight while the gate reloads: a reload that
        # removes [sessions] closes the canary session's connections (as it
        # must: session_revoked).
        self.canary_lock = asyncio.Lock()

    # --- set-up --------------------------------------------------------------
    async def setup(self):
        self.loop = asyncio.get_running_loop()
        self.dns = await DnsServer(self.loop).start()
        self.origins = await Origins(self.loop).start()
        self.origins.raw = getattr(self.o, "raw", False)
        await self.loop.run_in_executor(None, self._setup_inspection)
        self.origins.pki = self.pki if self.inspect else None
        self.lag_task = self.loop.create_task(self._lag_monitor())
        await self.start_daemon()

    def _setup_inspection(self):
        """Certificates, then whether this sluice inspects: `sluice check`
        on the inspecting config. --inspect auto (the default) goes on
        without inspection only when the binary does not know [tls]."""
        mode = getattr(self.o, "inspect", "auto")
        rules.ON = False
        if mode == "off":
            return
        self.pki = pki.Pki(self.workroot / "pki")
        cert, key, how = pki.gate_ca(self.binary, self.workroot / "gate-ca")
        upstream = self.pki.upstream_ca
        if getattr(self.o, "trust_untrusted", False):   # self-test: a bundle wider than it should be
            upstream = self.workroot / "pki" / "upstream-and-untrusted.pem"
            upstream.write_bytes(self.pki.upstream_ca.read_bytes() + self.pki.untrusted_ca.read_bytes())
        self.gate_tls = (cert, key, upstream)
        self.gate_ca_pem = Path(cert).read_text()
        d = Daemon(self.binary, self.workroot / "check", coverage=False, tls=self.gate_tls, secret=self.secret,
                   allowlist=self._allowlist(), policy_extra=getattr(self.o, "policy_extra", ""),
                   rules_text=getattr(self.o, "rules_text", None))
        rc, out = d.check()
        if rc == 0:
            self.inspect = True
            rules.ON = True
            print(f"fuzz-daemon: inspection on (gate CA made by {how})", flush=True)
        elif mode == "auto" and "unknown section [tls]" in out:
            print("fuzz-daemon: this sluice does not know [tls]: no inspection, i1/i2 names are refused", flush=True)
        else:
            raise RuntimeError(f"sluice check refused the inspecting config (exit {rc}):\n{out[-3000:]}")

    def _allowlist(self):
        from .daemon import ALLOWLIST
        return getattr(self.o, "allowlist", None) or ALLOWLIST

    async def start_daemon(self):
        await self._stop_canaries()
        if self.daemon and self.daemon.cov:
            self.daemon.cov.close()
        self.instance += 1
        wd = self.workroot / f"sluice{self.instance}"
        if wd.exists():
            shutil.rmtree(wd)
        self.daemon = Daemon(self.binary, wd, workers=self.o.workers, timeouts=self.timeouts,
                             coverage=not self.o.no_coverage, allowlist=self._allowlist(),
                             policy_extra=getattr(self.o, "policy_extra", ""),
                             tls=self.gate_tls if self.inspect else None, secret=self.secret,
                             rules_text=getattr(self.o, "rules_text", None),
                             pin_hold_kib=getattr(self.o, "pin_hold_kib", None))
        await self.loop.run_in_executor(None, self.daemon.start)
        self.daemon.log.secret = self.secret.encode()
        self.sess_key = None
        self.oracle = checks.Oracle(self.dns, self.secret if self.inspect else None,
                                    rules.rule_line_numbers(self.daemon.allowlist) if self.inspect else ())
        self.oracle.sess = None
        self.origins.conns = [c for c in self.origins.conns if not c.closed]
        self.cases_since_start = []
        self.port_owner = {}
        if self.daemon.cov and self.daemon.cov.nguards:
            self.nguards = self.daemon.cov.nguards
        self.canary_fail = []   # what failed against the last one is no news
        self.canary_task = self.loop.create_task(self._canary_loop(self.instance))

    async def _stop_canaries(self):
        # Python 3.11's wait_for can lose a cancellation that comes as its
        # inner await finishes: the loop also stops when its instance is
        # not the current one, and nothing waits on it for ever.
        t = getattr(self, "canary_task", None)
        self.canary_task = None
        if t:
            t.cancel()
            await asyncio.wait([t], timeout=3)

    async def stop_daemon(self):
        """SIGTERM: exit status 0 and no report (leaks show only now)."""
        await self._stop_canaries()
        ok, out = await self.loop.run_in_executor(None, self.daemon.audit_verify)
        fails = []
        if not ok:
            fails.append(("audit_verify_failed", out[-2000:]))
        rc, err = await self.loop.run_in_executor(None, self.daemon.stop)
        await self.origins.teardown()
        tail = err[self.daemon.stderr_off:] if len(err) > self.daemon.stderr_off else ""
        if sanitizer_report(tail):
            fails.append(("sanitizer_at_exit", tail[-6000:]))
        if rc != 0:
            fails.append(("exit_status", f"sluice exited {rc} after SIGTERM; stderr tail:\n{err[-3000:]}"))
        for kind, detail in fails:
            frames = first_frames(detail) if kind == "sanitizer_at_exit" else None
            if frames:
                m = re.search(r"ERROR: \w+Sanitizer: ([\w-]+)", detail)
                if m:
                    frames = [m.group(1)] + frames
            self.fail(Failure(kind, detail, None, {"frames": frames,
                                                     "cases": list(self.cases_since_start)}))
        if self.daemon.cov:
            self.daemon.cov.close()
            self.daemon.cov = None
        return not fails

    async def close(self):
        ok = await self.stop_daemon()
        self.lag_task.cancel()
        await self.origins.close()
        await self.dns.close()
        return ok

    # --- canaries -------------------------------------------------------------
    async def _lag_monitor(self):
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.05)
            late = time.monotonic() - t - 0.05
            if late > 0.2:
                self.lag.append((time.monotonic(), late))
                self.lag = self.lag[-200:]

    def _lag_between(self, a, b):
        return max([s for t, s in self.lag if a - 0.1 <= t <= b + 0.5] or [0.0])

    async def _exchange(self, data, until, deadline):
        """Connect, send, read until until(received) says done (or EOF)."""
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.daemon.port), deadline)
        port = w.get_extra_info("sockname")[1]
        got = bytearray()
        try:
            w.write(data)
            end = time.monotonic() + deadline
            while not until(got):
                b = await asyncio.wait_for(r.read(65536), max(0.01, end - time.monotonic()))
                if not b:
                    break
                got += b
        finally:
            w.close()
        return port, bytes(got)

    async def canary(self, kind, deadline=None):
        """One canary: (ok, detail, local port)."""
        deadline = deadline or self.o.canary_s
        tok = os.urandom(6).hex()
        t = time.monotonic()
        port = None
        tls_result = None
        try:
            if kind == "http":
                want = f"canary /c/{tok}\n".encode()
                req = (f"GET http://canary.fuzz.test/c/{tok} HTTP/1.1\r\nHost: canary.fuzz.test\r\n"
                       f"Proxy-Authorization: {self.canary_cred}\r\nConnection: close\r\n\r\n").encode()
                port, got = await self._exchange(req, lambda g: g.endswith(want), deadline)
                ok = got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"\r\n\r\n" + want)
            elif kind == "tunnel":
                payload = self.hello + tok.encode()
                req = (b"CONNECT canary.fuzz.test:443 HTTP/1.1\r\nHost: canary.fuzz.test:443\r\n"
                       b"Proxy-Authorization: " + self.canary_cred.encode() + b"\r\n\r\n" + payload)
                head = b"HTTP/1.1 200 "
                port, got = await self._exchange(
                    req, lambda g: b"\r\n\r\n" in g and g.split(b"\r\n\r\n", 1)[1] == payload, deadline)
                ok = got.startswith(head) and got.split(b"\r\n\r\n", 1)[-1] == payload
            elif kind == "inspect":
                want = f"canary /c/{tok}\n".encode()
                name = rules.CANARY_NAME
                spec = {"data": f"CONNECT {name}:443 HTTP/1.1\r\nHost: {name}:443\r\n"
                                f"Proxy-Authorization: {self.canary_cred}\r\n\r\n", "writes": [],
                        "end": {"kind": "hold", "at": None, "ms": 0}, "wait_ms": deadline * 1000,
                        "tls": {"host": name, "sni": "@", "alpn": ["http/1.1"], "records": 1, "writes": []}}
                inner = f"GET /c/{tok} HTTP/1.1\r\nHost: {name}\r\n\r\n".encode()
                r = await asyncio.wait_for(
                    run_tls_client(self.loop, spec, self.daemon.port, spec["data"].encode(), inner, name,
                                   self.gate_ca_pem, until=lambda p: p.endswith(want)), deadline + 3)
                port, got = r.local_port, bytes(r.plain)
                ok = r.tls.get("state") == "done" and got.startswith(b"HTTP/1.1 200 ") and got.endswith(want)
                tls_result = r
                if not ok:
                    slow = self._slow_canary_origin(t)
                    if slow and b"reason=upstream_tls_failed" in got and b"within" in got:
                        # sluice gave up on our origin's handshake, which we were slow to answer
                        self.stats["canary_excused_lag"] += 1
                        return True, f"excused: our TLS origin was slow ({slow})", r.local_port
                    got = (bytes(r.received[:80]) + b"... | tls " + repr(r.tls).encode() + b" | inside: " + got +
                           f" | our origin: {slow or self._canary_origin_times(t)}".encode())
            else:
                req = (b"GET http://canary.no.fuzz.test/ HTTP/1.1\r\nHost: canary.no.fuzz.test\r\n"
                       b"Proxy-Authorization: " + self.canary_cred.encode() + b"\r\n\r\n")
                port, got = await self._exchange(req, lambda g: False, deadline)
                ok = got.startswith(b"HTTP/1.1 403 ") and \
                    b"\r\nSluice-Decision: deny; reason=not_allowlisted\r\n" in got
            detail = "" if ok else f"wrong answer: {got[:600]!r}"
        except (asyncio.TimeoutError, OSError) as e:
            ok = False
            got = b""
            detail = f"no answer within {deadline}s ({e!r})"
            # Slow, not wrong: blame sluice only if this process kept up.
            if isinstance(e, asyncio.TimeoutError) and self._lag_between(t, time.monotonic()) > 0.5:
                self.stats["canary_excused_lag"] += 1
                return True, "excused: the harness itself was slow", port
        self.stats[f"t_canary_{kind}_ms"] += int((time.monotonic() - t) * 1000)
        self.stats[f"n_canary_{kind}"] += 1
        if port:
            self.port_owner[port] = (None, time.monotonic())
            cr = tls_result or ClientResult()
            cr.canary = True     # its lines may come from the config before the case's
            if tls_result is None:
                cr.local_port, cr.received = port, bytearray(got)
                cr.sent, cr.outcome = req, "canary"
            self.canary_results.append(cr)
        self.stats["canaries"] += 1
        return ok, detail, port

    def _canary_origin_times(self, since):
        """The inspected canary's TLS origin connections since then: when
        sluice's ClientHello came, when our flight went, when it was done."""
        out = []
        for c in self.origins.conns:
            if c.local == net.CANARY_TLS and c.t_accept >= since - 0.01 and c.tls is not None:
                t = c.tls
                out.append({k: round(t[k] - c.t_accept, 3) for k in ("t_in", "t_flight", "t_done") if k in t})
        return out

    def _slow_canary_origin(self, since):
        """Why the harness, not sluice, was slow in an inspected canary's
        upstream handshake, or "" (its loop stalled, or our origin took over
        100 ms to answer sluice's ClientHello)."""
        lag = self._lag_between(since, time.monotonic())
        if lag > 0.1:
            return f"the harness's loop stalled {lag:.2f}s"
        for t in self._canary_origin_times(since):
            if "t_in" in t and t.get("t_flight", 99) - t["t_in"] > 0.1:
                return f"our origin answered sluice's ClientHello after {t.get('t_flight', 99) - t['t_in']:.2f}s"
        return ""

    async def _canary_loop(self, instance):
        self.canary_results = []
        kinds = ["http", "tunnel", "deny"] + (["inspect"] if self.inspect else [])
        i = 0
        while self.instance == instance:
            await asyncio.sleep(self.o.canary_every)
            k = kinds[i % len(kinds)]
            i += 1
            async with self.canary_lock:
                ok, detail, port = await self.canary(k)
            if not ok:
                self.canary_fail.append((self.current, k, detail, port))

    # --- one case --------------------------------------------------------------
    def _sanitise(self, s):
        # Bytes the checks look for must come from where they mean something.
        if getattr(self.o, "raw", False):
            return s
        return s.replace(gen.POISON, "P0IS0N-").replace("Sluice-Decision", "Sluice-Dec1sion")

    def install(self, case, nonce):
        self.dns.install(nonce, case.get("dns", {}))
        table = {}
        for key, scripts in case.get("origins", {}).items():
            try:
                k = _addr_key(key)
            except ValueError:
                continue
            out = []
            for s in scripts:
                s = copy.deepcopy(s)
                for op in s.get("ops", []):
                    if op.get("op") == "send" and not getattr(self.o, "raw", False):
                        op["d"] = op.get("d", "").replace("Sluice-Decision", "Sluice-Dec1sion")
                out.append(s)
            table[k] = out
        self.origins.install(self.exec_id, table)
        for entry in case.get("dns", {}).values():
            for answers in entry.values():
                for a in answers:
                    for src in (a, a.get("tcp") if isinstance(a.get("tcp"), dict) else {}):
                        for rr in src.get("an", []):
                            if rr.get("t") == "CNAME" and "target" in rr:
                                self.oracle.cname_targets.add(
                                    rr["target"].replace(gen.NONCE, nonce).lower().rstrip("."))

    async def run_case(self, case):
        self.exec_id += 1
        self.current = case["id"]
        self.recent[case["id"]] = case
        while len(self.recent) > 200:
            self.recent.popitem(last=False)
        self.cases_since_start.append(case)
        nonce = f"{self.exec_id % (1 << 24):06x}"
        violations = await self.apply_sessions(case)
        self.install(case, nonce)
        cov = self.daemon.cov
        if cov:
            cov.reset()
        self.canary_results = []
        t_start = time.monotonic()

        async def one(spec):
            if spec.get("start_ms"):
                await asyncio.sleep(spec["start_ms"] / 1000.0)
            data = self._sanitise(_NONCE_RE.sub(nonce, spec.get("data", ""))).encode("latin-1")
            t = spec.get("tls")
            if isinstance(t, dict):
                plain = self._sanitise(_NONCE_RE.sub(nonce, t.get("data", ""))).encode("latin-1")
                host = _NONCE_RE.sub(nonce, str(t.get("host", "")))
                if isinstance(t.get("sni"), str) and t["sni"] != "@":
                    spec = copy.deepcopy(spec)
                    spec["tls"]["sni"] = _NONCE_RE.sub(nonce, t["sni"])
                return await run_tls_client(self.loop, spec, self.daemon.port, data, plain, host,
                                            self.gate_ca_pem if self.gate_tls else None,
                                            sessions=self.tls_sessions)
            return await run_client(self.loop, spec, self.daemon.port, data)

        results = await asyncio.gather(*(one(s) for s in case.get("clients", [])))
        now = time.monotonic()
        self.stats["t_clients_ms"] += int((now - t_start) * 1000)
        ports = [r.local_port for r in results if r.local_port]
        for p in ports:
            self.port_owner[p] = (case["id"], now)

        # Settle: sluice closes what the clients left; its lines arrive.
        deadline = now + (self.timeouts["idle"] + self.timeouts["header"]) / 1000.0 + 1.5
        while time.monotonic() < deadline:
            violations += self.pump_log()
            if not self.oracle.missing_closes(ports) and self.origins.all_closed(self.exec_id):
                break
            if not self.daemon.alive():
                break
            await asyncio.sleep(0.02)
        t_settled = time.monotonic()
        self.stats["t_settle_ms"] += int((t_settled - now) * 1000)
        await self.origins.teardown()
        violations += self.pump_log()
        lines_so_far = list(self.case_lines)
        violations += await self.check_after(case, results)
        if self.daemon.log.token_hits or self.sess_tokens:
            violations += self.oracle.check_tokens(list(results), self.origins.case_conns(self.exec_id),
                                                   self.daemon.log.token_hits, self.sess_tokens)
            self.daemon.log.token_hits = []
        for c in self.canary_fail:
            if c[0] == case["id"]:
                violations.append(checks.Violation("canary_failed", f"concurrent {c[1]} canary: {c[2]}"))
        self.canary_fail = [c for c in self.canary_fail if c[0] != case["id"]]

        # A canary after the case: sluice still answers a normal client.
        if self.daemon.alive() and not any(v.kind == "sanitizer" for v in violations):
            for kind in ("http", "tunnel") + (("inspect",) if self.inspect else ()):
                ok, detail, _ = await self.canary(kind)
                if not ok:
                    await asyncio.sleep(1.0)
                    ok2, detail2, _ = await self.canary(kind)
                    violations.append(checks.Violation(
                        "canary_failed", f"{kind} canary after the case: {detail}; "
                        f"again after 1 s: {'ok' if ok2 else detail2}"))
            violations += self.pump_log()
        self.stats["t_after_ms"] += int((time.monotonic() - t_settled) * 1000)
        violations += await self.check_daemon()
        if self.stats["cases"] % 50 == 49 and self.daemon.alive():
            ok, out = await self.loop.run_in_executor(None, self.daemon.audit_verify)
            if not ok:
                violations.append(checks.Violation("audit_verify_failed", out[-2000:]))

        new_bits = 0
        if cov and cov.nguards:
            table = _EDGE if getattr(self.o, "merge", None) else _BUCKET
            cur = int.from_bytes(cov.counters().translate(table), "little")
            fresh = cur & ~self.virgin
            if fresh:
                new_bits = bin(fresh).count("1")
                self.virgin |= cur
        self.last = (results, lines_so_far + list(self.case_lines), self.origins.case_conns(self.exec_id))
        sig = checks.signature(self.case_lines, results, self.origins.case_conns(self.exec_id), "")
        new_sig = sig - self.sigs
        self.sigs |= sig
        self.stats["cases"] += 1
        self.stats["case_seconds_x1000"] += int((time.monotonic() - t_start) * 1000)
        self.origins.conns = [c for c in self.origins.conns if c.exec_id == -1 and not c.closed]
        return violations, new_bits, new_sig

    async def apply_sessions(self, case):
        """The case's [sessions] on the gate (a reload when they are not the
        ones it has), and the tokens no log line or reply may carry."""
        spec = case.get("sessions")
        spec = spec if isinstance(spec, dict) else None
        key = json.dumps(spec, sort_keys=True) if spec else None
        out = []
        if key != self.sess_key:
            t = time.monotonic()
            try:    # (a canary that hangs must not hang the case too)
                await asyncio.wait_for(self.canary_lock.acquire(), 8)
                locked = True
            except asyncio.TimeoutError:
                locked = False
                self.stats["sess_reload_unlocked"] += 1
            try:
                t_locked = time.monotonic()
                self.daemon.write_sessions(spec, self.canary_token, getattr(self.o, "sess_break", None))
                err = await self.loop.run_in_executor(None, self.daemon.reload)
            finally:
                if locked:
                    self.canary_lock.release()
            took = time.monotonic() - t
            if took > 2:
                print(f"fuzz-daemon: the reload for case {case.get('id')} took {took:.1f}s "
                      f"({t_locked - t:.1f}s waiting for a canary)", flush=True)
            self.stats["sess_reloads"] += 1
            if err:
                out.append(checks.Violation("reload_failed", f"the case's sessions: {err}"))
            self.sess_key = key
        self.oracle.sess = sess.Config(spec, self.canary_token) if spec else None
        if spec:
            self.stats["sess_cases"] += 1
        toks = set(self.oracle.sess.secrets()) if spec else set()
        toks |= {self.canary_token, self.canary_cred.split(" ", 1)[1]}
        for cl in case.get("clients", []):
            for text in (cl.get("data", ""), (cl.get("tls") or {}).get("data", "") if isinstance(cl.get("tls"), dict) else ""):
                toks |= sess.tokens_in(text)
        self.sess_tokens = {t.encode("latin-1") for t in toks}
        self.daemon.log.tokens = self.sess_tokens
        return out

    def pump_log(self):
        new = self.daemon.log.poll()
        self.case_lines = getattr(self, "case_lines", []) + new
        out = self.oracle.add_lines(new)
        if self.daemon.log.leaks:
            out += [checks.Violation("secret_leaked", e) for e in self.daemon.log.leaks]
            self.daemon.log.leaks = []
        if self.daemon.log.errors:
            out += [checks.Violation("log_unparseable", e) for e in self.daemon.log.errors]
            self.daemon.log.errors = []
        return out

    async def check_after(self, case, results):
        o = self.oracle
        conns = self.origins.case_conns(self.exec_id)
        snap = o.snapshot()
        for attempt in range(2):
            out = []
            for r in list(results) + list(self.canary_results):
                out += o.check_client(r)
            o.allow_retries(conns)
            for c in conns:
                out += o.check_origin(c)
            if attempt == 0 and any(v.kind in COUNT_KINDS for v in out):
                # allow lines reach the file within 100 ms: look again
                await asyncio.sleep(0.3)
                self.pump_log()
                o.restore(snap)
                continue
            break
        self.canary_results = []
        for k, v in o.sess_stats.items():
            self.stats["sess_" + k] += v
        o.sess_stats.clear()
        out += o.check_pin_lines()
        for k, v in o.pin_stats.items():
            self.stats["pin_" + k] += v
        o.pin_stats.clear()
        out += o.check_dns()
        # Allow lines of finished clients must have their close line by now.
        now = time.monotonic()
        for port, (owner, t_fin) in list(self.port_owner.items()):
            if now - t_fin < self.o.close_grace_s:
                continue
            for d in o.missing_closes([port]):
                out.append(checks.Violation("allow_without_close",
                                            f"no close line {now - t_fin:.1f}s after client :{port} ended: {d}"
                                            + (f" (case {owner})" if owner and owner != case["id"] else "")))
            del self.port_owner[port]
        self.case_lines = []
        return out

    async def check_daemon(self):
        out = []
        err = self.daemon.new_stderr()
        for t in getattr(self, "sess_tokens", ()):
            if t.decode("latin-1") in err:
                out.append(checks.Violation("token_leaked", "sluice's stderr has a token or credential"))
                break
        if self.inspect and self.secret in err:
            i = err.find(self.secret)
            out.append(checks.Violation("secret_leaked",
                                        f"sluice's stderr has the secret: ...{err[max(0, i - 300):i]}"))
        if sanitizer_report(err) or not self.daemon.alive():
            if not self.daemon.alive():
                await asyncio.sleep(0.3)
                err += self.daemon.new_stderr()
            if sanitizer_report(err):
                # the report itself, from its first line
                starts = [i for i in (err.find(m) for m in ("==ERROR", "runtime error:", "sluice: BUG",
                                                            "Assertion `")) if i >= 0]
                start = max(0, err.rfind("\n", 0, min(starts)) + 1) if starts else 0
                out.append(checks.Violation("sanitizer", err[start:start + 12000]))
            else:
                out.append(checks.Violation("daemon_died", f"exit {self.daemon.proc.poll()}: {err[-3000:]}"))
        return out

    # --- failures ----------------------------------------------------------------
    def fail(self, f):
        key = f.key()
        self.stats["failures"] += 1
        if key in self.failure_keys:
            self.stats["failures_dup"] += 1
            return
        self.failure_keys.add(key)
        self.failures.append(f)
        self.crash_dir.mkdir(parents=True, exist_ok=True)
        obj = {"failure": {"kind": f.kind, "detail": f.detail[-12000:],
                           "frames": f.extra.get("frames")}}
        if f.case is not None:
            obj["case"] = {k: v for k, v in f.case.items() if not k.startswith("_")}
        if f.extra.get("cases"):
            obj["cases"] = [{k: v for k, v in c.items() if not k.startswith("_")} for c in f.extra["cases"]]
        name = f"{f.kind}-{(f.case or {}).get('id') or hashlib.sha1(f.detail.encode()).hexdigest()[:16]}.json"
        path = self.crash_dir / name
        path.write_text(codec.dumps(obj))
        frames = f.extra.get("frames")
        print(f"fuzz-daemon: FAILURE {f.kind}" + (f" at {' < '.join(frames)}" if frames else "")
              + f"\n  {f.detail.splitlines()[0][:300] if f.detail else ''}\n  replay: "
              f"tests/fuzz/daemon/run.py --replay {path}", flush=True)

    def handle(self, case, violations):
        ignored = {k for k in getattr(self.o, "ignore", "").split(",") if k}
        violations = [v for v in violations if v.kind not in ignored]
        if any(v.kind in ("sanitizer", "daemon_died") for v in violations):
            # what failed with the daemon tells nothing more
            violations = [v for v in violations if v.kind in ("sanitizer", "daemon_died")]
        by_kind = {}
        for v in violations:
            by_kind.setdefault(v.kind, v)
        for v in by_kind.values():
            frames = first_frames(v.detail) if v.kind == "sanitizer" else None
            if frames:
                m = re.search(r"ERROR: \w+Sanitizer: ([\w-]+)|runtime error: ([^\n]{0,80})", v.detail)
                if m:
                    frames = [m.group(1) or m.group(2)] + frames
            owner = case
            m = re.search(r"\(case ([0-9a-f]{16})\)$", v.detail)
            if m and m.group(1) in self.recent:
                owner = self.recent[m.group(1)]
            self.fail(Failure(v.kind, v.detail, owner, {"frames": frames}))
        return bool(violations)

    # --- corpus --------------------------------------------------------------
    def keep(self, case, new_bits, new_sig, out_dir):
        cov = self.daemon.cov and self.nguards
        if (cov and new_bits) or (not cov and new_sig):
            case["found"] = {"edges": new_bits, "sig": len(new_sig)}
            self.corpus.append(case)
            if out_dir:
                out_dir.mkdir(parents=True, exist_ok=True)
                body = {k: v for k, v in case.items() if not k.startswith("_")}
                (out_dir / f"{case['id']}.json").write_text(codec.dumps(body))
            self.stats["kept"] += 1
            return True
        return False

    def edges(self):
        if not self.virgin:
            return 0
        b = self.virgin.to_bytes((self.virgin.bit_length() + 7) // 8, "little")
        return len(b) - b.count(0)

    def status(self, phase):
        el = time.monotonic() - self.t0
        s = self.stats
        print(f"fuzz-daemon: {phase} {el:6.0f}s cases {s['cases']} ({s['cases'] / max(el, 1e-9):.2f}/s) "
              f"corpus {len(self.corpus)} edges {self.edges()}/{self.nguards} sig {len(self.sigs)} "
              f"canaries {s['canaries']} failures {len(self.failures)} restarts {self.instance - 1} "
              f"(ms/case: clients {s['t_clients_ms'] // max(1, s['cases'])}, settle "
              f"{s['t_settle_ms'] // max(1, s['cases'])}, checks+canaries {s['t_after_ms'] // max(1, s['cases'])})",
              flush=True)
