"""podman for the container tests (test_container.py), kept inside the test.

Everything podman keeps goes under one temp directory: the config
(CONTAINERS_CONF: runc, cgroupfs, explicit ulimits, no pulls), the storage
(CONTAINERS_STORAGE_CONF), the CNI network configs, the events log and the
libpod tmp dir. The registries config is empty, and every command that could
pull is given --pull=never: nothing is ever fetched; images are built here,
FROM scratch, from local files.

CNI's host-local IP allocator keeps its state in /var/lib/cni, podman puts
network namespace handles in /run/netns, and the image library keeps a blob
cache in /var/lib/containers/cache whatever the storage root. The suite runs
in a mount namespace of its own (unshare --mount), so a tmpfs is mounted over
each for the duration and nothing is left on the machine.

All containers run inside the suite's network namespace (unshare --net):
podman's bridges, the sandbox and the gate exist only there.
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from . import dnsquery
from .dns import DNSMASQ, LOCAL_TTL, RECORDS

PODMAN = shutil.which("podman")

# Hard limits podman gives every container (CONTAINERS_CONF default_ulimits);
# the run lines under test set their own on top.
DEFAULT_ULIMITS = ["nofile=4096:4096", "nproc=4096:4096"]

# State podman and CNI keep outside their configured directories.
TMPFS_OVER = ["/var/lib/cni", "/run/netns", "/var/lib/containers/cache"]


def _mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


class Podman:
    def __init__(self, root):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        for d in ("storage", "run", "tmp", "cni", "volumes"):
            (self.root / d).mkdir(exist_ok=True)
        self.containers_conf = self.root / "containers.conf"
        self.storage_conf = self.root / "storage.conf"
        self.registries_conf = self.root / "registries.conf"
        ulimits = ", ".join(f'"{u}"' for u in DEFAULT_ULIMITS)
        self.containers_conf.write_text(f"""\
[containers]
default_ulimits = [{ulimits}]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{self.root}/events.log"
tmp_dir = "{self.root}/tmp"
volume_path = "{self.root}/volumes"

[network]
network_backend = "cni"
network_config_dir = "{self.root}/cni"
""")
        self.storage_conf.write_text(f"""\
