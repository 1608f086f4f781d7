"""ringgate on PostgreSQL (`storage.backend = "postgres"`): a real PostgreSQL server started by
the test (pgserver.py) and `ringgate serve` on it, driven through the Python driver: DDL,
inserts, point, range and paged selects, a secondary index query, an LWT, a LOGGED batch across
physical partitions (also killed -9 mid-way), TRUNCATE, a restart with the data still there,
and kill -9 of ringgate under a write load with every acknowledged write present afterwards.

Skipped (loudly) without PostgreSQL binaries unless RINGGATE_REQUIRE_POSTGRES is set."""
import itertools
import os
import random
import struct
import threading
import time

import pytest
from cassandra.cluster import Cluster
from cassandra.murmur3 import murmur3
from cassandra.query import BatchStatement, BatchType, SimpleStatement

import pgserver
from rgtest import create_keyspace

_dbs = itertools.count(1)


@pytest.fixture(scope="module")
def pg():
    bin_dir = pgserver.find_bin_dir()
    if bin_dir is None:
        msg = "no PostgreSQL server binaries (run scripts/install-cluster-deps)"
        if os.environ.get("RINGGATE_REQUIRE_POSTGRES"):
            pytest.fail(f"RINGGATE_REQUIRE_POSTGRES is set but there are {msg}")
        print(f"\n!!!!! SKIPPING the PostgreSQL backend tests: {msg} !!!!!")
        pytest.skip(msg)
    server = pgserver.PgServer(bin_dir)
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture
def pg_ringgate(pg, server_factory):
    """start() -> a ringgate server on a fresh PostgreSQL database."""
    def start():
        url = pg.create_database(f"rg{next(_dbs)}_{os.getpid()}")
        return server_factory(settings={"storage.backend": "postgres",
                                        "storage.postgres.url": url})
    return start


def connect(srv):
    c = Cluster(contact_points=[srv.host], port=srv.port)
    return c, c.connect()


def keys_per_partition(s, ks, table, count):
    """`count` int keys in each physical partition of the table."""
    ranges = sorted((r.token_start, r.token_end) for r in s.execute(
        "SELECT token_start, token_end FROM system_views.physical_partitions "
        f"WHERE keyspace_name = '{ks}' AND table_name = '{table}'"))
    found = [[] for _ in ranges]
    for k in itertools.count():
        if min(len(f) for f in found) >= count:
            return found
        t = murmur3(struct.pack(">i", k))
        for i, (lo, hi) in enumerate(ranges):
            if lo < t <= hi and len(found[i]) < count:
                found[i].append(k)


