"""Every native CQL type: literals and bind values round-trip through INSERT/SELECT (minimum,
maximum, zero, negative, empty, null, non-ASCII), cqlsh prints them in Cassandra's format,
invalid values are rejected with Cassandra's error (0x2200) and leave the data unchanged, and
clustering order for every clusterable type (ASC and DESC) matches an independent model of
Cassandra's comparators."""

import datetime
import functools
import ipaddress
import math
import random
import struct
import uuid
from decimal import Decimal

import pytest
from cassandra import InvalidRequest
from cassandra.util import Date, Duration, Time

from rgtest import error_text

UTC = datetime.timezone.utc


def ts(*a):
    return datetime.datetime(*a)


# type -> [(CQL literal, value the Python driver returns, value to bind, cqlsh text)].
# The bind value is the returned value unless given; cqlsh text None = not checked.
NATIVE = {
    "ascii": [
        ("''", "", None, ""),
        ("'abc'", "abc", None, "abc"),
        ("'it''s'", "it's", None, "it's"),
        ("'\x7f~ '", "\x7f~ ", None, None),
    ],
    "bigint": [
        ("-9223372036854775808", -2**63, None, "-9223372036854775808"),
        ("9223372036854775807", 2**63 - 1, None, "9223372036854775807"),
        ("0", 0, None, "0"),
        ("-1", -1, None, "-1"),
    ],
    "blob": [
        ("0x", b"", None, "0x"),
        ("0x00ff10", b"\x00\xff\x10", None, "0x00ff10"),
        ("0xDEADbeef", b"\xde\xad\xbe\xef", None, "0xdeadbeef"),
    ],
    "boolean": [
        ("true", True, None, "True"),
        ("false", False, None, "False"),
        ("TRUE", True, None, "True"),
    ],
    "date": [
        ("'1970-01-01'", Date(0), None, "1970-01-01"),
        ("'2024-02-29'", Date(datetime.date(2024, 2, 29)), None, "2024-02-29"),
        ("'1969-12-31'", Date(-1), None, "1969-12-31"),
        ("'0001-01-01'", Date(datetime.date(1, 1, 1)), None, "0001-01-01"),
        ("'9999-12-31'", Date(datetime.date(9999, 12, 31)), None, "9999-12-31"),
        # the raw unsigned day number: 2^31 is the epoch; 0 is the minimum date
        ("0", Date(-2**31), None, None),
        ("4294967295", Date(2**31 - 1), None, None),
    ],
    "decimal": [
        ("0", Decimal("0"), None, "0"),
        ("-1.5", Decimal("-1.5"), None, "-1.5"),
        ("123456789012345678901234567890.0123456789", Decimal("123456789012345678901234567890.0123456789"), None, None),
        ("1E+10", Decimal("1E+10"), None, None),
        ("-0.000001", Decimal("-0.000001"), None, None),
    ],
    "double": [
        ("0", 0.0, None, "0"),
        ("-1.5", -1.5, None, "-1.5"),
        ("1.7976931348623157E308", 1.7976931348623157e308, None, None),
        ("4.9E-324", 5e-324, None, None),
        ("Infinity", math.inf, None, "Infinity"),
        ("-Infinity", -math.inf, None, "-Infinity"),
        ("NaN", math.nan, None, "NaN"),
    ],
    "duration": [
        ("1h30m", Duration(0, 0, 5400 * 10**9), None, "1h30m"),
        ("P1DT2H", Duration(0, 1, 7200 * 10**9), None, "1d2h"),
        ("-1y2mo3d", Duration(-14, -3, 0), None, "-1y2mo3d"),
        ("0s", Duration(0, 0, 0), None, None),
        ("P0001-02-03T04:05:06", Duration(14, 3, (4 * 3600 + 5 * 60 + 6) * 10**9), None, None),
        ("1us2ns", Duration(0, 0, 1002), None, "1us2ns"),
    ],
    "float": [
        ("0", 0.0, None, "0"),
        ("-2.5", -2.5, None, "-2.5"),
        ("3.4028235E38", struct.unpack(">f", struct.pack(">f", 3.4028235e38))[0], None, None),
        ("Infinity", math.inf, None, "Infinity"),
        ("NaN", math.nan, None, "NaN"),
    ],
    "inet": [
        ("'127.0.0.1'", "127.0.0.1", None, "127.0.0.1"),
        ("'0.0.0.0'", "0.0.0.0", None, None),
        ("'::1'", "::1", None, "::1"),
        ("'2001:db8::ff00:42:8329'", "2001:db8::ff00:42:8329", None, None),
    ],
    "int": [
        ("-2147483648", -2**31, None, "-2147483648"),
        ("2147483647", 2**31 - 1, None, "2147483647"),
        ("0", 0, None, "0"),
        ("-7", -7, None, "-7"),
    ],
    "smallint": [
        ("-32768", -32768, None, "-32768"),
        ("32767", 32767, None, "32767"),
        ("0", 0, None, "0"),
    ],
    "tinyint": [
        ("-128", -128, None, "-128"),
        ("127", 127, None, "127"),
        ("0", 0, None, "0"),
    ],
    "text": [
        ("''", "", None, ""),
        ("'héllo wörld ✓ 日本語'", "héllo wörld ✓ 日本語", None, "héllo wörld ✓ 日本語"),
        ("$$it's $ a 'dollar' string$$", "it's $ a 'dollar' string", None, None),
        ("'😀'", "😀", None, None),
    ],
    "varchar": [
        ("'x'", "x", None, "x"),
    ],
    "time": [
        ("'00:00:00'", Time(0), None, "00:00:00.000000000"),
        ("'23:59:59.999999999'", Time(86399999999999), None, "23:59:59.999999999"),
        ("'08:12:54.123'", Time(datetime.time(8, 12, 54, 123000)), None, "08:12:54.123000000"),
        ("3600000000000", Time(3600 * 10**9), None, None),
    ],
    "timestamp": [
        ("'1970-01-01 00:00:00+0000'", ts(1970, 1, 1), None, "1970-01-01 00:00:00.000000+0000"),
        ("'2011-02-03T04:05:06.789Z'", ts(2011, 2, 3, 4, 5, 6, 789000), None,
         "2011-02-03 04:05:06.789000+0000"),
        ("'2011-02-03 04:05+0100'", ts(2011, 2, 3, 3, 5), None, None),
        ("'2011-02-03'", ts(2011, 2, 3), None, None),
        ("-1000", ts(1969, 12, 31, 23, 59, 59), None, None),
        ("1299038700000", ts(2011, 3, 2, 4, 5), None, None),
        ("'0001-01-01 00:00:00+0000'", ts(1, 1, 1), None, None),
        ("'9999-12-31 23:59:59+0000'", ts(9999, 12, 31, 23, 59, 59), None, None),
    ],
    "timeuuid": [
        ("50554d6e-29bb-11e5-b345-feff819cdc9f", uuid.UUID("50554d6e-29bb-11e5-b345-feff819cdc9f"), None,
         "50554d6e-29bb-11e5-b345-feff819cdc9f"),
        ("00000000-0000-1000-8080-808080808080", uuid.UUID("00000000-0000-1000-8080-808080808080"), None, None),
    ],
    "uuid": [
        ("123e4567-e89b-42d3-a456-556642440000", uuid.UUID("123e4567-e89b-42d3-a456-556642440000"), None,
         "123e4567-e89b-42d3-a456-556642440000"),
        ("00000000-0000-0000-0000-000000000000", uuid.UUID(int=0), None, None),
        ("FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", uuid.UUID(int=2**128 - 1), None, None),
    ],
    "varint": [
        ("0", 0, None, "0"),
        ("-1", -1, None, "-1"),
        ("123456789012345678901234567890123456789", 123456789012345678901234567890123456789, None,
         "123456789012345678901234567890123456789"),
        ("-98765432109876543210987654321", -98765432109876543210987654321, None, None),
        ("128", 128, None, None),
        ("-129", -129, None, None),
    ],
}


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, ipaddress._BaseAddress) or isinstance(b, ipaddress._BaseAddress):
        return str(a) == str(b)
    return type(a) is type(b) and a == b or (a == b and not isinstance(a, bool) and not isinstance(b, bool))


