"""A pinned download of 1 GiB holds the gate's memory flat (issue 12): the
body is hashed as it streams and only the bytes that complete it wait for
the verdict, in the same pass. Plain HTTP to an inspected host (a pinned
rule on an IP literal in the test's network namespace), so that the gate's
cost is the hash and the relay, not TLS.

The origin is the test's own: it streams a 1 MiB block 1024 times
(Content-Length or chunked), and the client hashes what it receives. sluice's resident memory is sampled from
/proc while the body flows. ASan's quarantine of freed memory is turned
down for this gate (quarantine_size_mb=1), or it alone would grow RSS by
up to 256 MiB and hide what the gate itself holds."""

import base64
import hashlib
import os
import socket
import threading
import time

import pytest

ADDR = "11.0.0.1"
SIZE = 1 << 30
BLOCK = hashlib.sha256(b"sluice pinned block").digest() * (1 << 15)   # 1 MiB, not all one byte
assert len(BLOCK) == 1 << 20


def _digests(corrupt_last=False):
    h256, h512 = hashlib.sha256(), hashlib.sha512()
    for i in range(SIZE // len(BLOCK)):
        b = BLOCK
        if corrupt_last and i == SIZE // len(BLOCK) - 1:
            b = BLOCK[:-1] + bytes([BLOCK[-1] ^ 1])
        h256.update(b)
        h512.update(b)
    return ("sha256-" + base64.b64encode(h256.digest()).decode(),
            "sha512-" + base64.b64encode(h512.digest()).decode())


class BigOrigin:
    """Answers every GET with the 1 GiB body, Content-Length framed; with
    corrupt, its very last byte is flipped."""

    def __init__(self):
        self.ls = socket.create_server((ADDR, 0))
        self.port = self.ls.getsockname()[1]
        self.corrupt = False
        self.chunked = False
        self.requests = []
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        with c:
            head = b""
            while b"\r\n\r\n" not in head:
                d = c.recv(65536)
                if not d:
                    return
                head += d
            self.requests.append(head)
            if self.chunked:
                c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            else:
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % SIZE)
            n = SIZE // len(BLOCK)
            try:
                for i in range(n):
                    b = BLOCK[:-1] + bytes([BLOCK[-1] ^ 1]) if self.corrupt and i == n - 1 else BLOCK
                    c.sendall(b"%x\r\n%s\r\n" % (len(b), b) if self.chunked else b)
                if self.chunked:
                    c.sendall(b"0\r\n\r\n")
            except OSError:
                return

    def close(self):
        self.ls.close()


def _rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _download(proxy_port, url, pid, samples):
    """GET url through the gate; returns (status line, body bytes, sha256 hex
    of the body, how it ended). Samples RSS every 100 ms meanwhile."""
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append(_rss_kib(pid))
            stop.wait(0.1)

    st = threading.Thread(target=sample, daemon=True)
    st.start()
    s = socket.create_connection(("127.0.0.1", proxy_port), timeout=120)
    host = url.split("/")[2]
    s.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    chunked = b"transfer-encoding: chunked" in head.lower()
    h = hashlib.sha256()
    got, end, pending = 0, "eof", bytearray(rest)
    # a small de-chunker: the client hashes the content, as a client would
    left = 0          # bytes left in the current chunk (chunked) or the body
    try:
        while got < SIZE:
            if chunked:
                while True:
                    if left == 0:
                        i = pending.find(b"\r\n", 2 if pending[:2] == b"\r\n" else 0)
                        if i < 0:
                            break
                        line = bytes(pending[:i]).strip(b"\r\n")
                        del pending[:i + 2]
                        left = int(line, 16) if line else 0
                        if line == b"0":
                            break
                        continue
                    take = min(left, len(pending))
                    if take == 0:
                        break
                    h.update(pending[:take])
                    got += take
                    left -= take
                    del pending[:take]
                if got >= SIZE:
                    break
            else:
                h.update(pending)
                got += len(pending)
                pending.clear()
                if got >= SIZE:
                    break
            d = s.recv(1 << 20)
            if not d:
                break
            pending += d
    except ConnectionResetError:
        end = "reset"
    s.close()
    stop.set()
    st.join()
    return head.split(b"\r\n")[0], got, h.hexdigest(), end


@pytest.fixture
def big_origin():
    o = BigOrigin()
    yield o
    o.close()


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
@pytest.mark.parametrize("bad", [False, True], ids=["matches", "last-byte-wrong"])
def test_a_pinned_gigabyte_holds_memory_flat(sluice_inspecting, big_origin, bad, chunked):
    d256, d512 = _digests()
    url = f"http://{ADDR}:{big_origin.port}/big.bin"
    s = sluice_inspecting(allow=[f"GET {ADDR}:{big_origin.port}/big.bin {d256} {d512}"],
                          env={"ASAN_OPTIONS": "quarantine_size_mb=1"})
    big_origin.corrupt = bad
    big_origin.chunked = chunked
    pid = s.proc.pid
    before = _rss_kib(pid)
    samples = []
    t0 = time.monotonic()
    status, got, sha, end = _download(s.port, url, pid, samples)
    took = time.monotonic() - t0
    assert status == b"HTTP/1.1 200 OK"
    # the origin was asked for the identity coding, whatever the client said
    req = big_origin.requests[-1].lower()
    assert b"accept-encoding: identity\r\n" in req and b"gzip" not in req
    if bad:
        # never the whole body: the last MiB's end was held back, then reset
        assert got < SIZE, f"the client got all {got} bytes of a body that does not match"
        assert end in ("reset", "eof")
        line = s.wait_log(lambda l: l.get("end") == "integrity_mismatch", timeout=10)
        assert line["reason"] == "integrity_mismatch"
        assert line["expected"] == f"{d256} {d512}"
        bad256, bad512 = _digests(corrupt_last=True)
        assert line["actual"] == f"{bad256} {bad512}"
    else:
        assert got == SIZE and end == "eof"
        assert "sha256-" + base64.b64encode(bytes.fromhex(sha)).decode() == d256
    peak = max(samples + [before])
    # Flat: what the gate holds for one exchange is bounded by its buffers
    # (64 KiB in, 256 KiB out per side) and, for a body whose size is not
    # known at its head (chunked), the 8 MiB it holds whole before letting
    # it stream: nothing like the body's size.
    assert peak - before < 24 * 1024, (f"sluice's RSS grew from {before} KiB to {peak} KiB during the "
                                       f"{SIZE >> 20} MiB download ({took:.1f} s)")
