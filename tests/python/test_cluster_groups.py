"""Storage groups (issue 17) with real processes: etcd, two PostgreSQL servers registered as two
groups ("default" by n1 and n3's settings, "group2" by n2's) and three ringgate nodes.

- A new table's 8 partitions are spread over the two groups (both empty: alternately, ties by
  name), as system_views.storage_groups shows; every row written through the Python driver
  lands in the PostgreSQL server of its partition's group and in no other (checked with psql
  on each server), and every row reads back through every node.
- kill -9 of a node that owns partitions in both groups under a write load: its partitions are
  taken over by the others on both groups, and every acknowledged write reads back through
  each surviving node.
- a LOGGED batch whose coordinator (group2) is killed between its parts is replayed from
  group2's batch log by the lowest live node, whose own group is "default".
- `ringgate admin add-group` registers a third database; the next table's partitions go to the
  group with the least data first (the empty third one gets 3 of 8), `ringgate admin groups`
  shows it.
"""

import json
import subprocess
import threading
import time
from bisect import bisect_left

import pytest
from cassandra.metadata import Murmur3Token
from cassandra.query import BatchType, SimpleStatement

import clusterlib
import pgserver
from test_cluster import (
    LEASE_MS, Writer, pinned, settled_cluster, started, table_and_keys, wait_settled,
    wait_until)
from test_cluster_spanning import batch_of, rows_everywhere, rows_everywhere_one, val

clusterlib.require_or_skip(pytest)


@pytest.fixture
def cluster():
    yield from settled_cluster(nodes=3, groups=2)


def token(k):
    return Murmur3Token.hash_fn(int(k).to_bytes(4, "big", signed=True))


def tokens_in(pg):
    """The tokens of the data rows a PostgreSQL server holds (bytes 8..16 of each key: the
    token with its sign bit flipped), by psql."""
    psql = str(pgserver.Path(pgserver.find_bin_dir()) / "psql")
    out = subprocess.run(
        [psql, "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", "-d", "ringgate",
         "-Atc", "SELECT encode(substring(k from 9 for 8), 'hex') FROM ringgate_data "
                 "WHERE length(k) >= 16"],
        capture_output=True, text=True, check=True, cwd="/")
    got = set()
    for line in out.stdout.split():
        u = int(line, 16) ^ (1 << 63)
        got.add(u - (1 << 64) if u >= 1 << 63 else u)
    return got


