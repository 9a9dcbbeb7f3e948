"""What a client wrote to disk while it ran, as strace saw it: every file
it opened for writing and every buffer it wrote, with the path of the
descriptor (strace -y). A client that writes a file and removes it before
it exits leaves nothing to look at afterwards; this sees the write."""

import re
import shutil
from pathlib import Path

STRACE = "/usr/bin/strace"
SYSCALLS = "open,openat,creat,write,pwrite64,writev,pwritev,pwritev2"
WRITE_FLAGS = re.compile(r"O_WRONLY|O_RDWR|O_CREAT")
# 1234 openat(AT_FDCWD</x>, "a/b", O_WRONLY|O_CREAT, 0644) = 23</x/a/b>
LINE = re.compile(r"^(?P<pid>\d+) +(?P<call>\w+)\((?P<args>.*)\) += (?P<ret>-?\d+)(?:<(?P<path>[^>]*)>)?")
FD = re.compile(r"^(\d+)<(?P<path>[^>]*)>")


class Trace:
    """Run a command under `wrap` (strace -f, to `path`); afterwards
    `opened_for_writing()` and `written_containing(marker)`."""

    def __init__(self, path):
        if shutil.which(STRACE) is None:
            raise AssertionError("strace is not installed (make deps)")
        self.path = Path(path)
        self.wrap = [STRACE, "-f", "-qq", "-y", "-s", "65536", "-e", f"trace={SYSCALLS}",
                     "-o", str(self.path)]

    def calls(self):
        """(call, args text, return value, path of the result or of the
        first argument's descriptor) for each finished call."""
        pending = {}
        out = []
        for raw in self.path.read_text(errors="replace").splitlines():
            pid = raw.split(" ", 1)[0]
            if raw.endswith("<unfinished ...>"):
                pending[pid] = raw[:-len("<unfinished ...>")].rstrip()
                continue
            m = re.match(r"^(\d+) +<\.\.\. \w+ resumed>(.*)$", raw)
            if m:
                raw = pending.pop(pid, f"{pid} ?(") + m.group(2)
            m = LINE.match(raw)
            if not m:
                continue
            call, args, path = m.group("call"), m.group("args"), m.group("path")
            fd = FD.match(args)
            if call.startswith(("write", "pwrite")) and fd:
                path = fd.group("path")
            out.append((call, args, int(m.group("ret")), path))
        return out

    def opened_for_writing(self, under):
        """Files under `under` the command opened for writing (created or
        not)."""
        under = str(under).rstrip("/") + "/"
        got = []
        for call, args, ret, path in self.calls():
            if ret < 0 or not path:
                continue
            if call in ("open", "openat", "creat") and (call == "creat" or WRITE_FLAGS.search(args)) \
                    and path.startswith(under):
                got.append(path)
        return got

    def written_containing(self, marker, under):
        """Paths under `under` that a write put `marker` into."""
        under = str(under).rstrip("/") + "/"
        return [path for call, args, ret, path in self.calls()
                if call.startswith(("write", "pwrite")) and path and path.startswith(under) and marker in args]
