"""Cluster mode, schema (issue 17, decision 7): the schema lives in etcd, so DDL on any node is
seen by every node, each node pushes SCHEMA_CHANGE events to its own registered clients, two
nodes creating one table at once end with one table and one AlreadyExists, and drivers reach
schema agreement. Real processes: etcd, PostgreSQL and three ringgate nodes (clusterlib.py);
skipped loudly without the binaries unless RINGGATE_REQUIRE_POSTGRES/ETCD is set."""
import threading

import time

import pytest
from cassandra import Unavailable, AlreadyExists, InvalidRequest

import clusterlib
from rgtest import wait_until

clusterlib.require_or_skip(pytest)


@pytest.fixture(scope="module")
def cl():
    # Small physical partitions, so a split by size (no schema change) is quick to cause.
    c = clusterlib.LocalCluster(nodes=3, settings={"partitions.physical_split_bytes": "256KiB",
                                                   "cluster.initial_partitions": "1"})
    c.start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def drivers(cl):
    """One driver whose control connection is on n1, one on n3 (default settings but one
    executor thread for b). Why one: the Python driver orders a burst of SCHEMA_CHANGE events
    by due time, but hands the refreshes due in one scheduler tick to its executor's threads
    (2 by default), so a keyspace's refresh (which replaces the keyspace's metadata) and its
    type's or table's can finish in either order and the driver forgets the type or table
    until the next event. That is the driver's race, with Apache Cassandra too (seen here
    about once in 25 bursts on a loaded machine); the tests are about what the nodes push."""
    a = cl.connect(cl.node("n1"))
    b = cl.connect(cl.node("n3"), executor_threads=1)
    sa, sb = a.connect(), b.connect()
    # A node that joined just before may reach a driver as a NEW_NODE event, not at connect.
    for c in (a, b):
        wait_until(lambda: len([h for h in c.metadata.all_hosts() if h.is_up]) == 3,
                   timeout=30, message="the drivers to know all three nodes")
    yield (a, sa), (b, sb)
    a.shutdown()
    b.shutdown()


def host_of(cluster, node):
    return next(h for h in cluster.metadata.all_hosts() if h.endpoint.port == node.port)


def on(session, cluster, node, cql, *args):
    """Runs `cql` on `node` (not wherever the load balancer would send it)."""
    return session.execute(cql, *args, host=host_of(cluster, node))


_names = iter(range(10**6))


def fresh(prefix):
    return f"{prefix}{next(_names)}"


def create_ks(s, c, node, ks):
    on(s, c, node, f"CREATE KEYSPACE {ks} WITH replication = "
                   "{'class': 'SimpleStrategy', 'replication_factor': 1}")


def test_control_connections_are_where_the_tests_assume(cl, drivers):
    (a, _), (b, _) = drivers
    assert a.control_connection._connection.endpoint.port == cl.node("n1").port
    assert b.control_connection._connection.endpoint.port == cl.node("n3").port


def test_ddl_on_one_node_is_seen_and_announced_on_the_others(cl, drivers):
    (a, sa), (b, sb) = drivers
    ks = fresh("ks")
    create_ks(sa, a, cl.node("n1"), ks)
    on(sa, a, cl.node("n1"), f"CREATE TABLE {ks}.t (pk int PRIMARY KEY, v text)")
    # b's metadata learns of it only through the SCHEMA_CHANGE events n3 pushes.
    wait_until(lambda: ks in b.metadata.keyspaces and "t" in b.metadata.keyspaces[ks].tables,
               timeout=20, message="n3's client to see the new table")
    cols = b.metadata.keyspaces[ks].tables["t"].columns
    assert list(cols) == ["pk", "v"]
    # Every node knows the table: it prepares there. Rows are written and read through n3
    # only: until ownership (17b) each node opens partitions with a shared node epoch, so the
    # last node started fences the others' handles.
    for n in ("n1", "n2"):
        prepare_on(sa, a, cl.node(n), f"SELECT pk, v FROM {ks}.t WHERE pk = ?")
    for i in range(20):
        on(sa, a, cl.node("n3"), f"INSERT INTO {ks}.t (pk, v) VALUES (%s, %s)", (i, str(i)))
    rows = on(sa, a, cl.node("n3"), f"SELECT pk, v FROM {ks}.t")
    assert sorted((r.pk, r.v) for r in rows) == [(i, str(i)) for i in range(20)]


