"""Forwarding in cluster mode (design decisions 5 and 6): node b owns no partition (the test hook
RINGGATE_TEST_PLACEMENT_OWNER=a), so every write and single-partition read a client sends to b
is forwarded to a and answered as if local. The Python driver is pinned to b
(WhiteListRoundRobinPolicy); answers are compared with a's own. Real etcd, PostgreSQL and two
ringgate processes (cluster_fixture_17c.py)."""

import signal
import struct
import time
import uuid

import pytest
from cassandra import ConsistencyLevel, Unavailable, OperationTimedOut, WriteTimeout
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT, NoHostAvailable
import clusterlib
from cassandra.protocol import OverloadedErrorMessage
from cassandra.query import BatchStatement, BatchType, SimpleStatement

from cluster_fixture_17c import TwoNodes
from rgtest import rethrowing_profile

KS = "fwd"


def pinned(node, keyspace=None, **kwargs):
    profile = ExecutionProfile(
        load_balancing_policy=clusterlib.pinned_policy(node.port),
        request_timeout=20,
    )
    # Both nodes listen on 127.0.0.1: pinned by port.
    c = Cluster(["127.0.0.1"], port=node.port,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile}, **kwargs)
    return c, c.connect(keyspace)


@pytest.fixture(scope="module")
def two():
    t = TwoNodes(owner="a")
    try:
        if not t.start_backends():
            pytest.skip("PostgreSQL or etcd binaries missing (scripts/install-cluster-deps)")
        a = t.node("a").start()
        ca, sa = pinned(a)
        sa.execute(f"CREATE KEYSPACE {KS} WITH replication = "
                   "{'class':'SimpleStrategy','replication_factor':1}")
        sa.execute(f"CREATE TABLE {KS}.kv (pk int PRIMARY KEY, v text, n int)")
        sa.execute(f"CREATE TABLE {KS}.rows (pk int, ck int, v text, PRIMARY KEY (pk, ck))")
        sa.execute(f"CREATE TABLE {KS}.cnt (pk int PRIMARY KEY, hits counter)")
        sa.execute(f"CREATE TABLE {KS}.hot (pk int PRIMARY KEY, v text) "
                   "WITH cosmosdb_provisioned_throughput = 400")
        ca.shutdown()
        # b reads the schema at startup; a restarts after it (see cluster_fixture_17c.py).
        t.node("b").start()
        a.stop()
        a.start()
        ca, sa = pinned(a)
        cb, sb = pinned(t.node("b"))
        yield t, sa, sb
        ca.shutdown()
        cb.shutdown()
    finally:
        t.close()


def rows_of(session, query, params=None):
    return [tuple(r) for r in session.execute(query, params)]


def test_unprepared_writes_and_point_reads_are_answered_by_the_owner(two):
    _, sa, sb = two
    for i in range(20):
        sb.execute(f"INSERT INTO {KS}.kv (pk, v, n) VALUES (%s, %s, %s)", (i, f"v{i}", i))
    sb.execute(f"UPDATE {KS}.kv SET v = 'changed' WHERE pk = 3")
    sb.execute(f"DELETE FROM {KS}.kv WHERE pk = 4")
    assert rows_of(sa, f"SELECT pk, v, n FROM {KS}.kv WHERE pk = 3") == [(3, "changed", 3)]
    assert rows_of(sa, f"SELECT pk FROM {KS}.kv WHERE pk = 4") == []
    for i in range(20):
        q = f"SELECT pk, v, n FROM {KS}.kv WHERE pk = {i}"
        assert rows_of(sb, q) == rows_of(sa, q)
    assert len(rows_of(sa, f"SELECT pk FROM {KS}.kv")) == 19


def test_prepared_statements_through_b(two):
    _, sa, sb = two
    ins = sb.prepare(f"INSERT INTO {KS}.rows (pk, ck, v) VALUES (?, ?, ?)")
    sel = sb.prepare(f"SELECT ck, v FROM {KS}.rows WHERE pk = ?")
    for ck in range(5):
        sb.execute(ins, (100, ck, f"r{ck}"))
    got = [tuple(r) for r in sb.execute(sel, (100,))]
    assert got == [(ck, f"r{ck}") for ck in range(5)]
    assert got == rows_of(sa, f"SELECT ck, v FROM {KS}.rows WHERE pk = 100")


