"""Cases on disk: JSON, with long repeats of a short unit written as
{"runs": ["text", ["x", 17000], ["HTTP/1.1 100 Continue\r\n\r\n", 400]]} so
that a ClientHello's padding, a 33 KB header or 400 interim heads stay
small in the corpus."""

import json
import re

_RUN = re.compile(r"(.{1,64}?)\1{15,}", re.S)


def pack(obj):
    if isinstance(obj, str) and len(obj) > 256 and _RUN.search(obj):
        out, pos = [], 0
        for m in _RUN.finditer(obj):
            if m.end() - m.start() < 64:
                continue
            if m.start() > pos:
                out.append(obj[pos:m.start()])
            out.append([m.group(1), (m.end() - m.start()) // len(m.group(1))])
            pos = m.end()
        if pos < len(obj):
            out.append(obj[pos:])
        return {"runs": out}
    if isinstance(obj, dict):
        return {k: pack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [pack(v) for v in obj]
    return obj


def unpack(obj):
    if isinstance(obj, dict):
        if set(obj) == {"runs"} and isinstance(obj["runs"], list):
            return "".join(p if isinstance(p, str) else p[0] * int(p[1]) for p in obj["runs"])
        return {k: unpack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [unpack(v) for v in obj]
    return obj


def dumps(obj):
    """A case file's text: packed, one client, origin script list or DNS
    name a line (indented JSON would double the corpus for nothing)."""
    obj = pack(obj)

    def one(v):
        return json.dumps(v, separators=(",", ":"))

    out = []
    items = list(obj.items())
    for i, (k, v) in enumerate(items):
        sep = "," if i < len(items) - 1 else ""
        if isinstance(v, list) and v and k in ("clients", "cases"):
            inner = ",\n  ".join(one(x) for x in v)
            out.append(f" {one(k)}: [\n  {inner}\n ]{sep}")
        elif isinstance(v, dict) and v and k in ("origins", "dns", "case", "failure"):
            inner = ",\n  ".join(f"{one(kk)}: {one(vv)}" for kk, vv in v.items())
            out.append(f" {one(k)}: {{\n  {inner}\n }}{sep}")
        else:
            out.append(f" {one(k)}: {one(v)}{sep}")
    return "{\n" + "\n".join(out) + "\n}\n"
