#!/bin/sh
# Certificates for tests/unit/test_tls.c, made fresh into DIR with openssl
# (an implementation other than the one under test). Loopback names only.
#   ca        the test CA (ECDSA P-256): sluice's inspection CA in the
#             tests, and the upstream_ca the client side trusts
#   other_ca  a CA nobody trusts
#   rsa_ca    an RSA CA (sluice accepts RSA or ECDSA CA keys)
#   short_ca  a CA that ends in 30 minutes (leaves are remade near the end)
#   good, expired, future, wrongname, selfsigned, untrusted, nonca:
#             server certificates for upstream.test, each wrong in its way
set -eu
d=$1
cd "$d"
umask 077

ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }

cat > ca.cnf <<'CNF'
[ req ]
distinguished_name = dn
[ dn ]
[ v3_ca ]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[ v3_leaf ]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:upstream.test
authorityKeyIdentifier = keyid
[ v3_wrong ]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:other.test, DNS:www.other.test
[ ca ]
default_ca = testca
[ testca ]
database = index.txt
new_certs_dir = .
serial = serial.txt
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[ any ]
commonName = supplied
CNF
: > index.txt
echo 1000 > serial.txt

for c in ca other_ca; do
  ec $c
  openssl req -x509 -new -key $c.key -out $c.pem -days 30 -subj "/CN=sluice test $c" \
    -config ca.cnf -extensions v3_ca 2>/dev/null
done
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa_ca.key 2>/dev/null
openssl req -x509 -new -key rsa_ca.key -out rsa_ca.pem -days 30 -subj "/CN=sluice test rsa_ca" \
  -config ca.cnf -extensions v3_ca 2>/dev/null

# sign NAME CA EXTENSIONS STARTDATE ENDDATE
sign() {
  ec $1
  openssl req -new -key $1.key -out $1.csr -subj "/CN=upstream.test" -config ca.cnf 2>/dev/null
  openssl ca -batch -config ca.cnf -cert $2.pem -keyfile $2.key -in $1.csr -out $1.pem -notext \
    -extensions $3 -startdate $4 -enddate $5 2>/dev/null
}
now=$(date -u +%s)
t() { date -u -d "@$(( now + $1 ))" +%Y%m%d%H%M%SZ; }
sign good ca v3_leaf "$(t -3600)" "$(t 86400)"
sign expired ca v3_leaf "$(t -172800)" "$(t -86400)"
sign future ca v3_leaf "$(t 86400)" "$(t 172800)"
sign wrongname ca v3_wrong "$(t -3600)" "$(t 86400)"
sign untrusted other_ca v3_leaf "$(t -3600)" "$(t 86400)"

ec short_ca
openssl req -new -key short_ca.key -out short_ca.csr -subj "/CN=sluice test short_ca" -config ca.cnf 2>/dev/null
openssl ca -batch -selfsign -config ca.cnf -keyfile short_ca.key -in short_ca.csr -out short_ca.pem -notext \
  -extensions v3_ca -startdate "$(t -3600)" -enddate "$(t 1800)" 2>/dev/null

ec selfsigned
openssl req -x509 -new -key selfsigned.key -out selfsigned.pem -days 1 -subj "/CN=upstream.test" \
  -addext "subjectAltName=DNS:upstream.test" 2>/dev/null
# good.pem as a CA certificate: it is not one
cp good.pem nonca.pem
cp good.key nonca.key
# a bundle holding the test CA
cp ca.pem bundle.pem