def test_a_representative_slice_and_a_restart(pg_ringgate):
    srv = pg_ringgate()
    c, s = connect(srv)
    create_keyspace(s, "pgk")
    s.execute("CREATE TABLE pgk.events (p int, c int, v text, tag text, PRIMARY KEY (p, c)) "
              "WITH CLUSTERING ORDER BY (c DESC)")
    s.execute("CREATE INDEX events_tag ON pgk.events (tag)")
    ins = s.prepare("INSERT INTO pgk.events (p, c, v, tag) VALUES (?, ?, ?, ?)")
    for p in range(10):
        for i in range(30):
            s.execute(ins, (p, i, f"v{p}-{i}", f"t{i % 3}"))
    # Point, range (both clustering orders), paged.
    assert s.execute("SELECT v FROM pgk.events WHERE p = 3 AND c = 7").one().v == "v3-7"
    got = [r.c for r in s.execute("SELECT c FROM pgk.events WHERE p = 3 AND c >= 5 AND c < 9")]
    assert got == [8, 7, 6, 5]
    got = [r.c for r in s.execute(
        "SELECT c FROM pgk.events WHERE p = 3 AND c > 25 ORDER BY c ASC")]
    assert got == [26, 27, 28, 29]
    paged = SimpleStatement("SELECT p, c FROM pgk.events", fetch_size=7)
    rows = list(s.execute(paged))
    assert len(rows) == 300 and len({(r.p, r.c) for r in rows}) == 300
    # A secondary index query (a fan-out over the physical partitions' local indexes).
    tagged = {(r.p, r.c) for r in s.execute("SELECT p, c FROM pgk.events WHERE tag = 't1'")}
    assert tagged == {(p, i) for p in range(10) for i in range(30) if i % 3 == 1}
    # Paged: each partition's hits are read in one statement with its header; same rows, order.
    whole = [(r.p, r.c) for r in s.execute("SELECT p, c FROM pgk.events WHERE tag = 't1'")]
    paged = SimpleStatement("SELECT p, c FROM pgk.events WHERE tag = 't1'", fetch_size=4)
    assert [(r.p, r.c) for r in s.execute(paged)] == whole and len(whole) == 100
    # A lightweight transaction: applies once, then reports the current value.
    s.execute("CREATE TABLE pgk.kv (k text PRIMARY KEY, v int)")
    assert s.execute("INSERT INTO pgk.kv (k, v) VALUES ('a', 1) IF NOT EXISTS").one()[0]
    r = s.execute("INSERT INTO pgk.kv (k, v) VALUES ('a', 2) IF NOT EXISTS").one()
    assert not r[0] and r.v == 1
    assert s.execute("UPDATE pgk.kv SET v = 3 WHERE k = 'a' IF v = 1").one()[0]
    assert not s.execute("UPDATE pgk.kv SET v = 4 WHERE k = 'a' IF v = 1").one()[0]
    # A LOGGED batch across the three physical partitions of a table.
    s.execute("CREATE TABLE pgk.spread (k int PRIMARY KEY, v int) "
              "WITH cosmosdb_provisioned_throughput = 30000")
    keys = [p[0] for p in keys_per_partition(s, "pgk", "spread", 1)]
    assert len(keys) == 3
    batch = BatchStatement(batch_type=BatchType.LOGGED)
    ins_spread = s.prepare("INSERT INTO pgk.spread (k, v) VALUES (?, ?)")
    for k in keys:
        batch.add(ins_spread, (k, k * 10))
    s.execute(batch)
    assert {r.k: r.v for r in s.execute("SELECT k, v FROM pgk.spread")} == {k: k * 10 for k in keys}
    # TRUNCATE empties the table (the old data purged in the background).
    s.execute("CREATE TABLE pgk.gone (k int PRIMARY KEY)")
    for k in range(20):
        s.execute("INSERT INTO pgk.gone (k) VALUES (%s)", (k,))
    s.execute("TRUNCATE pgk.gone")
    assert list(s.execute("SELECT k FROM pgk.gone")) == []
    s.execute("INSERT INTO pgk.gone (k) VALUES (99)")
    c.shutdown()

    # A clean restart: schema, rows, index and LWT state are all in PostgreSQL.
    srv.stop()
    srv.start()
    c, s = connect(srv)
    assert s.execute("SELECT v FROM pgk.events WHERE p = 9 AND c = 29").one().v == "v9-29"
    assert len(list(s.execute("SELECT p, c FROM pgk.events WHERE tag = 't2'"))) == 100
    assert s.execute("SELECT v FROM pgk.kv WHERE k = 'a'").one().v == 3
    assert [r.k for r in s.execute("SELECT k FROM pgk.gone")] == [99]
    assert len(list(s.execute("SELECT k FROM pgk.spread"))) == 3
    c.shutdown()
    # ringgate's data directory holds no table data with this backend.
    assert not (srv.data_dir / "store").exists()


@pytest.mark.parametrize("where", ["WHERE p = 1", "", "WHERE token(p) >= -9223372036854775808"],
                         ids=["partition", "table", "token-range"])