def prepare_on(session, cluster, node, cql):
    """PREPAREs `cql` on `node` alone (the driver prepares on one host, then on the others
    in the background; a failure there would be only logged)."""
    host = host_of(cluster, node)
    conn = cluster.connection_factory(host.endpoint)
    try:
        from cassandra.protocol import PrepareMessage
        return conn.wait_for_response(PrepareMessage(query=cql), timeout=10)
    finally:
        conn.close()


def test_alter_and_drop_are_seen_everywhere(cl, drivers):
    (a, sa), (b, sb) = drivers
    ks = fresh("ks")
    create_ks(sa, a, cl.node("n2"), ks)
    on(sa, a, cl.node("n2"), f"CREATE TYPE {ks}.addr (street text, nr int)")
    on(sa, a, cl.node("n2"), f"CREATE TABLE {ks}.t (pk int PRIMARY KEY, v text)")
    on(sa, a, cl.node("n1"), f"ALTER TABLE {ks}.t ADD home frozen<addr>")
    wait_until(lambda: ks in b.metadata.keyspaces
               and "addr" in b.metadata.keyspaces[ks].user_types
               and "t" in b.metadata.keyspaces[ks].tables
               and "home" in b.metadata.keyspaces[ks].tables["t"].columns,
               timeout=20, message="n3's client to see the type and the new column")
    on(sa, a, cl.node("n3"), f"INSERT INTO {ks}.t (pk, home) VALUES (1, {{street: 'x', nr: 2}})")
    row = on(sa, a, cl.node("n3"), f"SELECT home FROM {ks}.t WHERE pk = 1").one()
    assert (row.home.street, row.home.nr) == ("x", 2)
    prepare_on(sa, a, cl.node("n2"), f"SELECT home FROM {ks}.t WHERE pk = ?")
    on(sa, a, cl.node("n1"), f"DROP TABLE {ks}.t")
    wait_until(lambda: "t" not in b.metadata.keyspaces[ks].tables, timeout=20,
               message="n3's client to see the table dropped")
    for n in ("n2", "n3"):
        with pytest.raises(InvalidRequest, match="unconfigured table|does not exist"):
            prepare_on(sa, a, cl.node(n), f"SELECT * FROM {ks}.t")
    on(sa, a, cl.node("n3"), f"DROP KEYSPACE {ks}")
    wait_until(lambda: ks not in a.metadata.keyspaces, timeout=20,
               message="n1's client to see the keyspace dropped")