@pytest.fixture(scope="module")
def types_ks(session):
    name = f"types_{random.randrange(1 << 30)}"
    session.execute(f"CREATE KEYSPACE {name} WITH replication = "
                    f"{{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    cols = ", ".join(f"c_{t} {t}" for t in NATIVE)
    session.execute(f"CREATE TABLE {name}.allt (k int PRIMARY KEY, {cols})")
    yield name
    session.execute(f"DROP KEYSPACE {name}")


@pytest.mark.parametrize("typ", sorted(NATIVE))
def test_native_literals_and_binds_round_trip(session, types_ks, typ):
    t = f"{types_ks}.allt"
    col = f"c_{typ}"
    base = 1000 * sorted(NATIVE).index(typ)
    ins = session.prepare(f"INSERT INTO {t} (k, {col}) VALUES (?, ?)")
    sel = session.prepare(f"SELECT {col} FROM {t} WHERE k = ?")
    for i, (lit, want, bind, _) in enumerate(NATIVE[typ]):
        k = base + 2 * i
        session.execute(f"INSERT INTO {t} (k, {col}) VALUES ({k}, {lit})")
        got = session.execute(sel, [k]).one()[0]
        assert same(got, want), f"{typ} literal {lit}: got {got!r}, want {want!r}"
        # the same value bound (prepared) and through a simple statement with positional values
        session.execute(ins, [k + 1, want if bind is None else bind])
        got = session.execute(sel, [k + 1]).one()[0]
        assert same(got, want), f"{typ} bound {want!r}: got {got!r}"
    # null: literal and bound; the column reads back as null
    session.execute(f"INSERT INTO {t} (k, {col}) VALUES ({base + 900}, null)")
    assert session.execute(sel, [base + 900]).one()[0] is None
    session.execute(ins, [base + 901, None])
    assert session.execute(sel, [base + 901]).one()[0] is None
    # null overwrites a value
    session.execute(f"INSERT INTO {t} (k, {col}) VALUES ({base + 902}, {NATIVE[typ][0][0]})")
    session.execute(f"UPDATE {t} SET {col} = null WHERE k = {base + 902}")
    assert session.execute(sel, [base + 902]).one()[0] is None


def test_native_values_as_partition_and_clustering_keys(session, keyspace):
    for typ in sorted(NATIVE):
        if typ in ("duration",):
            continue
        t = f"{keyspace}.pk_{typ}"
        session.execute(f"CREATE TABLE {t} (p {typ}, c {typ}, v int, PRIMARY KEY (p, c))")
        sel = session.prepare(f"SELECT p, c, v FROM {t} WHERE p = ? AND c = ?")
        for i, (lit, want, bind, _) in enumerate(NATIVE[typ]):
            if typ in ("float", "double") and isinstance(want, float) and math.isnan(want):
                continue
            if lit in ("''", "0x"):
                # Cassandra refuses an empty partition key (an empty clustering value is fine)
                with pytest.raises(InvalidRequest, match="Key may not be empty"):
                    session.execute(f"INSERT INTO {t} (p, c, v) VALUES ({lit}, {lit}, {i})")
                continue
            session.execute(f"INSERT INTO {t} (p, c, v) VALUES ({lit}, {lit}, {i})")
            row = session.execute(sel, [want, want]).one()
            assert row is not None, f"{typ} {lit}"
            assert same(row[0], want) and same(row[1], want) and row[2] == i, (typ, lit, row)


def cqlsh_rows(stdout):
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if set(line.strip()) <= set("-+") and line.strip() and i > 0:
            out = []
            for l in lines[i + 1:]:
                if not l.strip():
                    break
                out.append([c.strip() for c in l.split(" | ")])
            return out
    raise AssertionError(stdout)


def test_cqlsh_prints_native_values(session, types_ks, cqlsh):
    t = f"{types_ks}.allt"
    stmts = []
    expect = {}
    for typ in sorted(NATIVE):
        for i, (lit, _, _, text) in enumerate(NATIVE[typ]):
            if text is None:
                continue
            k = 500000 + 1000 * sorted(NATIVE).index(typ) + i
            stmts.append(f"INSERT INTO {t} (k, c_{typ}) VALUES ({k}, {lit});")
            expect[k] = (typ, text)
    session.execute(f"INSERT INTO {t} (k) VALUES (499999)")
    for s in stmts:
        session.execute(s.rstrip(";"))
    for typ in sorted(NATIVE):
        keys = [k for k, (ty, _) in expect.items() if ty == typ]
        r = cqlsh(["-e", f"SELECT k, c_{typ} FROM {t} WHERE k IN ({', '.join(map(str, keys + [499999]))})"])
        assert r.returncode == 0, r
        rows = {int(row[0]): row[1] for row in cqlsh_rows(r.stdout)}
        for k in keys:
            assert rows[k] == expect[k][1], f"{typ}: cqlsh printed {rows[k]!r}, want {expect[k][1]!r}"
        assert rows[499999] == "null"


INVALID = [
    # (type, literal, error fragment)
    ("int", "2147483648", "Invalid"),
    ("int", "'1'", "Invalid STRING constant"),
    ("int", "1.5", "Invalid"),
    ("tinyint", "128", "Invalid"),
    ("smallint", "-32769", "Invalid"),
    ("bigint", "9223372036854775808", "Invalid"),
    ("ascii", "'é'", "Invalid ASCII"),
    ("text", "1", "Invalid INTEGER constant"),
    ("uuid", "'x'", "Invalid STRING constant"),
    ("timeuuid", "123e4567-e89b-42d3-a456-556642440000", "TimeUUID supports only version 1 UUIDs"),
    ("inet", "'1.2.3'", "Unable to make inet address"),
    ("date", "'2021-02-30'", "Unable to coerce"),
    ("time", "'25:00:00'", "Unable to coerce"),
    ("timestamp", "'yesterday'", "Unable to parse a date/time"),
    ("boolean", "1", "Invalid INTEGER constant"),
    ("blob", "'ab'", "Invalid STRING constant"),
    ("duration", "'1h'", "Invalid STRING constant"),
    ("float", "true", "Invalid BOOLEAN constant"),
]


@pytest.mark.parametrize("typ,lit,frag", INVALID, ids=[f"{a}-{b}" for a, b, _ in INVALID])
def test_invalid_literals_rejected_and_data_unchanged(session, types_ks, typ, lit, frag):
    t = f"{types_ks}.allt"
    k = 900000 + INVALID.index((typ, lit, frag))
    good = NATIVE[typ][0][0] if typ != "boolean" else "true"
    session.execute(f"INSERT INTO {t} (k, c_{typ}) VALUES ({k}, {good})")
    before = session.execute(f"SELECT c_{typ} FROM {t} WHERE k = {k}").one()[0]
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"INSERT INTO {t} (k, c_{typ}) VALUES ({k}, {lit})")
    assert frag in error_text(e.value), error_text(e.value)
    with pytest.raises(InvalidRequest):
        session.execute(f"UPDATE {t} SET c_{typ} = {lit} WHERE k = {k}")
    assert same(session.execute(f"SELECT c_{typ} FROM {t} WHERE k = {k}").one()[0], before)


