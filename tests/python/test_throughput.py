"""Provisioned throughput and rate limiting (issue 7): per-physical-partition budgets, Overloaded
(0x1001) with Cosmos DB's message and a real RetryAfterMs, server-side retry, hot partitions."""

import re
import struct
import threading
import time

import pytest

from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import FallthroughRetryPolicy
from cassandra.protocol import OverloadedErrorMessage

from rgtest import create_keyspace

MIN_TOKEN = -(2**63)


def connect(srv):
    profile = ExecutionProfile(retry_policy=FallthroughRetryPolicy(), request_timeout=90)
    c = Cluster(contact_points=[srv.host], port=srv.port,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    return c, c.connect()


def charge(rs_or_future):
    fut = getattr(rs_or_future, "response_future", rs_or_future)
    return struct.unpack(">d", fut.custom_payload["RequestCharge"])[0]


def retry_after(exc):
    m = re.search(r"RetryAfterMs=(\d+)", str(exc))
    assert m, str(exc)
    return int(m.group(1))


def hammer(s, stmt, args_of, seconds, threads, per_thread_rate):
    """Offers per_thread_rate requests/s from each thread for `seconds`; returns
    (accepted RU, accepted count, rejections)."""
    lock = threading.Lock()
    totals = {"ru": 0.0, "ok": 0, "rejected": []}
    deadline = time.monotonic() + seconds

    def run(tid):
        i = 0
        interval = 1.0 / per_thread_rate
        nxt = time.monotonic()
        while time.monotonic() < deadline:
            futs = []
            for _ in range(10):
                futs.append(s.execute_async(stmt, args_of(tid, i)))
                i += 1
            for f in futs:
                try:
                    f.result()
                    with lock:
                        totals["ru"] += charge(f)
                        totals["ok"] += 1
                except OverloadedErrorMessage as e:
                    with lock:
                        totals["rejected"].append(e)
            nxt += 10 * interval
            time.sleep(max(0.0, nxt - time.monotonic()))

    start = time.monotonic()
    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    totals["elapsed"] = time.monotonic() - start
    return totals


def test_overload_is_rejected_at_the_provisioned_rate(server_factory, unique_name):
    srv = server_factory()
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v text, PRIMARY KEY (k, c)) "
              f"WITH cosmosdb_provisioned_throughput = 1000")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, 'x')")
    # The bucket starts full (one second of budget); no sleep here, so nothing is banked.
    cost = charge(s.execute(ins, (999999, 0)))
    seconds = 4.0
    # 3 clients, together 3x the budget.
    rate = 1000.0 / cost
    t = hammer(s, ins, lambda tid, i: (tid * 1_000_000 + i, i), seconds, 3, rate)
    assert t["rejected"], "no request was throttled"
    # Accepted: the budget for the duration plus the initial one-second bucket (burst banks
    # only unused budget, none here), within 10%.
    expected = 1000.0 * t["elapsed"] + 1000.0
    assert 0.9 * expected <= t["ru"] <= 1.1 * expected, (t["ru"], expected, t["ok"])
    e = t["rejected"][0]
    msg = str(e)
    assert "Request rate is large" in msg and "TooManyRequests (429)" in msg
    # Honouring RetryAfterMs succeeds.
    time.sleep(1.0)
    for _ in range(3):
        try:
            s.execute(ins, (5_000_000, 0))
            break
        except OverloadedErrorMessage as e2:
            time.sleep(retry_after(e2) / 1000.0)
    else:
        raise AssertionError("RetryAfterMs was not enough")
    rows = s.execute(f"SELECT * FROM system_views.throughput WHERE keyspace_name = %s", (ks,)).one()
    assert rows.provisioned_ru == 1000 and rows.physical_partitions == 1
    assert rows.throttled_requests == len(t["rejected"])
    # Nothing of a rejected write was stored.
    stored = s.execute(f"SELECT count(*) FROM {ks}.t").one()[0]
    assert stored == t["ok"] + 2
    c.shutdown()


