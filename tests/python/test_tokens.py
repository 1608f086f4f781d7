"""The server's tokens must be Cassandra's Murmur3Partitioner tokens, bit for bit: drivers
route by them and cqlsh COPY splits the ring with them. The reference here is the Python
driver's own Murmur3Token.hash_fn (an independent implementation of Cassandra's hash)."""

import random
import struct
import uuid

import pytest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.metadata import Murmur3Token

from rgtest import bigint_bytes, composite_routing_key, int_bytes

N_KEYS = 10_000
MIN_TOKEN = -(2**63)

TEXT_ALPHABET = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.:/"
                 "éèüößñçÅØΩλЖж日本語中文한국어🙂🚀€£ÿ\u00a0\u2028")


def random_text(rng):
    return "".join(rng.choice(TEXT_ALPHABET) for _ in range(rng.randint(1, 24)))


def keygen_int(rng):
    edge = [-(2**31), -1, 0, 1, 2**31 - 1, 127, 128, 255, 256, -128, -129]
    return edge + [rng.randint(-(2**31), 2**31 - 1) for _ in range(N_KEYS)]


def keygen_bigint(rng):
    edge = [-(2**63), -1, 0, 1, 2**63 - 1, 2**32, -(2**32)]
    return edge + [rng.randint(-(2**63), 2**63 - 1) for _ in range(N_KEYS)]


def keygen_text(rng):
    return ["a", "é", "\u00ff" * 15, "\u00ff" * 16, "\u00ff" * 17] + [random_text(rng) for _ in range(N_KEYS)]


def keygen_blob(rng):
    edge = [b"\x00", b"\xff", b"\xfe" * 8, b"\x80" * 15, b"\x80" * 16, b"\x80" * 33]
    return edge + [rng.randbytes(rng.randint(1, 40)) for _ in range(N_KEYS)]


