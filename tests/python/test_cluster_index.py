"""CREATE INDEX on a table that already has rows, in a cluster (issue 17), with real processes
on 127.0.0.1 (clusterlib.py: etcd, one PostgreSQL, three ringgate nodes):

- 300 rows written through the token-aware driver (their partitions owned by all three
  nodes), then CREATE INDEX through one node: through every node, the index query of each
  value returns exactly the rows a full scan with ALLOW FILTERING returns; rows written after
  the index are found too; after DROP INDEX every node refuses the query without ALLOW
  FILTERING again.
- A node killed with kill -9 just before CREATE INDEX: its partitions have no owner until its
  lease expires; the statement waits for a survivor to take them over and build them, and the
  index is then complete through both survivors.
- The per-partition build records in etcd (`index-built/...`, read with etcdctl): present
  after CREATE INDEX, deleted after DROP INDEX.
- The same with the kill in the middle of the build (RINGGATE_TEST_INDEX_BUILD_PAUSE_MS slows
  each partition's build): the survivors rebuild what the dead node left unrecorded.
- A node whose schema follower is late (RINGGATE_TEST_FOLLOW_DELAY_MS) takes over partitions
  built by a killed node right after CREATE INDEX: the rows it then writes there are indexed
  (it adopts the cluster's schema before serving a partition it took).
"""

import os
import subprocess
import threading
import time

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import NoHostAvailable

import clusterlib
from test_cluster import (  # noqa: F401 (cluster3 is a fixture)
    LEASE_MS, cluster3, node_of, owner_host, pinned, started, wait_settled,
    wait_until, with_table)

clusterlib.require_or_skip(pytest)

VALUES = 7


def write_rows(c, keys):
    """Writes app.t rows `keys` (v = 'v<k mod 7>') through the token-aware driver; returns
    the names of the nodes owning them."""
    driver, s = with_table(c)
    try:
        wait_until("all nodes known", lambda: len(driver.metadata.all_hosts()) == len(c.running()))
        insert = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        for k in keys:
            s.execute(insert, (k, f"v{k % VALUES}"))
        return {node_of(c, owner_host(driver, "app", "t", k)).name for k in keys}
    finally:
        driver.shutdown()


def index_matches_scan(node, expected_count):
    """Through `node`: per value, the index query's keys equal the filtered scan's."""
    cl, s = pinned(node)
    try:
        total = 0
        for i in range(VALUES):
            v = f"v{i}"
            by_index = sorted(r.pk for r in s.execute("SELECT pk FROM app.t WHERE v = %s", (v,)))
            by_scan = sorted(r.pk for r in s.execute(
                "SELECT pk FROM app.t WHERE v = %s ALLOW FILTERING", (v,)))
            assert by_index == by_scan, (node.name, v)
            total += len(by_index)
        assert total == expected_count, node.name
    finally:
        cl.shutdown()


def built_records(c):
    """How many index-built records etcd holds (keys only, read with etcdctl)."""
    etcdctl = clusterlib.find_etcdctl()
    out = subprocess.run([etcdctl, "--endpoints", c.etcd.endpoint, "get", "--prefix", "",
                          "--keys-only"], check=True, capture_output=True, timeout=30).stdout
    return out.count(b"index-built/")


def create_index_through(node):
    cl, s = pinned(node)
    try:
        s.execute("CREATE INDEX t_v ON app.t (v)")
        assert cl.control_connection.wait_for_schema_agreement(wait_time=30)
    finally:
        cl.shutdown()


def test_index_on_existing_rows_is_complete_through_every_node(cluster3):
    c = cluster3
    owners = write_rows(c, range(300))
    assert owners == {"n1", "n2", "n3"}, owners
    create_index_through(c.node("n2"))
    assert built_records(c) >= 3
    for n in c.nodes:
        index_matches_scan(n, 300)

    write_rows(c, range(300, 360))
    for n in c.nodes:
        index_matches_scan(n, 360)

    cl, s = pinned(c.node("n3"))
    try:
        s.execute("DROP INDEX app.t_v")
        assert cl.control_connection.wait_for_schema_agreement(wait_time=30)
    finally:
        cl.shutdown()
    for n in c.nodes:
        cl, s = pinned(n)
        try:
            with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
                s.execute("SELECT pk FROM app.t WHERE v = 'v1'")
        finally:
            cl.shutdown()
    wait_until("the build records deleted", lambda: built_records(c) == 0)


def test_index_built_by_survivors_after_kill9(cluster3):
    c = cluster3
    owners = write_rows(c, range(300))
    assert "n3" in owners, owners
    c.node("n3").kill9()
    create_index_through(c.node("n1"))
    for n in c.running():
        index_matches_scan(n, 300)


def test_index_build_survives_kill9_of_a_builder(monkeypatch):
    monkeypatch.setenv("RINGGATE_TEST_INDEX_BUILD_PAUSE_MS", "400")
    with started(clusterlib.LocalCluster(nodes=3, lease_ms=LEASE_MS)) as c:
        wait_settled(c)
        owners = write_rows(c, range(300))
        assert "n3" in owners, owners
        failed = []

        def create():
            began = time.monotonic()
            try:
                create_index_through(c.node("n1"))
                # Past the lease: the survivors took n3's partitions over, then built them.
                print(f"CREATE INDEX with a builder killed answered in "
                      f"{time.monotonic() - began:.1f} s (lease {LEASE_MS} ms)")
            except Exception as e:  # noqa: BLE001 (reported by the assertion below)
                failed.append(e)

        t = threading.Thread(target=create)
        t.start()
        time.sleep(0.6)  # n3 is between the commits of its partitions' builds
        c.node("n3").kill9()
        t.join(timeout=60)
        assert not t.is_alive()
        assert not failed, failed
        for n in c.running():
            index_matches_scan(n, 300)