def test_use_keyspace_and_protocol_v4_with_compression_through_b(two):
    t, sa, _ = two
    # Unqualified names: the statement runs in the client's keyspace on the owner too.
    c, s = pinned(t.node("b"), keyspace=KS, protocol_version=4, compression="lz4")
    try:
        s.execute("INSERT INTO kv (pk, v) VALUES (40, 'in keyspace')")
        st = s.prepare("SELECT v FROM kv WHERE pk = ?")
        assert [tuple(r) for r in s.execute(st, (40,))] == [("in keyspace",)]
        b = BatchStatement()
        b.add(SimpleStatement("INSERT INTO kv (pk, v) VALUES (41, 'batch in keyspace')"))
        s.execute(b)
    finally:
        c.shutdown()
    assert rows_of(sa, f"SELECT v FROM {KS}.kv WHERE pk = 40") == [("in keyspace",)]
    assert rows_of(sa, f"SELECT v FROM {KS}.kv WHERE pk = 41") == [("batch in keyspace",)]


def test_timestamps_of_forwarded_writes(two):
    _, sa, sb = two
    sb.execute(SimpleStatement(f"INSERT INTO {KS}.kv (pk, v) VALUES (50, 'old') USING TIMESTAMP 1000"))
    # A write with an older client timestamp loses, as on one node.
    sb.execute(f"INSERT INTO {KS}.kv (pk, v) VALUES (50, 'older') USING TIMESTAMP 999")
    assert rows_of(sa, f"SELECT v, writetime(v) FROM {KS}.kv WHERE pk = 50") == [("old", 1000)]
    # Without one, the coordinator's clock stamps it (recent, in microseconds).
    sb.execute(f"INSERT INTO {KS}.kv (pk, v) VALUES (51, 'now')")
    (wt,) = rows_of(sa, f"SELECT writetime(v) FROM {KS}.kv WHERE pk = 51")[0]
    assert abs(wt / 1e6 - time.time()) < 600


def test_lightweight_transactions_through_b(two):
    _, sa, sb = two
    r = sb.execute(f"INSERT INTO {KS}.kv (pk, v, n) VALUES (60, 'first', 1) IF NOT EXISTS").one()
    assert r[0] is True
    r = sb.execute(f"INSERT INTO {KS}.kv (pk, v, n) VALUES (60, 'second', 2) IF NOT EXISTS").one()
    assert r[0] is False and r.v == "first"
    cas = sb.prepare(f"UPDATE {KS}.kv SET n = ? WHERE pk = 60 IF n = ?")
    applied = 0
    for expected in range(1, 11):
        if sb.execute(cas, (expected + 1, expected)).one()[0]:
            applied += 1
    assert applied == 10
    assert not sb.execute(cas, (100, 1)).one()[0]
    assert rows_of(sa, f"SELECT n FROM {KS}.kv WHERE pk = 60") == [(11,)]
    serial = SimpleStatement(f"SELECT n FROM {KS}.kv WHERE pk = 60",
                             consistency_level=ConsistencyLevel.SERIAL)
    assert rows_of(sb, serial) == [(11,)]


def test_batches_and_counters_through_b(two):
    _, sa, sb = two
    ins = sb.prepare(f"INSERT INTO {KS}.rows (pk, ck, v) VALUES (?, ?, ?)")
    logged = BatchStatement()
    for ck in range(10):
        logged.add(ins, (200, ck, "logged"))
    logged.add(SimpleStatement(f"INSERT INTO {KS}.rows (pk, ck, v) VALUES (200, 99, 'text')"))
    sb.execute(logged)
    unlogged = BatchStatement(batch_type=BatchType.UNLOGGED)
    for ck in range(3):
        unlogged.add(ins, (201, ck, "unlogged"))
    sb.execute(unlogged)
    assert len(rows_of(sa, f"SELECT ck FROM {KS}.rows WHERE pk = 200")) == 11
    assert rows_of(sb, f"SELECT v FROM {KS}.rows WHERE pk = 201") == [("unlogged",)] * 3

    inc = sb.prepare(f"UPDATE {KS}.cnt SET hits = hits + ? WHERE pk = ?")
    for _ in range(7):
        sb.execute(inc, (2, 1))
    counters = BatchStatement(batch_type=BatchType.COUNTER)
    counters.add(inc, (5, 1))
    counters.add(SimpleStatement(f"UPDATE {KS}.cnt SET hits = hits + 1 WHERE pk = 1"))
    sb.execute(counters)
    assert rows_of(sa, f"SELECT hits FROM {KS}.cnt WHERE pk = 1") == [(20,)]
    assert rows_of(sb, f"SELECT hits FROM {KS}.cnt WHERE pk = 1") == [(20,)]