def keygen_uuid(rng):
    return ([uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(N_KEYS // 2)]
            + [uuid.UUID(int=rng.getrandbits(128), version=1) for _ in range(N_KEYS - N_KEYS // 2)])


def keygen_composite(rng):
    return [("a", 1), ("é", -1)] + [(random_text(rng), rng.randint(-(2**31), 2**31 - 1)) for _ in range(N_KEYS)]


# name -> (CQL type of the key, key generator, key -> routing key bytes)
KEY_KINDS = {
    "int": ("int", keygen_int, int_bytes),
    "bigint": ("bigint", keygen_bigint, bigint_bytes),
    "text": ("text", keygen_text, lambda k: k.encode("utf-8")),
    "blob": ("blob", keygen_blob, lambda k: k),
    "uuid": ("uuid", keygen_uuid, lambda k: k.bytes),
}


def distinct(keys):
    return list(dict.fromkeys(keys))


def insert_all(session, prepared, params):
    results = execute_concurrent_with_args(session, prepared, params, concurrency=128, raise_on_first_error=True)
    assert all(ok for ok, _ in results)


@pytest.mark.parametrize("kind", sorted(KEY_KINDS))
def test_single_column_key_tokens(session, keyspace, kind):
    cql_type, gen, to_bytes = KEY_KINDS[kind]
    rng = random.Random(f"ringgate-{kind}")
    keys = distinct(gen(rng))
    t = f"{keyspace}.tok_{kind}"
    session.execute(f"CREATE TABLE {t} (k {cql_type} PRIMARY KEY, n int)")
    ins = session.prepare(f"INSERT INTO {t} (k, n) VALUES (?, ?)")
    assert list(ins.routing_key_indexes) == [0]
    insert_all(session, ins, [(k, i) for i, k in enumerate(keys)])

    rows = list(session.execute(f"SELECT token(k), k, n FROM {t}"))
    assert len(rows) == len(keys)
    got = {r[1]: (r[0], r[2]) for r in rows}
    assert set(got) == set(keys)
    bad = []
    for i, k in enumerate(keys):
        expected = Murmur3Token.hash_fn(to_bytes(k))
        token, n = got[k]
        assert n == i
        if token != expected:
            bad.append((k, token, expected))
    assert not bad, f"{len(bad)} of {len(keys)} tokens differ from Murmur3, e.g. (key, server, expected): {bad[:5]}"
    tokens = [r[0] for r in rows]
    assert tokens == sorted(tokens), "a full scan must return partitions in token order"


def test_composite_key_tokens(session, keyspace):
    rng = random.Random("ringgate-composite")
    keys = distinct(keygen_composite(rng))
    t = f"{keyspace}.tok_composite"
    session.execute(f"CREATE TABLE {t} (a text, b int, n int, PRIMARY KEY ((a, b)))")
    ins = session.prepare(f"INSERT INTO {t} (a, b, n) VALUES (?, ?, ?)")
    insert_all(session, ins, [(a, b, i) for i, (a, b) in enumerate(keys)])

    rows = list(session.execute(f"SELECT token(a, b), a, b, n FROM {t}"))
    assert len(rows) == len(keys)
    got = {(r[1], r[2]): (r[0], r[3]) for r in rows}
    assert set(got) == set(keys)
    bad = []
    for i, (a, b) in enumerate(keys):
        expected = Murmur3Token.hash_fn(composite_routing_key(a.encode("utf-8"), int_bytes(b)))
        token, n = got[(a, b)]
        assert n == i
        if token != expected:
            bad.append(((a, b), token, expected))
    assert not bad, f"{len(bad)} of {len(keys)} tokens differ from Murmur3, e.g. (key, server, expected): {bad[:5]}"
    tokens = [r[0] for r in rows]
    assert tokens == sorted(tokens)


# Vectors from Cassandra's Murmur3Partitioner (REFERENCE.md section 3).
VECTORS = [
    ("text", "'a'", -8839064797231613815),
    ("int", "1", -4069959284402364209),
    ("bigint", "1", 6292367497774912474),
    ("blob", "0x313233", -7468325962851647638),  # b'123'
    ("blob", "0xfefefefefefefefe", -8927430733708461935),
]


@pytest.mark.parametrize("cql_type,literal,expected", VECTORS)
def test_reference_vectors(session, keyspace, cql_type, literal, expected):
    t = f"{keyspace}.vec_{cql_type}"
    session.execute(f"CREATE TABLE IF NOT EXISTS {t} (k {cql_type} PRIMARY KEY)")
    session.execute(f"INSERT INTO {t} (k) VALUES ({literal})")
    assert session.execute(f"SELECT token(k) FROM {t} WHERE k = {literal}").one()[0] == expected


def test_reference_vector_composite(session, keyspace):
    t = f"{keyspace}.vec_comp"
    session.execute(f"CREATE TABLE {t} (a text, b int, PRIMARY KEY ((a, b)))")
    session.execute(f"INSERT INTO {t} (a, b) VALUES ('a', 1)")
    assert session.execute(f"SELECT token(a, b) FROM {t} WHERE a = 'a' AND b = 1").one()[0] == 8247712171917364652
    # and the driver agrees (guards the reference itself)
    assert Murmur3Token.hash_fn(composite_routing_key(b"a", struct.pack(">i", 1))) == 8247712171917364652


def test_token_range_queries_cover_the_ring(session, keyspace):
    """cqlsh COPY TO and Spark-style readers split the ring into (start, end] token ranges
    starting at the minimum token -2^63."""
    t = f"{keyspace}.ranges"
    session.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
    ins = session.prepare(f"INSERT INTO {t} (id, v) VALUES (?, ?)")
    ids = list(range(2000))
    insert_all(session, ins, [(i, i) for i in ids])
    bounds = [MIN_TOKEN, -(2**62), -1, 0, 2**62, 2**63 - 1]
    seen = []
    for lo, hi in zip(bounds, bounds[1:]):
        rows = list(session.execute(f"SELECT token(id), id FROM {t} WHERE token(id) > {lo} AND token(id) <= {hi}"))
        for tok, i in rows:
            assert lo < tok <= hi
            assert tok == Murmur3Token.hash_fn(int_bytes(i))
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
        seen += [r[1] for r in rows]
    assert sorted(seen) == ids
    # prepared, with bound token values, as the COPY code path does
    p = session.prepare(f"SELECT id FROM {t} WHERE token(id) > ? AND token(id) <= ?")
    assert sorted(r.id for lo, hi in zip(bounds, bounds[1:]) for r in session.execute(p, (lo, hi))) == ids
    # token(id) >= X and a single-token range
    one = ids[123]
    tok = Murmur3Token.hash_fn(int_bytes(one))
    assert [r.id for r in session.execute(f"SELECT id FROM {t} WHERE token(id) >= {tok} AND token(id) <= {tok}")] == [one]
