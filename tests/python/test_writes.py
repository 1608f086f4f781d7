"""Write semantics (issue 4): timestamps, row liveness, tombstones, TTL, lightweight transactions,
batches and TRUNCATE, checked with the Python driver against Cassandra's rules."""

import random
import time

import pytest
from cassandra import InvalidRequest

from rgtest import create_keyspace


@pytest.fixture
def ks(session, unique_name):
    name = unique_name("wr")
    create_keyspace(session, name)
    return name


def rows(session, q, *args):
    return [tuple(r) for r in session.execute(q, args or None)]


# ------------------------------------------------------------------ liveness and tombstones


def test_insert_creates_row_update_does_not(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {ks}.t (k, c) VALUES (1, 1)")
    assert rows(session, f"SELECT k, c, v FROM {ks}.t WHERE k = 1") == [(1, 1, None)]
    session.execute(f"UPDATE {ks}.t SET v = 5 WHERE k = 2 AND c = 1")
    assert rows(session, f"SELECT k, c, v FROM {ks}.t WHERE k = 2") == [(2, 1, 5)]
    # an UPDATE-made row disappears when its only column is deleted; an INSERT-made one stays
    session.execute(f"DELETE v FROM {ks}.t WHERE k = 2 AND c = 1")
    assert rows(session, f"SELECT * FROM {ks}.t WHERE k = 2") == []
    session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (3, 1, 7)")
    session.execute(f"DELETE v FROM {ks}.t WHERE k = 3 AND c = 1")
    assert rows(session, f"SELECT k, c, v FROM {ks}.t WHERE k = 3") == [(3, 1, None)]


def test_range_and_prefix_deletions(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, a int, b int, v int, PRIMARY KEY (k, a, b))")
    for a in range(4):
        for b in range(3):
            session.execute(f"INSERT INTO {ks}.t (k, a, b, v) VALUES (0, {a}, {b}, 1) USING TIMESTAMP 10")
    session.execute(f"DELETE FROM {ks}.t USING TIMESTAMP 20 WHERE k = 0 AND a = 1")
    session.execute(f"DELETE FROM {ks}.t USING TIMESTAMP 20 WHERE k = 0 AND a = 2 AND b >= 1")
    session.execute(f"DELETE FROM {ks}.t USING TIMESTAMP 20 WHERE k = 0 AND a > 2")
    got = rows(session, f"SELECT a, b FROM {ks}.t WHERE k = 0")
    assert got == [(0, 0), (0, 1), (0, 2), (2, 0)]
    # older writes stay shadowed, newer ones show
    session.execute(f"INSERT INTO {ks}.t (k, a, b, v) VALUES (0, 1, 0, 2) USING TIMESTAMP 15")
    session.execute(f"INSERT INTO {ks}.t (k, a, b, v) VALUES (0, 3, 5, 3) USING TIMESTAMP 25")
    session.execute(f"INSERT INTO {ks}.t (k, a, b, v) VALUES (0, 2, 2, 4) USING TIMESTAMP 20")
    got = rows(session, f"SELECT a, b, v FROM {ks}.t WHERE k = 0")
    assert got == [(0, 0, 1), (0, 1, 1), (0, 2, 1), (2, 0, 1), (3, 5, 3)]
    # also in a full scan
    got = rows(session, f"SELECT a, b FROM {ks}.t")
    assert got == [(0, 0), (0, 1), (0, 2), (2, 0), (3, 5)]
    # a range with < and <= on a DESC column
    session.execute(f"CREATE TABLE {ks}.d (k int, c int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)")
    for c in range(10):
        session.execute(f"INSERT INTO {ks}.d (k, c) VALUES (0, {c})")
    session.execute(f"DELETE FROM {ks}.d WHERE k = 0 AND c > 2 AND c <= 6")
    assert [r.c for r in session.execute(f"SELECT c FROM {ks}.d WHERE k = 0")] == [9, 8, 7, 2, 1, 0]
    with pytest.raises(InvalidRequest, match="Range deletions are not supported for specific columns"):
        session.execute(f"DELETE v FROM {ks}.t WHERE k = 0 AND a > 1")


def test_partition_deletion_and_static(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, s int STATIC, v int, PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {ks}.t (k, c, s, v) VALUES (0, 1, 9, 1) USING TIMESTAMP 10")
    session.execute(f"DELETE FROM {ks}.t USING TIMESTAMP 11 WHERE k = 0")
    assert rows(session, f"SELECT * FROM {ks}.t WHERE k = 0") == []
    session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (0, 2, 2) USING TIMESTAMP 9")
    assert rows(session, f"SELECT * FROM {ks}.t WHERE k = 0") == []
    session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (0, 3, 3) USING TIMESTAMP 12")
    assert rows(session, f"SELECT k, c, s, v FROM {ks}.t WHERE k = 0") == [(0, 3, None, 3)]


def test_static_only_partitions(session, ks):
    from cassandra.query import SimpleStatement
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, s int STATIC, v int, PRIMARY KEY (k, c))")
    # INSERT of only the partition key and static columns writes the static row alone
    for k in range(6):
        session.execute(f"INSERT INTO {ks}.t (k, s) VALUES ({k}, {k * 10})")
    session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (2, 1, 21)")
    session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (2, 2, 22)")
    with pytest.raises(InvalidRequest, match="Some clustering keys are missing: c"):
        session.execute(f"INSERT INTO {ks}.t (k, s, v) VALUES (1, 1, 1)")
    with pytest.raises(InvalidRequest, match="Some clustering keys are missing: c"):
        session.execute(f"INSERT INTO {ks}.t (k) VALUES (1)")
    assert rows(session, f"SELECT k, c, s, v FROM {ks}.t WHERE k = 3") == [(3, None, 30, None)]
    # full scans and token ranges return partitions with only static content as one row with
    # null clustering and regular columns, as Cassandra does; every page size sees each once
    want = sorted([(k, None, k * 10, None) for k in range(6) if k != 2] + [(2, 1, 20, 21), (2, 2, 20, 22)],
                  key=lambda r: (r[0], r[1] or 0))
    for fetch in (1, 2, 3, 100):
        got = [tuple(r) for r in session.execute(
            SimpleStatement(f"SELECT k, c, s, v FROM {ks}.t", fetch_size=fetch))]
        assert sorted(got, key=lambda r: (r[0], r[1] or 0)) == want, fetch
    got = rows(session, f"SELECT k, s FROM {ks}.t WHERE token(k) >= {-2**63} AND token(k) <= {2**63 - 1}")
    assert sorted(got) == sorted([(k, k * 10) for k in range(6) for _ in range(2 if k == 2 else 1)])
    # a filter on a regular column excludes them
    assert rows(session, f"SELECT k FROM {ks}.t WHERE v = 21 ALLOW FILTERING") == [(2,)]
    assert session.execute(f"SELECT count(*) FROM {ks}.t").one()[0] == 7


def test_index_reads_honour_range_tombstones(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (p int, c int, v int, PRIMARY KEY (p, c))")
    session.execute(f"CREATE INDEX ON {ks}.t (v)")
    for c in range(4):
        session.execute(f"INSERT INTO {ks}.t (p, c, v) VALUES (1, {c}, 7)")
    session.execute(f"DELETE FROM {ks}.t WHERE p = 1 AND c >= 2")
    assert rows(session, f"SELECT c FROM {ks}.t WHERE v = 7") == [(0,), (1,)]
    assert rows(session, f"SELECT c FROM {ks}.t WHERE p = 1") == [(0,), (1,)]


class Model:
    """Cassandra's reconciliation for one table (k, c) -> v, w: last write wins per cell; on a
    timestamp tie a deletion beats a write and between two writes the greater value wins."""

    def __init__(self):
        self.cells = {}  # (k, c, col) -> (ts, value or None)
        self.marker = {}  # (k, c) -> ts
        self.row_del = {}  # (k, c) -> ts
        self.part_del = {}  # k -> ts

    def put(self, key, ts, value):
        cur = self.cells.get(key)
        if cur is None or ts > cur[0] or (ts == cur[0] and cur[1] is not None and
                                          (value is None or value > cur[1])):
            self.cells[key] = (ts, value)

    def insert(self, k, c, v, w, ts):
        self.marker[(k, c)] = max(ts, self.marker.get((k, c), ts))
        self.put((k, c, "v"), ts, v)
        self.put((k, c, "w"), ts, w)

    def update(self, k, c, col, value, ts):
        self.put((k, c, col), ts, value)

    def delete_row(self, k, c, ts):
        self.row_del[(k, c)] = max(ts, self.row_del.get((k, c), ts))

    def delete_partition(self, k, ts):
        self.part_del[k] = max(ts, self.part_del.get(k, ts))

    def state(self):
        out = {}
        keys = {(k, c) for (k, c, _) in self.cells} | set(self.marker)
        for (k, c) in keys:
            dead = max(self.row_del.get((k, c), -1), self.part_del.get(k, -1))
            vals = {}
            for col in ("v", "w"):
                cell = self.cells.get((k, c, col))
                vals[col] = cell[1] if cell and cell[0] > dead else None
            live = self.marker.get((k, c), -1) > dead or any(
                (self.cells.get((k, c, col)) or (-1, None))[0] > dead and vals[col] is not None
                for col in ("v", "w"))
            if live:
                out[(k, c)] = (vals["v"], vals["w"])
        return out


def test_random_timestamps_match_model(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, w int, PRIMARY KEY (k, c))")
    rnd = random.Random(4)
    model = Model()
    ins = session.prepare(f"INSERT INTO {ks}.t (k, c, v, w) VALUES (?, ?, ?, ?) USING TIMESTAMP ?")
    upv = session.prepare(f"UPDATE {ks}.t USING TIMESTAMP ? SET v = ? WHERE k = ? AND c = ?")
    delv = session.prepare(f"DELETE w FROM {ks}.t USING TIMESTAMP ? WHERE k = ? AND c = ?")
    delr = session.prepare(f"DELETE FROM {ks}.t USING TIMESTAMP ? WHERE k = ? AND c = ?")
    delp = session.prepare(f"DELETE FROM {ks}.t USING TIMESTAMP ? WHERE k = ?")
    for _ in range(1500):
        k, c, ts = rnd.randrange(3), rnd.randrange(4), rnd.randrange(1, 60)
        op = rnd.random()
        v, w = rnd.randrange(5), rnd.randrange(5)
        if op < 0.35:
            session.execute(ins, (k, c, v, w, ts))
            model.insert(k, c, v, w, ts)
        elif op < 0.65:
            session.execute(upv, (ts, v, k, c))
            model.update(k, c, "v", v, ts)
        elif op < 0.8:
            session.execute(delv, (ts, k, c))
            model.update(k, c, "w", None, ts)
        elif op < 0.95:
            session.execute(delr, (ts, k, c))
            model.delete_row(k, c, ts)
        else:
            session.execute(delp, (ts, k))
            model.delete_partition(k, ts)
    got = {(r.k, r.c): (r.v, r.w) for r in session.execute(f"SELECT k, c, v, w FROM {ks}.t")}
    assert got == model.state()


# ------------------------------------------------------------------ lightweight transactions


def test_insert_if_not_exists(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v text, w int, PRIMARY KEY (k, c))")
    r = session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (1, 1, 'a') IF NOT EXISTS")
    assert r.column_names == ["[applied]"] and r.one()[0] is True
    assert r.was_applied
    r = session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (1, 1, 'b') IF NOT EXISTS")
    assert r.column_names == ["[applied]", "k", "c", "v", "w"]
    assert tuple(r.one()) == (False, 1, 1, "a", None)
    assert not r.was_applied
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 1 AND c = 1") == [("a",)]
    # prepared: no result metadata at PREPARE, full metadata with the result
    ps = session.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?) IF NOT EXISTS")
    assert not ps.result_metadata  # Cassandra prepares conditional statements with NO_METADATA
    assert tuple(session.execute(ps, (1, 1, "z")).one()) == (False, 1, 1, "a", None)
    assert session.execute(ps, (1, 2, "z")).one()[0] is True
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional updates"):
        session.execute(f"INSERT INTO {ks}.t (k, c) VALUES (9, 9) IF NOT EXISTS USING TIMESTAMP 5")


def test_update_delete_if_exists(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    r = session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF EXISTS")
    assert r.column_names == ["[applied]"] and tuple(r.one()) == (False,)
    assert rows(session, f"SELECT * FROM {ks}.t") == []
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 0)")
    assert session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF EXISTS").one()[0] is True
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 1") == [(1,)]
    assert session.execute(f"DELETE FROM {ks}.t WHERE k = 1 IF EXISTS").one()[0] is True
    r = session.execute(f"DELETE FROM {ks}.t WHERE k = 1 IF EXISTS")
    assert tuple(r.one()) == (False,)
    with pytest.raises(InvalidRequest, match="IN on the partition key is not supported with conditional updates"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k IN (1, 2) IF EXISTS")


@pytest.mark.parametrize("cond,applies", [
    ("v = 5", True), ("v = 4", False), ("v != 4", True), ("v != 5", False),
    ("v < 6", True), ("v < 5", False), ("v <= 5", True), ("v <= 4", False),
    ("v > 4", True), ("v > 5", False), ("v >= 5", True), ("v >= 6", False),
    ("v IN (1, 5)", True), ("v IN (1, 2)", False), ("v IN (null, 5)", True),
    ("v = 5 AND w = 'x'", True), ("v = 5 AND w = 'y'", False), ("w = null", False),
    ("s = 7", True), ("s > 7", False),
])
def test_column_conditions(session, ks, cond, applies):
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.t (k int, c int, s int STATIC, v int, w text, "
                    f"PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {ks}.t (k, c, s, v, w) VALUES (0, 0, 7, 5, 'x')")
    r = session.execute(f"UPDATE {ks}.t SET v = 100 WHERE k = 0 AND c = 0 IF {cond}")
    assert r.one()[0] is applies
    if not applies:
        cols = []
        for part in cond.split(" AND "):
            col = part.split()[0]
            if col not in cols:
                cols.append(col)
        assert r.column_names == ["[applied]"] + cols
        current = {"v": 5, "w": "x", "s": 7}
        assert tuple(r.one())[1:] == tuple(current[c] for c in cols)
    expected = 100 if applies else 5
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 0 AND c = 0") == [(expected,)]


def test_conditions_on_missing_row_and_errors(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int, m map<int, int>)")
    assert session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF v = null").one()[0] is True
    r = session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 2 IF v = 3")
    assert r.column_names == ["[applied]"] and tuple(r.one()) == (False,)
    with pytest.raises(InvalidRequest, match="Invalid comparison with null"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF v > null")
    with pytest.raises(InvalidRequest, match="PRIMARY KEY column 'k' cannot have IF conditions"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF k = 1")
    with pytest.raises(InvalidRequest, match="Invalid element access syntax for non-collection column v"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF v[1] = 2")


@pytest.mark.parametrize("cond,applies", [
    ("m['a'] = 1", True), ("m['a'] = 2", False), ("m['zz'] = null", True), ("m['zz'] = 1", False),
    ("m['b'] > 1", True), ("m['b'] < 2", False), ("m['a'] IN (5, 1)", True), ("m['a'] != 1", False),
    ("m['zz'] > 0", False), ("m = {'a': 1, 'b': 2}", True), ("m = {'a': 1}", False),
    ("fm[3] = 'x'", True), ("fm[4] = null", True), ("fm[3] >= 'y'", False),
    ("l[0] = 10", True), ("l[1] = 20", True), ("l[2] = null", True), ("l[1] < 20", False),
    ("l = [10, 20]", True), ("s = {1, 2}", True), ("s = {1}", False),
    ("u.x = 1", True), ("u.y = 'p'", True), ("u.x > 1", False), ("u.y IN ('q', 'p')", True),
    ("fu.x = 7", True), ("fu.y = null", True), ("fu.x = 8", False),
    ("u.x = 1 AND m['a'] = 1 AND l[1] = 20", True), ("u.x = 1 AND m['a'] = 9", False),
    ("m CONTAINS 2", True), ("m CONTAINS 5", False), ("m CONTAINS KEY 'b'", True),
    ("m CONTAINS KEY 'z'", False), ("l CONTAINS 20", True), ("s CONTAINS 3", False),
    ("fm CONTAINS KEY 3", True),
])
def test_conditions_on_elements_and_fields(session, ks, cond, applies):
    session.execute(f"CREATE TYPE IF NOT EXISTS {ks}.pt (x int, y text)")
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.t (k int PRIMARY KEY, v int, m map<text, int>, "
                    f"fm frozen<map<int, text>>, l list<int>, s set<int>, u pt, fu frozen<pt>)")
    session.execute(f"INSERT INTO {ks}.t (k, v, m, fm, l, s, u, fu) VALUES (0, 0, {{'a': 1, 'b': 2}}, "
                    f"{{3: 'x'}}, [10, 20], {{1, 2}}, {{x: 1, y: 'p'}}, {{x: 7}})")
    r = session.execute(f"UPDATE {ks}.t SET v = 100 WHERE k = 0 IF {cond}")
    assert r.one()[0] is applies
    if not applies:
        # the whole current value of each conditioned column comes back
        current = {"m": {"a": 1, "b": 2}, "fm": {3: "x"}, "l": [10, 20], "s": {1, 2}}
        got = r.one()._asdict()
        for col, want in current.items():
            if col in r.column_names:
                assert got[col] == want
        if "u" in r.column_names:
            assert (got["u"].x, got["u"].y) == (1, "p")
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 0") == [(100 if applies else 0,)]
    session.execute(f"UPDATE {ks}.t SET v = 0 WHERE k = 0")


def test_element_condition_errors_and_binds(session, ks):
    session.execute(f"CREATE TYPE {ks}.pt (x int)")
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int, m map<text, int>, s set<int>, u pt)")
    session.execute(f"INSERT INTO {ks}.t (k, v, m, u) VALUES (1, 0, {{'a': 1}}, {{x: 5}})")
    with pytest.raises(InvalidRequest, match="Invalid element access syntax for set column s"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF s[1] = 2")
    with pytest.raises(InvalidRequest, match="Unknown field z for column u"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF u.z = 2")
    with pytest.raises(InvalidRequest, match="Invalid null value for map access"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF m[null] = 2")
    # bind markers for the element key and the value, typed from the column
    ps = session.prepare(f"UPDATE {ks}.t SET v = ? WHERE k = 1 IF m[?] = ? AND u.x = ?")
    assert [c.type.typename for c in ps.column_metadata] == ["int", "varchar", "int", "int"]
    assert session.execute(ps, (7, "a", 1, 5)).one()[0] is True
    assert session.execute(ps, (8, "a", 2, 5)).one()[0] is False
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 1") == [(7,)]
    with pytest.raises(InvalidRequest, match="Cannot use CONTAINS KEY on non-map column s"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 IF s CONTAINS KEY 1")
    ps = session.prepare(f"UPDATE {ks}.t SET v = ? WHERE k = 1 IF m CONTAINS KEY ? AND m CONTAINS ?")
    assert [c.type.typename for c in ps.column_metadata] == ["int", "varchar", "int"]
    assert session.execute(ps, (9, "a", 1)).one()[0] is True


def test_serial_read_sees_last_applied_write(session, ks):
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 1) IF NOT EXISTS")
    session.execute(f"UPDATE {ks}.t SET v = 2 WHERE k = 1 IF v = 1")
    for cl in (ConsistencyLevel.SERIAL, ConsistencyLevel.LOCAL_SERIAL):
        st = SimpleStatement(f"SELECT v FROM {ks}.t WHERE k = 1", consistency_level=cl)
        assert session.execute(st).one().v == 2


def test_concurrent_cas_increments(server, cluster_factory, session, ks):
    import threading
    session.execute(f"CREATE TABLE {ks}.counter (k int PRIMARY KEY, n int)")
    session.execute(f"INSERT INTO {ks}.counter (k, n) VALUES (0, 0)")
    successes = []
    errors = []
    deadline = time.monotonic() + 10

    def worker():
        c = cluster_factory()
        s = c.connect(ks)
        read = s.prepare("SELECT n FROM counter WHERE k = 0")
        cas = s.prepare("UPDATE counter SET n = ? WHERE k = 0 IF n = ?")
        ok = 0
        try:
            while time.monotonic() < deadline:
                n = s.execute(read).one().n
                if s.execute(cas, (n + 1, n)).one()[0]:
                    ok += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        successes.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(successes) == 16
    total = sum(successes)
    assert total > 0
    assert session.execute(f"SELECT n FROM {ks}.counter WHERE k = 0").one().n == total


# ------------------------------------------------------------------ batches


def test_batch_kinds_and_timestamp(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c))")
    session.execute(f"BEGIN BATCH USING TIMESTAMP 100 "
                    f"INSERT INTO {ks}.t (k, c, v) VALUES (1, 1, 1); "
                    f"INSERT INTO {ks}.t (k, c, v) VALUES (2, 1, 1); APPLY BATCH")
    assert rows(session, f"SELECT writetime(v) FROM {ks}.t WHERE k = 1 AND c = 1") == [(100,)]
    session.execute(f"BEGIN UNLOGGED BATCH "
                    f"UPDATE {ks}.t USING TIMESTAMP 99 SET v = 2 WHERE k = 1 AND c = 1; "
                    f"UPDATE {ks}.t SET v = 3 WHERE k = 2 AND c = 1; APPLY BATCH")
    assert rows(session, f"SELECT k, v FROM {ks}.t") == [(1, 1), (2, 3)]
    with pytest.raises(InvalidRequest, match="Timestamp must be set either on BATCH or individual statements"):
        session.execute(f"BEGIN BATCH USING TIMESTAMP 5 "
                        f"INSERT INTO {ks}.t (k, c, v) VALUES (1, 1, 1) USING TIMESTAMP 6; APPLY BATCH")
    # a protocol BATCH with prepared statements
    from cassandra.query import BatchStatement, BatchType
    ins = session.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)")
    b = BatchStatement(batch_type=BatchType.UNLOGGED)
    for i in range(5):
        b.add(ins, (3, i, i))
    session.execute(b)
    assert len(rows(session, f"SELECT * FROM {ks}.t WHERE k = 3")) == 5


def test_batch_counter_mixing_errors(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    session.execute(f"CREATE TABLE {ks}.cnt (k int PRIMARY KEY, n counter)")
    with pytest.raises(InvalidRequest, match="Cannot include non-counter statement in a counter batch"):
        session.execute(f"BEGIN COUNTER BATCH INSERT INTO {ks}.t (k, v) VALUES (1, 1); APPLY BATCH")
    with pytest.raises(InvalidRequest, match="Cannot include a counter statement in a logged batch"):
        session.execute(f"BEGIN BATCH UPDATE {ks}.cnt SET n = n + 1 WHERE k = 1; APPLY BATCH")
    with pytest.raises(InvalidRequest, match="Counter and non-counter mutations cannot exist in the same batch"):
        session.execute(f"BEGIN UNLOGGED BATCH UPDATE {ks}.cnt SET n = n + 1 WHERE k = 1; "
                        f"INSERT INTO {ks}.t (k, v) VALUES (1, 1); APPLY BATCH")
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for counter BATCH"):
        session.execute(f"BEGIN COUNTER BATCH USING TIMESTAMP 5 UPDATE {ks}.cnt SET n = n + 1 WHERE k = 1; "
                        f"APPLY BATCH")


def test_conditional_batch(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c))")
    session.execute(f"CREATE TABLE {ks}.u (k int PRIMARY KEY, v int)")
    r = session.execute(f"BEGIN BATCH "
                        f"INSERT INTO {ks}.t (k, c, v) VALUES (1, 1, 1) IF NOT EXISTS; "
                        f"INSERT INTO {ks}.t (k, c, v) VALUES (1, 2, 2); APPLY BATCH")
    assert r.one()[0] is True
    r = session.execute(f"BEGIN BATCH "
                        f"UPDATE {ks}.t SET v = 10 WHERE k = 1 AND c = 1 IF v = 5; "
                        f"UPDATE {ks}.t SET v = 20 WHERE k = 1 AND c = 2; APPLY BATCH")
    assert r.column_names == ["[applied]", "k", "c", "v"]
    assert tuple(r.one()) == (False, 1, 1, 1)
    assert rows(session, f"SELECT c, v FROM {ks}.t WHERE k = 1") == [(1, 1), (2, 2)]
    r = session.execute(f"BEGIN BATCH "
                        f"UPDATE {ks}.t SET v = 10 WHERE k = 1 AND c = 1 IF v = 1; "
                        f"UPDATE {ks}.t SET v = 20 WHERE k = 1 AND c = 2 IF v = 2; APPLY BATCH")
    assert r.one()[0] is True
    assert rows(session, f"SELECT c, v FROM {ks}.t WHERE k = 1") == [(1, 10), (2, 20)]
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple partitions"):
        session.execute(f"BEGIN BATCH UPDATE {ks}.t SET v = 1 WHERE k = 1 AND c = 1 IF v = 10; "
                        f"UPDATE {ks}.t SET v = 1 WHERE k = 2 AND c = 1; APPLY BATCH")
    with pytest.raises(InvalidRequest, match="Batch with conditions cannot span multiple tables"):
        session.execute(f"BEGIN BATCH UPDATE {ks}.t SET v = 1 WHERE k = 1 AND c = 1 IF v = 10; "
                        f"UPDATE {ks}.u SET v = 1 WHERE k = 1; APPLY BATCH")
    with pytest.raises(InvalidRequest, match="Cannot provide custom timestamp for conditional BATCH"):
        session.execute(f"BEGIN BATCH USING TIMESTAMP 3 UPDATE {ks}.t SET v = 1 WHERE k = 1 AND c = 1 IF v = 10; "
                        f"APPLY BATCH")


def test_batch_size_warn_and_fail(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
    small = f"BEGIN BATCH INSERT INTO {ks}.t (k, v) VALUES (1, 'a'); INSERT INTO {ks}.t (k, v) VALUES (2, 'b'); APPLY BATCH"
    assert not session.execute(small).response_future.warnings
    big = "x" * 3000
    warn = (f"BEGIN BATCH INSERT INTO {ks}.t (k, v) VALUES (1, '{big}'); "
            f"INSERT INTO {ks}.t (k, v) VALUES (2, '{big}'); APPLY BATCH")
    warnings = session.execute(warn).response_future.warnings
    assert warnings and f"Batch for [{ks}.t] is of size" in warnings[0]
    assert "exceeding specified threshold of 5120" in warnings[0]
    # one partition: no warning however large
    one = f"BEGIN BATCH INSERT INTO {ks}.t (k, v) VALUES (1, '{big * 3}'); APPLY BATCH"
    assert not session.execute(one).response_future.warnings
    huge = "x" * 30000
    with pytest.raises(InvalidRequest, match="Batch too large"):
        session.execute(f"BEGIN BATCH INSERT INTO {ks}.t (k, v) VALUES (3, '{huge}'); "
                        f"INSERT INTO {ks}.t (k, v) VALUES (4, '{huge}'); APPLY BATCH")
    assert rows(session, f"SELECT * FROM {ks}.t WHERE k = 3") == []


def test_batch_client_warnings(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int) WITH gc_grace_seconds = 0")
    inserts = " ".join(f"INSERT INTO {ks}.t (k, v) VALUES ({i}, 0);" for i in range(11))
    w = session.execute(f"BEGIN UNLOGGED BATCH {inserts} APPLY BATCH").response_future.warnings
    assert w == [f"Unlogged batch covering 11 partitions detected against table [{ks}.t]. You should use "
                 f"a logged batch for atomicity, or asynchronous writes for performance."]
    w = session.execute(f"BEGIN BATCH INSERT INTO {ks}.t (k, v) VALUES (1, 1); APPLY BATCH").response_future.warnings
    assert w and w[0].startswith(f"Executing a LOGGED BATCH on table [{ks}.t], configured with a gc_grace_seconds of 0.")


def test_conditions_need_the_full_primary_key(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, s int STATIC, v int, PRIMARY KEY (k, c))")
    with pytest.raises(InvalidRequest, match="DELETE statements must restrict all PRIMARY KEY columns"):
        session.execute(f"DELETE FROM {ks}.t WHERE k = 1 IF EXISTS")
    with pytest.raises(InvalidRequest, match="IN on the clustering key columns is not supported"):
        session.execute(f"UPDATE {ks}.t SET v = 1 WHERE k = 1 AND c IN (1, 2) IF v = 1")
    # static-only updates may condition on static columns with the partition key alone
    session.execute(f"INSERT INTO {ks}.t (k, c, s, v) VALUES (1, 1, 5, 1)")
    assert session.execute(f"UPDATE {ks}.t SET s = 6 WHERE k = 1 IF s = 5").one()[0] is True
    assert rows(session, f"SELECT s FROM {ks}.t WHERE k = 1") == [(6,)]


def test_batch_thresholds_are_settings(server_factory, cluster_factory):
    srv = server_factory(settings={"batch.size_warn_threshold": "1KiB", "batch.size_fail_threshold": "2KiB"})
    s = cluster_factory(srv).connect()
    create_keyspace(s, "bt")
    s.execute("CREATE TABLE bt.t (k int PRIMARY KEY, v text)")
    v = "x" * 700
    r = s.execute(f"BEGIN BATCH INSERT INTO bt.t (k, v) VALUES (1, '{v}'); "
                  f"INSERT INTO bt.t (k, v) VALUES (2, '{v}'); APPLY BATCH")
    assert r.response_future.warnings
    with pytest.raises(InvalidRequest, match="Batch too large"):
        s.execute(f"BEGIN BATCH INSERT INTO bt.t (k, v) VALUES (1, '{v * 2}'); "
                  f"INSERT INTO bt.t (k, v) VALUES (2, '{v}'); APPLY BATCH")


# ------------------------------------------------------------------ TTL


def test_ttl_expires_at_deadline_not_before(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    ins = session.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (1, 1) USING TTL 2")
    sel = session.prepare(f"SELECT v FROM {ks}.t WHERE k = 1")
    sent = time.monotonic()
    session.execute(ins)
    start = time.monotonic()
    # The write happened between `sent` and `start`: the row must be there until 2 s after
    # `sent` and gone from 2 s after `start` on (deadlines have millisecond precision).
    while True:
        asked = time.monotonic() - start
        present = session.execute(sel).one() is not None
        if not present:
            break
        assert asked < 2.0, f"a row with TTL 2 was still there {asked:.3f} s after its write"
        time.sleep(0.01)
    gone_after = time.monotonic() - sent
    assert gone_after >= 2.0, f"row with TTL 2 was gone {gone_after:.3f} s after its write"


def test_ttl_and_writetime_selectors(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int, w int)")
    session.execute(f"INSERT INTO {ks}.t (k, v, w) VALUES (1, 1, 1) USING TTL 100 AND TIMESTAMP 1234")
    session.execute(f"UPDATE {ks}.t USING TTL 0 SET w = 2 WHERE k = 1")
    r = session.execute(f"SELECT ttl(v), writetime(v), ttl(w), writetime(w) FROM {ks}.t WHERE k = 1").one()
    assert 98 <= r[0] <= 100 and r[1] == 1234
    assert r[2] is None and r[3] > 1234
    # TTL 0 means no expiry, also over a table default
    session.execute(f"CREATE TABLE {ks}.d (k int PRIMARY KEY, v int) WITH default_time_to_live = 50")
    session.execute(f"INSERT INTO {ks}.d (k, v) VALUES (1, 1)")
    session.execute(f"INSERT INTO {ks}.d (k, v) VALUES (2, 2) USING TTL 0")
    session.execute(f"INSERT INTO {ks}.d (k, v) VALUES (3, 3) USING TTL 7")
    got = dict(rows(session, f"SELECT k, ttl(v) FROM {ks}.d"))
    assert 48 <= got[1] <= 50 and got[2] is None and 5 <= got[3] <= 7


def test_writetime_and_ttl_per_collection_element(session, ks):
    # Cassandra 5.0: writetime()/ttl() of a non-frozen collection or UDT are lists with one
    # entry per element (in collection order); maxwritetime() is the newest element's.
    session.execute(f"CREATE TYPE {ks}.pt (x int, y int)")
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, m map<text, int>, l list<int>, "
                    f"u {ks}.pt, f frozen<list<int>>)")
    session.execute(f"INSERT INTO {ks}.t (k, m, l, u, f) VALUES (1, {{'b': 2}}, [7], {{x: 1}}, [1]) "
                    f"USING TIMESTAMP 100")
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 300 AND TTL 50 SET m['a'] = 1, l = l + [8] WHERE k = 1")
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 200 SET m['c'] = 3, u.y = 2 WHERE k = 1")
    r = session.execute(f"SELECT writetime(m), maxwritetime(m), writetime(l), "
                        f"writetime(u), writetime(f), ttl(f), maxwritetime(f) FROM {ks}.t WHERE k = 1").one()
    assert r[0] == [300, 100, 200]  # keys a, b, c
    assert r[1] == 300
    assert r[2] == [100, 300]
    assert r[3] == [100, 200]
    assert r[4] == 100 and r[5] is None and r[6] == 100
    # ttl() lists: elements without a TTL are null entries, which the Python driver cannot
    # decode (nor can it from Cassandra 5.0), so read them where every element has one
    session.execute(f"INSERT INTO {ks}.t (k, m, u) VALUES (2, {{'a': 1, 'b': 2}}, {{x: 1, y: 2}}) USING TTL 40")
    session.execute(f"UPDATE {ks}.t USING TTL 90 SET m['b'] = 3 WHERE k = 2")
    r = session.execute(f"SELECT ttl(m), ttl(u) FROM {ks}.t WHERE k = 2").one()
    assert 38 <= r[0][0] <= 40 and 88 <= r[0][1] <= 90
    assert len(r[1]) == 2 and all(38 <= x <= 40 for x in r[1])
    # the result metadata types the lists
    rs = session.execute(f"SELECT writetime(m), ttl(m) FROM {ks}.t WHERE k = 2")
    assert [t.typename for t in rs.column_types] == ["list", "list"]
    assert [t.subtypes[0].typename for t in rs.column_types] == ["bigint", "int"]
    # deleted elements drop out; an empty collection gives null
    session.execute(f"DELETE m['a'] FROM {ks}.t USING TIMESTAMP 400 WHERE k = 1")
    assert rows(session, f"SELECT writetime(m) FROM {ks}.t WHERE k = 1") == [([100, 200],)]
    session.execute(f"DELETE m FROM {ks}.t USING TIMESTAMP 500 WHERE k = 1")
    assert rows(session, f"SELECT writetime(m), ttl(m), maxwritetime(m) FROM {ks}.t WHERE k = 1") == [
        (None, None, None)]


def test_ttl_limits(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 1) USING TTL 630720000")
    with pytest.raises(InvalidRequest, match=r"ttl is too large. requested \(630720001\) maximum \(630720000\)"):
        session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 1) USING TTL 630720001")
    with pytest.raises(InvalidRequest, match="A TTL must be greater or equal to 0, but was -1"):
        session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 1) USING TTL -1")
    from cassandra.protocol import ConfigurationException
    with pytest.raises(ConfigurationException, match="default_time_to_live must be greater than or equal to 0"):
        session.execute(f"CREATE TABLE {ks}.bad (k int PRIMARY KEY) WITH default_time_to_live = -1")
    from cassandra.protocol import SyntaxException
    with pytest.raises(SyntaxException, match="expecting K_TIMESTAMP"):
        session.execute(f"DELETE FROM {ks}.t USING TTL 5 WHERE k = 1")


# ------------------------------------------------------------------ durability


def test_logged_batch_across_partitions_survives_kill9_atomically(server_factory, cluster_factory):
    import threading
    srv = server_factory()
    c = cluster_factory(srv)
    s = c.connect()
    create_keyspace(s, "kb")
    s.execute("CREATE TABLE kb.a (k int PRIMARY KEY, v int)")
    s.execute("CREATE TABLE kb.b (k int PRIMARY KEY, v int)")
    stop = threading.Event()
    sent = []

    def writer(i):
        while not stop.is_set():
            try:
                s.execute(f"BEGIN BATCH INSERT INTO kb.a (k, v) VALUES ({i}, {i}); "
                          f"INSERT INTO kb.b (k, v) VALUES ({i + 1000000}, {i}); APPLY BATCH")
                sent.append(i)
            except Exception:  # noqa: BLE001 - the server dies mid-request
                return
            i += 1

    threads = [threading.Thread(target=writer, args=(n * 100000,)) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join()
    c.shutdown()
    srv.start()
    s2 = cluster_factory(srv).connect()
    a = {r.k: r.v for r in s2.execute("SELECT k, v FROM kb.a")}
    b = {r.k - 1000000: r.v for r in s2.execute("SELECT k, v FROM kb.b")}
    assert a == b, "every logged batch is fully visible or not at all"
    assert set(sent) <= set(a), "acknowledged batches survive"


def test_truncate_is_durable(server_factory, cluster_factory):
    srv = server_factory()
    s = cluster_factory(srv).connect()
    create_keyspace(s, "tr")
    s.execute("CREATE TABLE tr.t (k int PRIMARY KEY, v text)")
    ins = s.prepare("INSERT INTO tr.t (k, v) VALUES (?, ?)")
    for i in range(500):
        s.execute(ins, (i, "x" * 100))
    s.execute("TRUNCATE tr.t")
    assert rows(s, "SELECT * FROM tr.t") == []
    s.execute(ins, (7, "after"))
    srv.kill9()
    srv.start()
    s = cluster_factory(srv).connect()
    assert rows(s, "SELECT k, v FROM tr.t") == [(7, "after")]
    srv.restart(kill9=False)
    s = cluster_factory(srv).connect()
    assert rows(s, "SELECT k, v FROM tr.t") == [(7, "after")]
