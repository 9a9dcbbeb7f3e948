"""Fixture cases for `sluice allow-from-lockfile`, one pytest test each.

Every directory tests/lockfiles/<format>/<case>/ is a case (README.md in this
directory describes the files). The tool runs from the repository root as

    $SLUICE_BIN allow-from-lockfile [args...] tests/lockfiles/<format>/<case>

with the network cut off: inside `unshare --net` (as `make e2e` runs), or,
when this process still sees a network, each run is wrapped in
`unshare --net` itself. A sanitizer report in stderr fails the case.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer", "ThreadSanitizer")
PROXY_ENV = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")
CASE_FILES = {"args", "expected.txt", "expected.exit", "expected.err", "existing.out",
              "expected.out"}


def binary():
    b = Path(os.environ.get("SLUICE_BIN", "build/san/sluice"))
    return b if b.is_absolute() else REPO / b


def cases():
    return sorted(p for p in HERE.glob("*/*")
                  if p.is_dir() and p.parent.name[0] not in "._" and not p.name.startswith("."))


def case_id(p):
    return f"{p.parent.name}/{p.name}"


# /proc/net/dev lists the links of the reader's own network namespace
# (/sys/class/net shows the namespace sysfs was mounted in).
LINKS_CMD = ["cat", "/proc/net/dev"]


def links(dev_text):
    return sorted(line.split(":", 1)[0].strip()
                  for line in dev_text.splitlines()[2:] if ":" in line)


def _interfaces():
    try:
        with open("/proc/net/dev") as f:
            return links(f.read())
    except OSError:
        return None


@pytest.fixture(scope="session")
def offline():
    """The command prefix that cuts the network: none when this process is
    already in a namespace with only lo, else `unshare --net --`."""
    if _interfaces() == ["lo"]:
        return []
    wrap = ["unshare", "--net", "--"]
    probe = subprocess.run([*wrap, *LINKS_CMD], capture_output=True, text=True)
    if probe.returncode != 0 or links(probe.stdout) != ["lo"]:
        pytest.fail("cannot cut the network for the allow-from-lockfile runs "
                    f"(unshare --net: {probe.stderr.strip() or probe.stdout.strip()}); "
                    "run as root or inside `unshare --net`")
    return wrap


def run_tool(offline, args, cwd=REPO):
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_ENV}
    env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    cmd = [*offline, str(binary()), "allow-from-lockfile", *args]
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, env=env, timeout=60)
    stdout = r.stdout.decode("utf-8", "replace")
    stderr = r.stderr.decode("utf-8", "replace")
    bad = [m for m in SANITIZER_MARKERS if m in stderr]
    assert not bad, f"sanitizer report in stderr:\n{stderr}"
    return r.returncode, stdout, stderr


def read_text(p):
    return p.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", cases(), ids=case_id)
def test_case(case, offline, tmp_path):
    rel = case.relative_to(REPO).as_posix()
    args = []
    if (case / "args").exists():
        args = [line.replace("{tmp}", str(tmp_path))
                for line in read_text(case / "args").splitlines() if line.strip()]
    out_file = tmp_path / "out.txt"
    if (case / "existing.out").exists():
        shutil.copyfile(case / "existing.out", out_file)

    want_exit = int(read_text(case / "expected.exit").strip()) \
        if (case / "expected.exit").exists() else 0
    has_txt = (case / "expected.txt").exists()
    if want_exit == 0:
        assert has_txt, f"{rel}: a case that succeeds needs expected.txt"
    else:
        assert not has_txt, f"{rel}: a failing case prints nothing: no expected.txt"
        assert (case / "expected.err").exists(), f"{rel}: a failing case needs expected.err"

    code, stdout, stderr = run_tool(offline, [*args, rel])

    assert code == want_exit, f"exit {code}, expected {want_exit}; stderr:\n{stderr}"
    want_out = read_text(case / "expected.txt") if has_txt else ""
    assert stdout == want_out, f"stderr:\n{stderr}"
    if (case / "expected.err").exists():
        for line in read_text(case / "expected.err").splitlines():
            if line.strip():
                assert line in stderr, f"'{line}' not in stderr:\n{stderr}"
    # One problem, one message: a file that several readers or several
    # files of one project lead to is still reported once.
    err_lines = stderr.splitlines()
    repeated = sorted({line for line in err_lines if err_lines.count(line) > 1})
    assert not repeated, f"reported more than once: {repeated}; stderr:\n{stderr}"
    if want_exit == 0:
        assert stderr == "", f"a successful run printed on stderr:\n{stderr}"
    if (case / "expected.out").exists():
        assert out_file.exists(), "-o wrote no file"
        assert read_text(out_file) == read_text(case / "expected.out")
        # the atomic write leaves no temporary file behind
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_every_case_has_its_files():
    """A typo in a case file name would silently test nothing."""
    assert cases(), "no fixture cases found"
    for case in cases():
        names = {p.name for p in case.iterdir()}
        assert names & {"expected.txt", "expected.err"}, f"{case_id(case)}: no expected output"
        for n in names:
            if n.startswith("expected") or n in ("args", "existing.out"):
                assert n in CASE_FILES, f"{case_id(case)}: unknown case file {n}"


# --- driver behaviour that fixtures in git cannot hold -------------------

NPM_LOCK = """{
  "name": "%s",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": { "name": "%s", "dependencies": { "dep": "^1.0.0" } },
    "node_modules/dep": {
      "version": "1.0.0",
      "resolved": "https://%s/dep/-/dep-1.0.0.tgz",
      "integrity": "sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="
    }
  }
}
"""


def npm_lock(host, name="app"):
    return NPM_LOCK % (name, name, host)


def hosts(stdout):
    return sorted(line.split()[0] for line in stdout.splitlines() if line.strip())


def test_walk_skips_dependency_vcs_and_build_directories(offline, tmp_path):
    """.git, build/ and __pycache__/ cannot be kept in a fixture (git and
    .gitignore drop them), so this tree is made here."""
    skipped = ["node_modules", ".git", "vendor", "target", ".venv", "venv", "__pycache__",
               ".tox", "build", "dist", ".gradle", ".idea"]
    (tmp_path / "package-lock.json").write_text(npm_lock("registry.npmjs.org"))
    for name in skipped:
        d = tmp_path / name / "nested"
        d.mkdir(parents=True)
        (d.parent / "package-lock.json").write_text(npm_lock(f"skipped-{name.strip('.')}.example"))
        (d / "package-lock.json").write_text(npm_lock(f"deep-{name.strip('.')}.example"))
    for name in ["tools", ".config", "builds", "packages"]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "package-lock.json").write_text(npm_lock(f"kept-{name.strip('.')}.example"))
    code, stdout, stderr = run_tool(offline, [str(tmp_path)])
    assert code == 0, stderr
    assert hosts(stdout) == ["kept-builds.example:443", "kept-config.example:443",
                             "kept-packages.example:443", "kept-tools.example:443",
                             "registry.npmjs.org:443"]


def test_a_skipped_directory_named_explicitly_is_read(offline, tmp_path):
    d = tmp_path / "vendor"
    d.mkdir()
    (d / "package-lock.json").write_text(npm_lock("vendored.example"))
    code, stdout, stderr = run_tool(offline, [str(d)])
    assert code == 0, stderr
    assert stdout == f"vendored.example:443  # {d}/package-lock.json\n"


def test_each_directory_is_its_own_project(offline, tmp_path):
    """The root's .npmrc applies to the root's lockfile, not to a nested one."""
    (tmp_path / ".npmrc").write_text("registry=https://npm.corp.example/\n")
    (tmp_path / "package-lock.json").write_text(npm_lock("registry.npmjs.org"))
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "package-lock.json").write_text(npm_lock("registry.npmjs.org"))
    code, stdout, stderr = run_tool(offline, [str(tmp_path)])
    assert code == 0, stderr
    lines = {line.split()[0]: line for line in stdout.splitlines()}
    assert set(lines) == {"npm.corp.example:443", "registry.npmjs.org:443"}
    assert f"{tmp_path}/package-lock.json" in lines["npm.corp.example:443"]
    assert f"{sub}/package-lock.json" not in lines["npm.corp.example:443"]
    assert f"{sub}/package-lock.json" in lines["registry.npmjs.org:443"]
    assert f"{tmp_path}/package-lock.json" not in lines["registry.npmjs.org:443"]


def test_a_lockfile_named_without_a_directory(offline, tmp_path):
    (tmp_path / "package-lock.json").write_text(npm_lock("npm.example.com"))
    code, stdout, stderr = run_tool(offline, ["package-lock.json"], cwd=tmp_path)
    assert code == 0, stderr
    assert stdout == "npm.example.com:443  # package-lock.json\n"


GO_MOD = """module example.com/webapp

