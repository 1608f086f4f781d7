"""Fault injection during schema changes: the server is killed with SIGKILL at a random moment
while clients write and one schema change runs: TRUNCATE, DROP TABLE, DROP KEYSPACE, ALTER TABLE
ADD and DROP column, ALTER TYPE, and ALTER TABLE ... WITH cosmosdb_provisioned_throughput that
splits the table. Each round has its own keyspace; the kill may land before, during or after the
change.

After each restart a model of what was acknowledged is checked:
- every acknowledged write is there, unless an acknowledged TRUNCATE or DROP sent after it
  removed it; a change the kill interrupted left everything or nothing (TRUNCATE is all or
  nothing, a table or keyspace is there with all its data or gone);
- an acknowledged change is there (the column, the type's field, the split);
- the partition map covers the ring and the logical partition counts of system_views match a
  count of the rows;
- the secondary index answers exactly what a scan finds (no entry without its row);
- dropped tables, keyspaces and columns stay dropped, and their data never comes back: they are
  created again empty, and checked again after every later restart.

RINGGATE_DDL_FAULT_RUNS sets the number of rounds (default 7, one per kind, ~3 s each);
scripts/faults runs many more."""

import os
import random
import threading
import time

from cassandra.cluster import Cluster

from rgtest import kill9_and_restart

RUNS = int(os.environ.get("RINGGATE_DDL_FAULT_RUNS", "7"))
SEED = int(os.environ.get("RINGGATE_FAULT_SEED", "1415"))
KINDS = ["truncate", "drop_table", "drop_keyspace", "add_column", "drop_column", "alter_type", "split"]
MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1
PAYLOAD = 512
PRELOAD = 200
GROUPS = 10
SPLIT_RU = 40_000  # ceil(40,000 / 10,000) = 4 physical partitions
# Small splits so that the write load also splits partitions in the background. Server-side
# retry: after the split round's ALTER the table is rate-limited, at most 10,000 RU/s per
# physical partition. When the kill interrupted the split, one partition holds all of the
# round's ~5,000 rows, and the checks' COUNT(*) and scan spend its second of budget at once;
# the index queries after them were rejected with a 429 (a CI run of de4ccbc). Held, they wait
# for the budget as on a Cosmos DB account with server-side retry.
SETTINGS = {"partitions.physical_split_bytes": "1MiB", "partitions.logical_max_bytes": "256KiB",
            "throughput.server_side_retry": True}


def connect(srv):
    c = Cluster(contact_points=[srv.host], port=srv.port, connect_timeout=10)
    return c, c.connect()