def tokens_of(node):
    """The end tokens of the partitions `node` owns (its system.local)."""
    cl, s = pinned(node)
    try:
        return set(s.execute("SELECT tokens FROM system.local").one().tokens or [])
    finally:
        cl.shutdown()


def versions_by_port(node):
    """{CQL port: published schema version} of every live node, as `node` shows them."""
    cl, s = pinned(node)
    try:
        out = {node.port: s.execute("SELECT schema_version FROM system.local").one()
               .schema_version}
        for p in s.execute("SELECT native_port, schema_version FROM system.peers_v2"):
            out[p.native_port] = p.schema_version
        return out
    finally:
        cl.shutdown()


def insert_retrying(session, k, timeout_s=10.0):
    """Inserts row `k`; Unavailable (n1 forwarded to the dead n2 before it saw the new
    owner) is tried again."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return session.execute("INSERT INTO app.t (pk, v) VALUES (%s, %s)",
                                   (k, f"v{k % VALUES}"))
        except NoHostAvailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_partition_taken_over_before_the_follower_saw_the_index(monkeypatch):
    """n3's schema follower adopts changes 6 s late (RINGGATE_TEST_FOLLOW_DELAY_MS). CREATE
    INDEX through n1: n1 and n2 build their partitions; n2 is killed with kill -9 and n3
    takes some of its (built) partitions over while its follower has not adopted the index
    yet. Rows written then through n1 (forwarded to n3 for those partitions) must get their
    index entries: n3 adopts the cluster's schema before it serves a partition it took.
    Before that, they were stored without entries, and no build covered them later (the
    partitions had their build records)."""
    with started(clusterlib.LocalCluster(nodes=2, lease_ms=LEASE_MS)) as c:
        write_rows(c, range(300))
        monkeypatch.setenv("RINGGATE_TEST_FOLLOW_DELAY_MS", "6000")
        n3 = c.add_node()
        monkeypatch.delenv("RINGGATE_TEST_FOLLOW_DELAY_MS")
        wait_settled(c)
        n1, n2 = c.node("n1"), c.node("n2")
        # n3's share handed to it: 8 partitions, 2 or 3 per node.
        wait_until("the balanced layout", lambda: all(
            len(tokens_of(n)) in (2, 3) for n in c.nodes))
        of_n2 = tokens_of(n2)
        cl, s = pinned(n1)
        try:
            fut = s.execute_async("CREATE INDEX t_v ON app.t (v)", timeout=30)
            wait_until("n2's partitions built", lambda: n2.log_text().count(
                "built the index entries of an owned partition") >= len(of_n2), timeout_s=5)
            n2.kill9()
            wait_until("n3 took some of n2's partitions",
                       lambda: tokens_of(n3) & of_n2, timeout_s=10)
            for k in range(300, 400):
                insert_retrying(s, k)
            # The window was real: n3's follower had not adopted the index yet.
            versions = versions_by_port(n1)
            assert versions[n3.port] != versions[n1.port], versions
            fut.result()
        finally:
            cl.shutdown()
        for n in (n1, n3):
            index_matches_scan(n, 400)


def has_row(node, query):
    cl, s = pinned(node)
    try:
        return s.execute(query).one() is not None
    finally:
        cl.shutdown()


def test_schema_following_goes_on_during_an_index_build(monkeypatch):
    """Each partition's index build pauses 1.5 s before its commit
    (RINGGATE_TEST_INDEX_BUILD_PAUSE_MS). While n2 builds its partitions for a CREATE INDEX
    run through n1, a table created through n3 is seen by n2 before n2's builds are done:
    builds run on their own worker, not on the schema follower's thread (n2 used to adopt
    nothing more until they were done). The index is then complete through every node."""
    monkeypatch.setenv("RINGGATE_TEST_INDEX_BUILD_PAUSE_MS", "1500")
    with started(clusterlib.LocalCluster(nodes=3, lease_ms=LEASE_MS)) as c:
        wait_settled(c)
        write_rows(c, range(300))
        n1, n2, n3 = c.nodes
        wait_until("the balanced layout", lambda: all(
            len(tokens_of(n)) in (2, 3) for n in c.nodes))
        n2_parts = len(tokens_of(n2))
        built = lambda: n2.log_text().count("built the index entries of an owned partition")
        cl1, s1 = pinned(n1)
        cl3, s3 = pinned(n3)
        try:
            index = s1.execute_async("CREATE INDEX t_v ON app.t (v)", timeout=30)
            wait_until("n2 adopted the index", lambda: has_row(
                n2, "SELECT index_name FROM system_schema.indexes WHERE keyspace_name = 'app' "
                    "AND table_name = 't' AND index_name = 't_v'"), timeout_s=5)
            table = s3.execute_async("CREATE TABLE app.u (pk int PRIMARY KEY)", timeout=30)
            wait_until("n2 adopted app.u", lambda: has_row(
                n2, "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'app' "
                    "AND table_name = 'u'"), timeout_s=20)
            done = built()
            assert done < n2_parts, (done, n2_parts)
            table.result()
            index.result()
        finally:
            cl1.shutdown()
            cl3.shutdown()
        for n in c.nodes:
            index_matches_scan(n, 300)
