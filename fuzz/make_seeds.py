"""Writes the seed corpus of the fuzz targets (fuzz/corpus/TARGET/NAME): small valid inputs
from which libFuzzer mutates. Run from the repository root with the test venv:
    .venv/bin/python fuzz/make_seeds.py
The files are committed; rerun this only to change the seeds."""

import struct
import sys
import zlib
from pathlib import Path

import lz4.block

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "tests" / "python"))
import cqlwire as w  # noqa: E402

STATEMENTS = [
    "SELECT * FROM ks.t WHERE id = 1",
    "SELECT a, b + 1, l[0], u.f, writetime(v), CAST(x AS text) FROM t WHERE a IN (1, 2) AND (c, d) > (1, 'x') LIMIT 10 ALLOW FILTERING",
    "INSERT INTO t (id, v, m, s) VALUES (?, :v, {1: 'a'}, {1.5, -2e3}) USING TTL 10 AND TIMESTAMP 5",
    "UPDATE t SET n = n + 1, l = [1] + l, m['k'] = 0x0102 WHERE id = 1 IF n = 2",
    "DELETE l[1], u.f FROM t WHERE id = 1 AND c >= 3",
    "BEGIN BATCH INSERT INTO t (a) VALUES (1); UPDATE t SET b = 2 WHERE a = 1; APPLY BATCH",
    "CREATE TABLE IF NOT EXISTS ks.t (a int, b text, c frozen<map<int, list<text>>>, PRIMARY KEY ((a, b), c)) WITH CLUSTERING ORDER BY (c DESC) AND comment = 'x'",
    "CREATE TYPE ks.u (f int, g frozen<tuple<int, text>>)",
    "ALTER TABLE t ADD x vector<float, 3>",
    "CREATE INDEX ON t (values(m))",
    "SELECT json * FROM t WHERE token(a) > -9223372036854775808 PER PARTITION LIMIT 2",
    "SELECT (int) ?, 'it''s', $$dollar$$, 12h30m, 123e4567-e89b-12d3-a456-426614174000 FROM t",
    "CREATE OR REPLACE FUNCTION ks.f (a int) CALLED ON NULL INPUT RETURNS int LANGUAGE java AS $$ return a; $$",
    "DROP FUNCTION IF EXISTS ks.f (int, frozen<list<text>>); DROP TRIGGER tr ON t; LIST ROLES",
]


def write(target, name, data):
    d = ROOT / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def query_with_values():
    # QUERY with consistency, flags: values (0x01), page size (0x04), paging state (0x08)
    body = w.long_string("SELECT * FROM t WHERE a = ?") + struct.pack(">HB", 1, 0x01 | 0x04 | 0x08)
    body += struct.pack(">H", 1) + w.bytes_(b"\x00\x00\x00\x01")
    body += struct.pack(">i", 100) + w.bytes_(b"\x01" + b"\x00" * 16)
    return body


def execute_body():
    return w.short(16) + b"\x01" * 16 + struct.pack(">HB", 1, 0x01) + struct.pack(">H", 1) + w.bytes_(b"abc")


def batch_body():
    body = struct.pack(">BH", 0, 2)
    body += b"\x00" + w.long_string("INSERT INTO t (a) VALUES (?)") + struct.pack(">H", 1) + w.bytes_(b"\x00\x00\x00\x07")
    body += b"\x01" + w.short(16) + b"\x02" * 16 + struct.pack(">H", 0)
    return body + struct.pack(">HB", 1, 0)


def frames():
    out = {
        "options": w.frame(w.OPTIONS),
        "startup": w.frame(w.STARTUP, w.startup_body(COMPRESSION="lz4")),
        "auth": w.frame(w.AUTH_RESPONSE, w.auth_response_body("cassandra", "cassandra")),
        "register": w.frame(w.REGISTER, struct.pack(">H", 1) + w.string("SCHEMA_CHANGE")),
        "query": w.frame(w.QUERY, query_with_values()),
        "prepare": w.frame(w.PREPARE, w.prepare_body(STATEMENTS[2])),
        "execute": w.frame(w.EXECUTE, execute_body()),
        "batch": w.frame(w.BATCH, batch_body()),
    }
    plain = w.query_body(STATEMENTS[0])
    lz4_body = struct.pack(">i", len(plain)) + lz4.block.compress(plain, store_size=False)
    out["query_lz4"] = w.frame(w.QUERY, lz4_body, flags=0x01)
    out["v3_query"] = w.frame(w.QUERY, plain, version=3)
    out["pipelined"] = out["options"] + out["query"] + out["execute"]
    return out


def crc24(value, length):
    crc = 0x875060
    for _ in range(length):
        crc ^= (value & 0xFF) << 16
        value >>= 8
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1974F0B
    return crc


def crc32(payload):
    return zlib.crc32(b"\xfa\x2d\x55\xca" + payload) & 0xFFFFFFFF


def segment(payload):
    header = len(payload) | (1 << 17)
    head = (header | (crc24(header, 3) << 24)).to_bytes(6, "little")
    return head + payload + struct.pack("<I", crc32(payload))


def lz4_segment(payload):
    compressed = lz4.block.compress(payload, store_size=False)
    header = len(compressed) | (len(payload) << 17) | (1 << 34)
    head = (header | (crc24(header, 5) << 40)).to_bytes(8, "little")
    return head + compressed + struct.pack("<I", crc32(compressed))


def main():
    fs = frames()
    for name, f in fs.items():
        write("frame", name, f)
        # request: version byte, flags, opcode, then the body
        version, flags, _stream, opcode, _len = struct.unpack(">BBhBi", f[:9])
        write("request", name, bytes([(version & 0x7F) - 3, flags, opcode]) + f[9:])
    v5 = w.frame(w.QUERY, w.query_body(STATEMENTS[0]), version=5)
    write("segment", "plain", b"\x00" + segment(v5 + v5))
    write("segment", "lz4", b"\x01" + lz4_segment(v5))
    for i, s in enumerate(STATEMENTS):
        write("cql", f"stmt{i:02}", s.encode())
    literals = [(9, b"-2147483648"), (5, b"-1.5e-7"), (7, b"1y2mo3w4d5h6m7s8ms9us10ns"), (10, b"::ffff:10.0.0.1"),
                (16, b"2011-02-03T04:05:00.000+0000"), (6, b"2011-02-03"), (15, b"08:12:54.123456789"),
                (18, b"123e4567-e89b-12d3-a456-426614174000"), (19, b"-123456789012345678901234567890"),
                (4, b"NaN"), (21, b"\x00\x00\x00\x01\x00\x00\x00\x01a"), (22, b"\x00\x00\x00\x04\x00\x00\x00\x07")]
    for i, (pick, text) in enumerate(literals):
        write("literal", f"lit{i:02}", bytes([pick]) + text)
    # row: a version-1 row value with a marker and one cell, and a storage key
    write("row", "v1", bytes([1, 0x01]) + struct.pack(">q", 1) + bytes([0]) + struct.pack(">H", 1)
          + bytes([0]) + struct.pack(">q", 2) + struct.pack(">I", 3) + b"abc")
    write("row", "key", struct.pack(">Q", 1024) + struct.pack(">Q", 1 << 63) + b"pk\x00\x01" + b"\x02" + b"\x80\x00\x00\x07")
    write("paging", "state", bytes([2]) + struct.pack(">IIII", 0, 100, 3, 4) + b"last")
    write("paging", "no_limit", bytes([2]) + struct.pack(">IIII", 2, 0xFFFFFFFF, 1 << 31, 0))


if __name__ == "__main__":
    main()
