"""Read docker/quadlet/sluice-gate.container and turn its [Container] keys
into the podman run flags quadlet (podman >= 4.4) passes for them, and read
the per-session podman run line out of docker/README.md.

The container tests run the gate with exactly these flags, so the unit file
and the README are what is tested. A key missing from FLAGS fails the test:
map it here (to the flag quadlet gives it) when the unit gains one.
"""

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CONTAINER_UNIT = REPO / "docker" / "quadlet" / "sluice-gate.container"
README = REPO / "docker" / "README.md"
RUN_LINE_MARKER = "<!-- per-session-run-line: tests/e2e/test_container.py runs this block -->"


def _bool(v):
    v = v.strip().lower()
    if v in ("1", "yes", "true", "on"):
        return True
    if v in ("0", "no", "false", "off"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def parse_unit(path=CONTAINER_UNIT):
    """[(section, key, value)] in file order (systemd syntax: # and ; comments,
    a trailing backslash continues the line)."""
    out, section, pending = [], None, ""
    for raw in Path(path).read_text().splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        if not sep or section is None:
            raise ValueError(f"{path}: bad line {raw!r}")
        out.append((section, key.strip(), value.strip()))
    return out


# [Container] key -> function(value) -> podman run flags, as quadlet writes them.
FLAGS = {
    "ContainerName": lambda v: [f"--name={v}"],
    "Volume": lambda v: [f"--volume={v}"],
    "Network": lambda v: [f"--network={v}"],
    "ReadOnly": lambda v: ["--read-only"] if _bool(v) else [],
    "NoNewPrivileges": lambda v: ["--security-opt=no-new-privileges"] if _bool(v) else [],
    "DropCapability": lambda v: [f"--cap-drop={c.lower()}" for c in v.split()],
    "AddCapability": lambda v: [f"--cap-add={c.lower()}" for c in v.split()],
    # Notify=true: sluice's own READY=1 reaches systemd; otherwise conmon's.
    "Notify": lambda v: ["--sdnotify=container" if _bool(v) else "--sdnotify=conmon"],
    "HealthCmd": lambda v: [f"--health-cmd={v}"],
    "HealthInterval": lambda v: [f"--health-interval={v}"],
    "HealthTimeout": lambda v: [f"--health-timeout={v}"],
    "HealthRetries": lambda v: [f"--health-retries={v}"],
    "HealthStartPeriod": lambda v: [f"--health-start-period={v}"],
    "User": lambda v: [f"--user={v}"],
    "Environment": lambda v: [f"--env={e}" for e in shlex.split(v)],
    "PodmanArgs": lambda v: normalize(shlex.split(v)),
}
POSITIONAL = ("Image", "Exec")

# podman run flags that take a value; normalize() joins "--flag value".
VALUE_FLAGS = {"--name", "--volume", "-v", "--network", "--net", "--cap-drop", "--cap-add",
               "--security-opt", "--ulimit", "--pids-limit", "--sdnotify", "--health-cmd",
               "--health-interval", "--health-timeout", "--health-retries",
               "--health-start-period", "--user", "-u", "--env", "-e", "--pull", "--dns",
               "--memory", "-m", "--log-driver", "--stop-timeout"}
ALIASES = {"-v": "--volume", "--net": "--network", "-u": "--user", "-e": "--env", "-m": "--memory"}


def normalize(args):
    """podman run flags in one form: '--flag=value' (aliases resolved),
    '--flag' alone for switches. Stops at the first argument that is not a
    flag (the image)."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            break
        flag, eq, value = a.partition("=")
        flag = ALIASES.get(flag, flag)
        if eq:
            out.append(f"{flag}={value}")
        elif a in VALUE_FLAGS:
            out.append(f"{flag}={args[i + 1]}")
            i += 1
        else:
            out.append(flag)
        i += 1
    return out


def split_run_line(argv):
    """(flags normalized, image, args after the image) of ['podman', 'run', ...]."""
    assert argv[:2] == ["podman", "run"], argv
    rest = argv[2:]
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        i += 2 if ("=" not in rest[i] and rest[i] in VALUE_FLAGS) else 1
    return normalize(rest[:i]), rest[i], rest[i + 1:]


class ContainerUnit:
    """The .container file as podman run flags."""

    def __init__(self, path=CONTAINER_UNIT):
        self.path = Path(path)
        self.entries = parse_unit(self.path)
        self.flags, self.image, self.exec_args = [], None, []
        self.service = {}
        self.unknown = []
        for section, key, value in self.entries:
            if section == "Container":
                if key == "Image":
                    self.image = value
                elif key == "Exec":
                    self.exec_args += shlex.split(value)
                elif key in FLAGS:
                    self.flags += FLAGS[key](value)
                else:
                    self.unknown.append(key)
            elif section == "Service":
                self.service.setdefault(key, []).append(value)
        if self.image is None:
            raise ValueError(f"{self.path}: no Image=")

    def values(self, flag):
        return [f.partition("=")[2] for f in self.flags if f.partition("=")[0] == flag]

    @property
    def name(self):
        v = self.values("--name")
        return v[0] if v else "systemd-" + self.path.stem

    def hardening(self):
        """The flags that are not about placement (name, mounts, networks,
        notify, health): the ones every gate, per-session or named, must run
        with."""
        placement = ("--name", "--volume", "--network", "--sdnotify", "--health-cmd",
                     "--health-interval", "--health-timeout", "--health-retries",
                     "--health-start-period")
        return [f for f in self.flags if f.partition("=")[0] not in placement]


def readme_run_line(subst):
    """The per-session podman run line from docker/README.md (the first
    fenced block after RUN_LINE_MARKER), with $VARS replaced from subst and
    shell-split. Lines of the block that do not belong to the podman run
    command (comments, other commands) are ignored."""
    text = README.read_text()
    at = text.find(RUN_LINE_MARKER)
    if at < 0:
        raise AssertionError(f"{README}: marker {RUN_LINE_MARKER!r} not found")
    m = re.search(r"```[a-z]*\n(.*?)```", text[at:], re.S)
    if not m:
        raise AssertionError(f"{README}: no code block after the per-session marker")
    block = m.group(1).replace("\\\n", " ")
    lines = [l for l in block.splitlines() if l.strip().startswith("podman run")]
    if len(lines) != 1:
        raise AssertionError(f"{README}: expected exactly one `podman run` line in the per-session "
                             f"block, found {len(lines)}")
    line = lines[0]
    # the caller's redirections and job control are not part of the command
    line = re.split(r"\s(?:2?>|&\s*$)", line)[0].rstrip(" &")
    for k, v in subst.items():
        line = line.replace("${" + k + "}", v).replace("$" + k, v)
    if "$" in line:
        raise AssertionError(f"unsubstituted variable in the README run line: {line}")
    return shlex.split(line)
