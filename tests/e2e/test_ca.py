"""`sluice ca init`: the inspection CA's files, their modes, refusing to
overwrite, and --permit name constraints as OpenSSL enforces them. No
daemon: sluice writes the CA, openssl judges it."""

import hashlib
import os
import subprocess

import pytest

from sluicetest.proc import sanitizer_env


def _run(sluice_bin, *args, umask=None):
    pre = (lambda: os.umask(umask)) if umask is not None else None
    r = subprocess.run([str(sluice_bin), *map(str, args)], capture_output=True, env=sanitizer_env(),
                       timeout=60, preexec_fn=pre)
    text = r.stderr.decode(errors="replace")
    assert "AddressSanitizer" not in text and "LeakSanitizer" not in text \
        and "runtime error:" not in text, text
    return r


def _openssl(*args, check=True):
    r = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def _text(cert):
    return _openssl("x509", "-in", cert, "-noout", "-text").stdout


def _leaf(ca_dir, out_dir, name, san):
    """A leaf signed with the CA's key by openssl, as a thief with ca.key would."""
    key, csr, pem = out_dir / f"{name}.key", out_dir / f"{name}.csr", out_dir / f"{name}.pem"
    ext = out_dir / f"{name}.ext"
    ext.write_text(f"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n")
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
    _openssl("req", "-new", "-key", key, "-subj", f"/CN={name}", "-out", csr)
    _openssl("x509", "-req", "-in", csr, "-CA", ca_dir / "ca.pem", "-CAkey", ca_dir / "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", pem)
    return pem


def _verify(ca_dir, pem):
    return _openssl("verify", "-CAfile", ca_dir / "ca.pem", pem, check=False)


def _digest(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_ca_init_writes_a_pathlen0_p256_ca_with_cert_0644_and_key_0600(sluice_bin, tmp_path):
    d = tmp_path / "ca"
    r = _run(sluice_bin, "ca", "init", d, umask=0o077)   # the cert is 0644 whatever the umask
    assert r.returncode == 0, r.stderr
    assert os.stat(d / "ca.pem").st_mode & 0o7777 == 0o644
    assert os.stat(d / "ca.key").st_mode & 0o7777 == 0o600
    text = _text(d / "ca.pem")
    assert "X509v3 Basic Constraints: critical\n                CA:TRUE, pathlen:0" in text
    assert "X509v3 Key Usage: critical\n                Certificate Sign, CRL Sign" in text
    assert "X509v3 Subject Key Identifier" in text
    assert "ASN1 OID: prime256v1" in text and "ecdsa-with-SHA256" in text
    assert "Name Constraints" not in text
    # self-signed, about a year, and the key is the certificate's
    assert _openssl("verify", "-CAfile", d / "ca.pem", d / "ca.pem").returncode == 0
    end = _openssl("x509", "-in", d / "ca.pem", "-noout", "-checkend", str(364 * 86400), check=False)
    assert end.returncode == 0
    end = _openssl("x509", "-in", d / "ca.pem", "-noout", "-checkend", str(366 * 86400), check=False)
    assert end.returncode != 0
    pub_cert = _openssl("x509", "-in", d / "ca.pem", "-noout", "-pubkey").stdout
    pub_key = _openssl("pkey", "-in", d / "ca.key", "-pubout").stdout
    assert pub_cert == pub_key
    # the output names the files for the [tls] section
    assert f"ca_cert = {d}/ca.pem".encode() in r.stdout
    assert f"ca_key = {d}/ca.key".encode() in r.stdout


def test_ca_init_days(sluice_bin, tmp_path):
    d = tmp_path / "ca"
    assert _run(sluice_bin, "ca", "init", d, "--days", "10").returncode == 0
    assert _openssl("x509", "-in", d / "ca.pem", "-noout", "-checkend", str(9 * 86400),
                    check=False).returncode == 0
    assert _openssl("x509", "-in", d / "ca.pem", "-noout", "-checkend", str(11 * 86400),
                    check=False).returncode != 0
    for bad in ("0", "-1", "x", "36501"):
        r = _run(sluice_bin, "ca", "init", tmp_path / f"bad{bad}", "--days", bad)
        assert r.returncode == 2
        assert b"--days" in r.stderr
        assert not (tmp_path / f"bad{bad}").exists()


def test_ca_init_refuses_to_overwrite_either_file(sluice_bin, tmp_path):
    d = tmp_path / "ca"
    assert _run(sluice_bin, "ca", "init", d).returncode == 0
    before = (_digest(d / "ca.pem"), _digest(d / "ca.key"))
    r = _run(sluice_bin, "ca", "init", d)
    assert r.returncode == 2
    assert b"refusing to overwrite" in r.stderr
    assert (_digest(d / "ca.pem"), _digest(d / "ca.key")) == before

    # only the key there: still refused, and no certificate is written beside it
    d2 = tmp_path / "keyonly"
    d2.mkdir()
    (d2 / "ca.key").write_text("precious\n")
    r = _run(sluice_bin, "ca", "init", d2)
    assert r.returncode == 2
    assert (d2 / "ca.key").read_text() == "precious\n"
    assert not (d2 / "ca.pem").exists()

    # a dangling symlink in ca.pem's place is not written through either
    d3 = tmp_path / "link"
    d3.mkdir()
    os.symlink(tmp_path / "elsewhere.pem", d3 / "ca.pem")
    assert _run(sluice_bin, "ca", "init", d3).returncode == 2
    assert not (tmp_path / "elsewhere.pem").exists()
    assert not (d3 / "ca.key").exists()


def test_ca_init_failing_midway_leaves_nothing_behind(sluice_bin, tmp_path):
    """A filesystem with room for ca.key but not ca.pem (a one-page tmpfs,
    in this test's own mount namespace)."""
    fs = tmp_path / "small"
    fs.mkdir()
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(fs)], capture_output=True)
    if m.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {m.stderr!r}")
    try:
        r = _run(sluice_bin, "ca", "init", fs / "ca")
        assert r.returncode == 1, r.stdout
        assert b"No space left on device" in r.stderr
        assert os.listdir(fs) == []   # no ca.key, and not even the directory it made
    finally:
        subprocess.run(["umount", str(fs)], check=True)