def payload(key):
    return key.to_bytes(8, "big") * (PAYLOAD // 8)


def create_round(s, ks):
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.execute(f"CREATE TYPE {ks}.u (a bigint)")
    s.execute(f"CREATE TABLE {ks}.t (id bigint PRIMARY KEY, v blob, g int, w bigint, x frozen<u>)")
    s.execute(f"CREATE INDEX t_g ON {ks}.t (g)")


def insert_stmt(s, ks):
    return s.prepare(f"INSERT INTO {ks}.t (id, v, g, w, x) VALUES (?, ?, ?, ?, {{a: ?}})")


def row_values(key):
    return (key, payload(key), key % GROUPS, key, key)


class Writer(threading.Thread):
    """Writes until told to stop; records each acknowledged key with when its request was
    sent. Errors (the server died, the table was dropped) do not end it: later writes may work."""

    def __init__(self, session, ks, base, stop):
        super().__init__(daemon=True)
        self.s, self.ks, self.base, self.stop = session, ks, base, stop
        self.acked = []  # (key, request sent at, acknowledged at)

    def run(self):
        try:
            ins = insert_stmt(self.s, self.ks)
        except Exception:
            return
        key = self.base
        while not self.stop.is_set():
            key += 1
            sent = time.monotonic()
            try:
                self.s.execute(ins, row_values(key), timeout=5)
            except Exception:
                time.sleep(0.02)
                continue
            self.acked.append((key, sent, time.monotonic()))


class Change(threading.Thread):
    """Runs one schema change after a delay; records when it was sent and whether (and when)
    it was acknowledged, and for ADD column the rows written with the new column afterwards."""

    def __init__(self, session, ks, kind, delay_s):
        super().__init__(daemon=True)
        self.s, self.ks, self.kind, self.delay_s = session, ks, kind, delay_s
        self.sent = self.acked_at = None
        self.after_rows = []

    def statement(self):
        ks = self.ks
        return {
            "truncate": f"TRUNCATE {ks}.t",
            "drop_table": f"DROP TABLE {ks}.t",
            "drop_keyspace": f"DROP KEYSPACE {ks}",
            "add_column": f"ALTER TABLE {ks}.t ADD c bigint",
            "drop_column": f"ALTER TABLE {ks}.t DROP w",
            "alter_type": f"ALTER TYPE {ks}.u ADD b text",
            "split": f"ALTER TABLE {ks}.t WITH cosmosdb_provisioned_throughput = {SPLIT_RU}",
        }[self.kind]

    def run(self):
        time.sleep(self.delay_s)
        self.sent = time.monotonic()
        try:
            self.s.execute(self.statement(), timeout=30)
        except Exception:
            return
        self.acked_at = time.monotonic()
        if self.kind == "add_column":
            try:
                ins = self.s.prepare(f"INSERT INTO {self.ks}.t (id, c) VALUES (?, ?)")
                for key in range(-1, -21, -1):
                    self.s.execute(ins, (key, key), timeout=5)
                    self.after_rows.append(key)
            except Exception:
                return


def exists(s, ks, table=None):
    if table is None:
        return s.execute("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one() is not None
    return s.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                     (ks, table)).one() is not None


def columns(s, ks):
    return {r.column_name for r in s.execute(
        "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 't'", (ks,))}


def check_partitions(s, ks):
    """The map covers the ring; the logical partition counts match a count of the rows."""
    parts = sorted(s.execute("SELECT token_start, token_end, logical_partitions FROM system_views.physical_partitions "
                             "WHERE keyspace_name = %s AND table_name = 't'", (ks,)), key=lambda r: r.token_start)
    assert parts, f"{ks}.t has no physical partitions"
    assert parts[0].token_start == MIN_TOKEN and parts[-1].token_end == MAX_TOKEN, parts
    for a, b in zip(parts, parts[1:]):
        assert a.token_end == b.token_start, f"{ks}: gap or overlap: {a} {b}"
    rows = s.execute(f"SELECT COUNT(*) FROM {ks}.t").one()[0]
    assert sum(p.logical_partitions for p in parts) == rows, (ks, parts, rows)
    return len(parts)


def check_index(s, ks):
    """The index on g answers what a scan finds, group by group."""
    scan = {}
    for r in s.execute(f"SELECT id, g FROM {ks}.t"):
        scan.setdefault(r.g, set()).add(r.id)
    q = s.prepare(f"SELECT id FROM {ks}.t WHERE g = ?")
    for g in range(GROUPS):
        via_index = {r.id for r in s.execute(q, (g,))}
        assert via_index == scan.get(g, set()), f"{ks}: index and scan differ for g = {g}"


def present_keys(s, ks, keys):
    q = s.prepare(f"SELECT id, v, x FROM {ks}.t WHERE id = ?")
    found = set()
    for key in keys:
        row = s.execute(q, (key,)).one()
        if row is not None:
            assert row.v == payload(key) and row.x.a == key, f"{ks}: row {key} corrupted: {row}"
            found.add(key)
    return found


def split_keys(change, acked):
    """The keys acknowledged before the change was sent, and those sent after it was
    acknowledged (the rest raced with it)."""
    if change.sent is None:
        return {k for k, _, _ in acked}, set()
    before = {k for k, _, done_at in acked if done_at < change.sent}
    after = {k for k, sent, _ in acked if change.acked_at is not None and sent > change.acked_at}
    return before, after


def verify_round(s, ks, change, acked):
    """Checks the round's model; returns the dropped things to watch ('table'/'keyspace'), or None."""
    kind, done = change.kind, change.acked_at is not None
    before, after = split_keys(change, acked)
    if kind in ("drop_table", "drop_keyspace"):
        gone = not exists(s, ks) if kind == "drop_keyspace" else not exists(s, ks, "t")
        assert gone or not done, f"{ks}: acknowledged {kind} undone by the restart"
        if gone:
            parts = [r for r in s.execute("SELECT table_name FROM system_views.physical_partitions "
                                          "WHERE keyspace_name = %s", (ks,)) if r.table_name == "t"]
            assert not parts, f"{ks}: the dropped table still has physical partitions"
            return kind
        assert present_keys(s, ks, before) == before, f"{ks}: lost acknowledged rows (no {kind} happened)"
    elif kind == "truncate":
        found = present_keys(s, ks, before | after)
        assert after <= found, f"{ks}: lost rows acknowledged after the TRUNCATE: {sorted(after - found)[:5]}"
        kept = found & before
        if done:
            assert not kept, f"{ks}: rows written before an acknowledged TRUNCATE came back: {sorted(kept)[:5]}"
        else:
            assert kept in (set(), before), f"{ks}: an interrupted TRUNCATE removed part of the data"
    else:
        found = present_keys(s, ks, before | after)
        assert found == before | after, f"{ks}: lost acknowledged rows: {sorted((before | after) - found)[:5]}"
        verify_alter(s, ks, change, before)
    check_partitions(s, ks)
    check_index(s, ks)
    return None


def verify_alter(s, ks, change, before):
    kind, done = change.kind, change.acked_at is not None
    if kind == "add_column":
        assert "c" in columns(s, ks) or not done, f"{ks}: acknowledged ADD c lost"
        if change.after_rows:
            q = s.prepare(f"SELECT c FROM {ks}.t WHERE id = ?")
            for key in change.after_rows:
                assert s.execute(q, (key,)).one().c == key, f"{ks}: row {key} written with c lost"
    elif kind == "drop_column":
        if "w" in columns(s, ks):
            assert not done, f"{ks}: acknowledged DROP w undone by the restart"
            q = s.prepare(f"SELECT w FROM {ks}.t WHERE id = ?")
            for key in sorted(before)[:50]:
                assert s.execute(q, (key,)).one().w == key, f"{ks}: column w lost its value in row {key}"
        else:
            # Dropped: adding it again must not bring the old values back.
            s.execute(f"ALTER TABLE {ks}.t ADD w bigint")
            assert_no_w(s, ks, before)
    elif kind == "alter_type":
        fields = s.execute("SELECT field_names FROM system_schema.types WHERE keyspace_name = %s AND type_name = 'u'",
                           (ks,)).one().field_names
        assert "b" in fields or not done, f"{ks}: acknowledged ALTER TYPE lost: {fields}"
    elif kind == "split" and done:
        parts = check_partitions(s, ks)
        assert parts >= SPLIT_RU // 10_000, f"{ks}: acknowledged throughput split left {parts} partitions"


def assert_no_w(s, ks, keys):
    q = s.prepare(f"SELECT w FROM {ks}.t WHERE id = ?")
    for key in sorted(keys)[:50]:
        row = s.execute(q, (key,)).one()
        assert row is None or row.w is None, f"{ks}: dropped column w came back in row {key}"


def recreate_dropped(s, ks, what):
    """Creates a dropped table (or keyspace) again: it must be empty."""
    if what == "drop_keyspace":
        create_round(s, ks)
    else:
        s.execute(f"CREATE TABLE {ks}.t (id bigint PRIMARY KEY, v blob, g int, w bigint, x frozen<u>)")
        s.execute(f"CREATE INDEX t_g ON {ks}.t (g)")
    assert_empty(s, ks)


def assert_empty(s, ks):
    assert s.execute(f"SELECT COUNT(*) FROM {ks}.t").one()[0] == 0, f"{ks}: dropped data came back"
    assert not s.execute(f"SELECT id FROM {ks}.t WHERE g = 1").all(), f"{ks}: dropped index entries came back"
    check_partitions(s, ks)


def run_round(srv, run, kind, rng):
    ks = f"ddl{run}"
    c, s = connect(srv)
    create_round(s, ks)
    ins = insert_stmt(s, ks)
    for key in range(1, PRELOAD + 1):
        s.execute(ins, row_values(key))
    stop = threading.Event()
    writers = [Writer(s, ks, (w + 1) * 10_000_000, stop) for w in range(2)]
    change = Change(s, ks, kind, rng.uniform(0.0, 1.0))
    for t in writers + [change]:
        t.start()
    time.sleep(rng.uniform(0.1, 1.6))
    kill9_and_restart(srv, writers + [change], c, stop)
    acked = [(k, 0.0, 0.0) for k in range(1, PRELOAD + 1)] + [a for w in writers for a in w.acked]
    return ks, change, acked


def test_kill9_during_truncate_drop_alter_and_split(server_factory):
    srv = server_factory(settings=SETTINGS)
    rng = random.Random(SEED)
    emptied = []  # keyspaces whose dropped table (or the keyspace) was created again empty
    survivors = {}  # keyspace -> a sample of its acknowledged keys that must stay
    outcomes = {}
    for run in range(RUNS):
        kind = KINDS[run % len(KINDS)]
        ks, change, acked = run_round(srv, run, kind, rng)
        c, s = connect(srv)
        try:
            dropped = verify_round(s, ks, change, acked)
            outcomes[(kind, change.acked_at is not None)] = outcomes.get((kind, change.acked_at is not None), 0) + 1
            if dropped:
                recreate_dropped(s, ks, dropped)
                emptied.append(ks)
            elif kind not in ("truncate",):
                before, after = split_keys(change, acked)
                survivors[ks] = set(rng.sample(sorted(before | after), min(50, len(before | after))))
            # Earlier rounds: dropped data stays away, kept data stays.
            for old in emptied:
                assert_empty(s, old)
            for old, keys in survivors.items():
                assert present_keys(s, old, keys) == keys, f"{old}: rows lost in a later round"
        finally:
            c.shutdown()
    print("outcomes (kind, acknowledged): count", outcomes)
    assert any(done for (_, done) in outcomes), "no schema change was acknowledged before the kill"
