"""The embedded store's row cache (storage.row_cache_bytes): point reads from the Python driver
are answered from memory (hits on /metrics) and always show the latest write, deletion,
expiry and compaction purge; a point read charges what a token-range read of the same row
charges, cached or not."""

import struct
import time

from cassandra.cluster import Cluster

from metrics_text import scrape
from rgtest import create_keyspace


def charge(rs):
    return struct.unpack(">d", rs.response_future.custom_payload["RequestCharge"])[0]


def hits(srv):
    return scrape(srv).value("ringgate_row_cache_hits_total")


def check_reads(s, ks, model, sel, scan):
    """Every row of the model read by key (prepared) and by token range: the same answer, the
    same charge."""
    for k in range(8):
        rs = s.execute(sel, (k,))
        got = [(r.k, r.s, r.v) for r in rs]
        want = [model[k]] if model.get(k) else []
        assert got == want, (k, got, want)
        rs2 = s.execute(scan, (k, k))
        assert [(r.k, r.s, r.v) for r in rs2] == got, k
        assert charge(rs) == charge(rs2), (k, charge(rs), charge(rs2))


def run_workload(srv, unique_name):
    c = Cluster([srv.host], port=srv.port)
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, s text, v int) "
              f"WITH gc_grace_seconds = 0")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, s, v) VALUES (?, ?, ?)")
    sel = s.prepare(f"SELECT k, s, v FROM {ks}.t WHERE k = ?")
    scan = s.prepare(f"SELECT k, s, v FROM {ks}.t WHERE token(k) >= token(?) AND token(k) <= token(?)")
    model = {}
    for k in range(8):
        s.execute(ins, (k, "x" * (10 * k), k))
        model[k] = (k, "x" * (10 * k), k)
    check_reads(s, ks, model, sel, scan)
    check_reads(s, ks, model, sel, scan)
    # Updates, a deletion, a row written with a short TTL.
    s.execute(f"UPDATE {ks}.t SET v = 100 WHERE k = 1")
    model[1] = (1, model[1][1], 100)
    s.execute(f"DELETE FROM {ks}.t WHERE k = 2")
    model[2] = None
    # (Large: a read of its expired bytes would charge more than the range read of nothing.)
    s.execute(f"INSERT INTO {ks}.t (k, s, v) VALUES (3, '{'y' * 4000}', 3) USING TTL 3")
    model[3] = (3, "y" * 4000, 3)
    check_reads(s, ks, model, sel, scan)
    time.sleep(3.2)
    model[3] = None
    check_reads(s, ks, model, sel, scan)
    # A compaction purges the expired row and the deletion (gc_grace_seconds = 0) under the
    # cache: reads still agree, and charge what the range read charges.
    s.execute("INSERT INTO system_views.maintenance (command) VALUES ('compact')")
    check_reads(s, ks, model, sel, scan)
    s.execute(ins, (2, "back", 2))
    model[2] = (2, "back", 2)
    check_reads(s, ks, model, sel, scan)
    c.shutdown()


def test_point_reads_are_cached_and_always_current(server_factory, unique_name):
    srv = server_factory()
    # (A new server: its count starts at 0. Scraped after the workload, when the HTTP
    # listener, started just after the CQL one, is surely up.)
    run_workload(srv, unique_name)
    # 6 rounds of 8 point reads; most answered from the cache.
    assert hits(srv) >= 24


def test_without_the_row_cache_reads_answer_the_same(server_factory, unique_name):
    srv = server_factory(settings={"storage.row_cache_bytes": "0"})
    run_workload(srv, unique_name)
    assert hits(srv) == 0


def misses(srv):
    return scrape(srv).value("ringgate_row_cache_misses_total")


def test_a_conditional_insert_of_a_flat_table_looks_up_its_row_alone(server_factory, unique_name):
    """IF NOT EXISTS on a table without clustering columns looks up the row and nothing else
    (such a table stores no partition header): each new key is one lookup the row cache
    misses, and the same inserts again find the rows cached and are not applied. With
    clustering columns the partition header is looked up too."""
    srv = server_factory()
    c = Cluster([srv.host], port=srv.port)
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.flat (k int PRIMARY KEY, v int)")
    s.execute(f"CREATE TABLE {ks}.wide (k int, c int, v int, PRIMARY KEY (k, c))")
    flat = s.prepare(f"INSERT INTO {ks}.flat (k, v) VALUES (?, ?) IF NOT EXISTS")
    wide = s.prepare(f"INSERT INTO {ks}.wide (k, c, v) VALUES (?, 1, ?) IF NOT EXISTS")
    before = misses(srv)
    for k in range(50):
        assert s.execute(flat, (k, k)).one()[0] is True
    assert misses(srv) - before == 50
    before_hits = hits(srv)
    for k in range(50):
        assert s.execute(flat, (k, -k)).one()[0] is False
    assert misses(srv) - before == 50
    assert hits(srv) - before_hits == 50
    assert [r.v for r in s.execute(f"SELECT v FROM {ks}.flat WHERE k = 7")] == [7]
    before = misses(srv)
    for k in range(50):
        assert s.execute(wide, (k, k)).one()[0] is True
    assert misses(srv) - before == 100
    c.shutdown()
