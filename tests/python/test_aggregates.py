"""Aggregates (count, min, max, sum, avg with Cassandra's result types) and GROUP BY on a primary
key prefix, paged by groups."""
import decimal
import random
import struct

import pytest
from cassandra import InvalidRequest
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement


def tok(k):
    return Murmur3Token.hash_fn(struct.pack(">i", k))


@pytest.fixture
def data(session, keyspace):
    t = f"{keyspace}.agg"
    session.execute(f"CREATE TABLE {t} (pk int, c1 int, c2 int, i int, d double, dec decimal, vi varint, "
                    f"name text, PRIMARY KEY (pk, c1, c2))")
    ins = session.prepare(f"INSERT INTO {t} (pk, c1, c2, i, d, dec, vi, name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
    rng = random.Random(5)
    rows = []
    for pk in range(8):
        for c1 in range(3):
            for c2 in range(rng.randint(1, 4)):
                i = rng.randint(-100, 100)
                r = (pk, c1, c2, i, i / 4, decimal.Decimal(i) / 8, i * 10 ** 20, f"n{rng.randint(0, 9)}")
                rows.append(r)
                session.execute(ins, r)
    # a row with nulls in the aggregated columns
    session.execute(f"INSERT INTO {t} (pk, c1, c2) VALUES (99, 0, 0)")
    rows.append((99, 0, 0, None, None, None, None, None))
    return t, rows


def test_whole_table_aggregates(session, data):
    t, rows = data
    vals = [r[3] for r in rows if r[3] is not None]
    r = session.execute(f"SELECT count(*), count(i), min(i), max(i), sum(i), avg(i), sum(d), max(name) FROM {t}").one()
    assert r[0] == len(rows)
    assert r[1] == len(vals)
    assert (r[2], r[3], r[4]) == (min(vals), max(vals), sum(vals))
    assert r[5] == (abs(sum(vals)) // len(vals)) * (1 if sum(vals) >= 0 else -1)  # truncates toward zero
    assert r[6] == pytest.approx(sum(v / 4 for v in vals))
    assert r[7] == max(x[7] for x in rows if x[7] is not None)
    # exact types: decimal and varint sums are exact
    r = session.execute(f"SELECT sum(dec), sum(vi), avg(vi) FROM {t}").one()
    assert r[0] == sum(decimal.Decimal(v) / 8 for v in vals)
    assert r[1] == sum(v * 10 ** 20 for v in vals)
    total = sum(v * 10 ** 20 for v in vals)
    assert r[2] == (abs(total) // len(vals)) * (1 if total >= 0 else -1)  # truncates like BigInteger
    # column names as Cassandra names them
    rs = session.execute(f"SELECT count(*), min(i) FROM {t}")
    assert rs.column_names == ["count", "system_min_i"] or rs.column_names == ["count", "system.min(i)"]
    # on no rows: count 0, min null, sum 0
    r = session.execute(f"SELECT count(*), min(i), sum(i) FROM {t} WHERE pk = 12345").one()
    assert tuple(r) == (0, None, 0)


def test_group_by_with_paging(session, data):
    t, rows = data
    by_pk = {}
    for r in rows:
        by_pk.setdefault(r[0], []).append(r)
    want = [(pk, len(g), max((x[3] for x in g if x[3] is not None), default=None))
            for pk, g in sorted(by_pk.items(), key=lambda kv: tok(kv[0]))]
    q = f"SELECT pk, count(*), max(i) FROM {t} GROUP BY pk"
    assert [tuple(r) for r in session.execute(q)] == want
    for fetch in (1, 2, 3):
        got = [tuple(r) for r in session.execute(SimpleStatement(q, fetch_size=fetch))]
        assert got == want, fetch
    # groups on (pk, c1), within one partition and across; LIMIT counts groups
    pk = 3
    g2 = {}
    for r in by_pk[pk]:
        g2.setdefault(r[1], []).append(r[3])
    want2 = [(pk, c1, len(v), sum(v)) for c1, v in sorted(g2.items())]
    got = [tuple(r) for r in session.execute(SimpleStatement(
        f"SELECT pk, c1, count(*), sum(i) FROM {t} WHERE pk = {pk} GROUP BY pk, c1", fetch_size=1))]
    assert got == want2
    got = [tuple(r) for r in session.execute(f"SELECT pk, c1, count(*) FROM {t} GROUP BY pk, c1 LIMIT 4")]
    assert len(got) == 4
    # a non-aggregate selector takes the value of the group's first row
    got = [tuple(r) for r in session.execute(f"SELECT pk, c2, count(*) FROM {t} WHERE pk = {pk} GROUP BY pk")]
    first = min(by_pk[pk], key=lambda r: (r[1], r[2]))
    assert got == [(pk, first[2], len(by_pk[pk]))]


def test_aggregate_errors(session, data):
    t, _ = data
    with pytest.raises(InvalidRequest, match="PRIMARY KEY"):
        session.execute(f"SELECT count(*) FROM {t} GROUP BY c1")
    with pytest.raises(InvalidRequest):
        session.execute(f"SELECT sum(name) FROM {t}")


def test_aggregates_on_system_and_virtual_tables(session, keyspace, cqlsh):
    # A user's first check that the server answers, as on Cassandra.
    assert session.execute("SELECT count(*) FROM system.local").one()[0] == 1
    names = sorted(r.table_name for r in session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'system'"))
    row = session.execute("SELECT count(*), min(table_name), max(table_name) FROM system_schema.tables "
                          "WHERE keyspace_name = 'system'").one()
    assert tuple(row) == (len(names), names[0], names[-1]) and len(names) > 1
    # GROUP BY the partition key of a virtual table, and an empty selection's count.
    session.execute(f"CREATE TABLE {keyspace}.a (k int PRIMARY KEY)")
    session.execute(f"CREATE TABLE {keyspace}.b (k int PRIMARY KEY)")
    groups = {r[0]: r[1] for r in session.execute(
        "SELECT keyspace_name, count(*) FROM system_schema.tables GROUP BY keyspace_name")}
    assert groups[keyspace] == 2 and groups["system"] == len(names)
    assert session.execute("SELECT count(*) FROM system_views.throughput WHERE keyspace_name = %s",
                           (keyspace,)).one()[0] == 2
    assert session.execute("SELECT count(*) FROM system_schema.tables WHERE keyspace_name = 'none'").one()[0] == 0
    out = cqlsh(["-e", "SELECT count(*) FROM system.local"])
    assert out.returncode == 0, out
    assert [line.strip() for line in out.stdout.splitlines() if line.strip()][:3] == ["count", "-------", "1"], out