def test_concurrent_create_table_gives_one_table_and_one_already_exists(cl, drivers):
    (a, sa), _ = drivers
    ks = fresh("ks")
    create_ks(sa, a, cl.node("n1"), ks)
    nodes = [cl.node("n1"), cl.node("n2")]
    for round_ in range(12):
        table = f"t{round_}"
        barrier = threading.Barrier(2)
        outcome = [None, None]

        def create(i):
            barrier.wait()
            try:
                on(sa, a, nodes[i], f"CREATE TABLE {ks}.{table} (pk int PRIMARY KEY, v{i} int)")
                outcome[i] = "created"
            except AlreadyExists:
                outcome[i] = "exists"

        threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
        [t.start() for t in threads]
        [t.join(60) for t in threads]
        assert sorted(outcome) == ["created", "exists"], f"round {round_}: {outcome}"
        winner = outcome.index("created")
        # The one table is the winner's, on every node.
        for n in cl.nodes:
            rows = on(sa, a, n, "SELECT column_name FROM system_schema.columns "
                                "WHERE keyspace_name = %s AND table_name = %s", (ks, table))
            assert sorted(r.column_name for r in rows) == sorted(["pk", f"v{winner}"])
    # IF NOT EXISTS from both at once: no error on either side, one table.
    barrier = threading.Barrier(2)
    errors = []

    def create_if_not_exists(i):
        barrier.wait()
        try:
            on(sa, a, nodes[i], f"CREATE TABLE IF NOT EXISTS {ks}.u (pk int PRIMARY KEY)")
        except Exception as e:  # noqa: BLE001 - any error fails the test below
            errors.append(e)

    threads = [threading.Thread(target=create_if_not_exists, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert errors == []
    rows = on(sa, a, cl.node("n3"), "SELECT table_name FROM system_schema.tables "
                                    "WHERE keyspace_name = %s", (ks,))
    assert sorted(r.table_name for r in rows) == sorted([f"t{i}" for i in range(12)] + ["u"])


def test_schema_agreement_and_one_version_everywhere(cl, drivers):
    (a, sa), (b, sb) = drivers
    ks = fresh("ks")
    create_ks(sb, b, cl.node("n3"), ks)
    on(sb, b, cl.node("n3"), f"CREATE TABLE {ks}.t (pk int PRIMARY KEY)")
    assert b.control_connection.wait_for_schema_agreement(wait_time=20)
    assert a.control_connection.wait_for_schema_agreement(wait_time=20)
    versions = {on(sa, a, n, "SELECT schema_version FROM system.local").one().schema_version
                for n in cl.nodes}
    assert len(versions) == 1
    # Each node's peers show the others at that same version.
    for n in cl.nodes:
        peers = list(on(sa, a, n, "SELECT peer_port, schema_version FROM system.peers_v2"))
        assert sorted(p.peer_port for p in peers) == sorted(m.port for m in cl.nodes if m is not n)
        assert {p.schema_version for p in peers} == versions


def test_split_on_one_node_is_followed_by_the_others(cl, drivers):
    """Data written through n3 splits a physical partition by size on its owner, with no
    schema change; the others load the new map (the split rewrites a key they follow), with
    the same ids and ranges."""
    (a, sa), _ = drivers
    ks = fresh("ks")
    create_ks(sa, a, cl.node("n3"), ks)
    on(sa, a, cl.node("n3"), f"CREATE TABLE {ks}.t (pk int PRIMARY KEY, v text)")

    def parts(node):
        rows = on(sa, a, node, "SELECT partition_id, token_start, token_end FROM "
                               "system_views.physical_partitions WHERE keyspace_name = %s "
                               "AND table_name = 't'", (ks,))
        return sorted((r.partition_id, r.token_start, r.token_end) for r in rows)

    before = parts(cl.node("n1"))
    assert len(before) >= 1  # cluster.initial_partitions
    version = on(sa, a, cl.node("n1"), "SELECT schema_version FROM system.local").one()
    host = host_of(a, cl.node("n3"))
    insert = sa.prepare(f"INSERT INTO {ks}.t (pk, v) VALUES (?, ?)")
    for i in range(200):
        # A split's children have no owner for a moment (Unavailable after lease + 1 s when
        # taking them takes longer: a gap noted for issue 17); the writer retries.
        for attempt in range(30):
            try:
                sa.execute(insert, (i, "x" * 4000), host=host)
                break
            except Unavailable:
                assert attempt < 29, "the split's children were never taken"
                time.sleep(1)
    # The owner of the written partitions splits (forwarded writes), whichever node it is.
    wait_until(lambda: any(len(parts(cl.node(n))) > len(before) for n in ("n1", "n2", "n3")),
               timeout=30, message="a split")

    def agreed():
        maps = [parts(cl.node(n)) for n in ("n1", "n2", "n3")]
        return maps[0] == maps[1] == maps[2] and len(maps[0]) > len(before)
    wait_until(agreed, timeout=30, message="every node to follow the split")
    # It came without a schema change.
    assert on(sa, a, cl.node("n1"), "SELECT schema_version FROM system.local").one() == version
