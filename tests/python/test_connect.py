"""Connecting with the real Python driver: negotiation, cluster metadata, token map,
compression, and many requests in flight on one connection."""

import os
import random
import time

import pytest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.metadata import Murmur3Token

from rgtest import int_bytes


def test_startup_log_line(server):
    # The port accepts connections from the moment it is bound, a moment before the line is
    # written: wait for it (bounded).
    deadline = time.monotonic() + 10
    while "listening on" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "listening on" in server.log_text(), "the server should log a line containing 'listening on' when ready"


def test_default_driver_connects_and_negotiates(cluster, session):
    assert cluster.protocol_version in (4, 5)
    row = session.execute("SELECT key, cluster_name, release_version FROM system.local WHERE key = 'local'").one()
    assert row is not None
    assert row.key == "local"
    assert row.cluster_name
    major, minor = (int(x) for x in row.release_version.split("-")[0].split(".")[:2])
    assert (major, minor) >= (4, 0), "release_version >= 4.0 selects the driver's v4 schema parser"


def test_system_local_has_what_clients_read(session):
    row = session.execute("SELECT * FROM system.local WHERE key = 'local'").one()
    cols = row._asdict()
    for name in ("cluster_name", "partitioner", "tokens", "data_center", "rack", "host_id", "rpc_address",
                 "release_version", "schema_version", "cql_version"):
        assert cols.get(name), f"system.local.{name} must be set, got {cols.get(name)!r}"
    assert cols["partitioner"].endswith("Murmur3Partitioner")
    # every token is a valid Murmur3 token (a signed 64-bit integer, in text form)
    for t in cols["tokens"]:
        assert -(2**63) <= int(t) < 2**63


def test_single_node_has_no_peers(session):
    assert list(session.execute("SELECT * FROM system.peers")) == []
    assert len(session.cluster.metadata.all_hosts()) == 1


def test_metadata_lists_keyspaces(cluster, keyspace):
    names = set(cluster.metadata.keyspaces)
    assert {"system", "system_schema", keyspace} <= names
    # system keyspaces appear with their tables (cqlsh needs metadata to print rows)
    assert "local" in cluster.metadata.keyspaces["system"].tables
    assert {"keyspaces", "tables", "columns"} <= set(cluster.metadata.keyspaces["system_schema"].tables)


def test_token_map_is_murmur3(cluster, keyspace):
    md = cluster.metadata
    assert md.partitioner.endswith("Murmur3Partitioner")
    tm = md.token_map
    assert tm is not None, "no token map: partitioner or tokens in system.local are not usable"
    assert tm.token_class is Murmur3Token
    assert len(tm.ring) >= 1
    hosts = md.all_hosts()
    assert len(hosts) == 1
    # the one node owns every token of the new keyspace (SimpleStrategy, RF 1)
    for key in (0, 1, -5, 123456):
        replicas = tm.get_replicas(keyspace, tm.token_class.from_key(int_bytes(key)))
        assert list(replicas) == hosts


def _roundtrip_rows(session, ks, n=150):
    session.execute(f"CREATE TABLE {ks}.c (id int PRIMARY KEY, small text, big text, raw blob)")
    rng = random.Random(7)
    ins = session.prepare(f"INSERT INTO {ks}.c (id, small, big, raw) VALUES (?, ?, ?, ?)")
    rows = {}
    for i in range(n):
        # compressible text of varying size (up to ~300 KB: more than one 128 KiB v5 segment)
        # and incompressible random bytes
        big = ("ringgate-%d " % i) * rng.choice([1, 50, 2000, 25000])
        raw = os.urandom(rng.choice([0, 10, 5000, 70000]))
        rows[i] = (f"s{i}", big, raw)
    execute_concurrent_with_args(session, ins, [(i, *v) for i, v in rows.items()], concurrency=20)
    got = {r.id: (r.small, r.big, r.raw) for r in session.execute(f"SELECT id, small, big, raw FROM {ks}.c")}
    assert got.keys() == rows.keys()
    for i, v in rows.items():
        assert got[i] == v, f"row {i} differs"


# Snappy is only used by the driver with protocol v4: with v5 (checksummed segments) it
# silently disables snappy, so that case pins protocol_version=4. lz4 is tested both on the
# negotiated version (v5 segments if the server accepts v5) and on v4 frame compression.
@pytest.mark.parametrize("compression,protocol_version", [
    ("lz4", None),
    ("lz4", 4),
    ("snappy", 4),
])
def test_compression(cluster_factory, keyspace, compression, protocol_version):
    kwargs = {"compression": compression}
    if protocol_version:
        kwargs["protocol_version"] = protocol_version
    c = cluster_factory(**kwargs)
    s = c.connect()
    assert c.protocol_version in ((protocol_version,) if protocol_version else (4, 5))
    # The driver raises if the requested algorithm is missing from SUPPORTED's COMPRESSION,
    # so getting here means the server offered it; check it really was put in use.
    conn = c.control_connection._connection
    assert conn._compression_type == compression
    pool = next(iter(s._pools.values()))
    assert pool._connection._compression_type == compression
    _roundtrip_rows(s, keyspace)


def test_uncompressed_large_values(session, keyspace):
    _roundtrip_rows(session, keyspace, n=60)


def test_many_concurrent_requests_on_one_connection(session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.conc (id int PRIMARY KEY, v text)")
    ins = session.prepare(f"INSERT INTO {keyspace}.conc (id, v) VALUES (?, ?)")
    sel = session.prepare(f"SELECT id, v FROM {keyspace}.conc WHERE id = ?")
    n = 500
    # all 500 are sent before any result is awaited
    futures = [session.execute_async(ins, (i, f"value-{i}-" + "x" * (i % 37))) for i in range(n)]
    for f in futures:
        f.result()
    connections = {id(f._connection) for f in futures}
    reads = [session.execute_async(sel, (i,)) for i in range(n)]
    for i, f in enumerate(reads):
        rows = list(f.result())
        assert len(rows) == 1, f"id {i}: {rows}"
        assert rows[0].id == i and rows[0].v == f"value-{i}-" + "x" * (i % 37)
    connections |= {id(f._connection) for f in reads}
    # the driver keeps one connection per host for protocol v3+: everything was multiplexed on it
    assert len(connections) == 1
