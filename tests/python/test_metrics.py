"""The Prometheus endpoint (issue 19): `/metrics` on `http.listen`, scraped with a real HTTP
client; its figures checked against system_views and against the requests the test made."""

import struct

from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.protocol import OverloadedErrorMessage

from metrics_text import get, scrape
from rgtest import create_keyspace, rethrowing_profile


def connect(srv):
    # schema_event_refresh_window=-1: no metadata refresh in answer to schema events. The
    # driver runs it up to 2 s after a CREATE, as QUERY requests of its own, which could land
    # between two scrapes that count this test's requests.
    profile = rethrowing_profile()
    c = Cluster(contact_points=[srv.host], port=srv.port, schema_event_refresh_window=-1,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    return c, c.connect()


def charge(rs_or_future):
    fut = getattr(rs_or_future, "response_future", rs_or_future)
    return struct.unpack(">d", fut.custom_payload["RequestCharge"])[0]


def test_metrics_count_requests_and_match_system_views(server_factory, unique_name):
    srv = server_factory()
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    # 30,000 RU/s: three physical partitions from the start.
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) "
              f"WITH cosmosdb_provisioned_throughput = 30000")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    c.control_connection.wait_for_schema_agreement()
    before = scrape(srv)
    n = 200
    charged = sum(charge(s.execute(ins, (k, "v" * (k % 50)))) for k in range(n))
    sel = s.prepare(f"SELECT v FROM {ks}.t WHERE k = ?")
    charged += sum(charge(s.execute(sel, (k,))) for k in range(20))
    after = scrape(srv)

    ok = dict(operation="execute", outcome="success")
    assert after.value("ringgate_requests_total", **ok) - \
        before.value("ringgate_requests_total", **ok) == n + 20
    hist = "ringgate_request_duration_seconds_count"
    assert after.value(hist, operation="execute") - before.value(hist, operation="execute") == n + 20
    # Every bucket is cumulative and +Inf holds them all.
    buckets = [v for l, v in after.series("ringgate_request_duration_seconds_bucket", operation="execute")]
    assert buckets == sorted(buckets) and buckets[-1] == after.value(hist, operation="execute")
    # The RU counter grew by what the responses charged (no other statement ran meanwhile).
    assert after.value("ringgate_requests_total", operation="query", outcome="success") == \
        before.value("ringgate_requests_total", operation="query", outcome="success")
    ru = after.value("ringgate_request_units_total") - before.value("ringgate_request_units_total")
    assert abs(ru - charged) < 1e-3 * (n + 20), (ru, charged)
    assert after.value("ringgate_connections") >= 1
    assert after.types["ringgate_requests_total"] == "counter"
    assert after.types["ringgate_request_duration_seconds"] == "histogram"

    # Per physical partition: the same figures as system_views.physical_partitions.
    rows = list(s.execute("SELECT partition_id, bytes, logical_partitions, provisioned_ru "
                          "FROM system_views.physical_partitions "
                          "WHERE keyspace_name = %s AND table_name = %s", (ks, "t")))
    assert len(rows) == 3
    m = scrape(srv)
    table = dict(keyspace=ks, table="t")
    assert m.value("ringgate_table_physical_partitions", **table) == 3
    assert m.value("ringgate_table_provisioned_ru", **table) == 30000
    assert m.value("ringgate_table_logical_partitions", **table) == n
    assert m.value("ringgate_table_bytes", **table) == sum(r.bytes for r in rows)
    for r in rows:
        labels = dict(table, partition_id=r.partition_id)
        assert m.value("ringgate_partition_bytes", **labels) == r.bytes
        assert m.value("ringgate_partition_logical_partitions", **labels) == r.logical_partitions
        assert m.value("ringgate_partition_request_units_total", **labels) > 0
    assert m.value("ringgate_metrics_omitted", kind="partition") == 0
    c.shutdown()


def test_throttled_requests_are_counted_per_partition(server_factory, unique_name):
    srv = server_factory()
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v blob) WITH cosmosdb_provisioned_throughput = 400")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    before = scrape(srv)
    big = b"v" * (100 * 1024)  # about 50 RU each: the 400 RU/s budget runs out within a second
    rejected = 0
    for i in range(40):
        try:
            s.execute(ins, (i, big))
        except OverloadedErrorMessage:
            rejected += 1
    assert rejected > 0
    after = scrape(srv)
    key = dict(operation="execute", outcome="throttled")
    assert after.value("ringgate_requests_total", **key) - \
        before.value("ringgate_requests_total", **key) == rejected
    row = s.execute("SELECT partition_id, throttled_requests FROM system_views.physical_partitions "
                    "WHERE keyspace_name = %s AND table_name = %s", (ks, "t")).one()
    assert row.throttled_requests == rejected
    assert after.value("ringgate_partition_throttled_requests_total", keyspace=ks, table="t",
                       partition_id=row.partition_id) == rejected
    c.shutdown()


def test_series_are_bounded_and_the_listener_refuses_other_requests(server_factory, unique_name):
    srv = server_factory(settings={"http.metrics_max_tables": 1, "http.metrics_max_partitions": 2})
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    for name in ("a", "b"):
        s.execute(f"CREATE TABLE {ks}.{name} (k int PRIMARY KEY) WITH cosmosdb_provisioned_throughput = 40000")
    for k in range(50):
        s.execute(f"INSERT INTO {ks}.b (k) VALUES ({k})")
    m = scrape(srv)
    # The busier table b is listed, a is not; 2 of b's 4 partitions are, 6 of 8 are left out.
    assert [l["table"] for l, _ in m.series("ringgate_table_bytes")] == ["b"]
    assert len(m.series("ringgate_partition_bytes")) == 2
    assert m.value("ringgate_metrics_omitted", kind="table") == 1
    assert m.value("ringgate_metrics_omitted", kind="partition") == 6
    assert m.value("ringgate_physical_partitions") == 8
    status, _, _ = get(srv, "/nothing-here")
    assert status == 404
    c.shutdown()


def test_slow_queries_are_logged_once_with_routing_rows_and_charge(server_factory, unique_name):
    # 1 ms: a traced scan of 3,000 rows on one connection is over it; point writes mostly are not.
    srv = server_factory(settings={"log.slow_query_ms": 1})
    c, s = connect(srv)
    ks = unique_name("ks")
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, 'x')")
    execute_concurrent_with_args(s, ins, [(k,) for k in range(3000)], concurrency=64,
                                 raise_on_first_error=True)
    start = srv.log_size()
    before = scrape(srv)
    query = f"SELECT k, v FROM {ks}.t WHERE v = 'x' ALLOW FILTERING"
    rs = s.execute(query, trace=True)
    assert len(list(rs)) == 3000
    log = srv.log_text(start)
    lines = [l for l in log.splitlines() if f"slow query: {query}" in l]
    assert len(lines) == 1, log[-3000:]
    line = lines[0]
    assert "rows=3000" in line and f"ru={charge(rs)}" in line, line
    assert "fan-out to all 1 physical partitions" in line, line
    assert scrape(srv).value("ringgate_slow_queries_total") > before.value("ringgate_slow_queries_total")
    # Untraced: the read records its routing itself once it is slow.
    start = srv.log_size()
    untraced = f"SELECT k FROM {ks}.t WHERE v = 'x' LIMIT 5000 ALLOW FILTERING"
    assert len(list(s.execute(untraced))) == 3000
    lines = [l for l in srv.log_text(start).splitlines() if f"slow query: {untraced}" in l]
    assert len(lines) == 1 and "fan-out to all 1 physical partitions" in lines[0], lines
    c.shutdown()