def raw_insert(session, query, values):
    """Execute a prepared statement with raw (already serialized) bind values."""
    prepared = session.prepare(query)
    bound = prepared.bind([None] * len(values))
    bound.values = list(values)
    return session.execute(bound)


BAD_BINDS = [
    # (type, raw bytes, error fragment)
    ("int", b"\x00\x00\x01", "Expected 4 or 0 byte int (3)"),
    ("bigint", b"\x00" * 9, "Expected 8 or 0 byte long (9)"),
    ("text", b"\xff\xfe", "String didn't validate."),
    ("ascii", b"\x80", "Invalid byte for ascii: -128"),
    ("uuid", b"\x00" * 15, "UUID should be 16 or 0 bytes (15)"),
    ("timeuuid", uuid.UUID("423e4567-e89b-42d3-a456-556642440000").bytes, "Invalid version for TimeUUID type: 0x4"),
    ("inet", b"\x01\x02\x03", "Expected 4 or 16 byte inetaddress"),
    ("boolean", b"\x00\x00", "Expected 1 or 0 byte value (2)"),
    ("date", b"\x00\x00", "Expected 4 byte long for date (2)"),
    ("time", b"\x00" * 7, "Expected 8 byte long for time (7)"),
]


@pytest.mark.parametrize("typ,raw,frag", BAD_BINDS, ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(BAD_BINDS)])
def test_invalid_bind_values_rejected_and_data_unchanged(session, types_ks, typ, raw, frag):
    t = f"{types_ks}.allt"
    k = 950000 + [b[0] for b in BAD_BINDS].index(typ)
    good = NATIVE[typ][0][0]
    session.execute(f"INSERT INTO {t} (k, c_{typ}) VALUES ({k}, {good})")
    before = session.execute(f"SELECT c_{typ} FROM {t} WHERE k = {k}").one()[0]
    with pytest.raises(InvalidRequest) as e:
        raw_insert(session, f"INSERT INTO {t} (k, c_{typ}) VALUES (?, ?)", [struct.pack(">i", k), raw])
    assert frag in error_text(e.value), error_text(e.value)
    assert same(session.execute(f"SELECT c_{typ} FROM {t} WHERE k = {k}").one()[0], before)


