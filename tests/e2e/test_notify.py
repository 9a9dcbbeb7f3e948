"""sd_notify: sluice tells systemd (a datagram to $NOTIFY_SOCKET) when it is
ready, reloading and stopping, so a unit can use Type=notify."""

import os
import signal
import socket
import subprocess

from sluicetest.proc import sanitizer_env


def _recv(sock):
    return sock.recv(4096).decode()


def test_ready_reloading_and_stopping_are_notified(sluice_bin, tmp_path):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(15)
    env = sanitizer_env()
    env["NOTIFY_SOCKET"] = path
    p = subprocess.Popen([str(sluice_bin), "run", "--listen", "127.0.0.1:0", "--dns-server", "127.0.0.53",
                          "--log", str(tmp_path / "log")], env=env, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
    try:
        ready = _recv(sock)
        assert "READY=1" in ready and "STATUS=listening on 127.0.0.1 port" in ready, ready
        p.send_signal(signal.SIGHUP)
        assert _recv(sock) == "RELOADING=1"
        assert _recv(sock) == "READY=1"
        p.send_signal(signal.SIGTERM)
        assert _recv(sock) == "STOPPING=1"
        assert p.wait(20) == 0
    finally:
        if p.poll() is None:
            p.kill()
        err = p.stderr.read().decode(errors="replace")
        sock.close()
    assert "Sanitizer" not in err and "runtime error:" not in err, err


def test_abstract_notify_socket(sluice_bin, tmp_path):
    name = f"sluice-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(15)
    env = sanitizer_env()
    env["NOTIFY_SOCKET"] = "@" + name
    p = subprocess.Popen([str(sluice_bin), "run", "--listen", "127.0.0.1:0", "--dns-server", "127.0.0.53",
                          "--log", str(tmp_path / "log")], env=env, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL)
    try:
        assert "READY=1" in _recv(sock)
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(20) == 0
        sock.close()