def test_retry_after_is_the_real_wait(server_factory, unique_name):
    srv = server_factory()
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v blob) WITH cosmosdb_provisioned_throughput = 400")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    big = b"v" * (100 * 1024)  # about 50 RU each
    rejected = None
    for i in range(40):
        try:
            s.execute(ins, (i, big))
        except OverloadedErrorMessage as e:
            rejected = e
            break
    assert rejected is not None
    wait = retry_after(rejected)
    assert 0 < wait <= 1500, wait
    time.sleep(wait / 1000.0 + 0.05)
    s.execute(ins, (100, big))
    c.shutdown()


def test_server_side_retry_loses_nothing(server_factory, unique_name):
    srv = server_factory(set_args=["throughput.server_side_retry=true"])
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cosmosdb_provisioned_throughput = 1000")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, 'x')")
    start = time.monotonic()
    futs = [s.execute_async(ins, (k,)) for k in range(1000)]
    for f in futs:
        f.result()
    elapsed = time.monotonic() - start
    total = sum(charge(f) for f in futs)
    # Held until the budget allowed them: beyond the first second's bucket (1,000 RU) and at
    # most as much again banked or overdrawn, the rest goes at 1,000 RU/s.
    floor = (total - 2000) / 1000
    assert total > 4000 and elapsed >= floor * 0.9, (total, elapsed)
    assert s.execute(f"SELECT count(*) FROM {ks}.t").one()[0] == 1000
    c.shutdown()


def test_hot_partition_is_throttled_alone(server_factory, unique_name):
    srv = server_factory()
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v text, PRIMARY KEY (k, c)) "
              f"WITH cosmosdb_provisioned_throughput = 20000")
    s.execute(f"ALTER TABLE {ks}.t WITH cosmosdb_provisioned_throughput = 1000")
    parts = sorted(s.execute("SELECT partition_id, token_start, token_end, provisioned_ru "
                             "FROM system_views.physical_partitions WHERE keyspace_name = %s", (ks,)),
                   key=lambda r: r.token_start)
    assert len(parts) == 2 and all(p.provisioned_ru == 500 for p in parts)
    # A key in each partition.
    from cassandra.metadata import Murmur3Token
    tok = lambda k: Murmur3Token.hash_fn(struct.pack(">i", k))  # noqa: E731
    hot = next(k for k in range(1000) if tok(k) <= parts[0].token_end)
    cold = next(k for k in range(1000) if tok(k) > parts[0].token_end)
    ins = s.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, 'x')")
    cost = charge(s.execute(ins, (cold, -1)))
    time.sleep(1.1)
    results = {}

    def run(name, key, rate):
        results[name] = hammer(s, ins, lambda tid, i: (key, i), 3.0, 1, rate)

    th = threading.Thread(target=run, args=("hot", hot, 3 * 500 / cost))
    tc = threading.Thread(target=run, args=("cold", cold, 0.6 * 500 / cost))
    th.start(); tc.start(); th.join(); tc.join()  # noqa: E702
    assert results["hot"]["rejected"], "the hot partition was not throttled"
    assert not results["cold"]["rejected"], "the cold partition was throttled"
    c.shutdown()


# ------------------------------------------------------------------ options, autoscale, sharing

def fresh(server_factory, unique_name, **server_args):
    """A new server (faithful throughput defaults), a session on it and a new keyspace."""
    c, s = connect(server_factory(**server_args))
    ks = unique_name("ks")
    create_keyspace(s, ks)
    return c, s, ks


def assert_within_budget(t, rate, tol=0.15):
    """Accepted RU of a hammer run: the budget for its duration plus the initial one-second
    bucket (nothing banked for burst), within tol."""
    expected = rate * t["elapsed"] + rate
    assert (1 - tol) * expected <= t["ru"] <= (1 + tol) * expected, (t["ru"], expected, t["ok"])


