"""A slice of a wide partition costs what the same slice of a narrow one costs.

Single-partition reads seek to the slice's first clustering key and stop after its last row, so
reading 100 rows reads 100 stored rows whatever the partition holds. The server's trace says
how many stored rows a read went through ("Read N stored rows"); these tests compare it for
the same slices of a 1,000-row and a 30,000-row partition (work, not time: the timing figure
is `BENCH_ONLY=wide scripts/bench`)."""

import re
import uuid

import pytest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from rgtest import create_keyspace

NARROW_ROWS = 1_000
WIDE_ROWS = 30_000


def stored_rows_read(session, cql):
    """(rows returned, stored rows read) over all pages of a traced query."""
    rs = session.execute(SimpleStatement(cql), trace=True)
    rows = list(rs)  # every page
    traces = rs.get_all_query_traces(max_wait_sec_per=5)
    events = [e.description for t in traces for e in t.events]
    reads = [int(m.group(1)) for e in events if (m := re.match(r"Read (\d+) stored rows", e))]
    assert len(reads) == len(traces), events
    return len(rows), sum(reads)


@pytest.fixture(scope="module")
def wide(session):
    keyspace = create_keyspace(session, f"wide_{uuid.uuid4().hex[:12]}")
    session.execute(f"CREATE TABLE {keyspace}.w (k int, c int, v int, PRIMARY KEY (k, c))")
    ins = session.prepare(f"INSERT INTO {keyspace}.w (k, c, v) VALUES (?, ?, ?)")
    rows = [(1, c, c) for c in range(NARROW_ROWS)] + [(2, c, c) for c in range(WIDE_ROWS)]
    for ok, res in execute_concurrent_with_args(session, ins, rows, concurrency=64):
        assert ok, res
    return f"{keyspace}.w"


@pytest.mark.parametrize("slice_", [
    "c >= 500 AND c < 600",
    "c > 499 AND c <= 599 ORDER BY c DESC",
    "c >= 0 LIMIT 100",
    "c < 1000 ORDER BY c DESC LIMIT 100",
])
def test_a_slice_reads_its_rows_only(session, wide, slice_):
    narrow = stored_rows_read(session, f"SELECT v FROM {wide} WHERE k = 1 AND {slice_}")
    wide_ = stored_rows_read(session, f"SELECT v FROM {wide} WHERE k = 2 AND {slice_}")
    assert narrow == (100, 100), narrow
    assert wide_ == (100, 100), wide_


def test_a_whole_partition_read_reads_every_row(session, wide):
    """The counter counts what is read: without a slice the wide partition is read whole."""
    assert stored_rows_read(session, f"SELECT v FROM {wide} WHERE k = 2") == (WIDE_ROWS, WIDE_ROWS)


@pytest.mark.parametrize("keys, want", [
    ("c = 20000", (1, 1)),
    ("c IN (29999, 5, 40000)", (2, 2)),
    ("c = 40000", (0, 0)),
])
def test_a_whole_key_read_reads_the_rows_it_names(session, wide, keys, want):
    """A read naming whole primary keys looks each row up (`select/points.rs`): it reads the
    named rows that exist and nothing else, however wide the partition."""
    assert stored_rows_read(session, f"SELECT v FROM {wide} WHERE k = 2 AND {keys}") == want
    # Prepared, as drivers send it: the same rows.
    prepared = session.prepare(f"SELECT c, v FROM {wide} WHERE k = ? AND c = ?")
    assert list(session.execute(prepared, (2, 20000))) == [(20000, 20000)]
    assert list(session.execute(prepared, (2, 40000))) == []