def test_duration_cannot_be_clustering(session, keyspace):
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"CREATE TABLE {keyspace}.d (p int, c duration, PRIMARY KEY (p, c))")
    assert "duration type is not supported for PRIMARY KEY column 'c'" in error_text(e.value)


# ---------------------------------------------------------------------------------------------
# Clustering order: an independent model of Cassandra 5.0's comparators (AbstractType.compare
# of each marshal type), written from their definitions, not from the server's code.

def _f32(x):
    return struct.unpack(">f", struct.pack(">f", x))[0]


def _float_key(x):
    # Float.compare / Double.compare: -0.0 < 0.0, NaN above +Infinity
    if math.isnan(x):
        return (1, 0.0, 0)
    return (0, x, math.copysign(1, x))


def _inet_bytes(s):
    return ipaddress.ip_address(s).packed


def _v1_time(b):
    return ((b[6] & 0x0F) << 56) | (b[7] << 48) | (b[4] << 40) | (b[5] << 32) | int.from_bytes(b[0:4], "big")


def _uuid_key(u):
    # UUIDType: version; for version 1 the timestamp, else the msb unsigned; then lsb unsigned
    b = u.bytes
    v = b[6] >> 4
    return (v, _v1_time(b) if v == 1 else int.from_bytes(b[:8], "big"), int.from_bytes(b[8:], "big"))


