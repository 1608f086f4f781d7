"""The change feed (issue 20): `SELECT ... WHERE COSMOS_CHANGEFEED_START_TIME() = <time>` through the
Python driver, as Cosmos DB's samples consume it (small pages, the paging state kept and sent again
for ever), across a split and a kill -9 restart, by token range in parallel, with deletes as an
option; the example consumer script run against a writer."""

import datetime
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement

from rgtest import create_keyspace, error_text, wait_until

ROOT = Path(__file__).resolve().parents[2]
MIN_TOKEN, MAX_TOKEN = -(2**63), 2**63 - 1


def connect(srv):
    c = Cluster(contact_points=[srv.host], port=srv.port)
    return c, c.connect()


def physical_partitions(s, ks, table):
    rows = s.execute("SELECT partition_id, token_start, token_end FROM system_views.physical_partitions "
                     "WHERE keyspace_name = %s AND table_name = %s", (ks, table))
    return sorted((r.token_start, r.token_end) for r in rows)


def utc_text(ms):
    """A timestamp literal as Cosmos samples write it (UTC, here with milliseconds)."""
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


class Consumer:
    """Follows a feed one page at a time, keeping the paging state; records (token, k, c, v)."""

    def __init__(self, session, query, page=7):
        self.session = session
        self.query = query
        self.page = page
        self.state = None
        self.events = []

    def poll(self):
        """One page; True when it was empty and the position did not move (caught up)."""
        st = SimpleStatement(self.query, fetch_size=self.page)
        rs = self.session.execute(st, paging_state=self.state)
        rows = rs.current_rows
        assert len(rows) <= self.page
        assert rs.paging_state is not None, "a feed page always continues"
        caught_up = not rows and rs.paging_state == self.state
        self.state = rs.paging_state
        self.events.extend((r.t, r.k, r.c, r.v) for r in rows)
        return caught_up

    def drain(self, polls=2000):
        for _ in range(polls):
            if self.poll():
                return
        pytest.fail("the feed never caught up")


class Writer:
    """Inserts, updates and deletes rows (k, c); v is a global counter, so each write of a row
    is a new version and the model knows every row's latest state (None: deleted)."""

    def __init__(self, session, ks, keys=40, clusterings=5):
        self.ks = ks
        self.use(session)
        self.rows = [(k, c) for k in range(keys) for c in range(clusterings)]
        self.state = {}
        # Rows changed since the last `mark()`.
        self.touched = set()
        self.v = 0
        self.i = 0

    def use(self, session):
        self.s = session
        self.ins = session.prepare(f"INSERT INTO {self.ks}.t (k, c, v) VALUES (?, ?, ?)")
        self.upd = session.prepare(f"UPDATE {self.ks}.t SET v = ? WHERE k = ? AND c = ?")
        self.dele = session.prepare(f"DELETE FROM {self.ks}.t WHERE k = ? AND c = ?")

    def mark(self):
        self.touched = set()

    def since_mark(self):
        return {row: v for row, v in self.state.items() if row in self.touched}

    def step(self, deletes=True):
        self.v += 1
        self.i += 1
        k, c = self.rows[(self.i * 7919) % len(self.rows)]
        self.touched.add((k, c))
        if deletes and (k, c) in self.state and self.state[(k, c)] is not None and self.i % 5 == 0:
            self.s.execute(self.dele, (k, c))
            self.state[(k, c)] = None
        elif (k, c) in self.state:
            self.s.execute(self.upd, (self.v, k, c))
            self.state[(k, c)] = self.v
        else:
            self.s.execute(self.ins, (k, c, self.v))
            self.state[(k, c)] = self.v

    def run(self, n, deletes=True):
        for _ in range(n):
            self.step(deletes)


def feed_query(ks, start_ms, extra=""):
    return (f"SELECT token(k) AS t, k, c, v FROM {ks}.t "
            f"WHERE COSMOS_CHANGEFEED_START_TIME() = '{utc_text(start_ms)}'{extra}")


def check_exactly_once(events, state, deletes):
    """Each (row, version) once, versions of a row only grow, the last seen is the latest."""
    seen = set()
    last = {}
    for _, k, c, v in events:
        assert (k, c, v) not in seen, f"row ({k}, {c}) version {v} seen twice"
        seen.add((k, c, v))
        if v is not None and last.get((k, c)) is not None:
            assert v > last[(k, c)], f"row ({k}, {c}): version {v} after {last[(k, c)]}"
        last[(k, c)] = v
    expected = {row: v for row, v in state.items() if deletes or v is not None}
    if not deletes:
        # A row deleted for good is simply absent from a feed without deletes; one that came
        # back shows its latest version.
        last = {row: v for row, v in last.items() if row in expected}
    assert last == expected


