"""Request units (issue 7): every response carries RequestCharge, following the documented cost
model (src/partition/ru.rs) and Cosmos DB's anchor points."""

import struct

import pytest

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


def payload_charge(payload):
    assert payload and "RequestCharge" in payload, payload
    return struct.unpack(">d", payload["RequestCharge"])[0]


def test_every_response_carries_the_charge(session, unique_name):
    from cassandra import InvalidRequest
    from cassandra.query import BatchStatement, BatchType
    ks = unique_name("ks")
    create_keyspace(session, ks)
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v text, PRIMARY KEY (k, c))")
    ins = session.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)")
    assert payload_charge(ins.custom_payload) == 0.0  # PREPARE reads nothing
    assert charge(session.execute(ins, (1, 1, "a"))) > 5.0
    assert charge(session.execute(f"SELECT * FROM {ks}.t WHERE k = 1")) >= 1.0
    assert charge(session.execute(f"SELECT * FROM {ks}.t")) >= 1.0
    b = BatchStatement(batch_type=BatchType.UNLOGGED)
    b.add(ins, (2, 1, "b"))
    b.add(ins, (2, 2, "c"))
    assert near(charge(session.execute(b)), 2 * charge(session.execute(ins, (3, 1, "a"))), 0.05)
    # Errors carry what was consumed before them (the driver keeps the payload of an error
    # response on the ResponseFuture).
    for bad in (f"SELECT * FROM {ks}.nope", f"INSERT INTO {ks}.t (k, c, v) VALUES (1, 1, 'x') USING TTL -1"):
        fut = session.execute_async(bad)
        try:
            fut.result()
            raise AssertionError("no error")
        except InvalidRequest:
            assert payload_charge(fut.custom_payload) >= 0.0


def test_conditional_writes_and_serial_reads_charge_read_and_write(session, unique_name):
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement
    ks = unique_name("ks")
    create_keyspace(session, ks)
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v blob)")
    plain = charge(session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 0x00)"))
    lwt = session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (2, 0x00) IF NOT EXISTS")
    assert lwt.one()[0] is True
    # The read of the (absent) row (1 RU minimum) plus the same write as the plain insert.
    assert near(charge(lwt), plain + 1.0, 0.02), (charge(lwt), plain)
    # Not applied: only the read.
    again = session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (2, 0x00) IF NOT EXISTS")
    assert again.one()[0] is False and near(charge(again), 1.0), charge(again)
    # A conditional batch: the read plus its writes.
    b = session.execute(f"BEGIN BATCH UPDATE {ks}.t SET v = 0x01 WHERE k = 2 IF EXISTS; APPLY BATCH")
    assert b.one()[0] is True and charge(b) > 2 * plain, charge(b)
    # SERIAL reads: a read plus a minimal write (the Paxos round).
    one = charge(session.execute(f"SELECT * FROM {ks}.t WHERE k = 1"))
    serial = charge(session.execute(SimpleStatement(f"SELECT * FROM {ks}.t WHERE k = 1",
                                                    consistency_level=ConsistencyLevel.SERIAL)))
    assert near(serial, one + 500 / 99, 0.02), (serial, one)


def test_hot_partitions_show_the_hammered_key(session, unique_name):
    ks = unique_name("ks")
    create_keyspace(session, ks)
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v text, PRIMARY KEY (k, c))")
    ins = session.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, 'x')")
    sel = session.prepare(f"SELECT * FROM {ks}.t WHERE k = ? AND c = 0")
    # 200 other keys once each (more than one sketch holds), key 4242 200 times.
    args = [(k, 0) for k in range(200)] + [(4242, c) for c in range(150)]
    execute_concurrent_with_args(session, ins, args, concurrency=32, raise_on_first_error=True)
    for _ in range(50):
        session.execute(sel, (4242,))
    rows = list(session.execute("SELECT * FROM system_views.hot_partitions WHERE keyspace_name = %s", (ks,)))
    assert 0 < len(rows) <= 20
    top = min(rows, key=lambda r: r.rank)
    assert (top.rank, top.table_name, top.partition_key) == (1, "t", "4242"), rows[:3]
    from cassandra.metadata import Murmur3Token
    assert top.token == Murmur3Token.hash_fn(struct.pack(">i", 4242))
    assert top.consumed_ru > 150 * 5.0 and top.consumed_ru > 10 * max(r.consumed_ru for r in rows if r.rank > 1)
    parts = {r.partition_id for r in session.execute(
        "SELECT partition_id FROM system_views.physical_partitions WHERE keyspace_name = %s", (ks,))}
    assert top.partition_id in parts


def test_payload_on_ready_and_errors_only_for_drivers_that_name_themselves(server):
    import cqlwire

    with cqlwire.Conn(server.host, server.port) as c:
        f = c.startup(DRIVER_NAME="test-driver")
        assert f.opcode == cqlwire.READY
        assert payload_charge(f.payload) == 0.0
        f = c.query("SELECT * FROM nosuchks.nosuchtable")
        assert f.error()[0] == cqlwire.ERR_INVALID
        assert payload_charge(f.payload) >= 0.0
        f = c.query("SELECT * FROM system.local")
        assert f.opcode == cqlwire.RESULT and payload_charge(f.payload) == 1.0
    # A client that does not name itself (cdrs-tokio) gets no payload at all.
    with cqlwire.Conn(server.host, server.port) as c:
        f = c.startup()
        assert f.opcode == cqlwire.READY and f.payload is None
        f = c.query("SELECT * FROM system.local")
        assert f.opcode == cqlwire.RESULT and f.payload is None


@pytest.mark.parametrize("mode, to_driver, to_unnamed", [
    ("named", True, False), ("all", True, True), ("none", False, False)])
def test_request_charge_setting_chooses_the_clients(server_factory, cluster_factory, mode, to_driver,
                                                    to_unnamed):
    """protocol.request_charge: "named" (default) charges clients that name themselves, "all"
    every client, "none" no client (not even one that sends a payload itself)."""
    import cqlwire

    srv = server_factory(settings={"protocol.request_charge": mode})
    s = cluster_factory(srv).connect()
    rs = s.execute("SELECT * FROM system.local")
    assert ("RequestCharge" in (rs.response_future.custom_payload or {})) == to_driver
    rs = s.execute("SELECT * FROM system.local", custom_payload={"x": b"1"})
    assert ("RequestCharge" in (rs.response_future.custom_payload or {})) == (mode != "none")

    with cqlwire.Conn(srv.host, srv.port) as c:
        f = c.startup()
        assert f.opcode == cqlwire.READY
        assert (f.payload is not None) == to_unnamed
        f = c.query("SELECT * FROM system.local")
        assert f.opcode == cqlwire.RESULT
        if to_unnamed:
            assert payload_charge(f.payload) == 1.0
        else:
            assert f.payload is None
