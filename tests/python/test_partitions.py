"""Physical partitions (issue 6): automatic splits driven by data size, the logical partition limit,
and crash safety of splits, seen through the Python driver and system_views."""

import re
import threading
import time

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.metadata import Murmur3Token

from rgtest import create_keyspace, error_text, kill9_and_restart, wait_until

MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1
MiB = 1 << 20

SPLIT_ARGS = ["partitions.physical_split_bytes=4MiB", "partitions.logical_max_bytes=1MiB"]


def connect(srv):
    c = Cluster(contact_points=[srv.host], port=srv.port)
    return c, c.connect()


def partitions(s, ks, table):
    rows = list(s.execute(
        "SELECT partition_id, token_start, token_end, bytes, logical_partitions "
        "FROM system_views.physical_partitions WHERE keyspace_name = %s AND table_name = %s",
        (ks, table)))
    return sorted(rows, key=lambda r: r.token_start)


def assert_covers_ring(parts):
    assert parts, "no physical partitions"
    assert parts[0].token_start == MIN_TOKEN
    assert parts[-1].token_end == MAX_TOKEN
    for a, b in zip(parts, parts[1:]):
        assert a.token_end == b.token_start, f"gap or overlap between {a} and {b}"
        assert a.token_start < a.token_end


def server_message(exc):
    """The message the server sent (the driver wraps it in 'Error from server: ... message="..."')."""
    text = error_text(exc)
    m = re.search(r'message="(.*)"', text, re.S)
    return m.group(1) if m else text


def split_lines(srv):
    pat = re.compile(r"parent_bytes=(\d+) left_bytes=(\d+) right_bytes=(-?\d+)")
    log = re.sub(r"\x1b\[[0-9;]*m", "", srv.log_text())
    return [tuple(map(int, m.groups())) for m in pat.finditer(log)]


def test_load_splits_into_balanced_partitions(server_factory, unique_name):
    srv = server_factory(set_args=SPLIT_ARGS)
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v blob)")
    n, size = 20_000, (64 * MiB) // 20_000
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    value = lambda k: bytes([k % 251]) * size  # noqa: E731
    results = execute_concurrent_with_args(
        s, ins, [(k, value(k)) for k in range(n)], concurrency=96, raise_on_first_error=True)
    assert all(ok for ok, _ in results)

    # Splits run in the background: wait until none is above the threshold plus one write.
    one_write = size + 200
    def settled():
        parts = partitions(s, ks, "t")
        return parts if all(p.bytes <= 4 * MiB + one_write for p in parts) else None
    parts = wait_until(settled, timeout=30, message="splits to finish")
    assert len(parts) >= 16, [p.bytes for p in parts]
    assert_covers_ring(parts)
    assert sum(p.logical_partitions for p in parts) == n
    total = sum(p.bytes for p in parts)
    assert 64 * MiB <= total <= 64 * MiB * 1.1, total

    # Every split gave each child 30-70% of its parent's data.
    splits = split_lines(srv)
    assert len(splits) >= 15
    for parent, left, right in splits:
        assert 0.3 <= left / parent <= 0.7, (parent, left, right)
        assert left + right == parent

    # size_estimates follows the map.
    est = list(s.execute(
        "SELECT range_start, range_end, partitions_count FROM system.size_estimates "
        "WHERE keyspace_name = %s AND table_name = 't'", (ks,)))
    assert len(est) == len(parts)
    assert sum(r.partitions_count for r in est) == n

    # Point reads.
    sel = s.prepare(f"SELECT v FROM {ks}.t WHERE k = ?")
    got = execute_concurrent_with_args(s, sel, [(k,) for k in range(n)], concurrency=96,
                                       raise_on_first_error=True)
    for k, (ok, rs) in enumerate(got):
        rows = list(rs)
        assert ok and len(rows) == 1 and rows[0].v == value(k), k
    # Full scan (paged): every key once, in token order.
    keys = [r.k for r in s.execute(f"SELECT k FROM {ks}.t")]
    assert sorted(keys) == list(range(n))
    tokens = [Murmur3Token.hash_fn(k.to_bytes(4, "big", signed=True)) for k in keys]
    assert tokens == sorted(tokens)
    c.shutdown()


