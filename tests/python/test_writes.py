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