def check_order(events, parts):
    """Within each physical partition, changes come in the order they were made (v grows)."""
    for start, end in parts:
        vs = [v for t, _, _, v in events if (start < t <= end or start == MIN_TOKEN) and v is not None]
        assert vs == sorted(vs), f"partition ({start}, {end}] out of order"


def test_feed_across_split_and_restart(server_factory, unique_name):
    srv = server_factory(set_args=["throughput.server_side_retry=true"])
    c, s = connect(srv)
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c)) "
              f"WITH cosmosdb_provisioned_throughput = 400 AND cdc = true")
    w = Writer(s, ks)
    w.run(60)
    old = s.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, 0, -1)")
    for k in range(1000, 1020):  # written before the start time only
        s.execute(old, (k,))
    time.sleep(0.01)
    start_ms = int(time.time() * 1000)
    time.sleep(0.01)
    w.mark()
    third = (MAX_TOKEN // 3)
    cuts = [MIN_TOKEN, -12345, third, MAX_TOKEN]  # not aligned with physical partitions
    consumers = {
        "all": Consumer(s, feed_query(ks, start_ms)),
        "deletes": Consumer(s, feed_query(ks, start_ms, " AND CHANGEFEED_DELETES() = true")),
        "one": Consumer(s, feed_query(ks, start_ms, " AND k = 3")),
    }
    for i in range(3):
        lo, hi = cuts[i], cuts[i + 1]
        consumers[f"range{i}"] = Consumer(s, feed_query(
            ks, start_ms, f" AND token(k) {'>=' if i == 0 else '>'} {lo} AND token(k) <= {hi}"))

    def round_(n):
        w.run(n)
        for con in consumers.values():
            con.poll()

    for _ in range(10):
        round_(15)
    assert len(physical_partitions(s, ks, "t")) == 1
    s.execute(f"ALTER TABLE {ks}.t WITH cosmosdb_provisioned_throughput = 40000")
    parts = physical_partitions(s, ks, "t")
    assert len(parts) == 4
    for _ in range(10):
        round_(15)
    # kill -9 and start again: the paging states go on.
    c.shutdown()
    srv.restart()
    c, s = connect(srv)
    w.use(s)
    for con in consumers.values():
        con.session = s
    for _ in range(10):
        round_(15)
    for con in consumers.values():
        con.drain()

    # Nothing from before the start time: rows written only before it never appear.
    for con in consumers.values():
        assert not any(k >= 1000 for _, k, _, _ in con.events)
    changed = w.since_mark()
    assert len(changed) > 100 and any(v is None for v in changed.values())
    assert len(consumers["all"].events) > len(changed)  # intermediate versions too
    check_exactly_once(consumers["all"].events, changed, deletes=False)
    check_exactly_once(consumers["deletes"].events, changed, deletes=True)
    check_exactly_once(consumers["one"].events, {r: v for r, v in changed.items() if r[0] == 3},
                       deletes=False)
    for con in consumers.values():
        check_order(con.events, parts)
    # The consumer group: the union of the ranges is the whole feed, each change once.
    union = [e for i in range(3) for e in consumers[f"range{i}"].events]
    check_exactly_once(union, changed, deletes=False)
    for i in range(3):
        lo, hi = cuts[i], cuts[i + 1]
        assert all(lo <= t <= hi for t, _, _, _ in consumers[f"range{i}"].events)
    # Deleted rows come with their key and a null value.
    assert any(v is None for _, _, _, v in consumers["deletes"].events)
    assert not any(v is None for _, _, _, v in consumers["all"].events)
    c.shutdown()


def test_concurrent_writers_and_the_consumer_script(server_factory, unique_name, tmp_path):
    """Writers in parallel (each its own rows, many writes in flight) while the example consumer
    script follows the feed in another process with small pages: every row's versions arrive
    once each, in order, ending with its latest."""
    srv = server_factory()
    c, s = connect(srv)
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c)) WITH cdc = true")
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
    state_file = tmp_path / "feed.state"
    cmd = [sys.executable, str(ROOT / "cql" / "changefeed_consumer.py"), f"{ks}.t",
           "--host", srv.host, "--port", str(srv.port), "--page", "5", "--interval", "0.05",
           "--start", start.strftime("%Y-%m-%d %H:%M:%S"), "--state", str(state_file)]
    consumer = subprocess.Popen(cmd + ["--seconds", "4"], stdout=subprocess.PIPE, text=True)
    stop = threading.Event()
    states = [dict() for _ in range(4)]

    def write(i):
        ins = s.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)")
        v = 0
        while not stop.is_set() and v < 3000:
            v += 1
            k = i * 100 + v % 25
            s.execute(ins, (k, v % 3, v))
            states[i][(k, v % 3)] = v

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(2)
    stop.set()
    for t in threads:
        t.join()
    out, _ = consumer.communicate(timeout=60)
    assert consumer.returncode == 0
    # A second run resumes from the saved paging state and reads the rest.
    rest = subprocess.run(cmd + ["--seconds", "2"], stdout=subprocess.PIPE, text=True, timeout=60)
    import json
    events = [json.loads(line) for line in (out + rest.stdout).splitlines()]
    expected = {row: v for st in states for row, v in st.items()}
    assert len(expected) == 4 * 25 * 3 or len(expected) > 50
    check_exactly_once([(e["row_token"], e["k"], e["c"], e["v"]) for e in events], expected, deletes=False)
    c.shutdown()


