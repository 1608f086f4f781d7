"""Provisioned throughput and rate limiting (issue 7): per-physical-partition budgets, Overloaded
(0x1001) with Cosmos DB's message and a real RetryAfterMs, server-side retry, hot partitions."""

import re
import struct
import threading
import time

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
    futs = [s.execute_async(ins, (k,)) for k in range(600)]  # about 3,000 RU
    for f in futs:
        f.result()
    elapsed = time.monotonic() - start
    assert elapsed >= 1.5, elapsed  # held until the budget allowed them
    assert s.execute(f"SELECT count(*) FROM {ks}.t").one()[0] == 600
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