def test_a_wide_partition_read_sees_each_batch_whole(pg_ringgate, where):
    """A read of a partition wider than one PostgreSQL statement reads (1 MiB) reads it from
    one snapshot, whether it names the partition or scans the table or a token range (as
    cqlsh COPY and Spark do): while batches set its first and last rows to the same value,
    every read of one page (the driver's default, 5,000 rows) sees them equal; across pages
    of 100 too, every row comes once, in order."""
    ROWS = 1100
    srv = pg_ringgate()
    c, s = connect(srv)
    create_keyspace(s, "pgw")
    s.execute("CREATE TABLE pgw.wide (p int, c int, v int, pad text, PRIMARY KEY (p, c))")
    ins = s.prepare("INSERT INTO pgw.wide (p, c, v, pad) VALUES (1, ?, 0, ?)")
    for ck in range(ROWS):
        s.execute(ins, (ck, "x" * 1000))
    upd = s.prepare("UPDATE pgw.wide SET v = ? WHERE p = 1 AND c = ?")
    done = threading.Event()

    def write():
        w = c.connect()
        for i in itertools.count(1):
            if done.is_set():
                return
            b = BatchStatement(batch_type=BatchType.UNLOGGED)
            b.add(upd, (i, 0))
            b.add(upd, (i, ROWS - 1))
            w.execute(b)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        reads, torn = 0, []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            for fetch in (5000, 100):
                q = SimpleStatement(f"SELECT c, v FROM pgw.wide {where}", fetch_size=fetch)
                rows = list(s.execute(q))
                assert [r.c for r in rows] == list(range(ROWS))
                reads += 1
                if rows[0].v != rows[-1].v and fetch == 5000:
                    torn.append((rows[0].v, rows[-1].v))
    finally:
        done.set()
        writer.join()
    assert reads > 10
    assert torn == [], f"{len(torn)} of {reads} reads saw half a batch: {torn[:3]}"
    c.shutdown()


def test_expired_and_deleted_data_is_purged_from_postgresql(pg, server_factory):
    """PostgreSQL has no compactions: a purge pass (the `compact` command, and a background one
    every storage.postgres.purge_every_secs) removes from its tables what is past
    gc_grace_seconds: rows shadowed by partition and range deletions, row deletions, expired
    rows. Reads answer the same before and after; the sweeper then drops the headers'
    tombstones."""
    db = f"rg{next(_dbs)}_{os.getpid()}"
    url = pg.create_database(db)
    settings = {"storage.backend": "postgres", "storage.postgres.url": url,
                "storage.postgres.purge_every_secs": 0}
    srv = server_factory(settings=settings)
    c, s = connect(srv)
    create_keyspace(s, "pgp")
    s.execute("CREATE TABLE pgp.t (p int, c int, v text, PRIMARY KEY (p, c)) "
              "WITH gc_grace_seconds = 0")
    s.execute("CREATE TABLE pgp.kv (k int PRIMARY KEY, v text) WITH gc_grace_seconds = 0")
    ins = s.prepare("INSERT INTO pgp.t (p, c, v) VALUES (?, ?, 'x')")
    for p in range(5):
        for ck in range(20):
            s.execute(ins, (p, ck))
    ins_kv = s.prepare("INSERT INTO pgp.kv (k, v) VALUES (?, 'y')")
    for k in range(100):
        s.execute(ins_kv, (k,))
    s.execute("DELETE FROM pgp.t WHERE p = 0")  # 20 rows shadowed by a partition deletion
    s.execute("DELETE FROM pgp.t WHERE p = 1 AND c >= 5 AND c < 15")  # 10 by a range
    s.execute("DELETE FROM pgp.t WHERE p = 2 AND c = 3")  # a row deletion
    for k in range(30):
        s.execute("DELETE FROM pgp.kv WHERE k = %s", (k,))  # 30 row deletions
    ttl = s.prepare("INSERT INTO pgp.kv (k, v) VALUES (?, 'z') USING TTL 1")
    for k in range(100, 130):
        s.execute(ttl, (k,))  # 30 rows that expire
    time.sleep(2.5)

    def count():
        return int(pg.sql(db, "SELECT count(*) FROM ringgate_data"))

    def live():
        return (sorted((r.p, r.c) for r in s.execute("SELECT p, c FROM pgp.t")),
                sorted(r.k for r in s.execute("SELECT k FROM pgp.kv")))

    before, stored = live(), count()
    assert len(before[0]) == 10 + 19 + 20 + 20 and before[1] == list(range(30, 100))
    r = s.execute("INSERT INTO system_views.maintenance (command) VALUES ('compact')").one()
    assert r.result == "compacted (91 expired or deleted entries purged)"
    assert count() == stored - 91
    assert live() == before
    # Nothing left for a second pass.
    r = s.execute("INSERT INTO system_views.maintenance (command) VALUES ('compact')").one()
    assert r.result == "compacted (0 expired or deleted entries purged)"
    # The sweeper (every 10 s) drops the two headers' tombstones, each header with them.
    deadline = time.time() + 30
    while count() > stored - 93 and time.time() < deadline:
        time.sleep(0.5)
    assert count() == stored - 93
    assert live() == before
    c.shutdown()
    srv.stop()

    # The background pass, on the same database.
    srv = server_factory(settings={**settings, "storage.postgres.purge_every_secs": 1})
    c, s = connect(srv)
    stored = count()
    for k in range(200, 210):
        s.execute("INSERT INTO pgp.kv (k, v) VALUES (%s, 'w') USING TTL 1", (k,))
    assert count() == stored + 10
    deadline = time.time() + 30
    while count() > stored and time.time() < deadline:
        time.sleep(0.5)
    assert count() == stored
    assert live() == before
    c.shutdown()