def test_pages_paging_states_and_errors(server_factory, unique_name):
    srv = server_factory()
    c, s = connect(srv)
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c))")
    start_ms = int(time.time() * 1000) - 1000
    ins = s.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)")
    # The feed is recorded for tables with Cassandra's `cdc = true` (it costs writes).
    s.execute(ins, (9, 9, -1))
    with pytest.raises(InvalidRequest) as e:
        Consumer(s, feed_query(ks, start_ms)).poll()
    assert f"ALTER TABLE {ks}.t WITH cdc = true" in error_text(e.value)
    s.execute(f"ALTER TABLE {ks}.t WITH cdc = true")
    for i in range(30):
        s.execute(ins, (i % 4, i, i))
    con = Consumer(s, feed_query(ks, start_ms), page=4)
    con.drain()
    assert [e[3] for e in con.events] == list(range(30))
    # Caught up: the same paging state again gives an empty page and itself; a later write
    # arrives on the next page.
    caught = con.state
    assert con.poll() and con.state == caught
    s.execute(ins, (1, 1, 100))
    assert not con.poll()
    assert con.events[-1][1:] == (1, 1, 100)
    # A start time after every write: nothing; a prepared query with a datetime works too.
    later = Consumer(s, feed_query(ks, int(time.time() * 1000) + 60_000))
    later.poll()
    assert later.poll() and later.events == []
    prep = s.prepare(f"SELECT k, c, v FROM {ks}.t WHERE COSMOS_CHANGEFEED_START_TIME() = ? AND k = ?")
    rs = s.execute(prep, (datetime.datetime.fromtimestamp(start_ms / 1000, datetime.timezone.utc), 2))
    assert sorted(r.v for r in rs.current_rows) == [i for i in range(30) if i % 4 == 2]
    # A paging state of another scope is refused.
    st = SimpleStatement(feed_query(ks, start_ms, " AND k = 3"), fetch_size=4)
    with pytest.raises(InvalidRequest) as e:
        s.execute(st, paging_state=caught)
    assert "change feed scope" in error_text(e.value)
    with pytest.raises(InvalidRequest) as e:
        s.execute(f"SELECT * FROM {ks}.t WHERE COSMOS_CHANGEFEED_START_TIME() > '2026-01-01'")
    assert "only supports the = operator" in error_text(e.value)
    with pytest.raises(InvalidRequest) as e:
        s.execute(f"SELECT * FROM {ks}.t WHERE no_such_function() = 1")
    assert "Unknown function no_such_function()" in error_text(e.value)
    # With deletes, a partition deletion appears as its partition key alone, a row deletion
    # as the row's key with null columns; without, neither appears.
    dels = Consumer(s, feed_query(ks, start_ms, " AND CHANGEFEED_DELETES() = true"))
    plain = Consumer(s, feed_query(ks, start_ms))
    dels.drain()
    plain.drain()
    s.execute(f"DELETE FROM {ks}.t WHERE k = 2")
    s.execute(f"DELETE FROM {ks}.t WHERE k = 1 AND c = 1")
    dels.events.clear()
    plain.events.clear()
    dels.drain()
    plain.drain()
    assert sorted(e[1:] for e in dels.events if e[1] == 2) == [(2, None, None)]
    assert (1, 1, None) in [e[1:] for e in dels.events]
    assert plain.events == []
    # TRUNCATE gives the table a new feed.
    s.execute(f"TRUNCATE {ks}.t")
    fresh = Consumer(s, feed_query(ks, start_ms))
    fresh.drain()
    assert fresh.events == []
    c.shutdown()


