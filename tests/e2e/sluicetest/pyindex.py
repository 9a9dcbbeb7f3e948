"""A PEP 503 simple index stand-in, served by the inspecting origins for
pypi.inspect.test: /simple/NAME/ pages (HTML) linking to wheels under
/files/ on the same host, as an index other than PyPI does (LOCKFILES.md
R9: its file host is assumed to be the index's). Wheels are made here as
zip files (make_wheel), so a test can serve other bytes at the same URL.

pip runs with no config file, no cache, no version check, and only the
index, proxy and CA the test gives it (pip_install)."""

import base64
import csv
import hashlib
import html
import io
import re
import subprocess
import threading
import zipfile

from .proc import client_env

PIP_PYTHON = "/usr/bin/python3"


def normalize(name):
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(name, version):
    return f"{re.sub(r'[-_.]+', '_', name)}-{version}-py3-none-any.whl"


def make_wheel(name, version, code):
    """(file name, bytes) of a pure-Python wheel: one module (the project
    name with '_'), its code, METADATA, WHEEL and a RECORD with the files'
    digests. Stored, not deflated, with fixed timestamps: the same input
    gives the same bytes."""
    module = re.sub(r"[-_.]+", "_", name)
    info = f"{module}-{version}.dist-info"
    files = [
        (f"{module}/__init__.py", code.encode()),
        (f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                             f"Summary: a package the sluice tests make\n".encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: sluicetest\nRoot-Is-Purelib: true\n"
                          b"Tag: py3-none-any\n"),
    ]
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        w.writerow([path, f"sha256={digest}", len(data)])
    w.writerow([f"{info}/RECORD", "", ""])
    files.append((f"{info}/RECORD", record.getvalue().encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data)
    return wheel_name(name, version), buf.getvalue()


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


class SimpleIndex:
    def __init__(self, base):
        self.base = base.rstrip("/")
        self.lock = threading.Lock()
        self.projects = {}      # normalised name -> {file name: bytes}

    def add(self, name, filename, data):
        """Serve data as /files/FILENAME, linked from /simple/NAME/ (a file
        already there is replaced: same URL, other bytes)."""
        with self.lock:
            self.projects.setdefault(normalize(name), {})[filename] = data

    def file_url(self, filename):
        return f"{self.base}/files/{filename}"

    def handle(self, req):
        """(status, headers, body, close) for a request to the index."""
        parts = req.path.strip("/").split("/")
        with self.lock:
            if req.method in ("GET", "HEAD") and len(parts) == 2 and parts[0] == "simple" \
                    and parts[1] in self.projects and req.path.endswith("/"):
                links = "".join(f'    <a href="/files/{html.escape(f)}">{html.escape(f)}</a><br/>\n'
                                for f in sorted(self.projects[parts[1]]))
                page = (f"<!DOCTYPE html>\n<html><head><title>Links for {parts[1]}</title></head>\n"
                        f"  <body><h1>Links for {parts[1]}</h1>\n{links}  </body></html>\n")
                return "200 OK", [("Content-Type", "text/html; charset=utf-8")], page.encode(), False
            if req.method in ("GET", "HEAD") and len(parts) == 2 and parts[0] == "files":
                for files in self.projects.values():
                    if parts[1] in files:
                        return "200 OK", [("Content-Type", "application/octet-stream")], files[parts[1]], False
        return "404 Not Found", [("Content-Type", "text/plain")], b"not found\n", False


def pip_install(target, requirements, proxy_port, ca, retries=0, timeout=120):
    """`python3 -m pip install --require-hashes --no-deps --target TARGET -r
    REQUIREMENTS` through the proxy, trusting only ca, with no config file
    and no cache."""
    env = client_env(PIP_CONFIG_FILE="/dev/null", PIP_NO_INPUT="1", PYTHONDONTWRITEBYTECODE="1")
    for k in list(env):
        if k.upper().startswith("PIP_") and k not in ("PIP_CONFIG_FILE", "PIP_NO_INPUT"):
            del env[k]
    cmd = [PIP_PYTHON, "-m", "pip", "install", "--require-hashes", "--no-deps", "--target", str(target),
           "-r", str(requirements), "--proxy", f"http://127.0.0.1:{proxy_port}", "--cert", str(ca),
           "--disable-pip-version-check", "--no-cache-dir", "--no-input", "--retries", str(retries),
           "--timeout", "30"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