def view(s, ks, table=None):
    rows = list(s.execute("SELECT * FROM system_views.throughput WHERE keyspace_name = %s", (ks,)))
    return {r.table_name: r for r in rows} if table is None else next(r for r in rows if r.table_name == table)


def test_throughput_options_are_validated_with_cosmos_errors(server_factory, unique_name):
    from cassandra import InvalidRequest
    c, s, ks = fresh(server_factory, lambda _: "ks_valid")
    manual = "The offer should have valid throughput values between 400 and 1000000 inclusive in increments of 100."
    auto = "The offer should have valid throughput values between 1000 and 1000000 inclusive in increments of 1000."
    cases = [
        ("cosmosdb_provisioned_throughput = 300", manual, "less than minimum possible throughput 400"),
        ("cosmosdb_provisioned_throughput = 450", manual, "not a multiple of 100"),
        ("cosmosdb_provisioned_throughput = 1000100", manual, "more than possible maximum"),
        ("cosmosdb_autoscale_max_throughput = 400", auto, "less than minimum possible throughput 1000"),
        ("cosmosdb_autoscale_max_throughput = 4500", auto, "not a multiple of 1000"),
        ("cosmosdb_provisioned_throughput = 400 AND cosmosdb_autoscale_max_throughput = 4000",
         "not both", "not both"),
    ]
    for opt, msg, detail in cases:
        for stmt in (f"CREATE TABLE {ks}.bad (k int PRIMARY KEY) WITH {opt}",
                     f"CREATE KEYSPACE {ks}_bad WITH replication = {{'class': 'SimpleStrategy', "
                     f"'replication_factor': 1}} AND {opt}"):
            try:
                s.execute(stmt)
                raise AssertionError(f"accepted: {stmt}")
            except InvalidRequest as e:
                assert msg in str(e) and detail in str(e), str(e)
    assert s.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = 'bad'",
                     (ks,)).one() is None
    assert s.execute("SELECT * FROM system_schema.keyspaces WHERE keyspace_name = %s",
                     (ks + "_bad",)).one() is None
    # A failed ALTER changes nothing.
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY) WITH cosmosdb_provisioned_throughput = 800")
    for opt, _, _ in cases:
        try:
            s.execute(f"ALTER TABLE {ks}.t WITH {opt}")
            raise AssertionError(opt)
        except InvalidRequest:
            pass
    row = view(s, ks, "t")
    assert (row.provisioned_ru, row.autoscale_max_ru, row.source) == (800, None, "table")
    c.shutdown()


def test_autoscale_budget_partitions_and_current_throughput(server_factory, unique_name):
    c, s, ks = fresh(server_factory, unique_name)
    s.execute(f"CREATE TABLE {ks}.big (k int PRIMARY KEY, v text) WITH cosmosdb_autoscale_max_throughput = 20000")
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cosmosdb_autoscale_max_throughput = 1000")
    big = view(s, ks, "big")
    # ceil(20000 / 10000) partitions; idle, autoscale sits at 10% of its maximum.
    assert (big.autoscale_max_ru, big.provisioned_ru, big.physical_partitions) == (20000, 20000, 2)
    assert big.current_ru == 2000
    desc = s.execute(f"DESCRIBE TABLE {ks}.big").one().create_statement
    assert "cosmosdb_autoscale_max_throughput = 20000" in desc, desc
    assert "cosmosdb_provisioned_throughput" not in desc
    assert view(s, ks, "t").current_ru == 100
    # Under load the budget is the maximum: 3x of it offered, about the maximum accepted, and
    # the current throughput scales up to it.
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, 'x')")
    cost = charge(s.execute(ins, (999999,)))
    t = hammer(s, ins, lambda tid, i: (tid * 1_000_000 + i,), 3.0, 3, 1000.0 / cost)
    assert t["rejected"], "autoscale max was not enforced"
    assert_within_budget(t, 1000.0)
    row = view(s, ks, "t")
    assert row.current_ru == 1000, row
    # Switching to manual throughput replaces autoscale.
    s.execute(f"ALTER TABLE {ks}.t WITH cosmosdb_provisioned_throughput = 600")
    row = view(s, ks, "t")
    assert (row.provisioned_ru, row.autoscale_max_ru, row.current_ru) == (600, None, 600)
    opts = s.execute("SELECT cosmosdb_autoscale_max_throughput, cosmosdb_provisioned_throughput "
                     "FROM system_schema.tables WHERE keyspace_name = %s AND table_name = 'big'", (ks,)).one()
    assert tuple(opts) == (20000, None)
    c.shutdown()