def test_logical_partition_limit(server_factory, unique_name):
    srv = server_factory(set_args=SPLIT_ARGS)
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v blob, PRIMARY KEY (k, c))")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)")
    chunk = b"x" * (50 * 1024)
    written, warned, error = [], False, None
    for i in range(100):
        try:
            rs = s.execute(ins, (1, i, chunk))
        except InvalidRequest as e:
            error = e
            break
        written.append(i)
        if rs.response_future.warnings:
            warned = True
            assert any("maximum logical partition size" in w for w in rs.response_future.warnings)
    assert error is not None, "the partition grew past 1 MiB"
    assert server_message(error).startswith("Partition key reached maximum size of 1 MiB")
    assert 18 <= len(written) <= 21
    assert warned, "no warning past 90% of the limit"
    # Nothing of the refused write was stored; earlier rows are intact.
    rows = list(s.execute(f"SELECT c, v FROM {ks}.t WHERE k = 1"))
    assert [r.c for r in rows] == written
    assert all(r.v == chunk for r in rows)
    # Overwrites do not grow the partition; other keys are unaffected.
    s.execute(ins, (1, 0, chunk))
    s.execute(ins, (2, 0, chunk))
    # Deleting rows frees room.
    s.execute(f"DELETE FROM {ks}.t WHERE k = 1 AND c = 0")
    s.execute(f"DELETE FROM {ks}.t WHERE k = 1 AND c = 1")
    s.execute(ins, (1, 1000, chunk))
    # A logical partition listing names the largest.
    top = list(s.execute("SELECT partition_key, bytes FROM system_views.logical_partitions "
                         "WHERE keyspace_name = %s AND table_name = 't'", (ks,)))
    assert top[0].partition_key == "1" and 0.9 * MiB < top[0].bytes <= MiB

    # Row (2 MB) limit.
    s.execute(f"CREATE TABLE {ks}.big (k int PRIMARY KEY, v blob)")
    with pytest.raises(InvalidRequest) as e:
        s.execute(f"INSERT INTO {ks}.big (k, v) VALUES (1, %s)", (b"y" * (3 * MiB),))
    assert "exceeds the maximum row size" in server_message(e.value)
    assert list(s.execute(f"SELECT k FROM {ks}.big")) == []
    c.shutdown()


def test_kill9_during_splits(server_factory, unique_name):
    srv = server_factory(set_args=["partitions.physical_split_bytes=1MiB"])
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v blob)")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    acked = set()
    lock = threading.Lock()
    stop = threading.Event()

    def writer(base):
        k = base
        while not stop.is_set():
            futs = [(k + i, s.execute_async(ins, (k + i, b"z" * 2000))) for i in range(0, 400, 4)]
            for key, f in futs:
                try:
                    f.result()
                    with lock:
                        acked.add(key)
                except Exception:
                    pass
            k += 400

    threads = [threading.Thread(target=writer, args=(b,)) for b in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: len(partitions(s, ks, "t")) >= 6, timeout=40, message="several splits")
    kill9_and_restart(srv, threads, c, stop)
    c, s = connect(srv)
    parts = partitions(s, ks, "t")
    assert_covers_ring(parts)
    got = {r.k for r in s.execute(f"SELECT k FROM {ks}.t")}
    missing = acked - got
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {sorted(missing)[:10]}"
    assert sum(p.logical_partitions for p in parts) == len(got)
    c.shutdown()


def test_alter_throughput_splits(server_factory, unique_name):
    # The load below is far above 400 RU/s: this test is about the layout, not rate limiting.
    srv = server_factory(set_args=["throughput.server_side_retry=true"])
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cosmosdb_provisioned_throughput = 400")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    execute_concurrent_with_args(s, ins, [(k, str(k)) for k in range(500)], concurrency=50)
    assert len(partitions(s, ks, "t")) == 1
    s.execute(f"ALTER TABLE {ks}.t WITH cosmosdb_provisioned_throughput = 40000")
    parts = partitions(s, ks, "t")
    assert len(parts) == 4
    assert_covers_ring(parts)
    assert sum(p.logical_partitions for p in parts) == 500
    assert {r.k: r.v for r in s.execute(f"SELECT k, v FROM {ks}.t")} == {k: str(k) for k in range(500)}
    c.shutdown()
