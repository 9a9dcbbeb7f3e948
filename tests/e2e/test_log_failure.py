"""The decision log failing under the gate: it fails closed (503
log_unavailable), keeps serving nobody it cannot record, resumes when the
log is writable again, and loses no line of a decision made while it was."""

import errno
import os
import subprocess
import time

import pytest

from sluicetest.checks import STANDARD_ALLOW, assert_refused
from sluicetest.client import connect, echo_both_ways


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
    """Write until the filesystem is full."""
    with open(path, "wb") as f:
        chunk = b"x" * 65536
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def _tunnel(port):
    resp, conn = connect(port, "origin.test:9000")
    ok = resp.status == 200 and echo_both_ways(conn.sock, b"ping") == b"ping"
    conn.close()
    return resp, conn, ok


def test_unwritable_log_fails_closed_then_resumes_without_losing_lines(sluice, small_fs):
    s = sluice(allow=STANDARD_ALLOW, config={"log": {"path": str(small_fs / "decisions.log")}})
    before = []
    for _ in range(5):
        resp, conn, ok = _tunnel(s.port)
        assert ok
        before.append(conn.local_port)

    _fill(small_fs / "filler")
    # The gate notices at its next write (within 100 ms of a decision).
    deadline = time.monotonic() + 10
    refused = None
    while time.monotonic() < deadline:
        resp, conn = connect(s.port, "origin.test:9000")
        conn.close()
        if resp.status == 503:
            refused = resp
            break
        time.sleep(0.05)
    assert refused is not None, "the gate kept admitting clients while its log was full"
    assert_refused(refused, 503, "log_unavailable")
    s.wait_stderr(r"decision log unwritable")
    for _ in range(3):
        resp, conn = connect(s.port, "origin.test:9000")
        conn.close()
        assert_refused(resp, 503, "log_unavailable")

    os.unlink(small_fs / "filler")
    deadline = time.monotonic() + 10
    while True:
        resp, conn, ok = _tunnel(s.port)
        if ok:
            break
        assert time.monotonic() < deadline, "the gate did not resume after the log became writable"
        time.sleep(0.05)
    s.wait_stderr(r"decision log writable again")
    s.stop()

    lines = s.log_lines(complete=True)
    clients = {l.get("client", "") for l in lines if l["event"] == "decision"}
    for p in before:
        assert f"127.0.0.1:{p}" in clients, f"decision for client port {p} is missing from the log"
    seqs = [l["seq"] for l in lines]
    assert seqs == list(range(1, len(seqs) + 1)), "the log has a gap or a repeat"
    assert any(l.get("reason") == "log_unavailable" for l in lines)


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
    deadline = time.monotonic() + 10
    while not s.log_path.exists():
        assert time.monotonic() < deadline, "the log was not created again"
        time.sleep(0.05)
    resp, conn, ok = _tunnel(s.port)
    assert ok, resp
    s.stop()
    first = s.log_lines(complete=True)[0]
    assert "continues_seq" in first and "continues_chain" in first, first