def test_example_script_runs_in_cqlsh(server_factory, cqlsh):
    """cql/changefeed.cql through cqlsh -f: with PAGING OFF a feed query answers once."""
    srv = server_factory()
    r = cqlsh(["-f", str(ROOT / "cql" / "changefeed.cql")], server=srv, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # All, one partition, with deletes, one token slice.
    assert [line.strip() for line in out.splitlines() if line.strip().endswith("rows)")] == \
        ["(2 rows)", "(2 rows)", "(3 rows)", "(2 rows)"]
    assert "paid" in out and "null" in out


def test_charges_follow_the_read_model_and_tracing_names_partitions(server_factory, unique_name):
    import struct
    srv = server_factory()
    c, s = connect(srv)
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v text, PRIMARY KEY (k, c)) "
              f"WITH cdc = true AND cosmosdb_provisioned_throughput = 20000")
    start_ms = int(time.time() * 1000) - 1000
    ins = s.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)")
    for k in range(20):
        s.execute(ins, (k, 0, "x" * 1000))  # about 1 KB stored per row

    def charge(rs):
        return struct.unpack(">d", rs.response_future.custom_payload["RequestCharge"])[0]

    st = SimpleStatement(feed_query(ks, start_ms).replace("token(k) AS t, k, c, v", "k, v"),
                         fetch_size=10)
    rs = s.execute(st, trace=True)
    assert len(rs.current_rows) == 10
    # 10 rows of about 1 KB: about 10 RU, as a scan returning them (read model, ru.rs).
    assert 9.5 < charge(rs) < 12
    events = [e.description for e in rs.get_query_trace(max_wait_sec=5).events]
    feed = [e for e in events if e.startswith("Change feed read")]
    assert feed, events
    parts = physical_partitions(s, ks, "t")
    assert len(parts) == 2
    # Both physical partitions are named with their token ranges (20 keys land in both).
    for start, end in parts:
        assert f"({start}, {end}]" in feed[0], feed[0]
    rest = s.execute(st, paging_state=rs.paging_state)
    empty = s.execute(st, paging_state=rest.paging_state)
    assert len(rest.current_rows) == 10 and not empty.current_rows
    assert charge(empty) == 1.0  # the read minimum
    c.shutdown()


def test_all_tables_setting_records_tables_created_without_cdc(server_factory, unique_name):
    """`changefeed.all_tables = true`: a Cosmos DB application's schema (no `cdc`) has a feed,
    and a batch over a cdc table and a table without it records only the cdc one by default."""
    srv = server_factory(set_args=["changefeed.all_tables=true"])
    c, s = connect(srv)
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c))")
    start_ms = int(time.time() * 1000) - 1000
    for i in range(5):
        s.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES ({i}, {i}, {i})")
    con = Consumer(s, feed_query(ks, start_ms), page=2)
    con.drain()
    assert sorted(e[3] for e in con.events) == list(range(5))
    c.shutdown()

    srv = server_factory()
    c, s = connect(srv)
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c)) WITH cdc = true")
    s.execute(f"CREATE TABLE {ks}.plain (k int, c int, v int, PRIMARY KEY (k, c))")
    s.execute(f"ALTER TABLE {ks}.plain WITH cdc = true")
    s.execute(f"ALTER TABLE {ks}.plain WITH cdc = false")
    start_ms = int(time.time() * 1000) - 1000
    s.execute(f"BEGIN BATCH INSERT INTO {ks}.t (k, c, v) VALUES (1, 1, 1); "
              f"INSERT INTO {ks}.plain (k, c, v) VALUES (1, 1, 1); APPLY BATCH")
    con = Consumer(s, feed_query(ks, start_ms))
    con.drain()
    assert [e[3] for e in con.events] == [1]
    # The table without cdc recorded nothing: turned on now, its feed since the start is empty.
    s.execute(f"ALTER TABLE {ks}.plain WITH cdc = true")
    plain = Consumer(s, feed_query(ks, start_ms).replace(f"{ks}.t ", f"{ks}.plain "))
    plain.drain()
    assert plain.events == []
    c.shutdown()