def test_paging_through_b_equals_the_owners_pages(two):
    _, sa, sb = two
    ins = sa.prepare(f"INSERT INTO {KS}.rows (pk, ck, v) VALUES (?, ?, ?)")
    for ck in range(95):
        sa.execute(ins, (300, ck, f"p{ck}"))
    q = f"SELECT ck, v FROM {KS}.rows WHERE pk = 300"
    sel = sb.prepare(q)
    sel.fetch_size = 10
    rs = sb.execute(sel)
    first_page = list(rs.current_rows)
    assert len(first_page) == 10 and rs.has_more_pages
    all_b = [tuple(r) for r in sb.execute(SimpleStatement(q, fetch_size=7))]
    assert all_b == [(ck, f"p{ck}") for ck in range(95)]
    assert [tuple(r) for r in sb.execute(sel)] == rows_of(sa, q)


def test_request_charge_comes_from_the_owner(two):
    _, _, sb = two
    rs = sb.execute(f"INSERT INTO {KS}.kv (pk, v) VALUES (70, 'x')")
    payload = rs.response_future.custom_payload
    assert payload and "RequestCharge" in payload
    (ru,) = struct.unpack(">d", payload["RequestCharge"])
    assert ru > 0


def test_the_owners_throttling_reaches_the_client_through_b(two):
    t, _, sb = two
    # 400 RU/s provisioned: writes through b spend the owner's bucket until it answers 429,
    # whose Cosmos DB text and RetryAfterMs reach b's client unchanged. The error is rethrown
    # as it came: the default policy moves to the next host, and pinned to b there is none,
    # and the driver's NoHostAvailable then sometimes leaves the host's error out.
    sb.cluster.add_execution_profile("rethrow", rethrowing_profile(
        load_balancing_policy=clusterlib.pinned_policy(t.node("b").port), request_timeout=20))
    ins = sb.prepare(f"INSERT INTO {KS}.hot (pk, v) VALUES (?, ?)")
    rejected = None
    for start in range(0, 20_000, 200):
        futures = [sb.execute_async(ins, (start + i, "x" * 200), execution_profile="rethrow")
                   for i in range(200)]
        for f in futures:
            try:
                f.result()
            except OverloadedErrorMessage as e:
                assert "Request rate is large" in str(e), e
                rejected = e
        if rejected:
            break
    assert rejected is not None, "the owner never throttled"
    assert "Request rate is large" in str(rejected) and "RetryAfterMs=" in str(rejected)


def test_tracing_on_b_shows_the_hop(two):
    t, _, sb = two
    a = t.node("a")
    rs = sb.execute(f"INSERT INTO {KS}.kv (pk, v) VALUES (80, 'traced')", trace=True)
    trace = rs.get_query_trace(max_wait_sec=10)
    acts = [e.description for e in trace.events]
    assert f"Forwarded to a (127.0.0.1:{a.port})" in acts, acts
    assert any(x.startswith("Answer from a after ") and x.endswith(" µs") for x in acts), acts


def test_execute_of_a_statement_the_owner_never_saw_is_prepared_there(two):
    _, sa, sb = two
    marker = uuid.uuid4().hex[:8]
    # A text no node has seen: prepared on b only, so a answers UNPREPARED first.
    st = sb.prepare(f"INSERT INTO {KS}.kv (pk, v) VALUES (?, ?) /* {marker} */")
    rs = sb.execute(st, (90, marker), trace=True)
    acts = [e.description for e in rs.get_query_trace(max_wait_sec=10).events]
    assert "Preparing the statement on a" in acts, acts
    assert rows_of(sa, f"SELECT v FROM {KS}.kv WHERE pk = 90") == [(marker,)]
    # In a batch too.
    st2 = sb.prepare(f"INSERT INTO {KS}.kv (pk, v) VALUES (?, ?) /* {marker}2 */")
    b = BatchStatement()
    b.add(st2, (91, marker))
    sb.execute(b)
    assert rows_of(sa, f"SELECT v FROM {KS}.kv WHERE pk = 91") == [(marker,)]


