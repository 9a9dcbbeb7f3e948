#!/usr/bin/python3
"""Writes the hand-written seed inputs under tests/fuzz/seeds/<target>/.

Run once by hand when seeds change (the output is committed); make test
does not run it. Seeds for parsers without fixtures: HTTP heads, chunked
bodies, ClientHellos (made by Python's ssl module in memory: no socket is
opened), JSON strings, addresses, allowlists, decision log lines with a
valid hash chain, configs. Fixture-derived corpora are made at test time
by ../make_corpus.sh."""
import hashlib
import os
import shutil
import socket
import ssl
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def reset(target):
    shutil.rmtree(os.path.join(HERE, target), ignore_errors=True)


def files(*parts):
    """The NAME\\0DATA(\\0\\0NAME\\0DATA)* form of fuzz_util.h."""
    out = b""
    for i, (name, data) in enumerate(parts):
        if isinstance(data, str):
            data = data.encode()
        out += (b"\0\0" if i else b"") + name.encode() + b"\0" + data
    return out


# ---- HTTP requests ----------------------------------------------------------
reset("fuzz_http_request")
REQ = {
    "get_absolute": "GET http://example.org/path?q=1 HTTP/1.1\r\nHost: example.org\r\nUser-Agent: t\r\nAccept: */*\r\n\r\n",
    "get_port": "GET http://example.org:8080/ HTTP/1.1\r\nHost: example.org:8080\r\n\r\n",
    "get_query_only": "GET http://example.org?x HTTP/1.1\r\nHost: example.org\r\n\r\n",
    "connect": "CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: registry.npmjs.org:443\r\nProxy-Connection: keep-alive\r\n\r\n",
    "connect_v6": "CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n",
    "post_cl": "POST http://example.org/upload HTTP/1.1\r\nHost: example.org\r\nContent-Length: 5\r\n\r\nhello",
    "post_chunked": "POST http://example.org/u HTTP/1.1\r\nHost: example.org\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "http10": "GET http://example.org/ HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "leading_crlf": "\r\nGET http://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n",
    "connection_opts": "GET http://e.org/ HTTP/1.1\r\nHost: e.org\r\nConnection: close, X-Foo, , keep-alive\r\nX-Foo: 1\r\nTE: trailers\r\nUpgrade: h2c\r\n\r\n",
    "expect": "PUT http://e.org/x HTTP/1.1\r\nHost: e.org\r\nExpect: 100-continue\r\nContent-Length: 3, 3\r\n\r\nabc",
    "bad_obsfold": "GET http://e.org/ HTTP/1.1\r\nHost: e.org\r\nX: a\r\n b\r\n\r\n",
    "bad_space_colon": "POST http://e.org/ HTTP/1.1\r\nHost: e.org\r\nContent-Length : 5\r\n\r\nhello",
    "bad_te_cl": "POST http://e.org/ HTTP/1.1\r\nHost: e.org\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    "bad_dup_cl": "POST http://e.org/ HTTP/1.1\r\nHost: e.org\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    "bad_bare_lf": "GET http://e.org/ HTTP/1.1\nHost: e.org\n\n",
    "bad_two_hosts": "GET http://e.org/ HTTP/1.1\r\nHost: e.org\r\nHost: f.org\r\n\r\n",
    "origin_form": "GET /index.html HTTP/1.1\r\nHost: e.org\r\n\r\n",
    "incomplete": "GET http://e.org/ HTTP/1.1\r\nHost: e.",
}
for k, v in REQ.items():
    write("fuzz_http_request", k, v)

# ---- HTTP responses ---------------------------------------------------------
reset("fuzz_http_response")
RESP = {
    "ok_cl": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok",
    "chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "te_cl": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 10\r\n\r\n",
    "gzip_te": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    "no_framing": "HTTP/1.1 200 OK\r\nServer: x\r\n\r\nbody until close",
    "no_content": "HTTP/1.1 204 No Content\r\n\r\n",
    "not_modified": "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
    "continue": "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "switching": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    "http10": "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
    "no_reason": "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n",
    "empty_reason": "HTTP/1.1 500 \r\nConnection: close\r\n\r\n",
    "bad_status": "HTTP/1.1 99 Low\r\n\r\n",
    "bad_version": "HTTP/2.0 200 OK\r\n\r\n",
}
for k, v in RESP.items():
    write("fuzz_http_response", k, v)