def test_permit_makes_openssl_reject_a_leaf_for_another_name(sluice_bin, tmp_path):
    d = tmp_path / "ca"
    r = _run(sluice_bin, "ca", "init", d, "--permit", "registry.example.test", "--permit", ".sluice.test")
    assert r.returncode == 0, r.stderr
    text = _text(d / "ca.pem")
    assert "X509v3 Name Constraints: critical" in text
    assert "DNS:registry.example.test" in text and "DNS:sluice.test" in text
    assert "IP:0.0.0.0/0.0.0.0" in text
    leaves = tmp_path / "leaves"
    leaves.mkdir()
    for ok in ("registry.example.test", "a.registry.example.test", "sluice.test", "x.sluice.test"):
        v = _verify(d, _leaf(d, leaves, ok, f"DNS:{ok}"))
        assert v.returncode == 0, (ok, v.stdout, v.stderr)
    for bad in ("evil.test", "example.test", "xregistry.example.test"):
        v = _verify(d, _leaf(d, leaves, bad, f"DNS:{bad}"))
        assert v.returncode != 0, bad
        assert "permitted subtree violation" in v.stdout + v.stderr, (bad, v.stdout, v.stderr)
    # a permitted name does not smuggle another one in
    v = _verify(d, _leaf(d, leaves, "mixed", "DNS:registry.example.test,DNS:evil.test"))
    assert v.returncode != 0
    # nor can the key sign for an IP address
    for ip in ("IP:192.0.2.1", "IP:2001:db8::1"):
        v = _verify(d, _leaf(d, leaves, f"ip{len(ip)}", ip))
        assert v.returncode != 0, ip
        assert "excluded subtree violation" in v.stdout + v.stderr, (ip, v.stdout, v.stderr)


def test_without_permit_the_ca_signs_for_any_name(sluice_bin, tmp_path):
    """The control for the test above: the rejections come from the
    constraints, not from the leaves openssl makes here."""
    d = tmp_path / "ca"
    assert _run(sluice_bin, "ca", "init", d).returncode == 0
    leaves = tmp_path / "leaves"
    leaves.mkdir()
    assert _verify(d, _leaf(d, leaves, "evil.test", "DNS:evil.test")).returncode == 0
    assert _verify(d, _leaf(d, leaves, "ip", "IP:192.0.2.1")).returncode == 0


@pytest.mark.parametrize("name, words", [
    (".com", b"whole public suffix"),
    ("co.uk", b"whole public suffix"),
    ("192.0.2.1", b"not an IP address"),
    ("*.example.test", b"not an IP address or a wildcard"),
    ("bad name", b"--permit bad name"),
])
def test_permit_refuses_what_is_not_a_name_to_constrain(sluice_bin, tmp_path, name, words):
    r = _run(sluice_bin, "ca", "init", tmp_path / "ca", "--permit", name)
    assert r.returncode == 2
    assert words in r.stderr, r.stderr
    assert not (tmp_path / "ca").exists()


def test_ca_usage(sluice_bin, tmp_path):
    r = _run(sluice_bin, "ca")
    assert r.returncode == 2 and b"usage: sluice ca init DIR" in r.stderr
    r = _run(sluice_bin, "ca", "init")
    assert r.returncode == 2
    r = _run(sluice_bin, "--help")
    assert b"ca init DIR" in r.stdout