def test_autoscale_current_follows_demand(server_factory, unique_name):
    c, s, ks = fresh(server_factory, unique_name)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cosmosdb_autoscale_max_throughput = 10000")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, 'x')")
    cost = charge(s.execute(ins, (999999,)))
    # About 2,500 RU/s offered: well above 10% (1,000), well below the maximum.
    t = hammer(s, ins, lambda tid, i: (tid * 1_000_000 + i,), 2.0, 1, 2500.0 / cost)
    assert not t["rejected"]
    row = view(s, ks, "t")
    rate = t["ru"] / t["elapsed"]
    assert rate > 1100, f"the client reached only {rate:.0f} RU/s, not above autoscale's floor"
    # The peak second is at least the average rate; nothing near the maximum was used.
    assert 0.9 * rate <= row.current_ru <= 6000 and row.current_ru % 100 == 0, (row, rate)
    c.shutdown()


def test_keyspace_throughput_is_shared_by_its_tables(server_factory, unique_name):
    srv = server_factory()
    c, s = connect(srv)
    ks = unique_name("ks")
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', "
              f"'replication_factor': 1}} AND cosmosdb_provisioned_throughput = 1000")
    s.execute(f"CREATE TABLE {ks}.a (k int PRIMARY KEY, v text)")
    s.execute(f"CREATE TABLE {ks}.b (k int PRIMARY KEY, v text)")
    s.execute(f"CREATE TABLE {ks}.own (k int PRIMARY KEY, v text) WITH cosmosdb_provisioned_throughput = 400")
    rows = view(s, ks)
    assert {n: (r.provisioned_ru, r.source) for n, r in rows.items()} == {
        "a": (1000, "keyspace"), "b": (1000, "keyspace"), "own": (400, "table")}
    ins_a = s.prepare(f"INSERT INTO {ks}.a (k, v) VALUES (?, 'x')")
    ins_b = s.prepare(f"INSERT INTO {ks}.b (k, v) VALUES (?, 'x')")
    cost = charge(s.execute(ins_a, (999999,)))
    results = {}

    def run(name, stmt):
        # Each table alone is offered the whole shared budget.
        results[name] = hammer(s, stmt, lambda tid, i: (tid * 1_000_000 + i,), 3.0, 1, 1000.0 / cost)

    ta = threading.Thread(target=run, args=("a", ins_a))
    tb = threading.Thread(target=run, args=("b", ins_b))
    ta.start(); tb.start(); ta.join(); tb.join()  # noqa: E702
    total = results["a"]["ru"] + results["b"]["ru"]
    assert results["a"]["rejected"] and results["b"]["rejected"]
    # Together within the one shared budget (each alone was offered all of it).
    assert_within_budget({"ru": total, "ok": None,
                          "elapsed": max(results["a"]["elapsed"], results["b"]["elapsed"])}, 1000.0)
    # Both were served from it (the split between them follows the two client threads, which
    # the GIL does not schedule evenly, so only a loose share is asserted).
    assert results["a"]["ru"] > 0.1 * total and results["b"]["ru"] > 0.1 * total
    # A table with its own throughput is not part of the pool.
    s.execute(s.prepare(f"INSERT INTO {ks}.own (k, v) VALUES (?, 'x')"), (1,))
    # ALTER KEYSPACE changes the shared budget; DESCRIBE shows it.
    s.execute(f"ALTER KEYSPACE {ks} WITH cosmosdb_autoscale_max_throughput = 4000")
    a = view(s, ks, "a")
    assert (a.provisioned_ru, a.autoscale_max_ru, a.source) == (4000, 4000, "keyspace")
    desc = s.execute(f"DESCRIBE KEYSPACE {ks}").one().create_statement
    assert "cosmosdb_autoscale_max_throughput = 4000" in desc, desc
    c.shutdown()


