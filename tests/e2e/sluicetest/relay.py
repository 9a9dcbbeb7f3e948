"""A reference CONNECT relay with no policy, for the harness checks only:
it lets the real clients (npm, Node's agent, urllib, git) reach the
inspecting origins the way they will through sluice, so that
test_harness_inspect.py shows the clients, their config and the origins
work before sluice is in the path. It resolves names from dns.RECORDS
alone (namespace addresses) and refuses every other target."""

import socket
import threading

from .dns import RECORDS


class Relay:
    def __init__(self):
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.lock = threading.Lock()
        self.targets = []       # every CONNECT target asked for, in order
        self._socks = []
        threading.Thread(target=self._accept, daemon=True, name="relay").start()

    def close(self):
        self.ls.close()
        with self.lock:
            socks = list(self._socks)
        for s in socks:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            with self.lock:
                self._socks.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                data = c.recv(4096)
                if not data or len(head) > 65536:
                    return
                head += data
            head, _, rest = head.partition(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n")[0].decode("latin-1").split(" ")
            with self.lock:
                self.targets.append(target)
            host, _, port = target.rpartition(":")
            addrs = [a for a in RECORDS.get(host.lower(), []) if ":" not in a]
            if method != "CONNECT" or not addrs or not port.isdigit():
                c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            up = socket.create_connection((addrs[0], int(port)), timeout=10)
            with self.lock:
                self._socks.append(up)
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                up.sendall(rest)
            t = threading.Thread(target=_pump, args=(up, c), daemon=True)
            t.start()
            _pump(c, up)
            t.join(30)
        except (OSError, ValueError):
            pass
        finally:
            c.close()


def _pump(src, dst):
    try:
        src.settimeout(None)
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
