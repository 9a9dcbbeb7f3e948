"""A TLS 1.2 peer whose records the test writes itself: the handshake is
Python's ssl (over memory BIOs, with a key log), then the session's keys are
derived from the master secret (RFC 5246 6.3) and every record after the
Finished is sealed and opened here, AES-128-GCM (RFC 5288). So a test can
send what no TLS library sends on request: handshake messages after the
handshake (renegotiation ClientHellos, HelloRequests), floods of alerts,
empty or one-byte records, records of any type, and see every record the
other side sends back, alerts included.

Works on both ends: RawTLS.client() over a socket (a CONNECT tunnel), and
RawTLS.server() over a socket an origin accepted."""

import hashlib
import hmac
import os
import socket
import ssl
import struct
import tempfile
import time

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

CIPHER = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"
RECORD_MAX = 16384

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA = 20, 21, 22, 23


def _p_sha256(secret, seed, n):
    out, a = b"", seed
    while len(out) < n:
        a = hmac.new(secret, a, hashlib.sha256).digest()
        out += hmac.new(secret, a + seed, hashlib.sha256).digest()
    return out[:n]


def _records(buf):
    """Split whole records off the front of buf: ([(type, body)], rest)."""
    out = []
    while len(buf) >= 5:
        n = struct.unpack(">H", buf[3:5])[0]
        if len(buf) < 5 + n:
            break
        out.append((buf[0], bytes(buf[5:5 + n])))
        buf = buf[5 + n:]
    return out, buf


class RawTLS:
    def __init__(self, sock, ctx, server_side, server_hostname=None):
        self.sock = sock
        self.server_side = server_side
        self._keylog = tempfile.NamedTemporaryFile(prefix="sluice-keylog-", delete=False)
        self._keylog.close()
        ctx.keylog_filename = self._keylog.name
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_side=server_side, server_hostname=server_hostname)
        self.sent = bytearray()      # every byte this side sent during the handshake
        self.got = bytearray()       # ... and received
        self.rbuf = b""              # received ciphertext not yet opened
        self.wseq = self.rseq = 1    # the Finished records were 0

    @classmethod
    def client(cls, sock, ca, host):
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers(CIPHER)
        ctx.set_alpn_protocols(["http/1.1"])
        return cls(sock, ctx, False, host)

    @classmethod
    def server(cls, sock, cert, key):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers(CIPHER)
        ctx.load_cert_chain(str(cert), str(key))
        ctx.set_alpn_protocols(["http/1.1"])
        return cls(sock, ctx, True)

    # --- the handshake (Python's ssl), then the keys -------------------------
    def handshake(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.obj.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            data = self.out.read()
            if data:
                self.sent += data
                self.sock.sendall(data)
            if done:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("handshake did not finish")
            self.sock.settimeout(left)
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the peer closed during the handshake")
            self.got += data
            self.inc.write(data)
        assert self.obj.version() == "TLSv1.2", self.obj.version()
        assert "AES128-GCM" in self.obj.cipher()[0], self.obj.cipher()
        self._derive()
        return self

    def _hello_random(self, flight):
        # record header (5), handshake header (4), version (2), random (32)
        assert flight[0] == HANDSHAKE and flight[5] in (1, 2), flight[:6]
        return bytes(flight[11:43])

    def _derive(self):
        mine, theirs = self._hello_random(self.sent), self._hello_random(self.got)
        client_random, server_random = (theirs, mine) if self.server_side else (mine, theirs)
        master = None
        with open(self._keylog.name) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "CLIENT_RANDOM" and bytes.fromhex(parts[1]) == client_random:
                    master = bytes.fromhex(parts[2])
        os.unlink(self._keylog.name)
        assert master, "no key log line for this handshake"
        kb = _p_sha256(master, b"key expansion" + server_random + client_random, 40)
        ckey, skey, civ, siv = kb[0:16], kb[16:32], kb[32:36], kb[36:40]
        if self.server_side:
            self.wkey, self.wiv, self.rkey, self.riv = AESGCM(skey), siv, AESGCM(ckey), civ
        else:
            self.wkey, self.wiv, self.rkey, self.riv = AESGCM(ckey), civ, AESGCM(skey), siv

    # --- records ---------------------------------------------------------------
    def seal(self, rtype, payload):
        """One record of rtype around payload (at most 16 KiB), as bytes."""
        assert len(payload) <= RECORD_MAX
        explicit = struct.pack(">Q", self.wseq)
        aad = struct.pack(">QBHH", self.wseq, rtype, 0x0303, len(payload))
        self.wseq += 1
        ct = self.wkey.encrypt(self.wiv + explicit, bytes(payload), aad)
        return struct.pack(">BHH", rtype, 0x0303, len(explicit) + len(ct)) + explicit + ct

    def send_record(self, rtype, payload):
        self.sock.sendall(self.seal(rtype, payload))

    def send_app(self, data, record=RECORD_MAX):
        out = b"".join(self.seal(APPLICATION_DATA, data[i:i + record]) for i in range(0, len(data), record))
        self.sock.sendall(out)

    def _open(self, rtype, body):
        if rtype == CHANGE_CIPHER_SPEC:
            return body
        explicit, ct = body[:8], body[8:]
        aad = struct.pack(">QBHH", self.rseq, rtype, 0x0303, len(ct) - 16)
        self.rseq += 1
        return self.rkey.decrypt(self.riv + explicit, ct, aad)

    def recv_records(self, timeout=5.0, until=None):
        """The records the peer sends, opened, as [(type, plaintext)], until
        until(records) is true, the peer closes, or timeout passes with
        nothing new. Returns (records, closed)."""
        got, closed = [], False
        while True:
            recs, self.rbuf = _records(self.rbuf)
            got += [(t, self._open(t, b)) for t, b in recs]
            if until and until(got):
                return got, False
            self.sock.settimeout(timeout)
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout:
                return got, False
            except ConnectionResetError:
                return got, True
            if not data:
                return got, True
            self.rbuf += data

    def recv_app_until(self, pred, timeout=5.0):
        """Application data until pred(bytes so far); (data, closed)."""
        data = bytearray()
        def until(recs):
            data[:] = b"".join(p for t, p in recs if t == APPLICATION_DATA)
            return pred(bytes(data))
        recs, closed = self.recv_records(timeout, until)
        data[:] = b"".join(p for t, p in recs if t == APPLICATION_DATA)
        return bytes(data), closed, recs


# Post-handshake handshake messages: each is one message, empty body.
CLIENT_HELLO_EMPTY = bytes([1, 0, 0, 0])      # a renegotiation request, from a client
HELLO_REQUEST = bytes([0, 0, 0, 0])           # a renegotiation request, from a server
