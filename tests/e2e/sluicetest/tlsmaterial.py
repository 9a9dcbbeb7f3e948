"""Certificates the tests make at session start.

make(): a test CA and a certificate for origin.test (openssl).

make_inspect(): for inspection, on top of make()'s CA (which is then the
gate's upstream_ca): a certificate for each inspected origin
(sluicetest/inspecting.py: ORIGINS), good ones and one for each way an
upstream certificate can fail (expired, not yet valid, self-signed, for
another name, from a CA not in upstream_ca). Made with python3-cryptography,
which can set any validity dates (openssl 3.0's x509 cannot).

sluice_ca(): the inspection CA a gate signs its leaves with: `sluice ca init`
where the binary has it, else openssl (ECDSA P-256, CA:TRUE pathlen:0, key
0600), as SPEC describes it."""

import datetime
import os
import subprocess

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def make(workdir):
    ca_key, ca_crt = workdir / "ca.key", workdir / "ca.pem"
    key, crt = workdir / "origin.key", workdir / "origin.pem"
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=sluice test CA", "-keyout", str(ca_key), "-out", str(ca_crt),
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=origin.test", "-keyout", str(key), "-out", str(crt),
        "-CA", str(ca_crt), "-CAkey", str(ca_key),
        "-addext", "subjectAltName=DNS:origin.test",
        "-addext", "basicConstraints=critical,CA:FALSE",
        "-addext", "extendedKeyUsage=serverAuth")
    return {"ca": ca_crt, "cert": crt, "key": key, "ca_key": ca_key}


# --- inspection ----------------------------------------------------------

DAY = datetime.timedelta(days=1)


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _ca(cn, key, now):
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert


def _leaf(cn, san, key, issuer_cert, issuer_key, not_before, not_after):
    b = (x509.CertificateBuilder().subject_name(_name(cn))
         .issuer_name(issuer_cert.subject if issuer_cert is not None else _name(cn))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(not_before).not_valid_after(not_after)
         .add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False)
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    if issuer_cert is not None:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_cert.public_key()),
                            critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def make_inspect(workdir, base, origins):
    """base: make()'s result; origins: {name: (address, kind, keytype)} with
    kind one of good, expired, not_yet_valid, self_signed, wrong_name,
    untrusted_ca and keytype rsa or ec. Returns {'upstream_ca': the CA
    every good origin chains to, 'rogue_ca': one no gate trusts,
    'certs': {name: (cert path, key path, what the certificate says)}}."""
    d = workdir / "inspect-origins"
    d.mkdir(exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    ca_cert = x509.load_pem_x509_certificate(base["ca"].read_bytes())
    ca_key = serialization.load_pem_private_key(base["ca_key"].read_bytes(), password=None)
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue = _ca("sluice test rogue CA (not in upstream_ca)", rogue_key, now)
    (d / "rogue-ca.pem").write_bytes(rogue.public_bytes(serialization.Encoding.PEM))
    keys = {"ec": ec.generate_private_key(ec.SECP256R1()),
            "rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048)}
    certs = {}
    for name, (_, kind, keytype) in origins.items():
        key = keys[keytype]
        nb, na = now - DAY, now + 2 * DAY
        issuer, issuer_key, san = ca_cert, ca_key, name
        if kind == "expired":
            nb, na = now - 10 * DAY, now - DAY
        elif kind == "not_yet_valid":
            nb, na = now + DAY, now + 10 * DAY
        elif kind == "self_signed":
            issuer, issuer_key = None, key
        elif kind == "wrong_name":
            san = "other.inspect.test"
        elif kind == "untrusted_ca":
            issuer, issuer_key = rogue, rogue_key
        else:
            assert kind == "good", kind
        cert = _leaf(san, san, key, issuer, issuer_key, nb, na)
        cp, kp = d / f"{name}.pem", d / f"{name}.key"
        cp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        kp.write_bytes(_pem_key(key))
        os.chmod(kp, 0o600)
        certs[name] = (cp, kp, f"{kind}: CN={san}, {nb:%Y-%m-%d %H:%M} to {na:%Y-%m-%d %H:%M} UTC")
    return {"upstream_ca": base["ca"], "rogue_ca": d / "rogue-ca.pem", "certs": certs}


# --- the gate's inspection CA ---------------------------------------------

def sluice_ca(binary, ca_dir):
    """ca_dir/ca.pem and ca_dir/ca.key for one gate. Returns 'sluice ca init'
    or 'openssl': which made them. `sluice ca init` is used whenever the
    binary knows the command; if it knows it and fails, that is an error
    (AssertionError), never a quiet fallback."""
    r = subprocess.run([str(binary), "ca", "init", str(ca_dir)], capture_output=True, text=True,
                       timeout=60)
    if r.returncode == 0:
        for f in ("ca.pem", "ca.key"):
            if not (ca_dir / f).is_file():
                raise AssertionError(f"`sluice ca init {ca_dir}` exited 0 without writing {f}")
        return "sluice ca init"
    if not (r.returncode == 2 and "unknown command 'ca'" in r.stderr):
        raise AssertionError(f"`sluice ca init {ca_dir}` failed (exit {r.returncode}): {r.stderr}")
    openssl_ca(ca_dir)
    return "openssl"


def openssl_ca(ca_dir):
    """ca_dir/ca.pem and ca_dir/ca.key made with openssl as SPEC describes
    `sluice ca init`'s: ECDSA P-256, CA:TRUE pathlen:0, the key 0600."""
    ca_dir.mkdir(parents=True, exist_ok=True)
    key, crt = ca_dir / "ca.key", ca_dir / "ca.pem"
    # the key is 0600 from the start, not chmod-ed after it was written
    os.close(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-out", str(key))
    run("openssl", "req", "-x509", "-new", "-key", str(key), "-sha256", "-days", "30",
        "-subj", "/CN=sluice test inspection CA", "-out", str(crt),
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    os.chmod(crt, 0o644)
