"""Writes whose partitions are owned by different nodes (issue 17), with real processes on
127.0.0.1 (clusterlib.py: etcd, one PostgreSQL, three ringgate nodes), every request pinned to
one node so that it coordinates:

- a LOGGED and an UNLOGGED batch over keys owned by all three nodes: every row reads back
  through every node with the batch's one write timestamp; the RequestCharge is the sum of the
  parts' (each part's charge equals the charge of the same writes sent alone to the owner).
- `UPDATE ... WHERE pk IN (...)` and `DELETE ... WHERE pk IN (...)` over several owners, and
  counter increments with `IN` (applied exactly once per key).
- a LOGGED batch of prepared statements whose coordinator is killed with kill -9 between its
  parts
  (RINGGATE_TEST_FANOUT_PAUSE_MS): once another node replayed its batch log entry, every row
  of the batch is there, with the batch's timestamp (all-or-nothing); the same for a LOGGED
  batch over two partitions of one node killed between their commits.
- `BEGIN BATCH` text, logged and unlogged, over several owners.
- `garbage-collect` (the tombstone sweep) on each node sweeps that node's partitions.
"""

import json
import struct
import time

import pytest
from cassandra.cluster import NoHostAvailable
from cassandra.metadata import Murmur3Token
from cassandra.query import BatchStatement, BatchType, SimpleStatement

import clusterlib
from test_cluster import (  # noqa: F401 (cluster3 is a fixture)
    cluster3, pinned, table_and_keys, wait_settled, wait_until)

clusterlib.require_or_skip(pytest)

LEASE_MS = 2000


def start_cluster():
    c = clusterlib.LocalCluster(nodes=3, lease_ms=LEASE_MS).start()
    try:
        wait_settled(c)
    except BaseException:
        c.print_logs()
        c.stop()
        raise
    return c


def charge(rs):
    return struct.unpack(">d", rs.response_future.custom_payload["RequestCharge"])[0]


def spread_keys(c, per_node=2):
    """`per_node` keys of app.t owned by each node (by a token-aware driver's map)."""
    return table_and_keys(c, c.nodes, per_node)


def rows_everywhere(c, keys):
    """{node: {pk: (v, writetime)}} of `keys`, read through each running node."""
    out = {}
    for n in c.running():
        cl, s = pinned(n)
        try:
            got = {}
            for k in keys:
                row = s.execute("SELECT v, writetime(v) AS wt FROM app.t WHERE pk = %s",
                                (k,)).one()
                got[k] = None if row is None else (row.v, row.wt)
            out[n.name] = got
        finally:
            cl.shutdown()
    return out


def rows_on(node, query):
    """The rows of `query`, read through `node` alone."""
    cl, s = pinned(node)
    try:
        return list(s.execute(query))
    finally:
        cl.shutdown()


def val(prefix, k):
    """A value whose size does not depend on the key (charges depend on sizes)."""
    return f"{prefix}-{k:04d}"


def batch_of(kind, keys, value, prepared=None):
    """A batch inserting `keys`, through prepared statement `prepared` when given."""
    b = BatchStatement(batch_type=kind)
    stmt = prepared or SimpleStatement("INSERT INTO app.t (pk, v) VALUES (%s, %s)")
    for k in keys:
        b.add(stmt, (k, val(value, k)))
    return b


@pytest.mark.parametrize("kind", [BatchType.LOGGED, BatchType.UNLOGGED])
def test_batch_over_three_owners_reads_back_everywhere_with_one_timestamp(cluster3, kind):
    c = cluster3
    owned = spread_keys(c, per_node=4)
    # Two keys per owner for the batch, two more per owner for the charge of its parts.
    spare = {name: ks[2:] for name, ks in owned.items()}
    keys = sorted(k for ks in owned.values() for k in ks[:2])
    cl, s = pinned(c.nodes[0])
    try:
        rs = s.execute(batch_of(kind, keys, "b"))
        total = charge(rs)
    finally:
        cl.shutdown()
    seen = rows_everywhere(c, keys)
    first = seen[c.nodes[0].name]
    assert all(first[k] is not None and first[k][0] == val("b", k) for k in keys), first
    assert len({wt for (_, wt) in first.values()}) == 1, first
    for name, got in seen.items():
        assert got == first, name

    # The charge is the sum of the parts: as many new rows of the same size per owner, each
    # owner's sent to it alone (within 0.1%: stored rows of other keys and timestamps differ by
    # a byte or so; a part missing from the sum would be a third of it).
    parts = 0.0
    for n in c.nodes:
        cl, s = pinned(n)
        try:
            parts += charge(s.execute(batch_of(kind, spare[n.name], "b")))
        finally:
            cl.shutdown()
    assert total > 0
    assert total == pytest.approx(parts, rel=1e-3), (total, parts)


def test_update_and_delete_with_in_over_several_owners(cluster3):
    c = cluster3
    owned = spread_keys(c)
    keys = sorted(k for ks in owned.values() for k in ks)
    cl, s = pinned(c.nodes[1])
    try:
        marks = ", ".join(["%s"] * len(keys))
        s.execute(f"UPDATE app.t USING TIMESTAMP 1000 SET v = 'in' WHERE pk IN ({marks})", keys)
        seen = rows_everywhere(c, keys)
        for name, got in seen.items():
            assert got == {k: ("in", 1000) for k in keys}, name
        gone = keys[: len(keys) // 2 + 1]
        marks = ", ".join(["%s"] * len(gone))
        s.execute(f"DELETE FROM app.t WHERE pk IN ({marks})", gone)
    finally:
        cl.shutdown()
    for name, got in rows_everywhere(c, keys).items():
        assert got == {k: (None if k in gone else ("in", 1000)) for k in keys}, name
    # Counters are not idempotent: each owner applies its partitions' increments once.
    cl, s = pinned(c.nodes[2])
    try:
        s.execute("CREATE TABLE app.c (pk int PRIMARY KEY, n counter)")
        marks = ", ".join(["%s"] * len(keys))
        for _ in range(3):
            s.execute(f"UPDATE app.c SET n = n + 2 WHERE pk IN ({marks})", keys)
        for n in c.nodes:
            got = {r.pk: r.n for r in rows_on(n, "SELECT pk, n FROM app.c")}
            assert got == {k: 6 for k in keys}, (n.name, got)
    finally:
        cl.shutdown()


def test_logged_batch_is_all_or_nothing_when_its_coordinator_is_killed(monkeypatch):
    # The coordinator sends its parts one at a time, 5 s apart: killed after the first.
    monkeypatch.setenv("RINGGATE_TEST_FANOUT_PAUSE_MS", "5000")
    c = start_cluster()
    try:
        owned = spread_keys(c)
        coordinator = c.nodes[0]
        keys = sorted(k for ks in owned.values() for k in ks)
        cl, s = pinned(coordinator)
        try:
            # Prepared: the batch log holds their text, so the replaying node can run them.
            insert = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
            fut = s.execute_async(batch_of(BatchType.LOGGED, keys, "k", insert), timeout=30)
            # Its first part (owner n1 < n2 < n3: the coordinator's own keys) lands at once.
            first = owned[coordinator.name]
            wait_until("the first part", lambda: all(
                r is not None for r in rows_everywhere_one(c.nodes[1], first).values()))
            coordinator.kill9()
            with pytest.raises(Exception):  # the connection died with the coordinator
                fut.result()
        finally:
            cl.shutdown()
        # Not every part was sent before the kill.
        partial = rows_everywhere_one(c.nodes[1], keys)
        assert any(v is None for v in partial.values()), partial
        began = time.monotonic()
        wait_until("the batch log replay", lambda: all(
            v is not None for v in rows_everywhere_one(c.nodes[1], keys).values()),
            timeout_s=60)
        print(f"replayed {time.monotonic() - began:.1f} s after the kill")
        seen = rows_everywhere(c, keys)
        for name, got in seen.items():
            assert {k: v[0] for k, v in got.items()} == {k: val("k", k) for k in keys}, name
            assert len({v[1] for v in got.values()}) == 1, got
    except BaseException:
        c.print_logs()
        raise
    finally:
        c.stop()


def rows_everywhere_one(node, keys, timeout_s=20.0):
    """{pk: (v, writetime) or None} through `node`; a read answered Unavailable (its owner was
    just killed and is not replaced yet) is tried again."""
    cl, s = pinned(node)
    deadline = time.monotonic() + timeout_s
    try:
        out = {}
        for k in keys:
            while True:
                try:
                    row = s.execute("SELECT v, writetime(v) AS wt FROM app.t WHERE pk = %s",
                                    (k,)).one()
                    break
                except NoHostAvailable:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            out[k] = None if row is None else (row.v, row.wt)
        return out
    finally:
        cl.shutdown()


def test_text_batches_over_owners(cluster3):
    """`BEGIN BATCH` as CQL text (cqlsh's way), logged and unlogged, through one node."""
    c = cluster3
    owned = spread_keys(c)
    keys = sorted(k for ks in owned.values() for k in ks)
    cl, s = pinned(c.nodes[2])
    try:
        for kind, value in (("", "t"), ("UNLOGGED ", "u")):
            inserts = " ".join(f"INSERT INTO app.t (pk, v) VALUES ({k}, '{val(value, k)}');"
                               for k in keys)
            s.execute(f"BEGIN {kind}BATCH {inserts} APPLY BATCH")
            for name, got in rows_everywhere(c, keys).items():
                assert {k: v[0] for k, v in got.items()} == {k: val(value, k) for k in keys}
                assert len({v[1] for v in got.values()}) == 1, (name, got)
    finally:
        cl.shutdown()


def two_partitions_of(c, node):
    """Two keys of app.t in different physical partitions that `node` owns (a partition's
    range ends at one of the node's tokens in system.local)."""
    cl, s = pinned(node)
    try:
        ends = sorted(s.execute("SELECT tokens FROM system.local").one().tokens)
        all_ends = set(ends)
        for p in s.execute("SELECT tokens FROM system.peers_v2"):
            all_ends |= set(p.tokens or [])
        ring = sorted(int(t) for t in all_ends)
        mine = {int(t) for t in ends}
        by_part = {}
        for k in range(500):
            tok = Murmur3Token.from_key(int(k).to_bytes(4, "big", signed=True)).value
            end = next((e for e in ring if e >= tok), ring[0])
            if end in mine:
                by_part.setdefault(end, k)
            if len(by_part) == 2:
                return list(by_part.values())
        raise AssertionError(f"{node.name} owns fewer than two partitions: {ends}")
    finally:
        cl.shutdown()


def test_logged_batch_over_partitions_of_one_owner_killed_mid_commit(monkeypatch):
    # Each partition's commit waits 5 s: the owner (and coordinator) is killed after the first.
    monkeypatch.setenv("RINGGATE_TEST_BATCHLOG_PAUSE_MS", "5000")
    c = start_cluster()
    try:
        spread_keys(c)  # the table
        owner = c.nodes[0]
        keys = two_partitions_of(c, owner)
        cl, s = pinned(owner)
        try:
            fut = s.execute_async(batch_of(BatchType.LOGGED, keys, "o"), timeout=30)
            wait_until("the first partition's commit", lambda: rows_everywhere_one(
                c.nodes[1], keys[:1])[keys[0]] is not None)
            owner.kill9()
            with pytest.raises(Exception):  # the connection died with the coordinator
                fut.result()
        finally:
            cl.shutdown()
        partial = rows_everywhere_one(c.nodes[1], keys)
        assert partial[keys[1]] is None, partial
        wait_until("the batch log replay", lambda: all(
            v is not None for v in rows_everywhere_one(c.nodes[1], keys).values()),
            timeout_s=60)
        got = rows_everywhere_one(c.nodes[2], keys)
        assert {k: v[0] for k, v in got.items()} == {k: val("o", k) for k in keys}
        assert len({v[1] for v in got.values()}) == 1, got
    except BaseException:
        c.print_logs()
        raise
    finally:
        c.stop()


def test_garbage_collect_sweeps_each_nodes_own_partitions(cluster3):
    """The tombstone sweep (`ringgate admin garbage-collect`) on each node sweeps the
    partitions that node owns: together every partition, each once, and the rows the range
    tombstones shadowed stay gone."""
    import subprocess
    c = cluster3
    owned = spread_keys(c)
    keys = sorted(k for ks in owned.values() for k in ks)
    cl, s = pinned(c.nodes[0])
    try:
        s.execute("CREATE TABLE app.r (k int, c int, PRIMARY KEY (k, c)) WITH gc_grace_seconds = 0")
        for k in keys:
            for i in range(6):
                s.execute("INSERT INTO app.r (k, c) VALUES (%s, %s)", (k, i))
            s.execute("DELETE FROM app.r WHERE k = %s AND c < 3", (k,))
        time.sleep(1.1)  # the tombstones' local deletion time (seconds) must be past
        swept = {}
        for n in c.nodes:
            cmd = [str(clusterlib.ringgate_binary()), "admin", "--host", n.address, "--json",
                   "garbage-collect", "app.r"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, (n.name, r.stdout, r.stderr)
            swept[n.name] = int(json.loads(r.stdout)["result"].split()[0])
        assert sum(swept.values()) == len(keys), swept
        for k in keys:
            assert [r.c for r in s.execute("SELECT c FROM app.r WHERE k = %s", (k,))] == [3, 4, 5]
    finally:
        cl.shutdown()


def test_compact_purges_each_nodes_own_partitions(cluster3):
    """On PostgreSQL `compact` runs a purge pass (`query/purge_pass.rs`); in a cluster each
    node's pass covers the partitions it owns: every row deletion past gc_grace_seconds is
    purged once, by its owner, and reads through every node answer as before."""
    import subprocess
    c = cluster3
    owned = spread_keys(c)
    cl, s = pinned(c.nodes[0])
    try:
        s.execute("ALTER TABLE app.t WITH gc_grace_seconds = 0")
        assert cl.control_connection.wait_for_schema_agreement(wait_time=30)
        for keys in owned.values():
            for k in keys:
                s.execute("INSERT INTO app.t (pk, v) VALUES (%s, 'gone')", (k,))
                s.execute("DELETE FROM app.t WHERE pk = %s", (k,))
                s.execute("INSERT INTO app.t (pk, v) VALUES (%s, 'kept')", (k + 1000,))

        def compact(n):
            cmd = [str(clusterlib.ringgate_binary()), "admin", "--host", n.address, "--json",
                   "compact"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, (n.name, r.stdout, r.stderr)
            result = json.loads(r.stdout)["result"]
            return int(result.split("(")[1].split()[0])

        # A node that has not applied the ALTER yet purges nothing (its gc_grace_seconds is
        # still 10 days): its next pass does.
        want = {name: len(keys) for name, keys in owned.items()}
        purged = {n.name: 0 for n in c.nodes}
        deadline = time.time() + 30
        while purged != want and time.time() < deadline:
            for n in c.nodes:
                if purged[n.name] < want[n.name]:
                    purged[n.name] += compact(n)
            time.sleep(0.2)
        assert purged == want
        every = sorted(k for keys in owned.values() for k in keys)
        for n in c.nodes:
            got = {r.pk: r.v for r in rows_on(n, "SELECT pk, v FROM app.t")}
            assert got == {k + 1000: "kept" for k in every}, n.name
    finally:
        cl.shutdown()