def admin(node, *args):
    out = subprocess.run([str(clusterlib.ringgate_binary()), "admin", "--host", node.address,
                          "--json", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def groups_view(session):
    return {r.name: (r.hosts, r.physical_partitions) for r in session.execute(
        "SELECT name, hosts, physical_partitions FROM system_views.storage_groups")}


def test_rows_land_in_their_groups_and_survive_a_kill9(cluster):
    c = cluster
    driver = c.connect()
    try:
        s = driver.connect()
        s.execute("CREATE KEYSPACE app WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE app.t (pk int PRIMARY KEY, v text)")
        assert driver.control_connection.wait_for_schema_agreement(wait_time=30)
        view = groups_view(s)
        assert view == {
            "default": (f"127.0.0.1:{c.pgs[0].port}", 4),
            "group2": (f"127.0.0.1:{c.pgs[1].port}", 4),
        }, view

        def ring_settled():
            tm = driver.metadata.token_map
            return tm is not None and len(tm.ring) == 8 and \
                len({h.endpoint.port for h in tm.token_to_host_owner.values()}) == 3
        wait_until("the driver's token map shows the owners", ring_settled, timeout_s=40)
        ring = sorted(t.value for t in driver.metadata.token_map.ring)
        owner_port = {t.value: h.endpoint.port
                      for t, h in driver.metadata.token_map.token_to_host_owner.items()}

        ins = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        keys = range(300)
        for k in keys:
            s.execute(ins, (k, f"v{k}"))
    finally:
        driver.shutdown()

    # Partition i (token order) is in group i mod 2: its rows are in that server only.
    expected = {token(k) for k in keys}
    held = [tokens_in(pg) & expected for pg in c.pgs]
    assert held[0] and held[1], "both servers hold rows"
    assert not held[0] & held[1], "a row in both servers"
    assert held[0] | held[1] == expected, "a row in neither server"
    for t in expected:
        part = bisect_left(ring, t)
        assert t in held[part % 2], f"token {t} of partition {part} not in group {part % 2}"

    for n in c.nodes:
        cl, ps = pinned(n)
        try:
            got = {r.pk: r.v for r in ps.execute(SimpleStatement("SELECT pk, v FROM app.t",
                                                                 fetch_size=70))}
            assert got == {k: f"v{k}" for k in keys}, n.name
        finally:
            cl.shutdown()

    # The victim owns partitions of both groups (the assignment is a pure function of the
    # node names and the end tokens, so this is the same node every run).
    parity = {n.name: {i % 2 for i, e in enumerate(ring) if owner_port[e] == n.port}
              for n in c.nodes}
    victim = next(n for n in c.nodes if parity[n.name] == {0, 1} and n.name != "n1")
    survivors = [n for n in c.nodes if n is not victim]
    driver = c.connect(node=survivors[0])
    try:
        s = driver.connect()
        wait_until("three nodes", lambda: len(driver.metadata.all_hosts()) == 3)
        stop = threading.Event()
        writers = [Writer(s, 1_000_000 * (i + 1), stop) for i in range(3)]
        for w in writers:
            w.start()
        time.sleep(2)
        killed_at = time.monotonic()
        victim.kill9()
        time.sleep(LEASE_MS / 1000 * 3 + 3)
        stop.set()
        for w in writers:
            w.join(30)
        acked = {k for w in writers for k, _ in w.acked}
        after = {k for w in writers for k, t in w.acked if t > killed_at}
        assert after, "no write succeeded after the kill"
        late = [{token(k) for k in after} & tokens_in(pg) for pg in c.pgs]
        assert late[0] and late[1], "writes after the kill landed in both groups"
    finally:
        driver.shutdown()

    for n in survivors:
        cl, ps = pinned(n)
        try:
            sel = ps.prepare("SELECT v FROM app.t WHERE pk = ?")
            for k in keys:
                assert ps.execute(sel, (k,)).one().v == f"v{k}", (n.name, k)
            lost = [k for k in sorted(acked) if ps.execute(sel, (k,)).one() is None]
            assert not lost, f"{n.name}: {len(lost)} acknowledged writes lost, e.g. {lost[:5]}"
        finally:
            cl.shutdown()
    print(f"\n{len(acked)} writes acknowledged ({len(after)} after the kill of {victim.name}), "
          "all read back through both survivors")

    # A third group, registered by the admin command, is empty: the next table's partitions
    # go there first (8 round 3 groups, least data first: 3 there).
    third = c.pgs[1].create_database("third")
    assert third.endswith("/third")
    res = admin(survivors[0], "add-group", "third", "--hosts", f"127.0.0.1:{c.pgs[1].port}",
                "--dbname", "third")
    assert res["result"] == "registered", res
    cl, ps = pinned(survivors[1])
    try:
        def published():
            v = {r.name: r.bytes for r in ps.execute(
                "SELECT name, bytes FROM system_views.storage_groups")}
            return v.get("default", 0) > 0 and v.get("group2", 0) > 0 and v.get("third") == 0
        wait_until("both old groups' bytes published", published)
        ps.execute("CREATE TABLE app.u (pk int PRIMARY KEY, v text)")
    finally:
        cl.shutdown()
    rows = {r["name"]: r for r in admin(survivors[0], "groups")}
    assert rows["third"]["physical_partitions"] == 3, rows
    assert rows["default"]["physical_partitions"] + rows["group2"]["physical_partitions"] == 13


def batchlog_entries(pg, node):
    """Keys of `node`'s cluster batch log entries in PostgreSQL server `pg`, by psql."""
    psql = str(pgserver.Path(pgserver.find_bin_dir()) / "psql")
    out = subprocess.run(
        [psql, "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres", "-d", "ringgate",
         "-Atc", "SELECT convert_from(k, 'UTF8') FROM ringgate_meta "
                 f"WHERE k >= 'cluster_batchlog/{node}/' AND k < 'cluster_batchlog/{node}0'"],
        capture_output=True, text=True, check=True, cwd="/")
    return out.stdout.split()


def test_logged_batch_of_a_node_killed_in_another_group_is_replayed(monkeypatch):
    """The coordinator n2 (group2) of a LOGGED batch over all three owners is killed with
    kill -9 between its parts: its batch log entry is in group2's server, and n1, the lowest
    live node, whose own group is "default", replays it from there (it used to read only its
    own group's, so the batch waited for n2 to come back)."""
    # Parts go out one at a time in owner order (n1, n2, n3), 5 s apart.
    monkeypatch.setenv("RINGGATE_TEST_FANOUT_PAUSE_MS", "5000")
    with started(clusterlib.LocalCluster(nodes=3, lease_ms=LEASE_MS, groups=2)) as c:
        wait_settled(c)
        n1, coordinator, n3 = c.nodes
        owned = table_and_keys(c, c.nodes, 2)
        keys = sorted(k for ks in owned.values() for k in ks)
        cl, s = pinned(coordinator)
        try:
            insert = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
            fut = s.execute_async(batch_of(BatchType.LOGGED, keys, "g", insert), timeout=30)
            wait_until("the first part (n1's keys)", lambda: all(
                r is not None for r in rows_everywhere_one(n1, owned[n1.name]).values()))
            coordinator.kill9()
            with pytest.raises(Exception):  # the connection died with the coordinator
                fut.result()
        finally:
            cl.shutdown()
        # The entry is in the coordinator's group only.
        assert batchlog_entries(c.pgs[1], coordinator.name), "no entry in group2"
        assert not batchlog_entries(c.pgs[0], coordinator.name)
        partial = rows_everywhere_one(n1, keys)
        assert any(v is None for v in partial.values()), partial
        began = time.monotonic()
        wait_until("the batch log replay", lambda: all(
            v is not None for v in rows_everywhere_one(n3, keys).values()), timeout_s=60)
        print(f"replayed {time.monotonic() - began:.1f} s after the kill")
        for name, got in rows_everywhere(c, keys).items():
            assert {k: v[0] for k, v in got.items()} == {k: val("g", k) for k in keys}, name
            assert len({v[1] for v in got.values()}) == 1, got
        wait_until("the replayed entry deleted",
                   lambda: not batchlog_entries(c.pgs[1], coordinator.name))