def _timeuuid_key(u):
    # TimeUUIDType: the timestamp, then clock sequence and node as *signed* bytes
    b = u.bytes
    return (_v1_time(b), tuple(x - 256 if x > 127 else x for x in b[8:]))


def _rand_v1(rng):
    t = rng.randrange(0, 1 << 60)
    return uuid.UUID(fields=(t & 0xFFFFFFFF, (t >> 32) & 0xFFFF, ((t >> 48) & 0x0FFF) | 0x1000,
                             0x80 | rng.randrange(64), rng.randrange(256), rng.randrange(1 << 48)))


def _rand_text(rng, alphabet):
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 6)))


def _order_cases(rng):
    ints = lambda lo, hi: [lo, hi, 0, -1, 1] + [rng.randrange(lo, hi + 1) for _ in range(30)]
    decimals = {Decimal(rng.randrange(-10**12, 10**12)).scaleb(rng.randrange(-15, 15)) for _ in range(30)}
    decimals |= {Decimal("0"), Decimal("-0.001"), Decimal("0.001"), Decimal("1E+30"), Decimal("-1E+30")}
    by_value = {}
    for d in decimals:
        by_value.setdefault(d.normalize() if d else Decimal(0), d)
    doubles = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 1.7976931348623157e308] + \
        [rng.uniform(-1e6, 1e6) * 10 ** rng.randrange(-30, 30) for _ in range(30)]
    floats = list({_f32(x) if not math.isnan(x) else x: None for x in doubles if abs(x) < 3e38 or math.isinf(x)})
    v1s = [_rand_v1(rng) for _ in range(20)]
    base = _rand_v1(rng)  # same timestamp, different clock/node: the signed-byte tie-break
    same_time = [uuid.UUID(bytes=base.bytes[:8] + bytes([b]) + base.bytes[9:]) for b in (0x80, 0x81, 0xBF, 0xC0, 0xFF)]
    ascii_alpha = "azAZ09 ~!\x00\x7f"
    text_alpha = "aZ0 éü✓日本😀\x00"
    return {
        "tinyint": (ints(-128, 127), int),
        "smallint": (ints(-32768, 32767), int),
        "int": (ints(-2**31, 2**31 - 1), int),
        "bigint": (ints(-2**63, 2**63 - 1), int),
        "varint": ([0, -1, 1, 127, 128, -128, -129, 255, 256, -2**70, 2**70] +
                   [rng.randrange(-2**100, 2**100) >> rng.randrange(0, 100) for _ in range(30)], int),
        "decimal": (list(by_value.values()), lambda d: d),
        "float": (floats, _float_key),
        "double": (doubles, _float_key),
        "boolean": ([True, False], lambda b: b),
        "ascii": (list({_rand_text(rng, ascii_alpha) for _ in range(40)}), lambda s: s.encode()),
        "text": (list({_rand_text(rng, text_alpha) for _ in range(40)}), lambda s: s.encode("utf-8")),
        "varchar": (["b", "a", "ab", "", "é"], lambda s: s.encode("utf-8")),
        "blob": (list({rng.randbytes(rng.randrange(0, 5)) for _ in range(40)}), lambda b: b),
        "inet": (list({"127.0.0.1", "10.0.0.1", "255.255.255.255", "0.0.0.0", "::1", "::", "fe80::1",
                       "2001:db8::1", "ffff::"} |
                      {str(ipaddress.IPv4Address(rng.randrange(1 << 32))) for _ in range(10)} |
                      {str(ipaddress.IPv6Address(rng.randrange(1 << 128))) for _ in range(10)}), _inet_bytes),
        "date": ([Date(d) for d in {-2**31, 2**31 - 1, 0, -1, 1} | {rng.randrange(-2**31, 2**31) for _ in range(30)}],
                 lambda d: d.days_from_epoch),
        "time": ([Time(n) for n in {0, 1, 86399999999999} | {rng.randrange(0, 86400 * 10**9) for _ in range(30)}],
                 lambda t: t.nanosecond_time),
        "timestamp": (list({datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=rng.randrange(-2**41, 2**41))
                            for _ in range(30)} | {datetime.datetime(1970, 1, 1), datetime.datetime(1969, 12, 31, 23, 59, 59, 999000)}),
                      lambda d: d),
        "uuid": (list({uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)} | {uuid.uuid4() for _ in range(15)} |
                      {uuid.uuid3(uuid.NAMESPACE_DNS, str(i)) for i in range(5)} |
                      {uuid.uuid5(uuid.NAMESPACE_DNS, str(i)) for i in range(5)} | set(v1s[:10])), _uuid_key),
        "timeuuid": (list(set(v1s) | set(same_time)), _timeuuid_key),
    }


