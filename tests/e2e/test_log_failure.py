"""The decision log failing under the gate: it fails closed (503
log_unavailable), keeps serving nobody it cannot record, resumes when the
log is writable again, and loses no line of a decision made while it was."""

import errno
import os
import signal
import subprocess
import time

import pytest

from sluicetest.checks import STANDARD_ALLOW, assert_refused
from sluicetest.client import connect, echo_both_ways
from sluicetest.logcheck import (assert_answered, assert_chain, assert_each_answer_logged_once,
                                 refuse_many)


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _in_private_mount_namespace():
    """True if some ancestor (the shell that ran `unshare --mount`) is in
    another mount namespace: a mount made here is then ours alone."""
    mine = os.readlink("/proc/self/ns/mnt")
    pid = os.getpid()
    while pid > 1:
        pid = _ppid(pid)
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") != mine:
                return True
        except OSError:
            return False
    return False


@pytest.fixture
def small_fs(tmp_path):
    """A 1 MiB tmpfs, mounted only inside the test's own mount namespace."""
    if not _in_private_mount_namespace():
        pytest.fail("the e2e suite must run under `unshare --mount` (make e2e does)")
    d = tmp_path / "logfs"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)], check=True)
    yield d
    subprocess.run(["umount", "-l", str(d)], check=False)


