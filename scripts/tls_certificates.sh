#!/bin/sh
# Makes the certificates of the TLS tests and of https_benchmark in directory $1 with the openssl
# command (nothing secret is committed): two CAs, and signed by the first one
#   server.{crt,key}    localhost, 127.0.0.1, ::1 (ECDSA P-256)
#   other.{crt,key}     other.test (for SNI)
#   renewed.{crt,key}   localhost again, with O=renewed (for reload())
#   expired.{crt,key}   localhost, valid only in January 2020
#   rsa.{crt,key}       localhost (RSA-2048)
#   client.{crt,key}    a client certificate, CN=cyan test client
# and wrong_ca.crt, a CA that signed none of them.
set -eu
dir=$1
cd "$dir"

ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() {  # name subject
  ec "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "$2" -days 3650 -sha256 -out "$1.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}

ca ca "/CN=cyan test CA"
ca wrong_ca "/CN=cyan wrong CA"

cat >ca.cnf <<'EOF'
[ ca ]
default_ca = test_ca
[ test_ca ]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = anything
copy_extensions = copy
unique_subject = no
[ anything ]
commonName = supplied
organizationName = optional
EOF
: >index.txt
echo 1000 >serial

leaf() {  # name subject subjectAltName [key algorithm options] [openssl ca dates]
  name=$1 subject=$2 san=$3
  shift 3
  if [ "${1:-}" = rsa ]; then
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$name.key" 2>/dev/null
    shift
  else
    ec "$name.key"
  fi
  openssl req -new -key "$name.key" -subj "$subject" -addext "subjectAltName=$san" \
    -out "$name.csr"
  openssl ca -batch -config ca.cnf -keyfile ca.key -cert ca.crt -in "$name.csr" \
    -out "$name.crt" -notext "$@" 2>/dev/null
}

leaf server "/CN=localhost" "DNS:localhost,IP:127.0.0.1,IP:::1" -days 365
leaf other "/CN=other.test" "DNS:other.test" -days 365
leaf renewed "/CN=localhost/O=renewed" "DNS:localhost,IP:127.0.0.1" -days 365
leaf expired "/CN=localhost/O=expired" "DNS:localhost,IP:127.0.0.1" \
  -startdate 20200101000000Z -enddate 20200201000000Z
leaf rsa "/CN=localhost/O=rsa" "DNS:localhost,IP:127.0.0.1" rsa -days 365
leaf client "/CN=cyan test client" "DNS:client.test" -days 365
