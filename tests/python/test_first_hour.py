"""The first hour (issue 12): on DEFAULT settings (`throughput.enforce = "provisioned"`) loading
data into tables without throughput works (cqlsh COPY FROM, execute_concurrent, the example
loader in cql/), what Cosmos DB would have rate-limited is counted in `would_throttle`, tables
with provisioned throughput are still throttled, and server-side retry holds requests without
keeping new clients out."""

import subprocess
import sys
import threading
import time
from pathlib import Path

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.protocol import OverloadedErrorMessage

from rgtest import create_keyspace, rethrowing_profile


ROOT = Path(__file__).resolve().parents[2]


def views(s, ks, table):
    tp = s.execute("SELECT enforced, source, would_throttle, throttled_requests FROM system_views.throughput "
                   "WHERE keyspace_name = %s AND table_name = %s", (ks, table)).one()
    parts = list(s.execute("SELECT table_name, would_throttle FROM system_views.physical_partitions "
                           "WHERE keyspace_name = %s", (ks,)))
    return tp, sum(p.would_throttle for p in parts if p.table_name == table)


def test_copy_from_100k_rows_into_a_default_table(cluster_factory, server_factory, cqlsh, unique_name, tmp_path):
    srv = server_factory()
    c = cluster_factory(srv)
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, name text, v double)")
    csv = tmp_path / "rows.csv"
    n = 100_000
    csv.write_text("".join(f"{k},name-{k},{k * 0.5}\n" for k in range(n)))
    out = cqlsh(["-e", f"COPY {ks}.t (k, name, v) FROM '{csv}'"], server=srv, timeout=300)
    assert out.returncode == 0, out
    assert f"{n} rows imported" in out.stdout, out
    assert s.execute(f"SELECT count(*) FROM {ks}.t").one()[0] == n
    assert s.execute(f"SELECT name, v FROM {ks}.t WHERE k = 4242").one() == ("name-4242", 2121.0)
    # Accounted at the default 400 RU/s, not rejected; what Cosmos DB would have rate-limited
    # is counted per table and per physical partition.
    tp, parts_would = views(s, ks, "t")
    assert (tp.enforced, tp.source, tp.throttled_requests) == (False, "default", 0)
    assert tp.would_throttle > 0 and parts_would == tp.would_throttle, (tp, parts_would)


def test_execute_concurrent_5000_rows_with_driver_defaults(cluster_factory, server_factory, unique_name):
    srv = server_factory()
    c = cluster_factory(srv)
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    results = execute_concurrent_with_args(s, ins, [(k, f"v{k}") for k in range(5000)],
                                           concurrency=100, raise_on_first_error=True)
    assert all(ok for ok, _ in results)
    assert s.execute(f"SELECT count(*) FROM {ks}.t").one()[0] == 5000


