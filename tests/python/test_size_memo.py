"""The size memos' budget (partitions.size_memo_bytes): within it, each physical partition's memo
holds a size record per logical partition (a write of a new partition key then skips reading its
row), on /metrics; past it, a memo turns off, counted there, and writes go on reading the store
first, with the same rows and the same partition counts and sizes."""

from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args

from metrics_text import scrape
from rgtest import create_keyspace

KEYS = 2_000


def load(srv, unique_name):
    """A fresh table of KEYS logical partitions written, half of them updated (a write that
    merges with the stored row); the session, keyspace and the table's partition rows."""
    c = Cluster([srv.host], port=srv.port)
    s = c.connect()
    ks = create_keyspace(s, unique_name("memo"))
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int, w text)")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    execute_concurrent_with_args(s, ins, [(k, k) for k in range(KEYS)], concurrency=32)
    upd = s.prepare(f"UPDATE {ks}.t SET w = ? WHERE k = ?")
    execute_concurrent_with_args(s, upd, [(f"w{k}", k) for k in range(0, KEYS, 2)],
                                 concurrency=32)
    parts = list(s.execute(
        "SELECT bytes, logical_partitions FROM system_views.physical_partitions "
        "WHERE keyspace_name = %s AND table_name = 't'", (ks,)))
    return c, s, ks, parts


def check_rows(s, ks, parts):
    rows = {r.k: (r.v, r.w) for r in s.execute(f"SELECT k, v, w FROM {ks}.t")}
    assert rows == {k: (k, f"w{k}" if k % 2 == 0 else None) for k in range(KEYS)}
    assert sum(p.logical_partitions for p in parts) == KEYS


def test_memos_hold_every_record_within_the_budget(server_factory, unique_name):
    srv = server_factory()
    before = scrape(srv)
    assert before.value("ringgate_size_memo_limit_bytes") == 64 << 20
    c, s, ks, parts = load(srv, unique_name)
    try:
        check_rows(s, ks, parts)
        after = scrape(srv)
        # At least a short key's allocation per record (16 bytes), well within the budget.
        grown = after.value("ringgate_size_memo_bytes") - before.value("ringgate_size_memo_bytes")
        assert grown >= 16 * KEYS, grown
        assert after.value("ringgate_size_memos_over_budget_total") == 0
    finally:
        c.shutdown()


def test_a_memo_past_the_budget_turns_off_and_writes_stay_exact(server_factory, unique_name):
    small = server_factory(settings={"partitions.size_memo_bytes": "16KiB"})
    big = server_factory()
    m = scrape(small)
    assert m.value("ringgate_size_memo_limit_bytes") == 16 << 10
    assert m.value("ringgate_size_memos_over_budget_total") == 0
    (c1, s1, ks1, small_parts), (c2, _, _, big_parts) = (load(small, unique_name),
                                                          load(big, unique_name))
    try:
        check_rows(s1, ks1, small_parts)
        m = scrape(small)
        assert m.value("ringgate_size_memos_over_budget_total") >= 1
        assert m.value("ringgate_size_memo_bytes") <= 16 << 10
        # The same stored bytes as where the memo held every record.
        assert sum(p.bytes for p in small_parts) == sum(p.bytes for p in big_parts)
    finally:
        c1.shutdown()
        c2.shutdown()