# ---- absolute-form targets ---------------------------------------------------
reset("fuzz_http_absolute")
for i, t in enumerate([
        "http://example.org/", "http://example.org", "HTTP://Example.ORG:8080/a/b?c=d",
        "http://h?q", "http://[2001:db8::1]:80/x", "http://127.0.0.1:8000/", "https://e.org/",
        "http://user@e.org/", "http://e.org/#frag", "ftp://e.org/", "http:/e.org/", "http:///x",
        "http://e.org:/p", "http://xn--bcher-kva.example/%41"]):
    write("fuzz_http_absolute", "t%02d" % i, t)

# ---- chunked bodies: [k][k split sizes] BODY --------------------------------
reset("fuzz_chunked")
CH = [
    (b"", b"5\r\nhello\r\n0\r\n\r\n"),
    (b"\x00\x02", b"5;ext=1;q=\"x\"\r\nhello\r\n6\r\n world\r\n0\r\nTrailer-A: 1\r\nB: two\r\n\r\nNEXT"),
    (b"\x00", b"a  ;x\r\n0123456789\r\n0\r\n\r\n"),
    (b"\x03\x01\x07", b"FF\r\n" + b"x" * 255 + b"\r\n0\r\n\r\n"),
    (b"", b"0000000000000001\r\nx\r\n0\r\n\r\n"),
    (b"", b"5 \r\nhello\r\n"),
    (b"", b"5\r\nhelloX\r\n"),
    (b"", b"0\r\n\r"),
    (b"", b"-1\r\n"),
]
for i, (splits, body) in enumerate(CH):
    write("fuzz_chunked", "c%02d" % i, bytes([len(splits)]) + splits + body)

# ---- TLS ClientHellos, built in memory ---------------------------------------
reset("fuzz_tls_sni")


def client_hello(server_hostname, **ctxargs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for k, v in ctxargs.items():
        setattr(ctx, k, v)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_side=False, server_hostname=server_hostname)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


