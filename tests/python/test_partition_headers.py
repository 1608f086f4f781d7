"""Reads that meet the partition header in their own scan: single-partition reads scan from the
header on (one seek), and full / token-range scans learn that a partition has no header when its
first key is a row (only a page resumed mid-partition fetches the header). Partitions with
static cells, a partition deletion, a range tombstone, statics only, or no header at all must
read the same through every path and page size."""

import pytest
from cassandra.query import SimpleStatement

N_PARTITIONS = 12
ROWS = 6


def expected(pk):
    """(pk, c, s, v) rows of partition `pk` after `load`."""
    kind = pk % 6
    if kind == 4:  # statics only
        return [(pk, None, 100 + pk, None)]
    s = 100 + pk if kind in (1, 2, 3) else None
    cs = range(ROWS)
    if kind == 2:  # partition deleted, then two rows written again
        cs = range(2)
    if kind == 3:  # c < 3 deleted by a range tombstone
        cs = range(3, ROWS)
    if kind == 5:  # every row deleted, no statics: nothing
        return []
    return [(pk, c, s, pk * 10 + c) for c in cs]


def load(session, ins):
    for pk in range(N_PARTITIONS):
        kind = pk % 6
        if kind == 4:
            session.execute("INSERT INTO t (pk, s) VALUES (%s, %s)", (pk, 100 + pk))
            continue
        for c in range(ROWS):
            session.execute(ins, (pk, c, pk * 10 + c))
        if kind in (1, 2, 3):
            session.execute("UPDATE t SET s = %s WHERE pk = %s", (100 + pk, pk))
        if kind == 2:
            session.execute("DELETE FROM t WHERE pk = %s", (pk,))
            session.execute("UPDATE t SET s = %s WHERE pk = %s", (100 + pk, pk))
            for c in range(2):
                session.execute(ins, (pk, c, pk * 10 + c))
        if kind == 3:
            session.execute("DELETE FROM t WHERE pk = %s AND c < 3", (pk,))
        if kind == 5:
            for c in range(ROWS):
                session.execute("DELETE FROM t WHERE pk = %s AND c = %s", (pk, c))


def rows(session, query, params=(), fetch_size=None):
    stmt = SimpleStatement(query, fetch_size=fetch_size)
    return [tuple(r) for r in session.execute(stmt, params)]


@pytest.fixture
def table(session, keyspace):
    session.set_keyspace(keyspace)
    session.execute("CREATE TABLE t (pk int, c int, s int static, v int, PRIMARY KEY (pk, c))")
    load(session, session.prepare("INSERT INTO t (pk, c, v) VALUES (?, ?, ?)"))
    return session


@pytest.mark.parametrize("fetch_size", [None, 1, 2, 5])
def test_single_partition_reads_see_the_header(table, fetch_size):
    for pk in range(N_PARTITIONS):
        got = rows(table, "SELECT pk, c, s, v FROM t WHERE pk = %s", (pk,), fetch_size)
        assert got == expected(pk), f"partition {pk} (kind {pk % 6})"
        # Bounded slices and reversed reads fetch the header on their own. (Statics-only
        # partitions are left out of the slice: which of them a clustering slice returns is
        # not what this test is about.)
        if pk % 6 != 4:
            got = rows(table, "SELECT pk, c, s, v FROM t WHERE pk = %s AND c >= 1", (pk,),
                       fetch_size)
            assert got == [r for r in expected(pk) if r[1] >= 1], pk
        got = rows(table, "SELECT pk, c, s, v FROM t WHERE pk = %s ORDER BY c DESC", (pk,), fetch_size)
        want = [r for r in expected(pk) if r[1] is not None][::-1] or \
            [r for r in expected(pk) if r[1] is None]
        assert got == want, pk


@pytest.mark.parametrize("fetch_size", [None, 1, 3, 7])
def test_full_scan_pages_see_every_header(table, fetch_size):
    got = rows(table, "SELECT pk, c, s, v FROM t", (), fetch_size)
    want = [r for pk in range(N_PARTITIONS) for r in expected(pk)]
    assert sorted(got, key=lambda r: (r[0], -1 if r[1] is None else r[1])) == sorted(
        want, key=lambda r: (r[0], -1 if r[1] is None else r[1]))
    assert len(got) == len(want)