def test_forwarding_with_auth_logs_in_to_the_owner():
    from cassandra.auth import PlainTextAuthProvider
    t = TwoNodes(owner="a", settings=["auth.enabled=true", 'auth.users.alice="s3cret"'])
    try:
        if not t.start_backends():
            pytest.skip("PostgreSQL or etcd binaries missing (scripts/install-cluster-deps)")
        auth = PlainTextAuthProvider("alice", "s3cret")
        a = t.node("a").start()
        ca, sa = pinned(a, auth_provider=auth)
        sa.execute(f"CREATE KEYSPACE {KS} WITH replication = "
                   "{'class':'SimpleStrategy','replication_factor':1}")
        sa.execute(f"CREATE TABLE {KS}.kv (pk int PRIMARY KEY, v text)")
        ca.shutdown()
        t.node("b").start()
        a.stop()
        a.start()
        cb, sb = pinned(t.node("b"), auth_provider=auth)
        rs = sb.execute(f"INSERT INTO {KS}.kv (pk, v) VALUES (1, 'with login')", trace=True)
        acts = [e.description for e in rs.get_query_trace(max_wait_sec=10).events]
        assert any(x.startswith("Forwarded to a ") for x in acts), acts
        assert rows_of(sb, f"SELECT v FROM {KS}.kv WHERE pk = 1") == [("with login",)]
        cb.shutdown()
        ca, sa = pinned(a, auth_provider=auth)
        assert rows_of(sa, f"SELECT v FROM {KS}.kv WHERE pk = 1") == [("with login",)]
        ca.shutdown()
    finally:
        t.close()


def test_owner_paused_gives_a_timeout_not_an_answer(two):
    t, sa, sb = two
    a = t.node("a")
    a.proc.send_signal(signal.SIGSTOP)
    try:
        # Sent to the owner, which does not answer: the outcome is unknown (WriteTimeout), or
        # the owner cannot be reached / is no live member once its lease ran out (Unavailable;
        # NoHostAvailable when the driver's one retry finds no other host). On a slow machine
        # the lease may run out while b waits, and b, which then owns the partition, applies
        # it: an answer, but a true one (the value is read back below, after the owner's).
        try:
            sb.execute(f"INSERT INTO {KS}.kv (pk, v) VALUES (96, 'paused')")
        except (WriteTimeout, Unavailable, NoHostAvailable):
            pass
    finally:
        a.proc.send_signal(signal.SIGCONT)
    # Resumed past its lease, the owner joins again with a new lease; until b lists it
    # again, b answers Unavailable.
    write_when_served(sb, 96, "resumed")
    # Read through b (forwarded to a): a's own client gave a up while it slept.
    assert rows_of(sb, f"SELECT v FROM {KS}.kv WHERE pk = 96") == [("resumed",)]


def write_when_served(session, pk, v, timeout_s=30):
    """Writes until a node answers. After the owner was paused (the test before), the driver
    may still hold a connection to it opened before it lost its lease: the owner refuses what
    comes on it (Unavailable, "reconnect") and closes it, and the driver reconnects."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            session.execute(f"INSERT INTO {KS}.kv (pk, v) VALUES ({pk}, '{v}')")
            return
        except (Unavailable, NoHostAvailable):
            assert time.monotonic() < deadline, "the owner never served again"
            time.sleep(0.2)


def test_owner_killed_gives_errors_never_wrong_answers(two):
    t, sa, sb = two
    write_when_served(sb, 95, "before")
    t.node("a").kill9()
    failures = 0
    for i in range(5):
        try:
            sb.execute(f"INSERT INTO {KS}.kv (pk, v) VALUES (95, 'after{i}')")
        except (Unavailable, WriteTimeout, OperationTimedOut, NoHostAvailable):
            failures += 1
        try:
            rows = rows_of(sb, f"SELECT v FROM {KS}.kv WHERE pk = 95")
            pytest.fail(f"a read answered without its owner: {rows}")
        except (Unavailable, OperationTimedOut, NoHostAvailable):
            pass
    assert failures == 5
