"""Fault injection during the tombstone sweeper: the server is killed with SIGKILL while
`garbage-collect` sweeps a table whose partition deletion, range tombstones and row deletions
are past gc_grace_seconds (0), and while clients write new rows into the deleted ranges.

The server runs with RINGGATE_TEST_SWEEP_PAUSE_MS, which sleeps before each chunk of a sweep
(outside the partition lock), so the kill lands between chunks of a partition, between
partitions, before the sweep or after it. Each partition has more shadowed rows than one chunk
rewrites (1,000), so a sweep of one partition takes three chunks; its tombstones go in the last.

After each restart:
- every acknowledged write is there with its values, none of the deleted rows came back (only
  rows a client wrote again, acknowledged or in flight at the kill, are there);
- the partition map covers the ring; the secondary index answers what a scan finds;
- a complete garbage-collect then changes nothing a client sees, and afterwards the logical
  partition counts of system_views match the partitions a scan finds.
Earlier rounds' tables are checked again after every later restart.

RINGGATE_SWEEP_FAULT_RUNS sets the number of rounds (default 3, ~6 s each); scripts/faults
runs many more."""

import os
import random
import threading
import time

from cassandra.cluster import Cluster

from rgtest import kill9_and_restart

RUNS = int(os.environ.get("RINGGATE_SWEEP_FAULT_RUNS", "3"))
SEED = int(os.environ.get("RINGGATE_FAULT_SEED", "1416"))
PAUSE_MS = 150
MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1
PARTS = 4
ROWS = 2400  # per partition
DELETED_RANGE = (200, 2200)  # ck >= 200 AND ck < 2200: 2,000 shadowed rows, three chunks
GROUPS = 7
NEW_PARTS = 100  # writers also create partitions pk >= NEW_PARTS


def connect(srv):
    c = Cluster(contact_points=[srv.host], port=srv.port, connect_timeout=10)
    return c, c.connect()


def value(pk, ck):
    return (pk * 1_000_003 + ck).to_bytes(8, "big") * 2


def create_round(s, ks):
    """The table, its rows and the deletions; returns the keys that are live before the sweep."""
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.execute(f"CREATE TABLE {ks}.t (pk int, ck int, v blob, g int, PRIMARY KEY (pk, ck)) WITH gc_grace_seconds = 0")
    s.execute(f"CREATE INDEX t_g ON {ks}.t (g)")
    for pk in range(PARTS):
        for start in range(0, ROWS, 200):
            inserts = "".join(f"INSERT INTO {ks}.t (pk, ck, v, g) VALUES ({pk}, {ck}, 0x{value(pk, ck).hex()}, "
                              f"{ck % GROUPS}); " for ck in range(start, start + 200))
            s.execute(f"BEGIN UNLOGGED BATCH {inserts}APPLY BATCH", timeout=30)
    live = {(pk, ck) for pk in range(PARTS) for ck in range(ROWS)}
    # pk 0: a partition deletion; the others: a range tombstone and row deletions.
    s.execute(f"DELETE FROM {ks}.t WHERE pk = 0")
    live -= {(0, ck) for ck in range(ROWS)}
    lo, hi = DELETED_RANGE
    for pk in range(1, PARTS):
        s.execute(f"DELETE FROM {ks}.t WHERE pk = {pk} AND ck >= {lo} AND ck < {hi}")
        live -= {(pk, ck) for ck in range(lo, hi)}
        for ck in range(5, ROWS, 97):
            s.execute(f"DELETE FROM {ks}.t WHERE pk = {pk} AND ck = {ck}")
            live.discard((pk, ck))
    return live


class Writer(threading.Thread):
    """Writes rows again into the deleted ranges (and into new partitions) until told to stop;
    records what was sent and what was acknowledged."""

    def __init__(self, session, ks, rng, stop):
        super().__init__(daemon=True)
        self.s, self.ks, self.rng, self.stop = session, ks, rng, stop
        self.sent, self.acked = set(), set()

    def run(self):
        try:
            ins = self.s.prepare(f"INSERT INTO {self.ks}.t (pk, ck, v, g) VALUES (?, ?, ?, ?)")
        except Exception:
            return
        while not self.stop.is_set():
            pk = self.rng.choice([*range(PARTS), NEW_PARTS + self.rng.randrange(3)])
            ck = self.rng.randrange(ROWS)
            self.sent.add((pk, ck))
            try:
                self.s.execute(ins, (pk, ck, value(pk, ck), ck % GROUPS), timeout=5)
            except Exception:
                time.sleep(0.02)
                continue
            self.acked.add((pk, ck))


