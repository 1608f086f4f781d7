"""Fault injection with real processes: the server is killed with SIGKILL at a random moment
while clients write (plain inserts, LWT, logged batches) and partitions split under the load.
After each restart every acknowledged write is there, a logged batch is all or nothing, and the
partition invariants hold (the map covers the ring, logical partition counts match the data).

RINGGATE_FAULT_RUNS sets the number of kill/restart rounds (default 12, each ~2-4 s)."""

import os
import random
import threading
import time

from cassandra.cluster import Cluster

from rgtest import kill9_and_restart

RUNS = int(os.environ.get("RINGGATE_FAULT_RUNS", "12"))
MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1
PAYLOAD = 2048
SPLIT_SETTINGS = {"partitions.physical_split_bytes": "1MiB", "partitions.logical_max_bytes": "256KiB"}


def connect(srv):
    c = Cluster(contact_points=[srv.host], port=srv.port, connect_timeout=10)
    return c, c.connect()


def payload(key):
    return (key.to_bytes(8, "big") * (PAYLOAD // 8))


class Writer(threading.Thread):
    """Writes until the server dies; records what was acknowledged."""

    def __init__(self, session, base, kind):
        super().__init__(daemon=True)
        self.session, self.base, self.kind = session, base, kind
        self.acked = []

    def run(self):
        s = self.session
        ins = s.prepare("INSERT INTO f.rows (id, v) VALUES (?, ?)")
        lwt = s.prepare("INSERT INTO f.lwt (id, v) VALUES (?, ?) IF NOT EXISTS")
        for i in range(1_000_000):
            key = self.base + i
            try:
                if self.kind == "plain":
                    s.execute(ins, (key, payload(key)), timeout=5)
                elif self.kind == "lwt":
                    assert s.execute(lwt, (key, key), timeout=5).one().applied
                else:
                    s.execute(f"BEGIN BATCH INSERT INTO f.rows (id, v) VALUES ({key}, 0x{payload(key).hex()}); "
                              f"INSERT INTO f.pair (id, v) VALUES ({key}, {key}); APPLY BATCH", timeout=5)
            except Exception:
                return
            self.acked.append(key)


def check_invariants(s):
    parts = sorted(s.execute("SELECT token_start, token_end, logical_partitions FROM "
                             "system_views.physical_partitions WHERE keyspace_name = 'f' AND table_name = 'rows'"),
                   key=lambda r: r.token_start)
    assert parts[0].token_start == MIN_TOKEN and parts[-1].token_end == MAX_TOKEN
    for a, b in zip(parts, parts[1:]):
        assert a.token_end == b.token_start, f"gap or overlap: {a} {b}"
    rows = s.execute("SELECT COUNT(*) FROM f.rows").one()[0]
    assert sum(p.logical_partitions for p in parts) == rows, (parts, rows)
    return len(parts)


def verify(s, run, acked):
    """Every acknowledged write in `acked` is there; the batches of this round are whole."""
    rows = s.prepare("SELECT v FROM f.rows WHERE id = ?")
    for key in acked["plain"] | acked["batch"]:
        row = s.execute(rows, (key,)).one()
        assert row is not None and row.v == payload(key), f"run {run}: acknowledged row {key} lost"
    lwt = s.prepare("SELECT v FROM f.lwt WHERE id = ?")
    for key in acked["lwt"]:
        assert s.execute(lwt, (key,)).one().v == key, f"run {run}: acknowledged LWT {key} lost"
    # Logged batches: all or nothing, acknowledged or not (the round's batch writer's range).
    base = (run * 3 + 2) * 10_000_000
    pair_ids = {r.id for r in s.execute("SELECT id FROM f.pair") if base <= r.id < base + 10_000_000}
    assert {k for k in acked["batch"] if k >= base} <= pair_ids
    for key in pair_ids:
        assert s.execute(rows, (key,)).one() is not None, f"run {run}: half a batch ({key})"


def test_kill9_during_writes_lwt_batches_and_splits(server_factory):
    srv = server_factory(settings=SPLIT_SETTINGS)
    c, s = connect(srv)
    s.execute("CREATE KEYSPACE f WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE f.rows (id bigint PRIMARY KEY, v blob)")
    s.execute("CREATE TABLE f.lwt (id bigint PRIMARY KEY, v bigint)")
    s.execute("CREATE TABLE f.pair (id bigint PRIMARY KEY, v bigint)")
    c.shutdown()
    rng = random.Random(1414)
    acked = {"plain": set(), "lwt": set(), "batch": set()}
    splits_seen = 1
    for run in range(RUNS):
        c, s = connect(srv)
        writers = [Writer(s, (run * 3 + k) * 10_000_000, kind) for k, kind in enumerate(acked)]
        for w in writers:
            w.start()
        time.sleep(rng.uniform(0.2, 1.5))
        kill9_and_restart(srv, writers, c)
        c, s = connect(srv)
        # This round's acknowledged writes, and a sample of the earlier ones.
        new = {kind: set(w.acked) for kind, w in zip(acked, writers)}
        verify(s, run, {k: new[k] | set(rng.sample(sorted(v), min(100, len(v)))) for k, v in acked.items()})
        for kind, keys in new.items():
            acked[kind] |= keys
        splits_seen = max(splits_seen, check_invariants(s))
        c.shutdown()
    assert sum(len(v) for v in acked.values()) > 0
    assert splits_seen > 1, "the load never split a partition: the test did not exercise splits"
