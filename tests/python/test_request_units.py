"""Request units (issue 7): every response carries RequestCharge, following the documented cost
model (src/partition/ru.rs) and Cosmos DB's anchor points."""

import struct

from cassandra.concurrent import execute_concurrent_with_args

from rgtest import create_keyspace

KB = 1024


def charge(rs):
    payload = rs.response_future.custom_payload or {}
    assert "RequestCharge" in payload, payload
    return struct.unpack(">d", payload["RequestCharge"])[0]


def near(value, target, tol=0.10):
    return abs(value - target) <= tol * target


def test_request_charges_follow_the_anchor_points(session, unique_name):
    ks = unique_name("ks")
    create_keyspace(session, ks)
    ddl = session.execute(f"CREATE TABLE {ks}.t (k int, c int, v blob, PRIMARY KEY (k, c))")
    assert charge(ddl) == 1.0
    ins = session.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)")
    sel = session.prepare(f"SELECT v FROM {ks}.t WHERE k = ? AND c = ?")

    one = charge(session.execute(ins, (1, 1, b"a" * KB)))
    assert near(one, 5.5), one
    hundred = charge(session.execute(ins, (2, 1, b"b" * 100 * KB)))
    assert near(hundred, 50), hundred
    replace = charge(session.execute(ins, (1, 1, b"c" * KB)))
    assert near(replace, 2 * one), (replace, one)
    assert near(charge(session.execute(sel, (1, 1))), 1.0)
    assert near(charge(session.execute(sel, (2, 1))), 10.0)
    # Same operation, same data, same charge.
    assert charge(session.execute(sel, (2, 1))) == charge(session.execute(sel, (2, 1)))
    # An empty read still costs 1 RU.
    assert charge(session.execute(sel, (3, 3))) == 1.0

    # A query returning 1,000 rows of 1 KB costs about 1,000 RU.
    execute_concurrent_with_args(session, ins, [(10, c, b"d" * KB) for c in range(1000)],
                                 concurrency=64, raise_on_first_error=True)
    rs = session.execute(f"SELECT * FROM {ks}.t WHERE k = 10")
    assert len(rs.current_rows) == 1000
    assert near(charge(rs), 1000), charge(rs)
    # Filtering is charged for what is read, not what is returned.
    rs = session.execute(f"SELECT * FROM {ks}.t WHERE k = 10 AND v = 0x00 ALLOW FILTERING")
    assert rs.current_rows == [] and near(charge(rs), 1000), charge(rs)

    # Batches charge the sum of their writes; system reads a small fixed amount.
    b = session.execute(f"BEGIN UNLOGGED BATCH INSERT INTO {ks}.t (k, c, v) VALUES (20, 1, 0x00); "
                        f"INSERT INTO {ks}.t (k, c, v) VALUES (20, 2, 0x00); APPLY BATCH")
    assert near(charge(b), 2 * 5.05, 0.05), charge(b)
    assert charge(session.execute("SELECT * FROM system.local")) == 1.0
