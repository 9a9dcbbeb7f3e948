"""The test resolver (dnsmasq on 127.0.0.53:53) and a DNS server that never
answers (127.0.0.54:53)."""

import re
import socket
import subprocess
import threading
import time
import uuid

from . import dnsquery

DNSMASQ = "/usr/sbin/dnsmasq"
RESOLVER = ("127.0.0.53", 53)
BLACKHOLE = ("127.0.0.54", 53)
LOCAL_TTL = 2

# name -> addresses, in the order dnsmasq should return them. dnsmasq answers
# several --host-record lines for one name in reverse order, so they are given
# to it reversed (see Dnsmasq.args).
RECORDS = {
    "origin.test": ["11.0.0.1"],
    "origin2.test": ["11.0.0.2"],
    "recorder.test": ["11.0.0.3"],
    "stall.test": ["11.0.0.4"],
    "private.test": ["10.0.0.1"],
    "metadata.test": ["169.254.169.254"],
    "metadata6.test": ["fd00:ec2::254"],
    "mixed.test": ["11.0.0.1", "10.0.0.1"],
    "mixed46.test": ["11.0.0.1", "64:ff9b::a9fe:a9fe"],
    "v6.test": ["2c0f:fff0::1"],
    "dual.test": ["11.0.0.1", "2c0f:fff0::1"],
    "mapped.test": ["::ffff:10.0.0.1"],
    "nat64.test": ["64:ff9b::a00:1"],
    "xn--bcher-kva.test": ["11.0.0.1"],     # bücher.test
    "wild.test": ["11.0.0.1"],
    "a.wild.test": ["11.0.0.1"],
    "apex.test": ["11.0.0.1"],
    "b.apex.test": ["11.0.0.1"],
    # Happy Eyeballs: the first address drops SYNs (11.0.0.4:443), the second answers.
    "blackholed.test": ["11.0.0.4", "11.0.0.1"],
    # 17 addresses: 16 public ones, then a loopback one; the whole answer is checked.
    "many.test": [f"11.0.2.{i}" for i in range(1, 17)] + ["127.0.0.1"],
    # the scriptable origins (sluicetest/scripted.py)
    "h1.hostile.test": ["11.0.0.5"],
    "h2.hostile.test": ["11.0.0.6"],
    "two.hostile.test": ["11.0.0.5", "11.0.0.6"],
    "alias.hostile.test": ["11.0.0.5"],     # h1's address under another name
    # the inspecting origins (sluicetest/inspecting.py): HTTPS, each with its own certificate
    "registry.inspect.test": ["11.0.1.1"],  # also plain HTTP on :80
    "git.inspect.test": ["11.0.1.2"],
    "api.inspect.test": ["11.0.1.3"],
    "opaque.inspect.test": ["11.0.1.4"],    # a plain allowlist entry: never inspected
    "pypi.inspect.test": ["11.0.1.5"],      # a simple index (pyindex.py)
    # crates.io's sparse index and downloads, answered here only (no upstream):
    # the cargo tests' registry stand-in (crates.py) inside the namespace
    "index.crates.io": ["11.0.1.6"],
    "static.crates.io": ["11.0.1.7"],
    "expired.inspect.test": ["11.0.1.10"],
    "notyet.inspect.test": ["11.0.1.11"],
    "selfsigned.inspect.test": ["11.0.1.12"],
    "wrongname.inspect.test": ["11.0.1.13"],
    "untrusted.inspect.test": ["11.0.1.14"],
}
# Everything else under .test (and crates.io) is NXDOMAIN, answered locally:
# e.g. denied.test, nxdomain.test. dnsmasq has no upstream at all.

_QUERY_RE = re.compile(r"query\[(\w+)\] (\S+) from ")


class Dnsmasq:
    def __init__(self, workdir):
        self.workdir = workdir
        self.log_path = workdir / "dnsmasq.log"
        self.err_path = workdir / "dnsmasq.stderr"
        self.proc = None

    def args(self):
        a = [DNSMASQ, "--keep-in-foreground", "--user=root", "--group=root", "--pid-file=",
             "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--no-poll",
             "--log-queries", f"--log-facility={self.log_path}",
             f"--listen-address={RESOLVER[0]}", "--bind-interfaces", f"--port={RESOLVER[1]}",
             f"--local-ttl={LOCAL_TTL}", "--local=/test/", "--local=/crates.io/"]
        for name, addrs in RECORDS.items():
            for addr in reversed(addrs):
                a.append(f"--host-record={name},{addr}")
        return a

    def start(self):
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL,
                                     stdout=self.err, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dnsmasq exited {self.proc.returncode}: "
                                   f"{self.err_path.read_text(errors='replace')}")
            try:
                rcode, _ = dnsquery.query("origin.test", "A", RESOLVER, timeout=0.2)
                if rcode == "NOERROR":
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("dnsmasq did not answer within 10 s")
        # check the answers the tests rely on
        for name, addrs in RECORDS.items():
            got = []
            for qtype in ("A", "AAAA"):
                rcode, answers = dnsquery.query(name, qtype, RESOLVER)
                assert rcode == "NOERROR", (name, qtype, rcode)
                got += [a for _, a, _ in answers]
            want = sorted(str(_norm(a)) for a in addrs)
            assert sorted(str(_norm(a)) for a in got) == want, (name, got, addrs)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.err.close()

    # --- the query log ---------------------------------------------------
    def mark(self):
        """A position in the query log; see queries_since()."""
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def sync(self, timeout=5.0):
        """Ask dnsmasq a sentinel name and wait until the log shows it: every
        query that reached dnsmasq before is in the log then."""
        name = f"sentinel-{uuid.uuid4().hex[:12]}.test"
        dnsquery.query(name, "A", RESOLVER)
        deadline = time.monotonic() + timeout
        while name not in self.log_path.read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise AssertionError(f"dnsmasq did not log the sentinel query {name}")
            time.sleep(0.01)

    def queries_since(self, mark):
        """[(qtype, name)] asked since `mark`, up to now (calls sync())."""
        self.sync()
        with open(self.log_path, "rb") as f:
            f.seek(mark)
            text = f.read().decode(errors="replace")
        return [(m.group(1), m.group(2)) for m in _QUERY_RE.finditer(text)
                if not m.group(2).startswith("sentinel-")]

    def names_since(self, mark):
        return {name.lower().rstrip(".") for _, name in self.queries_since(mark)}


def _norm(a):
    import ipaddress
    return ipaddress.ip_address(a)


class Blackhole:
    """A DNS server that reads every query and never answers (UDP and TCP)."""

    def __init__(self, addr=BLACKHOLE):
        self.addr = addr
        self.udp_queries = 0
        self.tcp_connections = 0
        self._stop = False
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(addr)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(addr)
        self.tcp.listen(64)
        self._held = []
        threading.Thread(target=self._udp_loop, daemon=True).start()
        threading.Thread(target=self._tcp_loop, daemon=True).start()

    def _udp_loop(self):
        while not self._stop:
            try:
                self.udp.recvfrom(4096)
                self.udp_queries += 1
            except OSError:
                return

    def _tcp_loop(self):
        while not self._stop:
            try:
                c, _ = self.tcp.accept()
            except OSError:
                return
            self.tcp_connections += 1
            self._held.append(c)
            threading.Thread(target=self._drain, args=(c,), daemon=True).start()

    @staticmethod
    def _drain(c):
        try:
            while c.recv(4096):
                pass
        except OSError:
            pass

    def close(self):
        self._stop = True
        for s in [self.udp, self.tcp] + self._held:
            try:
                s.close()
            except OSError:
                pass
