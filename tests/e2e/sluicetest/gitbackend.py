"""git smart HTTP for the inspecting origins: `git http-backend` as a CGI
under /git/, and bare repositories the tests make. Every repository has
`http.receivepack true`, so the origin accepts a push: only the gate's rules
refuse one."""

import os
import subprocess
import uuid

from .proc import client_env

GIT = "/usr/bin/git"


def _backend():
    exec_path = subprocess.run([GIT, "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
    return os.path.join(exec_path, "git-http-backend")


def git_env(home, **extra):
    """git with a tmp HOME, no system or user config, no prompts, no proxy
    from the environment."""
    return client_env(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=str(home / "gitconfig"),
                     GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/false", GIT_AUTHOR_NAME="sluice test",
                     GIT_AUTHOR_EMAIL="test@sluice.test", GIT_COMMITTER_NAME="sluice test",
                     GIT_COMMITTER_EMAIL="test@sluice.test", **extra)


def cgi(root, req, path_info, remote_addr):
    """Run git http-backend for one request: (status, headers, body, close)."""
    env = {"GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path_info,
           "QUERY_STRING": req.target.partition("?")[2], "REQUEST_METHOD": req.method,
           "CONTENT_LENGTH": str(len(req.body)), "REMOTE_ADDR": remote_addr,
           "SERVER_PROTOCOL": "HTTP/1.1", "GATEWAY_INTERFACE": "CGI/1.1",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"}
    for header, var in (("Content-Type", "CONTENT_TYPE"), ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
                        ("Git-Protocol", "GIT_PROTOCOL")):
        if req.header(header) is not None:
            env[var] = req.header(header)
    r = subprocess.run([_backend()], input=req.body, env=env, capture_output=True, timeout=60)
    out = r.stdout
    sep = min((i for i in (out.find(b"\r\n\r\n"), out.find(b"\n\n")) if i >= 0), default=-1)
    if r.returncode != 0 and sep < 0:
        return "500 Internal Server Error", [("Content-Type", "text/plain")], r.stderr, True
    head, body = out[:sep], out[sep:].lstrip(b"\r\n")
    status, headers = "200 OK", []
    for line in head.decode("latin-1").replace("\r\n", "\n").split("\n"):
        k, _, v = line.partition(":")
        if k.lower() == "status":
            status = v.strip()
        elif k:
            headers.append((k.strip(), v.strip()))
    return status, headers, body, False


def make_repo(root, home):
    """A new bare repository under root with one commit on main. Returns
    {'name', 'path', 'head' (commit id), 'files' {name: content}}."""
    name = f"project-{uuid.uuid4().hex[:8]}.git"
    bare = root / name
    env = git_env(home)
    run = lambda *a, cwd=None: subprocess.run([GIT, *a], cwd=cwd, env=env, capture_output=True, text=True,
                                              check=True, timeout=60).stdout
    run("init", "-q", "--bare", "-b", "main", str(bare))
    run("config", "http.receivepack", "true", cwd=bare)
    work = root / (name + ".work")
    run("init", "-q", "-b", "main", str(work))
    files = {"README.md": f"repository {name}\n", "src/data.txt": uuid.uuid4().hex * 50 + "\n"}
    for f, content in files.items():
        (work / f).parent.mkdir(parents=True, exist_ok=True)
        (work / f).write_text(content)
    run("add", ".", cwd=work)
    run("commit", "-q", "-m", "the test's commit", cwd=work)
    run("push", "-q", str(bare), "main", cwd=work)
    head = run("rev-parse", "HEAD", cwd=work).strip()
    return {"name": name, "path": bare, "head": head, "files": files}


def refs(bare, home):
    """{ref: commit} of a bare repository."""
    out = subprocess.run([GIT, "for-each-ref", "--format=%(refname) %(objectname)"], cwd=bare,
                         env=git_env(home), capture_output=True, text=True, check=True).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())