def test_acknowledged_writes_survive_kill9_under_load(pg_ringgate):
    srv = pg_ringgate()
    c, s = connect(srv)
    create_keyspace(s, "pgd")
    s.execute("CREATE TABLE pgd.t (id int PRIMARY KEY, v text)")
    c.shutdown()
    acked, stop = {}, threading.Event()
    lock = threading.Lock()

    def writer(n):
        wc, ws = connect(srv)
        ins = ws.prepare("INSERT INTO pgd.t (id, v) VALUES (?, ?)")
        i = n
        try:
            while not stop.is_set():
                try:
                    ws.execute(ins, (i, f"value-{i}"), timeout=5)
                except Exception:
                    return  # the server is gone: what was acknowledged is recorded
                with lock:
                    acked[i] = f"value-{i}"
                i += 4
        finally:
            wc.shutdown()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 400 and time.monotonic() < deadline:
        time.sleep(0.05)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert len(acked) >= 400, "the load did not get going"
    srv.start()
    c, s = connect(srv)
    got = {r.id: r.v for r in s.execute(SimpleStatement("SELECT id, v FROM pgd.t", fetch_size=500))}
    c.shutdown()
    lost = sorted(set(acked) - set(got))
    assert not lost, f"{len(lost)} acknowledged writes lost after kill -9, e.g. {lost[:10]}"
    assert all(got[k] == v for k, v in acked.items())


def test_logged_batch_killed_midway_is_all_or_nothing(pg_ringgate, monkeypatch):
    """The batch log on PostgreSQL: kill -9 while a LOGGED batch across three physical
    partitions is being applied (a test hook pauses before each part); after the restart
    all of it or none of it is there."""
    monkeypatch.setenv("RINGGATE_TEST_BATCHLOG_PAUSE_MS", "100")
    srv = pg_ringgate()
    c, s = connect(srv)
    create_keyspace(s, "bl")
    s.execute("CREATE TABLE bl.t (k int PRIMARY KEY, round int) "
              "WITH cosmosdb_provisioned_throughput = 30000")
    parts = keys_per_partition(s, "bl", "t", 4)
    c.shutdown()
    rng = random.Random()
    for rep in range(4):
        keys = [p[rep] for p in parts]
        c, s = connect(srv)
        ins = s.prepare("INSERT INTO bl.t (k, round) VALUES (?, ?)")
        batch = BatchStatement(batch_type=BatchType.LOGGED)
        for k in keys:
            batch.add(ins, (k, rep))
        future = s.execute_async(batch, timeout=30)
        time.sleep(rng.uniform(0.05, 0.35))
        srv.kill9()
        future.add_errback(lambda _: None)
        c.shutdown()
        srv.start()
        c, s = connect(srv)
        rows = [s.execute("SELECT round FROM bl.t WHERE k = %s", (k,)).one() for k in keys]
        c.shutdown()
        present = [r is not None for r in rows]
        assert all(present) or not any(present), f"repetition {rep}: {present}"
        assert all(r.round == rep for r in rows if r is not None)