[storage]
driver = "overlay"
graphroot = "{self.root}/storage"
runroot = "{self.root}/run"
""")
        self.registries_conf.write_text("unqualified-search-registries = []\n")
        self.env = {k: v for k, v in os.environ.items()
                    if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy",
                                         "notify_socket")}
        self.env.update(CONTAINERS_CONF=str(self.containers_conf),
                        CONTAINERS_STORAGE_CONF=str(self.storage_conf),
                        CONTAINERS_REGISTRIES_CONF=str(self.registries_conf))
        self._mounted = []

    # --- set-up and tear-down -----------------------------------------
    def isolate_state(self):
        """tmpfs over CNI's and podman's state outside the temp dir (this mount
        namespace only)."""
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            self._ip_forward = f.read().strip()
        for path in TMPFS_OVER:
            os.makedirs(path, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=16m", "tmpfs", path],
                           check=True, capture_output=True)
            self._mounted.append(path)

    def teardown(self):
        problems = []
        r = self.run("ps", "-aq", check=False)
        ids = r.stdout.split()
        if ids:
            self.run("rm", "-f", "-v", "-t", "0", *ids, check=False, timeout=120)
        for net in self.networks():
            if net != "podman":
                self.run("network", "rm", "-f", net, check=False)
        self.run("system", "prune", "-f", "--volumes", check=False, timeout=120)
        # CNI leaves its bridges behind (the default network's is never
        # removed) and turns on forwarding: give the rest of the suite its
        # namespace back as it was.
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        for line in links.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(("cni-podman", "veth")):
                subprocess.run(["ip", "link", "del", name], capture_output=True)
        if getattr(self, "_ip_forward", None) is not None:
            with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
                f.write(self._ip_forward)
        # Unmount the overlay layers podman may still hold, then our tmpfs.
        subprocess.run(["umount", "-R", str(self.root / "storage" / "overlay")],
                       capture_output=True)
        for path in reversed(self._mounted):
            r = subprocess.run(["umount", "-R", path], capture_output=True, text=True)
            if r.returncode != 0 and _mounted(path):
                subprocess.run(["umount", "-l", path], capture_output=True)
                problems.append(f"umount {path}: {r.stderr.strip()}")
        self._mounted = []
        return problems

    # --- commands ----------------------------------------------------
    def cmd(self, *args):
        return [PODMAN, *map(str, args)]

    def run(self, *args, check=True, timeout=180, env=None, input=None):
        r = subprocess.run(self.cmd(*args), capture_output=True, text=True, timeout=timeout,
                           env=env or self.env, input=input, stdin=None if input else subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"podman {' '.join(map(str, args))} exited {r.returncode}:\n"
                                 f"{r.stdout}\n{r.stderr}")
        return r

    def popen(self, argv, env=None, **kw):
        """Run a full command line (argv[0] == 'podman')."""
        assert argv[0] == "podman", argv
        return subprocess.Popen([PODMAN, *argv[1:]], env=env or self.env, stdin=subprocess.DEVNULL, **kw)

    def networks(self):
        r = self.run("network", "ls", "--format", "{{.Name}}", check=False)
        return r.stdout.split()

    def inspect(self, what, name):
        return json.loads(self.run(what, "inspect", name).stdout)[0]

    def gateway(self, network):
        info = self.inspect("network", network)
        return info["subnets"][0]["gateway"]

    def state(self, name):
        r = self.run("inspect", "--format", "{{.State.Status}}", name, check=False)
        return r.stdout.strip() if r.returncode == 0 else None

    def pid(self, name):
        return int(self.run("inspect", "--format", "{{.State.Pid}}", name).stdout.strip())

    def logs(self, name):
        r = self.run("logs", name, check=False)
        return r.stdout + r.stderr

    def wait_logs(self, name, needle, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            text = self.logs(name)
            if needle in text:
                return text
            state = self.state(name)
            if state not in ("running", "created", "configured", "initialized"):
                raise AssertionError(f"container {name} is {state} before printing {needle!r}:\n{text}")
            if time.monotonic() > deadline:
                raise AssertionError(f"container {name} did not print {needle!r} in {timeout}s:\n{text}")
            time.sleep(0.2)

    def wait_gone(self, name, timeout=30.0):
        deadline = time.monotonic() + timeout
        while self.state(name) is not None:
            if time.monotonic() > deadline:
                raise AssertionError(f"container {name} still exists after {timeout}s "
                                     f"({self.state(name)}):\n{self.logs(name)}")
            time.sleep(0.2)


def proc_status(pid):
    """{field: value} from /proc/PID/status."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def root_mount_options(pid):
    """The mount options of / as the process sees it."""
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == "/":
                return set(fields[5].split(","))
    raise AssertionError(f"no / in /proc/{pid}/mountinfo")


class Dnsmasq:
    """dnsmasq with the suite's records (sluicetest/dns.py) on one address:
    the resolver the gate uses, on the host side of its outside network."""

    def __init__(self, workdir, listen):
        self.workdir = Path(workdir)
        self.listen = listen
        self.log_path = self.workdir / f"dnsmasq-{listen}.log"
        self.proc = None

    def start(self):
        args = [DNSMASQ, "--keep-in-foreground", "--user=root", "--group=root", "--pid-file=",
                "--conf-file=/dev/null", "--no-resolv", "--no-hosts", "--no-poll",
                "--log-queries", f"--log-facility={self.log_path}",
                f"--listen-address={self.listen}", "--bind-interfaces", "--port=53",
                f"--local-ttl={LOCAL_TTL}", "--local=/test/"]
        for name, addrs in RECORDS.items():
            for addr in reversed(addrs):
                args.append(f"--host-record={name},{addr}")
        self.err = open(self.workdir / f"dnsmasq-{self.listen}.stderr", "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.err,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dnsmasq on {self.listen} exited {self.proc.returncode}")
            try:
                if dnsquery.query("origin.test", "A", (self.listen, 53), timeout=0.2)[0] == "NOERROR":
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"dnsmasq on {self.listen} did not answer within 10 s")

    def queried(self, name):
        return self.log_path.exists() and f" {name} from " in self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        if self.proc:
            self.err.close()
