"""A test CA and a certificate for origin.test, made with openssl at session
start."""

import subprocess


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
    return {"ca": ca_crt, "cert": crt, "key": key}
