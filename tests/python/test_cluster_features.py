"""What a single node does works the same in a 3-node cluster (issue 17), with real processes
(clusterlib.py) and the Python driver with its default settings:

- hierarchical partition keys: tenants placed in physical partitions of different owners
  (writes through the token-aware driver reach them) read back whole by prefix through every
  node, routed to only the partition that holds the tenant's range (the trace's routing line);
- request units: every write and read answers with its RequestCharge, whichever node the
  driver sent it to, and the charge of the same read is the same through every node.
"""

import struct

import pytest
from cassandra.concurrent import execute_concurrent_with_args

import clusterlib
from test_cluster import cluster3, pinned  # noqa: F401  (the fixture)
from test_hierarchical import multihash_token, partition_ids, trace_routing

clusterlib.require_or_skip(pytest)

COLS = "tenant, usr, sess, ts, body"


def charge(rs):
    payload = rs.response_future.custom_payload or {}
    assert "RequestCharge" in payload, payload
    return struct.unpack(">d", payload["RequestCharge"])[0]


def owners_of_partitions(session, keyspace, table):
    """partition id -> (token_start, token_end) of a table, as system_views shows them."""
    return {p.partition_id: (p.token_start, p.token_end) for p in session.execute(
        "SELECT partition_id, token_start, token_end FROM system_views.physical_partitions "
        "WHERE keyspace_name = %s AND table_name = %s", (keyspace, table))}


def test_hierarchical_keys_across_owners(cluster3):
    c = cluster3
    driver = c.connect()
    try:
        s = driver.connect()
        s.execute("CREATE KEYSPACE mh WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE mh.events (tenant text, usr text, sess text, ts int, body text, "
                  "PRIMARY KEY ((tenant, usr, sess), ts)) WITH partition_key_kind = 'MultiHash'")
        assert driver.control_connection.wait_for_schema_agreement(wait_time=30)
        parts = owners_of_partitions(s, "mh", "events")
        assert len(parts) == 8
        rows = []
        for t in range(40):
            for u in range(3 if t else 200):
                rows.append((f"t{t}", f"u{u}", "s0", u % 5, f"body {t} {u}"))
        ins = s.prepare(f"INSERT INTO mh.events ({COLS}) VALUES (?, ?, ?, ?, ?)")
        for ok, res in execute_concurrent_with_args(s, ins, rows, concurrency=32,
                                                    raise_on_first_error=False):
            assert ok, res

        def holding(tenant):
            tokens = {multihash_token(list(r[:3])) for r in rows if r[0] == tenant}
            return {pid for pid, (lo, hi) in parts.items() for t in tokens if lo < t <= hi}
        assert len({min(holding(f"t{t}")) for t in range(40)}) >= 4  # tenants spread out
        for node in c.nodes:
            cl, ps = pinned(node)
            try:
                for tenant in ("t0", "t7", "t39"):
                    rs = ps.execute(f"SELECT {COLS} FROM mh.events WHERE tenant = %s",
                                    (tenant,), trace=True)
                    got = sorted(tuple(r) for r in rs)
                    assert got == sorted(r for r in rows if r[0] == tenant), (node.name, tenant)
                    route = trace_routing(rs)
                    assert route.startswith("Routing: targeted"), route
                    assert set(partition_ids(route)) == holding(tenant), route
                got = ps.execute("SELECT body FROM mh.events WHERE tenant = 't0' AND usr = 'u5' "
                                 "AND sess = 's0'").one()
                assert got.body == "body 0 5"
                n = ps.execute("SELECT count(*) FROM mh.events WHERE tenant = 't0'").one()[0]
                assert n == 200
            finally:
                cl.shutdown()
    finally:
        driver.shutdown()


def test_request_charges_through_every_node(cluster3):
    c = cluster3
    driver = c.connect()
    try:
        s = driver.connect()
        s.execute("CREATE KEYSPACE ru WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE ru.t (pk int PRIMARY KEY, v text)")
        assert driver.control_connection.wait_for_schema_agreement(wait_time=30)
        ins = s.prepare("INSERT INTO ru.t (pk, v) VALUES (?, ?)")
        for k in range(20):
            assert charge(s.execute(ins, (k, "x" * 500))) > 0
    finally:
        driver.shutdown()
    read_charges = {}
    for node in c.nodes:
        cl, ps = pinned(node)  # most of these reads are forwarded to the owner
        try:
            sel = ps.prepare("SELECT v FROM ru.t WHERE pk = ?")
            for k in range(20):
                rs = ps.execute(sel, (k,))
                assert rs.one().v == "x" * 500
                read_charges.setdefault(k, set()).add(charge(rs))
            assert charge(ps.execute(ps.prepare("INSERT INTO ru.t (pk, v) VALUES (?, ?)"),
                                     (100, "y"))) > 0
        finally:
            cl.shutdown()
    # The same point read costs the same wherever it arrived (the owner charges it).
    assert all(len(v) == 1 for v in read_charges.values()), read_charges