class Sweep(threading.Thread):
    """Runs garbage-collect on the table; records whether it was acknowledged."""

    def __init__(self, session, ks):
        super().__init__(daemon=True)
        self.s, self.ks = session, ks
        self.done = False

    def run(self):
        try:
            garbage_collect(self.s, self.ks)
        except Exception:
            return
        self.done = True


def garbage_collect(s, ks):
    row = s.execute("INSERT INTO system_views.maintenance (command, keyspace_name, table_name) "
                    f"VALUES ('garbage-collect', '{ks}', 't')", timeout=120).one()
    assert "partitions lost tombstones" in row.result, row


def scan(s, ks):
    """Every row of the table, checked against the value it was written with."""
    found = set()
    for r in s.execute(f"SELECT pk, ck, v, g FROM {ks}.t"):
        assert r.v == value(r.pk, r.ck) and r.g == r.ck % GROUPS, f"{ks}: row corrupted: {r}"
        found.add((r.pk, r.ck))
    return found


def check_rows(s, ks, live, in_flight):
    """Every live row is there; nothing else but rows written again (in flight at the kill)."""
    found = scan(s, ks)
    lost = live - found
    assert not lost, f"{ks}: lost live rows: {sorted(lost)[:5]}"
    back = found - live - in_flight
    assert not back, f"{ks}: deleted rows came back: {sorted(back)[:5]}"
    return found


def check_map(s, ks):
    """The map covers the ring; returns the logical partitions the views count."""
    parts = sorted(s.execute("SELECT token_start, token_end, logical_partitions FROM system_views.physical_partitions "
                             "WHERE keyspace_name = %s AND table_name = 't'", (ks,)), key=lambda r: r.token_start)
    assert parts and parts[0].token_start == MIN_TOKEN and parts[-1].token_end == MAX_TOKEN, parts
    for a, b in zip(parts, parts[1:]):
        assert a.token_end == b.token_start, f"{ks}: gap or overlap: {a} {b}"
    return sum(p.logical_partitions for p in parts)


def check_index(s, ks, found):
    by_g = {}
    for pk, ck in found:
        by_g.setdefault(ck % GROUPS, set()).add((pk, ck))
    q = s.prepare(f"SELECT pk, ck FROM {ks}.t WHERE g = ?")
    for g in range(GROUPS):
        via_index = {(r.pk, r.ck) for r in s.execute(q, (g,))}
        assert via_index == by_g.get(g, set()), f"{ks}: index and scan differ for g = {g}"


def verify_round(s, ks, live, in_flight):
    """The checks after a restart, then a complete sweep and the checks again; returns the rows."""
    found = check_rows(s, ks, live, in_flight)
    check_map(s, ks)
    check_index(s, ks, found)
    garbage_collect(s, ks)
    assert scan(s, ks) == found, f"{ks}: a complete garbage-collect changed the rows"
    check_index(s, ks, found)
    partitions = {pk for pk, _ in found}
    assert check_map(s, ks) == len(partitions), f"{ks}: logical partition counts differ from a scan"
    return found


def run_round(srv, ks, rng):
    c, s = connect(srv)
    live = create_round(s, ks)
    stop = threading.Event()
    writer = Writer(s, ks, random.Random(rng.random()), stop)
    sweep = Sweep(s, ks)
    writer.start()
    sweep.start()
    # Four partitions of three chunks each at PAUSE_MS: the sweep takes ~1.8 s.
    time.sleep(rng.uniform(0.05, 2.2))
    kill9_and_restart(srv, [writer, sweep], c, stop)
    return live | writer.acked, writer.sent - writer.acked, sweep.done


def test_kill9_during_tombstone_sweeps(server_factory, monkeypatch):
    monkeypatch.setenv("RINGGATE_TEST_SWEEP_PAUSE_MS", str(PAUSE_MS))
    srv = server_factory()
    rng = random.Random(SEED)
    kept = {}  # keyspace -> its rows after the round's checks
    outcomes = {True: 0, False: 0}
    for run in range(RUNS):
        ks = f"sweep{run}"
        live, in_flight, done = run_round(srv, ks, rng)
        outcomes[done] += 1
        c, s = connect(srv)
        try:
            kept[ks] = verify_round(s, ks, live, in_flight)
            for old, rows in kept.items():
                assert scan(s, old) == rows, f"{old}: rows changed in a later round"
        finally:
            c.shutdown()
    print("sweep outcomes (acknowledged before the kill): count", outcomes)
    if RUNS >= 3:
        assert outcomes[False] > 0, "every sweep finished before the kill: the test did not kill a sweep"