def test_multi_tenant_example_loader_completes(cluster_factory, server_factory, cqlsh):
    srv = server_factory()
    out = cqlsh(["-f", str(ROOT / "cql" / "10-multi-tenant-schema.cql")], server=srv)
    assert out.returncode == 0 and "Error" not in out.stderr, out
    p = subprocess.run([sys.executable, str(ROOT / "cql" / "multi_tenant_load.py"), srv.host, str(srv.port)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    loaded = int(p.stdout.split()[1])
    c = cluster_factory(srv)
    s = c.connect()
    # MultiHash keys: count the rows of every tenant through the table's full scan.
    assert s.execute("SELECT count(*) FROM saas.events").one()[0] == loaded > 1000


def test_provisioned_tables_are_still_throttled_by_default(cluster_factory, server_factory, unique_name):
    srv = server_factory()
    # Fallthrough: see each Overloaded (the driver's default moves on to the next host, of
    # which a one-node cluster has none).
    profile = rethrowing_profile()
    c = cluster_factory(srv, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.p (k int PRIMARY KEY, v blob) WITH cosmosdb_provisioned_throughput = 400")
    s.execute(f"CREATE TABLE {ks}.d (k int PRIMARY KEY, v blob)")
    big = b"v" * (100 * 1024)  # about 50 RU each: 40 of them are 5 s of a 400 RU/s budget
    rejected = 0
    for name in ("p", "d"):
        ins = s.prepare(f"INSERT INTO {ks}.{name} (k, v) VALUES (?, ?)")
        for k in range(40):
            try:
                s.execute(ins, (k, big))
            except OverloadedErrorMessage as e:
                assert name == "p", f"the default-budget table was throttled: {e}"
                assert "Request rate is large" in str(e)
                rejected += 1
    assert rejected > 0, "the provisioned table was not throttled"
    assert s.execute(f"SELECT count(*) FROM {ks}.d").one()[0] == 40
    p, _ = views(s, ks, "p")
    d, d_parts = views(s, ks, "d")
    assert (p.enforced, p.source, p.throttled_requests, p.would_throttle) == (True, "table", rejected, 0)
    assert (d.enforced, d.throttled_requests) == (False, 0) and d.would_throttle == d_parts > 0


def test_server_side_retry_copy_holds_requests_and_new_clients_connect(cluster_factory, server_factory, cqlsh, unique_name,
                                                                       tmp_path):
    srv = server_factory(set_args=["throughput.server_side_retry=true"])
    c = cluster_factory(srv)
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cosmosdb_provisioned_throughput = 400")
    n = 600  # rows by COPY and as many by the driver at once: 6,600 RU, about 16 s of budget
    csv = tmp_path / "rows.csv"
    csv.write_text("".join(f"{k},value-{k}\n" for k in range(n)))
    result = {}
    copy = threading.Thread(target=lambda: result.setdefault(
        # Requests may be held longer than cqlsh's 10 s default request timeout.
        "out", cqlsh(["-e", f"COPY {ks}.t (k, v) FROM '{csv}' WITH REQUESTTIMEOUT = 90"], server=srv,
                     timeout=300)))
    copy.start()
    # Hundreds of requests held at once (they used to take a thread each, and new clients'
    # requests queued behind them).
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, 'driver')")
    futs = [s.execute_async(ins, (n + k,), timeout=120) for k in range(n)]
    # While COPY's requests are held, new clients connect and are answered, again and again.
    held_seen = False
    answered = 0
    while copy.is_alive():
        fresh = Cluster(contact_points=[srv.host], port=srv.port)
        fs = fresh.connect()
        assert fs.execute("SELECT release_version FROM system.local").one() is not None
        # (A read of the table would be held too: count its keys through the partition view.)
        stored = fs.execute("SELECT logical_partitions FROM system_views.physical_partitions "
                            "WHERE keyspace_name = %s", (ks,)).one()[0]
        held_seen = held_seen or 0 < stored < 2 * n
        answered += 1
        fresh.shutdown()
        time.sleep(0.5)
    copy.join()
    for f in futs:
        f.result()
    out = result["out"]
    assert out.returncode == 0, out
    assert f"{n} rows imported" in out.stdout, out
    assert held_seen and answered >= 3, (held_seen, answered)
    assert s.execute(f"SELECT count(*) FROM {ks}.t").one()[0] == 2 * n
    # Held, not rejected: the budget's rejections stay at zero.
    tp, _ = views(s, ks, "t")
    assert tp.throttled_requests == 0 and tp.enforced


def test_readme_retry_policy_loads_a_throttled_table(cluster_factory, server_factory, unique_name):
    """cql/cosmos_retry.py, the policy the README gives Python applications: a concurrent load
    into a 400 RU/s table is rate-limited and completes."""
    sys.path.insert(0, str(ROOT / "cql"))
    try:
        from cosmos_retry import CosmosRetryPolicy
    finally:
        sys.path.pop(0)
    srv = server_factory()
    profile = ExecutionProfile(retry_policy=CosmosRetryPolicy())
    c = cluster_factory(srv, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cosmosdb_provisioned_throughput = 400")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    n = 500  # about 2,750 RU: 400 RU/s for several seconds
    results = execute_concurrent_with_args(s, ins, [(k, f"v{k}") for k in range(n)], concurrency=50,
                                           raise_on_first_error=True)
    assert all(ok for ok, _ in results)
    assert s.execute(f"SELECT count(*) FROM {ks}.t").one()[0] == n
    tp, _ = views(s, ks, "t")
    assert tp.throttled_requests > 0, "nothing was rate-limited: the policy was not exercised"


def test_enforce_off_counts_what_would_be_throttled(cluster_factory, server_factory, unique_name):
    srv = server_factory(set_args=["throughput.enforce=off"])
    c = cluster_factory(srv)
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.p (k int PRIMARY KEY, v blob) WITH cosmosdb_provisioned_throughput = 400")
    ins = s.prepare(f"INSERT INTO {ks}.p (k, v) VALUES (?, ?)")
    for k in range(40):  # about 50 RU each: 5 s of the budget at once, none rejected
        s.execute(ins, (k, b"v" * (100 * 1024)))
    p, parts = views(s, ks, "p")
    assert (p.enforced, p.source, p.throttled_requests) == (False, "table", 0)
    # Rate-limited requests do not draw on the budget, so roughly the first second's worth ran
    # within it and most of the rest would have been rejected.
    assert 20 <= p.would_throttle == parts <= 39, p


def test_held_request_is_traced_and_answered(cluster_factory, server_factory, unique_name):
    srv = server_factory(set_args=["throughput.server_side_retry=true"])
    c = cluster_factory(srv)
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TABLE {ks}.t (k int, c int, v blob, PRIMARY KEY (k, c)) "
              f"WITH cosmosdb_provisioned_throughput = 400")
    # One batch of about 2,000 RU leaves the bucket seconds in debt: the next read is held.
    big = "0x" + "61" * (100 * 1024)
    stmts = " ".join(f"INSERT INTO {ks}.t (k, c, v) VALUES (1, {i}, {big});" for i in range(40))
    s.execute(f"BEGIN UNLOGGED BATCH {stmts} APPLY BATCH", timeout=60)
    rs = s.execute(f"SELECT count(*) FROM {ks}.t WHERE k = 1", trace=True, timeout=60)
    assert rs.one()[0] == 40
    events = [e.description for e in rs.get_query_trace(max_wait_sec=5).events]
    held = sum(e.startswith("Held by server-side retry") for e in events)
    # Each run plans (and traces its routing) again; all but the last were held.
    assert held >= 1 and sum(e.startswith("Routing:") for e in events) == held + 1, events
