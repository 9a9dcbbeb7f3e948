"""What SPEC part 2 makes a config error or asks of `sluice ca init`, seen
from outside: the CA files, name constraints that OpenSSL enforces, and
the refusals of a readable CA key or secret, rules without a CA, and a
credential that would never be used."""

import datetime
import os
import re
import stat
import subprocess

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REG = "registry.inspect.test"
READS = f"GET,HEAD {REG}/*"


def _check(binary, s):
    r = subprocess.run([str(binary), "check", "-c", str(s.config_path)], capture_output=True, text=True,
                       timeout=30)
    return r.returncode, r.stdout + r.stderr


def _leaf(ca_cert, ca_key, name, path):
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), False)
            .sign(ca_key, hashes.SHA256()))
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def test_ca_init_writes_an_ecdsa_p256_ca_with_pathlen_0_and_refuses_to_overwrite(sluice_bin, tmp_path):
    d = tmp_path / "ca"
    r = subprocess.run([str(sluice_bin), "ca", "init", str(d)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE((d / "ca.pem").stat().st_mode) == 0o644
    assert stat.S_IMODE((d / "ca.key").stat().st_mode) == 0o600
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert bc.ca and bc.path_length == 0, bc
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey) and ca.public_key().curve.name == "secp256r1"
    key = (d / "ca.key").read_bytes()
    assert b"PRIVATE KEY" in key and b"PRIVATE KEY" not in r.stdout.encode() + r.stderr.encode()
    before = (d / "ca.pem").read_bytes(), key
    r = subprocess.run([str(sluice_bin), "ca", "init", str(d)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, "ca init overwrote an existing CA"
    assert ((d / "ca.pem").read_bytes(), (d / "ca.key").read_bytes()) == before


def test_ca_init_permit_makes_openssl_reject_a_leaf_for_another_name(sluice_bin, tmp_path):
    d = tmp_path / "ca"
    r = subprocess.run([str(sluice_bin), "ca", "init", str(d), "--permit", REG], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    nc = ca.extensions.get_extension_for_class(x509.NameConstraints)
    assert x509.DNSName(REG) in (nc.value.permitted_subtrees or []), nc
    # what a thief of the key could sign: OpenSSL refuses it
    ca_key = serialization.load_pem_private_key((d / "ca.key").read_bytes(), password=None)
    good = _leaf(ca, ca_key, REG, tmp_path / "good.pem")
    bad = _leaf(ca, ca_key, "bank.example", tmp_path / "bad.pem")
    verify = lambda leaf: subprocess.run(["openssl", "verify", "-CAfile", str(d / "ca.pem"), str(leaf)],
                                         capture_output=True, text=True)
    ok = verify(good)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    refused = verify(bad)
    assert refused.returncode != 0 and "permitted subtree violation" in refused.stdout + refused.stderr, \
        refused.stdout + refused.stderr


def test_a_ca_key_readable_by_group_or_others_is_a_config_error(sluice_inspecting, sluice_bin):
    s = sluice_inspecting(allow=[READS], start=False)
    key = s.workdir / "ca" / "ca.key"
    os.chmod(key, 0o640)
    rc, out = _check(sluice_bin, s)
    assert rc == 2 and "ca.key" in out, out
    assert b"PRIVATE KEY" not in out.encode()


def test_request_rules_without_a_ca_are_a_config_error(sluice, sluice_bin):
    s = sluice(allow=["origin.test", READS], start=False)
    rc, out = _check(sluice_bin, s)
    assert rc == 2, out
    assert re.search(r"ca_cert|ca_key|\[tls\]|\bCA\b", out), f"the error does not say a CA is needed: {out}"


def test_a_credential_for_a_host_that_is_not_inspected_is_a_config_error(sluice_inspecting, sluice_bin):
    secret = "sl-cred-never-used-1d6e"
    s = sluice_inspecting(allow=[READS, "origin.test"], start=False,
                          credentials=[("gh", "origin.test", "Authorization", "token {secret}", secret)])
    rc, out = _check(sluice_bin, s)
    assert rc == 2 and "credentials.txt:2" in out, out
    assert secret not in out


def test_a_secret_file_readable_by_others_is_a_config_error_that_does_not_show_it(sluice_inspecting, sluice_bin):
    secret = "sl-cred-readable-77c2"
    s = sluice_inspecting(allow=[READS], start=False,
                          credentials=[("npm", REG, "Authorization", "Bearer {secret}", secret)])
    os.chmod(s.workdir / "secrets" / "npm", 0o644)
    rc, out = _check(sluice_bin, s)
    assert rc == 2 and "npm" in out, out
    assert secret not in out, "the error shows the secret"


def test_the_effective_policy_shows_rules_under_their_host_and_credentials_by_name(sluice_inspecting, sluice_bin):
    secret = "sl-cred-check-output-5a0f"
    allow = [READS, f"POST {REG}/-/v1/search"]
    s = sluice_inspecting(allow=allow, start=False,
                          credentials=[("npm", REG, "Authorization", "Bearer {secret}", secret)])
    rc, out = _check(sluice_bin, s)
    assert rc == 0, out
    assert REG in out and "/-/v1/search" in out and "npm" in out, out
    assert secret not in out