hello = client_hello("registry.npmjs.org")
write("fuzz_tls_sni", "tls13_sni", hello)
write("fuzz_tls_sni", "no_sni", client_hello(None))
write("fuzz_tls_sni", "tls12_only", client_hello("example.org", maximum_version=ssl.TLSVersion.TLSv1_2))
write("fuzz_tls_sni", "long_name", client_hello("a" * 63 + "." + "b" * 63 + "." + "c" * 63 + ".example.org"))
# The same hello split over two handshake records.
body = hello[5:]
cut = 40
rec = lambda b: bytes([22, 3, 1]) + struct.pack(">H", len(b)) + b
write("fuzz_tls_sni", "two_records", rec(body[:cut]) + rec(body[cut:]))
write("fuzz_tls_sni", "trailing_ccs", hello + bytes([20, 3, 3, 0, 1, 1]))
write("fuzz_tls_sni", "truncated", hello[:100])
write("fuzz_tls_sni", "http", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")

# ---- JSON strings: [b] DATA ----------------------------------------------------
reset("fuzz_json")
J = [
    b"\x10plain ascii host.example.org",
    b"\x00quote\" backslash\\ slash/ nl\n cr\r tab\t nul\x00 del\x7f esc\x1b",
    b"\x40valid utf-8: \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
    b"\x05invalid: \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xff \x80 \xe2\x82",
    b"\x03field one\xfffield two\xff12345678\xff\x00\x00\x00\x00\x00\x00\xf8\x7f",
    b"\xff" + b"x" * 300 + b"\xff" + b"\"" * 200,
]
for i, d in enumerate(J):
    write("fuzz_json", "j%02d" % i, d)

# ---- netclass: [flags][16 addr bytes]([kind][prefix][16 bytes])* -----------------
reset("fuzz_netclass")


def a4(s):
    return socket.inet_pton(socket.AF_INET, s) + b"\0" * 12


def a6(s):
    return socket.inet_pton(socket.AF_INET6, s)


NC = [
    b"\x00" + a4("8.8.8.8"),
    b"\x00" + a4("10.1.2.3"),
    b"\x00" + a4("169.254.169.254") + b"\x01\x10" + a4("169.254.0.0"),
    b"\x00" + a4("192.0.2.7") + b"\x00\x18" + a4("192.0.2.0") + b"\x01\x20" + a4("192.0.2.7"),
    b"\x01" + a6("::ffff:10.1.2.3"),
    b"\x01" + a6("64:ff9b::808:808"),
    b"\x01" + a6("2002:a00:1::1"),
    b"\x01" + a6("2001:0:4136:e378:8000:63bf:3fff:fdd2"),
    b"\x01" + a6("2606:4700::1111") + b"\x02\x20" + a6("2606:4700::"),
    b"\x01" + a6("fd00:ec2::254") + b"\x03\x00" + a6("::"),
    b"\x01" + a6("64:ff9b:1::a9fe:a9fe") + b"\x03\x10" + a6("64:ff9b::"),
]
for i, d in enumerate(NC):
    write("fuzz_netclass", "n%02d" % i, d)

# ---- addresses and CIDRs ---------------------------------------------------------
reset("fuzz_addr")
for i, t in enumerate([
        "1.2.3.4", "255.255.255.255", "0.0.0.0", "127.1", "0x7f.0.0.1", "0177.0.0.1", "2130706433",
        "1.2.3.4.5", "::", "::1", "2001:db8::1", "::ffff:1.2.3.4", "fe80::1%eth0",
        "1:2:3:4:5:6:7:8", "1::2:3:4:5:6:7", "10.0.0.0/8", "10.0.0.1/8", "2001:db8::/32",
        "::/0", "0.0.0.0/0", "192.0.2.7/32", "192.0.2.0/33", "fd00::/07"]):
    write("fuzz_addr", "a%02d" % i, t)

# ---- hosts and authorities ----------------------------------------------------------
reset("fuzz_host")
for i, t in enumerate([
        "example.org", "EXAMPLE.Org.", "a_b.example.com", "x" * 63 + ".example", "[::1]",
        "[::1]:443", "[fe80::1%25eth0]", "127.0.0.1:80", "127.0.0.1.", "registry.npmjs.org:443",
        "bücher.example", "xn--bcher-kva.example", "ⓔxample.org", "faß.de", "host:0", "host:08",
        "host:65536", "0x7f.1", "1.2.3", "-a.example", "a..b", "::1"]):
    write("fuzz_host", "h%02d" % i, t)

# ---- URLs -----------------------------------------------------------------------------
reset("fuzz_url")
for i, t in enumerate([
        "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",
        "git+ssh://git@github.com:owner/repo.git#abc123",
        "git+ssh://git@github.com/owner/repo.git",
        "git@gitlab.example.com:group/sub/repo.git",
        "git://example.org/repo.git",
        "sparse+https://index.crates.io/",
        "registry+https://github.com/rust-lang/crates.io-index",
        "https://user:p@ss@npm.example.com:8443/repo/",
        "http://[2001:db8::1]:8080/simple/",
        "https://github.com/owner/repo/archive/v1.0.tar.gz",
        "https://api.github.com/repos/o/r/tarball/v1",
        "https://github.com/o/r/releases/download/v1/x.whl",
        "git+https://github.com/o/r@v1.2#egg=r",
        "hg+https://hg.example.org/repo",
        "file:///tmp/x.tgz", "link:../x", "github:owner/repo", "npm:pkg@1",
        "https://files.pythonhosted.org/packages/x/y-1.0-py3-none-any.whl",
        "https://pypi.org/simple", "HTTPS://Example.ORG:443/"]):
    write("fuzz_url", "u%02d" % i, t)

# ---- allowlists: LINES [\0 connect_ports \n http_ports \n queries] ----------------------
reset("fuzz_allowlist")
write("fuzz_allowlist", "basic",
      "# comment\nexample.org\n*.githubusercontent.com\n.debian.org:80\n203.0.113.7:8443\n"
      "[2001:db8::7]\nbücher.example:443  # idn\n\n  registry.npmjs.org:443  \n"
      "\0443, 8443\n80 8080\nraw.githubusercontent.com:443\ndeb.debian.org:80\n[2001:db8::7]:443\n"
      "example.org:8443\n203.0.113.7:8443\n")
write("fuzz_allowlist", "errors",
      "*.com\n.co.uk\n*.1.2.3.4\nexample.org:0\nexample.org:99999\na b\n*foo.example\n"
      "[::1\n::1\n127.1\n" + "x" * 1100 + "\n")
write("fuzz_allowlist", "specific",
      ".example.org:443\n*.example.org:8443\napi.example.org\nexample.org:80\n"
      "\0443\n80\napi.example.org:443\nx.api.example.org:8443\nexample.org:443\n")

# ---- request rules: allowlist lines ---------------------------------------------------
D256 = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
D512 = ("sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6"
        "+SfaPg==")
reset("fuzz_rule")
write("fuzz_rule", "spec",
      "GET,HEAD registry.npmjs.org/*   # reads only\nGET api.github.com/repos/acme/*\n"
      "* uploads.example.com/incoming/*\n"
      "GET registry.npmjs.org/is-number/-/is-number-7.0.0.tgz " + D512 + "\nregistry.npmjs.org\n")
write("fuzz_rule", "forms",
      "GET *.cdn.example:8443/a/*/b\nPOST .x.example/api\nPUT [2001:db8::7]:443/up/*\n"
      "DELETE,PATCH 203.0.113.7/*.json\nGET bücher.example/*\nGET x.example/a%2Bb " + D256 + " " + D512 +
      "\n.x.example\n*.cdn.example:8443\n")
write("fuzz_rule", "errors",
      "get example.org/x\nGET,,HEAD example.org/x\n*,GET example.org/\nGET example.org\n"
      "GET example.org/a#b\nGET example.org/a/../b\nGET example.org//x\nGET example.org/a%2f\n"
      "GET example.org/a%zz\nGET,HEAD example.org/a " + D256 + "\nGET example.org/a sha256-xyz\n"
      "G@T example.org/x\nexample.org/x\n")

# ---- paths and patterns: PATTERN \0 PATH -----------------------------------------------
reset("fuzz_path")
for name, pat, path in [
        ("basic", "/repos/acme/*", "/repos/acme/widget/pulls"),
        ("stars", "*a" * 8 + "*b", "a" * 69),
        ("dots", "/a/*", "/a/%2e%2E/b"),
        ("encoded", "/a%2Bb*", "/a/..%2fb"),
        ("params", "/a/..;/b", "/a/%2e%2e;x/b"),
        ("double", "/*.tgz", "/x/%252e%252e/y.tgz"),
        ("overlong", "/%c0%ae*", "/%e0%80%ae/%f0%90%80%80")]:
    write("fuzz_path", name, pat + "\0" + path)

# ---- decision log lines, chained ------------------------------------------------------
reset("fuzz_audit_line")
reset("fuzz_audit_verify")


def chained(bodies, stream="5eed" * 8, start=0, prev=None, cont=None):
    lines = []
    seq = start
    chain = prev
    for i, body in enumerate(bodies):
        extra = ""
        if seq == 0:
            extra = ',"stream":"%s"' % stream
        elif i == 0 and cont:
            extra = ',"stream":"%s","continues_seq":%d,"continues_chain":"%s"' % (stream, seq, chain)
        text = body + extra + ',"seq":%d}' % (seq + 1)
        p = stream if seq == 0 else chain
        chain = hashlib.sha256(p.encode() + text.encode()).hexdigest()
        lines.append(text[:-1] + ',"chain":"%s"}' % chain)
        seq += 1
    return lines, chain, seq


B = [
    '{"ts":"2025-01-01T00:00:00.000Z","event":"decision","id":"c1","client":"10.0.0.2:5000","method":"CONNECT","host":"registry.npmjs.org","port":443,"decision":"allow","reason":"allowlisted","rule":"registry.npmjs.org","addr":"104.16.0.1","dns_ms":1.5',
    '{"ts":"2025-01-01T00:00:01.000Z","event":"close","id":"c1","bytes_up":1234,"bytes_down":56789,"duration_ms":10.0,"end":"client_closed"',
    '{"ts":"2025-01-01T00:00:02.000Z","event":"decision","id":"c2","client":"10.0.0.2:5001","method":"GET","host":"evil.example","port":80,"decision":"deny","reason":"not_allowlisted","detail":"add \\"evil.example\\""',
    '{"ts":"2025-01-01T00:00:03.000Z","event":"decision","id":"c3","client":"10.0.0.3:5002","method":"CONNECT","host":"internal.example","port":443,"decision":"deny","reason":"non_public_address","addr":"10.1.2.3"',
    '{"ts":"2025-01-01T00:00:04.000Z","event":"decision","id":"c4","client":"10.0.0.3:5003","method":"CONNECT","host":"h\\u00e9\\ud83d\\ude00\\u0000","port":8443,"decision":"deny","reason":"port_not_allowed"',
]
lines, chain, seq = chained(B)
log = "\n".join(lines) + "\n"
write("fuzz_audit_line", "log", log)
write("fuzz_audit_line", "odd", '{"a":[1,2.5e3,-0,true,false,null,{"b":{}}],"seq":18446744073709551615,"port":-1,"host":"\\/x"}\n'
      '  {"host":1,"port":"443"}  \n{"host":"a","host":"b"}\n{}\n[]\n{"x":1}x\n')
write("fuzz_audit_verify", "valid", b"\x00" + log.encode())
write("fuzz_audit_verify", "valid_fix", b"\x01" + log.encode())
# A reopened log: the next file continues the chain.
lines2, _, _ = chained(B[:2], start=seq, prev=chain, cont=True)
write("fuzz_audit_verify", "continued", b"\x00" + (log + "\n".join(lines2) + "\n").encode())
write("fuzz_audit_verify", "continued_only", b"\x01" + ("\n".join(lines2) + "\n").encode())
write("fuzz_audit_verify", "truncated", b"\x00" + log.encode()[:-40])
tampered = log.replace("1234", "1235")
write("fuzz_audit_verify", "tampered", b"\x00" + tampered.encode())
# An inspected tunnel: its CONNECT, request lines (one with a hostile path), its close.
I = [
    '{"ts":"2025-01-01T00:01:00.000Z","event":"decision","id":"t1","client":"10.0.0.2:5010","method":"CONNECT","host":"api.example.org","port":443,"decision":"allow","reason":"inspected","rule":"allow.txt:2"',
    '{"ts":"2025-01-01T00:01:01.000Z","event":"request","id":"t1","n":1,"method":"GET","host":"api.example.org","path":"/repos/acme/widgets","decision":"allow","reason":"rule","rule":"allow.txt:2","credential":"gh","status":200,"bytes_up":311,"bytes_down":1830,"duration_ms":41.2',
    '{"ts":"2025-01-01T00:01:02.000Z","event":"request","id":"t1","n":2,"method":"PUT","host":"api.example.org","path":"/repos/acme/widgets/x","decision":"deny","reason":"rule_not_matched","status":403,"suggest":"PUT api.example.org/repos/acme/widgets/x"',
    '{"ts":"2025-01-01T00:01:03.000Z","event":"request","id":"t1","n":3,"method":"GET","host":"api.example.org","path":"/a*b/\\u001b[2J/c%2F","decision":"deny","reason":"rule_not_matched","status":403',
    '{"ts":"2025-01-01T00:01:04.000Z","event":"close","id":"t1","bytes_up":900,"bytes_down":4000,"duration_ms":99.0,"end":"client_eof"',
    '{"ts":"2025-01-01T00:01:05.000Z","event":"decision","id":"p1","client":"10.0.0.2:5011","method":"GET","host":"api.example.org","port":80,"decision":"deny","reason":"rule_not_matched","path":"/plain"',
]
ilines, _, _ = chained(I)
write("fuzz_audit_line", "inspected", "\n".join(ilines) + "\n")
write("fuzz_audit_verify", "inspected", b"\x00" + ("\n".join(ilines) + "\n").encode())

# ---- configs (fuzz_util.h file form) ------------------------------------------------
reset("fuzz_config")
write("fuzz_config", "full", files(
    ("sluice.ini",
     "[proxy]\nlisten = 127.0.0.1:3128\nlisten = [::1]:3128\nworkers = 2\nmax_clients = 100\n"
     "shutdown_grace_ms = 1000\nexit_idle_s = 60\n\n[policy]\nallowlist = allowlist.txt\n"
     "allow = example.org:8443\nconnect_ports = 443, 8443\nhttp_ports = 80\n"
     "allow_cidr = 10.20.0.0/16\ndeny_cidr = 203.0.113.0/24\nsni_check = no\n\n"
     "[dns]\nserver = 127.0.0.53\nserver = [::1]:5353\ntimeout_ms = 500\nmin_ttl_s = 1\nmax_ttl_s = 60\n\n"
     "[timeouts]\nheader_ms = 100\nconnect_ms = 100\nidle_ms = 100\n\n[log]\npath = /var/log/sluice.jsonl\n\n"
     "[admin]\nlisten = 127.0.0.1:9090\n"),
    ("allowlist.txt", "registry.npmjs.org\n*.pythonhosted.org\n.debian.org:80\n"),
))
write("fuzz_config", "resolv", files(
    ("sluice.ini", "[policy]\nallow = example.org\n"),
    ("/etc/resolv.conf", "# x\nnameserver 192.0.2.53\nnameserver fe80::1%eth0\nnameserver 2001:db8::53\noptions edns0\n"),
))
write("fuzz_config", "errors", files(
    ("bad.ini", "\xef\xbb\xbf[proxy]\nlisten = 0.0.0.0:99999\nworkers = many\nunknown = 1\n[nope]\nx = 1\n"
     "top\n  indented = 1\n[policy]\nallowlist = missing.txt\nallowlist = /abs/list\n"
     "connect_ports = \nallow_cidr = 10.0.0.1/8\n[dns]\nmin_ttl_s = 100\nmax_ttl_s = 10\n"
     "[admin]\nlisten = 127.0.0.1:3128\n" + "k" * 300 + " = 1\n"),
    ("/abs/list", "*.com\nok.example\n"),
))
write("fuzz_config", "inspect", files(
    ("sluice.ini", "[policy]\nallowlist = allowlist.txt\n[dns]\nserver = 127.0.0.53\n"
     "[tls]\nca_cert = ca/ca.pem\nca_key = ca/ca.key\nupstream_ca = bundle.pem\nleaf_days = 30\n"
     "[credentials]\nfile = credentials.txt\nsecret_dir = secrets\n"),
    ("allowlist.txt", "registry.npmjs.org\nGET,HEAD registry.npmjs.org/*\nGET api.github.com/repos/acme/*\n"
     "* .uploads.example/incoming/*\n"),
    ("credentials.txt", "# NAME HOST HEADER TEMPLATE\nnpm registry.npmjs.org Authorization Bearer {secret}\n"
     "gh api.github.com Authorization token {secret}\nup .uploads.example X-Key {secret}\n"),
    ("ca/ca.pem", "-----BEGIN CERTIFICATE-----\n"),
    ("ca/ca.key", "-----BEGIN EC PRIVATE KEY-----\n"),
    ("bundle.pem", "-----BEGIN CERTIFICATE-----\n"),
    ("secrets/npm", "npm-token\n"),
    ("secrets/gh", "gh-token"),
    ("secrets/up", "up-token\n"),
))
write("fuzz_config", "inspect-errors", files(
    ("sluice.ini", "[policy]\nallow = GET example.org/*\nallow = example.org\n[tls]\nca_cert = ca.pem\n"
     "leaf_days = 900\n[credentials]\nfile = credentials.txt\n"),
    ("credentials.txt", "a example.net Host {secret}\nb example.org X {secret} {secret}\n"),
))
# [sessions]: the keys only (the harness serves no directory, so dir names
# one that does not exist and the policy is refused; see fuzz_config.c).
write("fuzz_config", "sessions", files(
    ("sluice.ini", "[proxy]\nlisten = 127.0.0.1:3128\n\n[policy]\nallowlist = allowlist.txt\n\n"
     "[dns]\nserver = 127.0.0.53\n\n[sessions]\ndir = sessions.d\nrequire = no\n"),
    ("allowlist.txt", "example.org\n"),
))
write("fuzz_config", "sessions-errors", files(
    ("sluice.ini", "[sessions]\nrequire = maybe\nrequire = yes\ndir =\ndir = /nonexistent/sessions.d\n"
     "flavour = x\n"),
))
# ---- JSON documents for the parallel loader (allowlist/lockfiles/jsonload.c) ------------
# Lockfile-shaped: a top-level object whose big members are split across
# threads. Strings full of brackets, commas and escapes, duplicate keys
# (inside the big object and of the big key at the top level), arrays,
# and a few broken ones.
reset("fuzz_jsonload")
JL = {
    "npm": '{\n  "name": "a",\n  "lockfileVersion": 3,\n  "packages": {\n    "": {"name": "a"},\n'
           '    "node_modules/b": {"version": "1.0.0", "resolved": "https://registry.npmjs.org/b/-/b-1.0.0.tgz"},\n'
           '    "node_modules/c": {"version": "2.0.0", "dependencies": {"b": "^1.0.0"}}\n  }\n}\n',
    "strings": '{"p":{"{":"}",",":",,","\\"":"\\"}","\\\\":"\\\\","u":"\\u007b\\u002c",'
               '"e":"\\ud83d\\ude00\u00e9","k:":"[,]"},"q":1}',
    "dups": '{"p":{"a":1,"b":2,"a":3,"\\u0061":4,"c":{"a":5}},"q":{"x":1}}',
    "dup_top": '{"p":{"a":1,"b":2,"c":3},"q":1,"p":2}',
    "arrays": '{"packages":[{"name":"a","dist":{"url":"https://x/a.zip"}},{"name":"b"},[1,[2]],null],'
              '"packages-dev":[],"n":-1.5e3}',
    "empty": '{"p":{},"q":[],"r":{ }}',
    "ws": ' \r\n{ \t"p" :\n{ "a" : [ 1 , 2 ] ,\n"b" : { } } , "q" : true }\n ',
    "trailing": '{"p":{"a":1,"b":2}} x',
    "stray_comma": '{"p":{"a":1,,"b":2}}',
    "conflict": '{\n"p":{\n<<<<<<< HEAD\n"a":1,\n=======\n"a":2,\n>>>>>>> x\n"b":3}}\n',
    "deep": '{"p":{"a":' + '[' * 1030 + ']' * 1030 + ',"b":1}}',
}
for k, v in JL.items():
    write("fuzz_jsonload", k, v)

# ---- regressions: inputs that broke a property once (see README.md) -------------
# allowlist/addr.c: sl_addr_parse accepted an IPv6 text with a NUL inside
# (inet_pton stops at the NUL), and so sl_host_parse accepted "[::1\0x]".
write("fuzz_addr", "regress-addr-nul", b"::1\0x")
write("fuzz_host", "regress-addr-nul", b"[::1\0x]")
# proxy/audit/audit_input.c: sl_astr_decode skipped a character that did not fit
# the buffer and went on with the next ones ("h\u0937xyz" into 4 bytes: "hxy").
write("fuzz_audit_line", "regress-astr-cut", '{"host":"h\\u0937xyz"}\n')
# proxy/audit/audit_report.c: a ts with a huge fraction made the summary's span
# NaN/inf, cast to unsigned long long (undefined behaviour).
write("fuzz_audit_line", "regress-ts-inf", '{"ts":"5-1-0T0:0:0.1e802"}\n')

# allowlist/lockfiles/derive.c vs allowlist/allowlist.c: a host needed by many files
# printed one provenance comment longer than the 1024 bytes the daemon reads
# in an allowlist line (a monorepo's allow-from-lockfile -o output).
inc = ["requirements/%s-%02d.txt" % ("x" * 200, i) for i in range(6)]
write("fuzz_lockfile", "regress-derived-long-line", files(
    ("requirements.txt", "".join("-r %s\n" % n for n in inc)),
    *[(n, "foo%d @ https://files.example.com/foo%d-1.0-py3-none-any.whl\n" % (i, i))
      for i, n in enumerate(inc)]))

print("seeds written under", HERE)