def _fill(path):
    """Write until the filesystem is full (unbuffered: a last partial write
    must not leave bytes for close() to fail on)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    chunk = b"x" * 65536
    try:
        while True:
            os.write(fd, chunk)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)


def _tunnel(port):
    resp, conn = connect(port, "origin.test:9000")
    ok = resp.status == 200 and echo_both_ways(conn.sock, b"ping") == b"ping"
    conn.close()
    return resp, conn, ok


def _connect_refused(port, answers):
    """A CONNECT that must be refused with 503 log_unavailable (kept in
    answers, for the check that its line is in the log)."""
    resp, conn = connect(port, "origin.test:9000")
    conn.close()
    assert_refused(resp, 503, "log_unavailable")
    answers.append((conn.local_port, 503, "log_unavailable", "", 0))


def test_unwritable_log_fails_closed_then_resumes_without_losing_lines(sluice, sluice_bin, small_fs):
    s = sluice(allow=STANDARD_ALLOW, config={"log": {"path": str(small_fs / "decisions.log")}})
    before = []
    for _ in range(5):
        resp, conn, ok = _tunnel(s.port)
        assert ok
        before.append(conn.local_port)

    _fill(small_fs / "filler")
    # Refusals made now cannot be written: their clients are answered all
    # the same (the 403 once the write failed, or a 503), and promptly.
    answers = refuse_many(s.port, 0, 40)
    assert_answered(answers)
    # The gate notices at its next write.
    deadline = time.monotonic() + 10
    refused = None
    while time.monotonic() < deadline:
        resp, conn = connect(s.port, "origin.test:9000")
        conn.close()
        if resp.status == 503:
            refused = resp
            answers.append((conn.local_port, 503, resp.decision[1], "", 0))
            break
        time.sleep(0.05)
    assert refused is not None, "the gate kept admitting clients while its log was full"
    assert_refused(refused, 503, "log_unavailable")
    s.wait_stderr(r"decision log unwritable: .*No space left on device")
    for _ in range(3):
        _connect_refused(s.port, answers)
    more = refuse_many(s.port, 100, 10)
    assert_answered(more)
    answers += more

    os.unlink(small_fs / "filler")
    deadline = time.monotonic() + 10
    while True:
        resp, conn, ok = _tunnel(s.port)
        if ok:
            break
        assert_refused(resp, 503, "log_unavailable")
        answers.append((conn.local_port, 503, "log_unavailable", "", 0))
        assert time.monotonic() < deadline, "the gate did not resume after the log became writable"
        time.sleep(0.05)
    s.wait_stderr(r"decision log writable again")
    s.stop()
    assert "could not be written" not in s.stderr

    lines = assert_chain([s.log_path], sluice_bin)
    clients = {l.get("client", "") for l in lines if l["event"] == "decision"}
    for p in before:
        assert f"127.0.0.1:{p}" in clients, f"decision for client port {p} is missing from the log"
    assert_each_answer_logged_once(answers, lines)


def test_sigterm_stops_the_gate_while_its_log_disk_is_full(sluice, small_fs):
    grace_ms = 1000
    s = sluice(allow=STANDARD_ALLOW, config={"log": {"path": str(small_fs / "decisions.log")},
                                             "proxy": {"listen": "127.0.0.1:0",
                                                       "shutdown_grace_ms": grace_ms}})
    resp, conn, ok = _tunnel(s.port)
    assert ok
    _fill(small_fs / "filler")
    assert_answered(refuse_many(s.port, 0, 20))
    s.wait_stderr(r"decision log unwritable")
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    assert s.wait_exit(grace_ms / 1000 + 5) == 0, s.stderr
    assert time.monotonic() - t0 < grace_ms / 1000 + 5
    m = s.wait_stderr(r"sluice: (\d+) bytes of decision log could not be written at exit")
    assert int(m.group(1)) > 0
    # what did reach the disk ends on a whole line (the teardown checks it)


def test_a_reload_to_another_path_while_the_disk_is_full_takes_the_waiting_lines(sluice, sluice_bin,
                                                                                small_fs, tmp_path):
    old = small_fs / "decisions.log"
    s = sluice(allow=STANDARD_ALLOW, config={"log": {"path": str(old)}})
    resp, conn, ok = _tunnel(s.port)
    assert ok
    s.wait_count(lambda l: l["event"] == "close", 1)   # the old file has a line
    _fill(small_fs / "filler")
    answers = refuse_many(s.port, 0, 30)
    assert_answered(answers)
    s.wait_stderr(r"decision log unwritable")
    failed_at = s.last_stderr_index
    new = tmp_path / "elsewhere.log"
    s.sections["log"]["path"] = str(new)
    s.write_config(s.sections)
    ok, line = s.reload()
    assert ok, line
    s.wait_stderr(r"decision log writable again", start=failed_at)
    more = refuse_many(s.port, 100, 10)
    assert all(r[1:3] == (403, "not_allowlisted") for r in more), more
    s.stop()
    # The old file ends on a whole line; the lines that waited went to the
    # new one, whose first line continues the old file's chain.
    lines = assert_chain([old, new], sluice_bin)
    assert_each_answer_logged_once(answers + more, lines)


def test_a_renamed_log_keeps_its_lines_until_sigusr1(sluice):
    # logrotate renames first and signals later: the renamed file still
    # takes the lines, so nothing is refused meanwhile.
    s = sluice(allow=STANDARD_ALLOW)
    _tunnel(s.port)
    rotated = s.log_path.with_suffix(".1")
    s.log_path.rename(rotated)
    for _ in range(5):
        resp, conn, ok = _tunnel(s.port)
        assert ok, resp
        time.sleep(0.05)
    assert "unwritable" not in s.stderr
    s.stop()
    assert len(rotated.read_text().splitlines()) >= 12   # 6 decisions + 6 closes


def test_a_deleted_log_fails_closed_and_is_created_again(sluice):
    s = sluice(allow=STANDARD_ALLOW)
    _tunnel(s.port)
    s.wait_count(lambda l: l["event"] == "close", 1)   # on disk before the file goes
    s.log_path.unlink()
    s.wait_stderr(r"decision log unwritable: .* was deleted")
    failed_at = s.last_stderr_index
    s.wait_stderr(r"decision log writable again", start=failed_at)
    assert s.log_path.exists(), "the log was not created again"
    resp, conn, ok = _tunnel(s.port)
    assert ok, resp
    s.stop()
    first = s.log_lines(complete=True)[0]
    assert "continues_seq" in first and "continues_chain" in first, first