@pytest.mark.parametrize("typ", sorted(_order_cases(random.Random(0))))
def test_clustering_order_matches_cassandra_comparators(session, keyspace, typ):
    rng = random.Random(f"order-{typ}")
    values, key = _order_cases(rng)[typ]
    values = list({key(v): v for v in values}.values())  # distinct clustering values
    for direction in ("ASC", "DESC"):
        t = f"{keyspace}.o_{typ}_{direction.lower()}"
        session.execute(f"CREATE TABLE {t} (p int, c {typ}, v int, PRIMARY KEY (p, c)) "
                        f"WITH CLUSTERING ORDER BY (c {direction})")
        ins = session.prepare(f"INSERT INTO {t} (p, c, v) VALUES (0, ?, ?)")
        shuffled = list(values)
        rng.shuffle(shuffled)
        for i, v in enumerate(shuffled):
            session.execute(ins, [v, i])
        got = [r.c for r in session.execute(f"SELECT c FROM {t} WHERE p = 0")]
        want = sorted(values, key=key, reverse=direction == "DESC")
        assert [key(g) for g in got] == [key(w) for w in want], f"{typ} {direction}"
        # a slice from the middle value on: the key encoding agrees with the comparator
        mid = sorted(values, key=key)[len(values) // 2]
        got = [r.c for r in session.execute(session.prepare(f"SELECT c FROM {t} WHERE p = 0 AND c >= ?"), [mid])]
        want = [w for w in want if key(w) >= key(mid)]
        assert [key(g) for g in got] == [key(w) for w in want], f"{typ} {direction} c >= {mid!r}"
