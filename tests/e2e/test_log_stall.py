"""The decision log on a standard output nobody reads: the writes block,
and the gate must neither hang its clients nor lose a line. Refusals are
answered (403, or 503 log_unavailable once the stall is noticed), SIGTERM
still ends the process, an open tunnel keeps relaying; once the pipe is
read, every decision that was answered is in the log exactly once and the
chain verifies."""

import os
import re
import signal
import threading
import time

from sluicetest.checks import STANDARD_ALLOW, assert_refused
from sluicetest.client import connect, echo_both_ways
from sluicetest.logcheck import (assert_answered, assert_chain, assert_each_answer_logged_once,
                                 refuse_many, refused)
from sluicetest.pattern import pattern

STALL_RE = r"decision log unwritable: standard output: a write has been blocked for 1000 ms"
STDOUT_LOG = {"log": {"path": "-"}}


def _stall(s):
    """Refuse requests until the gate says its log is blocked. Returns every
    answer; each must be a refusal, 403 or 503 log_unavailable, and come
    within a few seconds."""
    results = []
    deadline = time.monotonic() + 30
    while not re.search(STALL_RE, s.stderr):
        assert time.monotonic() < deadline, "the gate never noticed its log was blocked"
        results += refuse_many(s.port, len(results), 50)
    # and a few more after it noticed: these are refused at once
    results += refuse_many(s.port, len(results), 20)
    assert_answered(results)
    assert any(r[1] == 503 for r in results), "no 503 log_unavailable after the stall was noticed"
    return results


class PipeReader(threading.Thread):
    """Reads sluice's standard output to its end."""

    def __init__(self, fd):
        super().__init__(daemon=True)
        self.fd = fd
        self.data = bytearray()

    def run(self):
        while True:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return
            self.data += chunk


def _read_all(reader, tmp_path):
    """What was read from the pipe, saved as a file."""
    saved = tmp_path / "stdout.log"
    saved.write_bytes(bytes(reader.data))
    return saved


def test_a_stalled_stdout_log_answers_every_client_and_loses_no_line(sluice, sluice_bin, tmp_path):
    s = sluice(allow=STANDARD_ALLOW, config=STDOUT_LOG, stdout_pipe=True)
    results = _stall(s)
    s.wait_stderr(STALL_RE)
    stalled_at = s.last_stderr_index

    reader = PipeReader(s.stdout_fd)
    reader.start()
    s.wait_stderr(r"decision log writable again; accepting clients", start=stalled_at, timeout=20)
    # served again: a real decision, not a 503
    after = [refused(s.port, 100000)]
    assert after[0][1:3] == (403, "not_allowlisted"), after
    resp, conn = connect(s.port, "origin.test:9000")
    assert resp.status == 200 and echo_both_ways(conn.sock, b"ping") == b"ping"
    conn.close()
    s.stop()
    reader.join(10)
    assert not reader.is_alive()
    s.proc.stdout.close()

    assert len(reader.data) > 1 << 16, "not more log than a pipe holds"
    lines = assert_chain([_read_all(reader, tmp_path)], sluice_bin)
    assert_each_answer_logged_once(results + after, lines)
    allow = [l for l in lines if l["event"] == "decision" and l["decision"] == "allow"]
    assert len(allow) == 1 and any(l["event"] == "close" and l["id"] == allow[0]["id"] for l in lines)


def test_sigterm_with_a_stalled_stdout_log_exits_and_reports_what_was_not_written(sluice):
    grace_ms = 1000
    s = sluice(allow=STANDARD_ALLOW,
               config={**STDOUT_LOG, "proxy": {"listen": "127.0.0.1:0", "shutdown_grace_ms": grace_ms}},
               stdout_pipe=True)
    _stall(s)
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    rc = s.wait_exit(grace_ms / 1000 + 5)
    took = time.monotonic() - t0
    assert rc == 0, s.stderr
    assert took < grace_ms / 1000 + 5, took
    m = s.wait_stderr(r"sluice: (\d+) bytes of decision log could not be written at exit")
    assert int(m.group(1)) > 0
    s.proc.stdout.close()


def test_an_open_tunnel_keeps_relaying_while_the_log_is_stalled(sluice, sluice_bin, tmp_path):
    s = sluice(allow=STANDARD_ALLOW, config=STDOUT_LOG, stdout_pipe=True)
    resp, tunnel = connect(s.port, "origin.test:9000")
    assert resp.status == 200
    assert echo_both_ways(tunnel.sock, b"before") == b"before"
    results = _stall(s)
    stalled_at = s.last_stderr_index
    payload = pattern(300000, seed=5)
    assert echo_both_ways(tunnel.sock, payload) == payload
    # while new clients are refused: the gate cannot record them
    resp, conn = connect(s.port, "origin.test:9000")
    conn.close()
    assert_refused(resp, 503, "log_unavailable")
    results.append((conn.local_port, 503, "log_unavailable", "", 0))
    assert echo_both_ways(tunnel.sock, b"after") == b"after"
    tunnel.close()

    reader = PipeReader(s.stdout_fd)
    reader.start()
    s.wait_stderr(r"decision log writable again", start=stalled_at, timeout=20)
    s.stop()
    reader.join(10)
    s.proc.stdout.close()
    lines = assert_chain([_read_all(reader, tmp_path)], sluice_bin)
    assert_each_answer_logged_once(results, lines)
    allow = [l for l in lines if l["event"] == "decision" and l["decision"] == "allow"]
    assert len(allow) == 1
    close = [l for l in lines if l["event"] == "close" and l["id"] == allow[0]["id"]]
    assert len(close) == 1 and close[0]["bytes_up"] == len(payload) + len(b"beforeafter"), close
