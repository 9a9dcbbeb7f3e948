"""Certificates for inspected cases, made once a run in the work directory.

- The gate's inspection CA: `sluice ca init DIR` when the binary has it,
  else openssl (ECDSA P-256, pathlen:0, the key 0600), as SPEC describes.
- The origins' CA (sluice's upstream_ca) and the leaves the fuzzer's TLS
  origins present: `good` for every inspected name, and one for each way
  sluice must refuse an origin: `wrong_name`, `expired`, `not_yet`,
  `untrusted` (signed by a CA that is not in upstream_ca).

Made with python3-cryptography; nothing here touches the network."""

import datetime
import os
import ssl
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from . import rules

GOOD_NAMES = [f"*.{z}" for z in rules.INSPECTED]
CERT_KINDS = ("good", "wrong_name", "expired", "not_yet", "untrusted")
BAD_CERTS = set(CERT_KINDS) - {"good"}


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(path, key):
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    os.chmod(path, 0o600)


def _ca(cn, now):
    key = _key()
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         key_cert_sign=True, crl_sign=True, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca_key, ca_cert, names, before, after):
    key = _key()
    cert = (x509.CertificateBuilder().subject_name(_name(names[0])).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(before).not_valid_after(after)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return key, cert


def _pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def gate_ca(binary, d):
    """The inspection CA in d: (ca.pem, ca.key, how it was made)."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    cert, key = d / "ca.pem", d / "ca.key"
    for f in (cert, key):
        if f.exists():
            f.unlink()
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_COVERAGE_MAP"}
    env["ASAN_OPTIONS"] = "detect_leaks=0"
    r = subprocess.run([str(binary), "ca", "init", str(d)], capture_output=True, text=True, env=env, timeout=60)
    if r.returncode == 0 and cert.exists() and key.exists():
        return cert, key, "sluice ca init"
    for f in (cert, key):
        if f.exists():
            f.unlink()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "30",
                    "-subj", "/CN=sluice fuzz-daemon inspection CA",
                    "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
                   check=True, capture_output=True)
    os.chmod(key, 0o600)
    os.chmod(cert, 0o644)
    return cert, key, "openssl"


class Pki:
    """The origins' certificates, and the TLS contexts both sides of the
    harness use."""

    def __init__(self, d):
        self.dir = Path(d)
        self.dir.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        day = datetime.timedelta(days=1)
        ca_key, ca = _ca("fuzz-daemon origin CA", now)
        other_key, other = _ca("fuzz-daemon CA sluice does not trust", now)
        self.upstream_ca = self.dir / "upstream-ca.pem"
        self.upstream_ca.write_bytes(_pem(ca))
        self.untrusted_ca = self.dir / "untrusted-ca.pem"
        self.untrusted_ca.write_bytes(_pem(other))
        specs = {
            "good": (ca_key, ca, GOOD_NAMES, now - day, now + 30 * day),
            "wrong_name": (ca_key, ca, ["*.other.fuzz.test", "i1.fuzz.test", "i2.fuzz.test"],
                           now - day, now + 30 * day),
            "expired": (ca_key, ca, GOOD_NAMES, now - 30 * day, now - day),
            "not_yet": (ca_key, ca, GOOD_NAMES, now + day, now + 30 * day),
            "untrusted": (other_key, other, GOOD_NAMES, now - day, now + 30 * day),
        }
        self.files = {}
        for kind, (k, c, names, before, after) in specs.items():
            key, cert = _leaf(k, c, names, before, after)
            cf, kf = self.dir / f"{kind}.pem", self.dir / f"{kind}.key"
            cf.write_bytes(_pem(cert) + _pem(c))   # the chain: leaf, then its CA
            _write_key(kf, key)
            self.files[kind] = (cf, kf)
        self._servers = {}

    def server_context(self, kind):
        """An origin's context: TLS 1.2 and up, ALPN h2 and http/1.1 offered
        (sluice must pick http/1.1: it may offer nothing else)."""
        if kind not in self._servers:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(*self.files[kind])
            ctx.set_alpn_protocols(["h2", "http/1.1"])

            def sni(obj, name, _ctx):
                obj.sni_seen = name
            ctx.sni_callback = sni
            self._servers[kind] = ctx
        return self._servers[kind]


def client_context(gate_ca, alpn, check_name):
    """A client's context inside a tunnel: trusts the gate's CA only (its
    PEM text, read once: the files may be remade by another run), so a
    handshake that ends with anyone else's certificate fails."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if gate_ca:
        ctx.load_verify_locations(cadata=gate_ca)
    ctx.check_hostname = bool(check_name)
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx
