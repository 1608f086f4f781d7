"""Moving physical partitions between storage groups online (issue 18), with real processes:
etcd, PostgreSQL servers as storage groups, three ringgate nodes, the Python driver and
`ringgate admin`.

- A partition moved under a write load (`ringgate admin move`): the move reports 'moved', the
  partition's group is the new one through every node, a full token-range scan holds every
  acknowledged key exactly once, every node's own scan reads them all, the rows are in the
  new group's PostgreSQL and, after the cleanup grace, no longer in the old one's, and the
  secondary index (local records, copied by token) finds the moved rows.
- A rebalance after adding a group under a write load (`ringgate admin add-group`, then
  `ringgate admin rebalance`): half the partitions move to the new group, the groups hold
  about equal data, and the full scan again holds every acknowledged key exactly once.
"""

import json
import subprocess
import threading
import time

import pytest
from cassandra.query import SimpleStatement

import clusterlib
from test_cluster import (LEASE_MS, Writer, pinned, settled_cluster, started, wait_settled,
                          wait_until)
from test_cluster_groups import token, tokens_in

clusterlib.require_or_skip(pytest)


def admin(node, *args, check=True):
    out = subprocess.run([str(clusterlib.ringgate_binary()), "admin", "--host", node.address,
                          "--json", "--timeout-secs", "90", *args],
                         capture_output=True, text=True, timeout=180)
    if check:
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)
    return out


def partitions(session):
    """{partition id: (group, start, end)} of app.t."""
    rows = session.execute(
        "SELECT partition_id, storage_group, token_start, token_end FROM "
        "system_views.physical_partitions WHERE keyspace_name = 'app' AND table_name = 't'")
    return {r.partition_id: (r.storage_group, r.token_start, r.token_end) for r in rows}


def owned_partitions(session):
    """{partition id: (group, owner)} of app.t, once every partition has an owner."""
    def owners():
        return {r.partition_id: (r.storage_group, r.owner) for r in session.execute(
            "SELECT partition_id, storage_group, owner FROM system_views.physical_partitions "
            "WHERE keyspace_name = 'app' AND table_name = 't'")}
    wait_until("every partition owned", lambda: all(o for _, o in owners().values()))
    return owners()


def full_scan(session):
    """Every pk of app.t by a token-range scan of 64 ranges (Spark-style)."""
    seen = [r.pk for r in session.execute(
        "SELECT pk FROM app.t WHERE token(pk) = %s", (-(2 ** 63),))]
    bounds = [-(2 ** 63) + i * (2 ** 64 // 64) for i in range(64)] + [2 ** 63 - 1]
    for lo, hi in zip(bounds, bounds[1:]):
        seen += [r.pk for r in session.execute(SimpleStatement(
            "SELECT pk FROM app.t WHERE token(pk) > %s AND token(pk) <= %s", fetch_size=1000),
            (lo, hi))]
    return seen


def start_writers(session, count=3):
    stop = threading.Event()
    writers = [Writer(session, (i + 1) * 1_000_000, stop) for i in range(count)]
    for w in writers:
        w.start()
    return stop, writers


def stop_writers(stop, writers):
    stop.set()
    for w in writers:
        w.join(30)
    return {k for w in writers for k, _ in w.acked}, sum(w.failed for w in writers)


def wait_every_node_sees(nodes, groups):
    """Until each node's map has every partition of `groups` ({partition id: group}) in its
    group. A node scans partitions it does not own in the group its map names: until its
    follower reads the new map (every 200 ms) it scans the old group's copy, complete up to the
    switch, so writes acknowledged after the switch are not yet in its scans."""
    for n in nodes:
        cl, ps = pinned(n)
        try:
            wait_until(f"{n.name} sees the moves", lambda: all(
                partitions(ps)[pid][0] == g for pid, g in groups.items()))
        finally:
            cl.shutdown()


def create_app_t(driver, session, index=False):
    session.execute("CREATE KEYSPACE app WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE app.t (pk int PRIMARY KEY, v text)")
    if index:
        session.execute("CREATE INDEX t_v ON app.t (v)")
    assert driver.control_connection.wait_for_schema_agreement(wait_time=30)


def check_scans(c, session, acked):
    seen = full_scan(session)
    assert len(seen) == len(set(seen)), "a row appeared twice in the scan"
    missing = acked - set(seen)
    assert not missing, f"{len(missing)} acknowledged rows missing from the scan"
    for n in c.nodes:
        cl, ps = pinned(n)
        try:
            got = [r.pk for r in ps.execute(SimpleStatement("SELECT pk FROM app.t",
                                                            fetch_size=2000))]
            assert len(got) == len(set(got)), f"{n.name}: a row twice"
            assert not acked - set(got), f"{n.name}: {len(acked - set(got))} rows missing"
        finally:
            cl.shutdown()


@pytest.fixture
def two_groups(monkeypatch):
    # Writes keep landing in the partition for 1.5 s after its bulk copy: they reach the new
    # group only through the catch-up rounds and the last round under the pause.
    monkeypatch.setenv("RINGGATE_TEST_MOVE_PAUSE_MS", "1500")
    yield from settled_cluster(nodes=3, groups=2)


def test_a_partition_moved_under_load_loses_and_duplicates_nothing(two_groups):
    c = two_groups
    driver = c.connect()
    try:
        s = driver.connect()
        create_app_t(driver, s, index=True)
        stop, writers = start_writers(s)
        time.sleep(3)
        parts = partitions(s)
        pid = min(p for p, (g, _, _) in parts.items() if g == "default")
        _, start, end = parts[pid]
        moved = admin(c.nodes[0], "move", "app.t", str(pid), "group2")
        assert moved["state"] == "moved", moved
        assert moved["from_group"] == "default", moved
        time.sleep(2)
        acked, failed = stop_writers(stop, writers)
        in_part = {k for k in acked if start < token(k) <= end}
        assert in_part, "no write landed in the moved partition"
        print(f"\nmoved partition {pid} under load: {moved['detail']}; {len(acked)} writes "
              f"acknowledged ({len(in_part)} in it), {failed} failed")
        assert failed == 0, f"{failed} writes failed during the move"

        wait_every_node_sees(c.nodes, {pid: "group2"})
        check_scans(c, s, acked)

        # The rows are in group2's server; the old copy goes after the cleanup grace.
        moved_tokens = {token(k) for k in in_part}
        assert moved_tokens <= tokens_in(c.pgs[1]), "moved rows missing in group2's server"
        wait_until("the old copy is deleted", lambda: not moved_tokens & tokens_in(c.pgs[0]))
        # Index entries (local records) came along: the index finds moved rows.
        sample = sorted(in_part)[:20]
        for k in sample:
            got = [r.pk for r in s.execute("SELECT pk FROM app.t WHERE v = %s", (f"w{k}",))]
            assert got == [k], (k, got)
        states = {r.partition_id: r.state for r in s.execute(
            "SELECT partition_id, state FROM system_views.partition_moves")}
        assert states.get(pid) == "moved", states
    finally:
        driver.shutdown()


@pytest.fixture
def one_group():
    yield from settled_cluster(nodes=3)


def test_rebalance_after_adding_a_group_loses_and_duplicates_nothing(one_group):
    c = one_group
    driver = c.connect()
    try:
        s = driver.connect()
        create_app_t(driver, s)
        ins = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        for k in range(2000):
            s.execute(ins, (k, "x" * 200))
        preloaded = set(range(2000))
        assert set(g for g, _, _ in partitions(s).values()) == {"default"}

        c.pgs[0].create_database("second")
        res = admin(c.nodes[1], "add-group", "second", "--hosts",
                    f"127.0.0.1:{c.pgs[0].port}", "--dbname", "second")
        assert res["result"] == "registered", res
        stop, writers = start_writers(s)
        time.sleep(1)
        moves = admin(c.nodes[2], "rebalance")
        time.sleep(1)
        acked, failed = stop_writers(stop, writers)
        print(f"\nrebalance: {[(m['partition_id'], m['state'], m['detail']) for m in moves]}; "
              f"{len(acked)} writes acknowledged meanwhile, {failed} failed")
        assert len(moves) == 4 and all(m["state"] == "moved" for m in moves), moves
        assert failed == 0, f"{failed} writes failed during the rebalance"
        groups = [g for g, _, _ in partitions(s).values()]
        assert groups.count("second") == 4 and groups.count("default") == 4, groups
        bytes_by_group = {}
        for r in s.execute("SELECT storage_group, bytes FROM system_views.physical_partitions "
                           "WHERE keyspace_name = 'app' AND table_name = 't'"):
            bytes_by_group[r.storage_group] = bytes_by_group.get(r.storage_group, 0) + r.bytes
        lo, hi = min(bytes_by_group.values()), max(bytes_by_group.values())
        assert lo >= 0.6 * hi, bytes_by_group
        wait_every_node_sees(c.nodes, {m["partition_id"]: "second" for m in moves})
        check_scans(c, s, acked | preloaded)
    finally:
        driver.shutdown()


def test_a_move_whose_owner_is_killed_is_finished_by_the_next_owner(two_groups):
    """kill -9 of the moving owner after its bulk copy (in the test pause): the partition stays
    in its group and is taken over there; the request is still recorded, so the next owner
    moves it (deleting the partial copy first); nothing acknowledged is lost or doubled."""
    c = two_groups
    driver = c.connect(node=c.nodes[0])
    try:
        s = driver.connect()
        create_app_t(driver, s)

        parts = owned_partitions(s)
        pid, owner = next((p, o) for p, (g, o) in sorted(parts.items())
                          if g == "default" and o != "n1")
        victim = c.node(owner)
        stop, writers = start_writers(s)
        time.sleep(2)
        result = {}
        mover = threading.Thread(target=lambda: result.update(
            out=admin(c.nodes[0], "move", "app.t", str(pid), "group2", check=False)))
        mover.start()
        time.sleep(0.8)
        victim.kill9()
        mover.join(120)
        time.sleep(1)
        acked, failed = stop_writers(stop, writers)
        out = result["out"]
        assert out.returncode == 0, out.stderr
        moved = json.loads(out.stdout)
        assert moved["state"] == "moved", moved
        print(f"\nmove of partition {pid} finished after its owner {owner} was killed: "
              f"{moved['detail']}; {len(acked)} writes acknowledged, {failed} failed")
        survivors = [n for n in c.nodes if n is not victim]
        wait_every_node_sees(survivors, {pid: "group2"})
        seen = full_scan(s)
        assert len(seen) == len(set(seen)), "a row appeared twice in the scan"
        missing = acked - set(seen)
        assert not missing, f"{len(missing)} acknowledged rows missing from the scan"
    finally:
        driver.shutdown()


@pytest.fixture
def small_partitions():
    yield from settled_cluster(nodes=3, groups=2,
                               settings={"partitions.physical_split_bytes": "1MiB"})


def test_a_split_child_goes_to_the_group_with_the_least_data(small_partitions):
    """Issue 17: a split child is placed in the group with the least data. A partition of the
    default group grows past the split size while group2 holds nothing: the larger child stays
    (ties go to the parent's group), the other is moved to group2 online."""
    c = small_partitions
    driver = c.connect()
    try:
        s = driver.connect()
        create_app_t(driver, s)
        parts = partitions(s)
        pid = min(p for p, (g, _, _) in parts.items() if g == "default")
        _, start, end = parts[pid]
        keys = [k for k in range(20000) if start < token(k) <= end][:330]
        ins = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        for k in keys:
            s.execute(ins, (k, "x" * 4096))

        def children():
            now = partitions(s)
            return {p: g for p, (g, lo, hi) in now.items() if start <= lo and hi <= end}
        wait_until("the partition to split", lambda: len(children()) == 2, timeout_s=60)
        wait_until("one child moved to group2",
                   lambda: sorted(children().values()) == ["default", "group2"], timeout_s=60)
        moved = [p for p, g in children().items() if g == "group2"]
        states = {r.partition_id: (r.state, r.from_group) for r in s.execute(
            "SELECT partition_id, state, from_group FROM system_views.partition_moves")}
        assert states.get(moved[0]) == ("moved", "default"), states
        wait_every_node_sees(c.nodes, {moved[0]: "group2"})
        check_scans(c, s, set(keys))
    finally:
        driver.shutdown()


def test_a_node_behind_on_a_move_scans_the_rows_written_after_it(monkeypatch):
    """n3's follower reads the maps' change key only every 60 s (RINGGATE_TEST_FOLLOW_MAPS_MS),
    so its map still places a partition in its old group after another node moved it. A row
    written after the move (in the new group only) is in n3's scan all the same: the read sees
    that the maps changed while it ran, reloads them and reads again (query/select/fresh.rs).
    Before, n3 scanned the old group's copy and missed the row until its follower caught up."""
    with started(clusterlib.LocalCluster(nodes=2, groups=2, lease_ms=LEASE_MS)) as c:
        monkeypatch.setenv("RINGGATE_TEST_FOLLOW_MAPS_MS", "60000")
        behind = c.add_node()
        monkeypatch.delenv("RINGGATE_TEST_FOLLOW_MAPS_MS")
        wait_settled(c)
        driver = c.connect(node=c.nodes[0])
        try:
            s = driver.connect()
            create_app_t(driver, s)

            pid = next(p for p, (g, o) in sorted(owned_partitions(s).items())
                       if g == "default" and o != behind.name)
            _, start, end = partitions(s)[pid]
            keys = [k for k in range(20000) if start < token(k) <= end][:2]
            ins = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
            s.execute(ins, (keys[0], "before the move"))
            cl, ps = pinned(behind)
            try:
                scan = SimpleStatement(
                    "SELECT pk FROM app.t WHERE token(pk) > %s AND token(pk) <= %s")
                assert [r.pk for r in ps.execute(scan, (start, end))] == [keys[0]]
                moved = admin(c.nodes[0], "move", "app.t", str(pid), "group2")
                assert moved["state"] == "moved", moved
                s.execute(ins, (keys[1], "after the move"))
                rs = ps.execute(scan, (start, end), trace=True)
                assert sorted(r.pk for r in rs) == sorted(keys)
                events = [e.description for e in rs.get_query_trace(max_wait_sec=10).events]
                assert any("map changed during the read" in e for e in events), events
            finally:
                cl.shutdown()
        finally:
            driver.shutdown()