def test_tables_without_throughput_get_the_default_and_are_throttled(server_factory, unique_name):
    # Only under "all": by default ("provisioned") a default-budget table is accounted, not
    # rejected (test_first_hour.py).
    c, s, ks = fresh(server_factory, unique_name, set_args=["throughput.enforce=all"])
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
    row = view(s, ks, "t")
    assert (row.provisioned_ru, row.source, row.enforced, row.physical_partitions) == (400, "default", True, 1)
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, 'x')")
    cost = charge(s.execute(ins, (999999,)))
    t = hammer(s, ins, lambda tid, i: (tid * 1_000_000 + i,), 3.0, 2, 600.0 / cost)
    assert t["rejected"], "a table without throughput was not throttled"
    assert_within_budget(t, 400.0)
    c.shutdown()


def test_server_side_retry_times_out_as_a_timeout(server_factory, unique_name):
    from cassandra import ReadTimeout, WriteTimeout, WriteType
    c, s, ks = fresh(server_factory, unique_name, set_args=["throughput.server_side_retry=true",
                                                            "throughput.server_side_retry_max_ms=1500"])
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v blob, PRIMARY KEY (k, c)) "
              f"WITH cosmosdb_provisioned_throughput = 400")
    # One single-partition batch of about 2,000 RU: admitted while the bucket is positive, it
    # leaves the bucket about 1,600 RU (4 s at 400 RU/s) in debt, so the next two requests
    # (each held 1.5 s) cannot fit.
    big = "0x" + "61" * (100 * 1024)
    stmts = " ".join(f"INSERT INTO {ks}.t (k, c, v) VALUES (1, {i}, {big});" for i in range(40))
    s.execute(f"BEGIN UNLOGGED BATCH {stmts} APPLY BATCH")
    try:
        s.execute(f"SELECT k FROM {ks}.t WHERE k = 2")
        raise AssertionError("the read was not held past the retry limit")
    except ReadTimeout as e:
        assert "server-side retry" in str(e), str(e)
    try:
        s.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (3, 0, 0x00)")
        raise AssertionError("the write was not held past the retry limit")
    except WriteTimeout as e:
        assert "server-side retry" in str(e) and e.write_type == WriteType.SIMPLE, str(e)
    assert s.execute(f"SELECT * FROM {ks}.t WHERE k = 3").one() is None  # nothing stored
    c.shutdown()


def test_lwt_is_admitted_and_throttled(server_factory, unique_name):
    c, s, ks = fresh(server_factory, unique_name)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int) WITH cosmosdb_provisioned_throughput = 400")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, 0) IF NOT EXISTS")
    upd = s.prepare(f"UPDATE {ks}.t SET v = 1 WHERE k = ? IF v = 0")
    first = charge(s.execute(ins, (0,)))
    assert first > 5.0, first  # a read and a write
    t = hammer(s, ins, lambda tid, i: (tid * 1_000_000 + i,), 2.0, 2, 400.0 / first)
    assert t["rejected"], "conditional writes were not throttled"
    e = t["rejected"][0]
    assert "Request rate is large" in str(e)
    # The error carries what was consumed (nothing: rejected before anything ran).
    assert struct.unpack(">d", e.custom_payload["RequestCharge"])[0] == 0.0
    time.sleep(2.5)
    rs = s.execute(upd, (0,))
    assert rs.one()[0] is True and charge(rs) > 5.0
    c.shutdown()