go 1.22

require golang.org/x/text v0.16.0
"""
GO_SUM = """golang.org/x/text v0.16.0 h1:a94ExnEXNtEwYLGJSIUxnWoxoRz/ZcCsV63ROupILh4=
golang.org/x/text v0.16.0/go.mod h1:GhwF1Be+LQoKShO3cGOHzqOgRrGaYc9AvblQOmPVHnI=
"""


@pytest.mark.parametrize("named", ["go.sum", "go.env"])
def test_a_go_file_named_stands_for_its_project(offline, tmp_path, named):
    """A fixture's directory is always walked too, so naming go.sum or
    go.env alone beside a go.mod is tested here: it reads the project (go.mod
    with go.sum and go.env), once, as naming the directory does."""
    (tmp_path / "go.mod").write_text(GO_MOD)
    (tmp_path / "go.sum").write_text(GO_SUM)
    (tmp_path / "go.env").write_text("GOPROXY=https://goproxy.corp.example,direct\n")
    code, stdout, stderr = run_tool(offline, [str(tmp_path / named)])
    assert code == 0, stderr
    assert stdout == f"goproxy.corp.example:443  # {tmp_path}/go.mod, {tmp_path}/go.env\n"
    assert run_tool(offline, [str(tmp_path)])[1] == stdout


def test_a_file_over_64_mib_is_refused(offline, tmp_path):
    lock = tmp_path / "package-lock.json"
    with open(lock, "wb") as f:
        f.truncate(64 * 1024 * 1024 + 1)       # sparse: costs no disk
    code, stdout, stderr = run_tool(offline, [str(tmp_path)])
    assert code == 2
    assert stdout == ""
    assert f"{lock}: file too large" in stderr


def test_a_fifo_is_not_read(offline, tmp_path):
    os.mkfifo(tmp_path / "package-lock.json")
    code, stdout, stderr = run_tool(offline, [str(tmp_path / "package-lock.json")])
    assert code == 2
    assert stdout == ""
    assert "not a regular file" in stderr


def test_output_to_a_missing_directory_fails_with_nothing_written(offline, tmp_path):
    (tmp_path / "package-lock.json").write_text(npm_lock("registry.npmjs.org"))
    out = tmp_path / "no-such-dir" / "allowlist.txt"
    code, stdout, stderr = run_tool(offline, ["-o", str(out), str(tmp_path)])
    assert code == 1
    assert stdout == ""
    assert str(out) in stderr
    assert not out.parent.exists()


def test_output_keeps_the_mode_of_the_file_it_replaces(offline, tmp_path):
    (tmp_path / "package-lock.json").write_text(npm_lock("registry.npmjs.org"))
    out = tmp_path / "allowlist.txt"
    out.write_text("old\n")
    out.chmod(0o640)
    code, stdout, stderr = run_tool(offline, ["-o", str(out), str(tmp_path / "package-lock.json")])
    assert code == 0, stderr
    assert stdout == ""
    assert out.read_text() == f"registry.npmjs.org:443  # {tmp_path}/package-lock.json\n"
    assert out.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("args, code, text", [
    ([], 2, "no PATH given"),
    (["--format", "xml", "."], 2, "--format"),
    (["--bogus", "."], 2, "usage:"),
    (["-o"], 2, "usage:"),
])
def test_usage_errors(offline, args, code, text):
    got, stdout, stderr = run_tool(offline, args)
    assert got == code
    assert stdout == ""
    assert text in stderr


def test_help(offline):
    code, stdout, stderr = run_tool(offline, ["-h"])
    assert code == 0
    assert stdout.startswith("usage: sluice allow-from-lockfile")


def test_runs_are_offline(offline):
    """What every run above saw: a namespace whose only interface is lo."""
    r = subprocess.run([*offline, *LINKS_CMD], capture_output=True, text=True)
    assert links(r.stdout) == ["lo"]


# --- pip: a file that another file of the run includes ---------------------

def test_a_walked_include_cycle_is_one_problem(offline):
    """pip/bad-include-cycle-walked: the walk finds both files of the cycle.
    The cycle is read, and reported, once (from the first file), not once
    from each: expected.err alone cannot say that no other line appears."""
    case = HERE / "pip" / "bad-include-cycle-walked"
    code, stdout, stderr = run_tool(offline, [str(case.relative_to(REPO))])
    assert (code, stdout) == (2, "")
    assert stderr.splitlines() == [read_text(case / "expected.err").strip(),
                                   "sluice: allow-from-lockfile: 1 error; no allowlist written"]


def test_a_file_reached_only_through_a_cycle_is_not_a_root(offline, tmp_path):
    """requirements-0.txt comes first in the walk, but it is included by the
    cycle a <-> b (which nothing else includes): the cycle's first file is
    read, reports the cycle, and requirements-0.txt is not read on its own."""
    (tmp_path / "requirements-0.txt").write_text("flask==3.0.2\n")
    (tmp_path / "requirements-a.txt").write_text("-r requirements-b.txt\n")
    (tmp_path / "requirements-b.txt").write_text("-r requirements-0.txt\n-r requirements-a.txt\n")
    code, stdout, stderr = run_tool(offline, [str(tmp_path)])
    assert (code, stdout) == (2, "")
    assert stderr.splitlines() == [
        f"{tmp_path}/requirements-b.txt:2: include cycle: requirements-a.txt -> "
        "requirements-b.txt -> requirements-a.txt",
        "sluice: allow-from-lockfile: 1 error; no allowlist written"]


@pytest.mark.parametrize("order", [("requirements-base.txt", "requirements.txt"),
                                   ("requirements.txt", "requirements-base.txt")])
def test_named_files_one_including_the_other_are_one_install(offline, tmp_path, order):
    """Named on the command line, in either order, as a walk finds them: the
    included file takes the index of the file that includes it."""
    (tmp_path / "requirements.txt").write_text(
        "-r requirements-base.txt\n--index-url https://pypi.corp.example/simple\n")
    (tmp_path / "requirements-base.txt").write_text("requests==2.31.0\n")
    code, stdout, stderr = run_tool(offline, [str(tmp_path / n) for n in order])
    assert code == 0, stderr
    assert stdout == f"pypi.corp.example:443  # {tmp_path}/requirements.txt\n"


def test_an_included_file_named_alone_is_read_on_its_own(offline, tmp_path):
    """Nothing else of the run includes it: it is an install of its own,
    with the default index."""
    (tmp_path / "requirements.txt").write_text(
        "-r requirements-base.txt\n--index-url https://pypi.corp.example/simple\n")
    (tmp_path / "requirements-base.txt").write_text("requests==2.31.0\n")
    code, stdout, stderr = run_tool(offline, [str(tmp_path / "requirements-base.txt")])
    assert code == 0, stderr
    assert hosts(stdout) == ["files.pythonhosted.org:443", "pypi.org:443"]


def test_an_include_of_another_readers_file_hides_nothing(offline, tmp_path):
    """pip takes `-c go.sum` (its lines read as local paths), but go.sum is
    still the Go reader's: only pip's own files are left to their includer."""
    (tmp_path / "go.sum").write_text(GO_SUM)
    (tmp_path / "requirements.txt").write_text("-c go.sum\nflask==3.0.2\n")
    code, stdout, stderr = run_tool(offline, [str(tmp_path)])
    assert code == 0, stderr
    assert hosts(stdout) == ["files.pythonhosted.org:443", "proxy.golang.org:443", "pypi.org:443",
                             "storage.googleapis.com:443"]


# --- --pins: every fixture's output is an allowlist the gate loads ----------

def pins_cases():
    return sorted(p for p in HERE.glob("*/pins-*") if (p / "expected.txt").exists())


@pytest.fixture(scope="module")
def inspection_ca(tmp_path_factory):
    """Request rules need [tls] ca_cert and ca_key: one CA for every check."""
    ca = tmp_path_factory.mktemp("pins") / "ca"
    r = subprocess.run([str(binary()), "ca", "init", str(ca)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return ca


ALLOWLIST_COUNTS = re.compile(r"^allowlist: (\d+) entr(?:y|ies)(?:, (\d+) request rules?)?", re.M)
CHECK_HOST = re.compile(r"^  (\S+)$")
CHECK_RULE = re.compile(r"^    GET (/\S*)((?: sha(?:256|384|512)-\S+)*) +(\S+):(\d+)$")


def checked_rules(stdout):
    """The request rules `sluice check` lists: (host:port, path, digests, line)."""
    rules, host, inside = set(), None, False
    for line in stdout.splitlines():
        if line.startswith("inspected hosts:"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            break
        m = CHECK_HOST.match(line) if inside else None
        if m:
            host = m.group(1)
            continue
        m = CHECK_RULE.match(line) if inside else None
        if m:
            rules.add((host, m.group(1), tuple(m.group(2).split()), int(m.group(4))))
    return rules


@pytest.mark.parametrize("case", pins_cases(), ids=case_id)
def test_pins_output_is_an_allowlist_the_gate_loads(case, offline, inspection_ca, tmp_path):
    """What `allow-from-lockfile --pins` printed for the case, loaded as the
    gate's allowlist: it must load, and every rule must be read with the host,
    path and digests it was written with (a line the parser took for a plain
    entry, or cut short, would allow something else)."""
    expected = case / "expected.txt"
    config = tmp_path / "sluice.ini"
    config.write_text("[proxy]\nlisten = 127.0.0.1:3128\n\n"
                      f"[tls]\nca_cert = {inspection_ca}/ca.pem\nca_key = {inspection_ca}/ca.key\n\n"
                      f"[policy]\nallowlist = {expected}\n")
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_ENV}
    env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
    r = subprocess.run([*offline, str(binary()), "check", "-c", str(config)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert not [m for m in SANITIZER_MARKERS if m in r.stderr], r.stderr
    assert r.returncode == 0, r.stderr
    # the only complaint allowed is a host entry shadowed by rules, which
    # the output's own comment says
    for line in r.stderr.splitlines():
        assert "warning: " in line and "is shadowed by the request rules" in line, line

    lines = read_text(expected).splitlines()
    want = set()
    for n, line in enumerate(lines, 1):
        text = line.split("  # ", 1)[0].split()
        if text and text[0] == "GET":
            host, _, path = text[1].partition("/")
            want.add((host, "/" + path, tuple(text[2:]), n))
    m = ALLOWLIST_COUNTS.search(r.stdout)
    assert m, r.stdout
    assert (int(m.group(1)), int(m.group(2) or 0)) == (len(lines) - len(want), len(want))
    assert checked_rules(r.stdout) == want


def test_every_pins_output_has_rules_to_check():
    """The test above reads the check's listing: a change to it that made
    checked_rules() find nothing would make every case vacuous."""
    assert pins_cases(), "no pins fixtures"
    with_rules = [c for c in pins_cases() if "\nGET " in "\n" + read_text(c / "expected.txt")]
    assert with_rules, "no pins fixture has a rule"
