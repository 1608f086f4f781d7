"""Query tracing: the protocol's tracing flag fills system_traces and returns the session id."""
import uuid

from cassandra.query import SimpleStatement


def test_driver_trace_has_session_and_events(session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.tr (id int PRIMARY KEY, v text)")
    session.execute(f"INSERT INTO {keyspace}.tr (id, v) VALUES (1, 'x')")
    rs = session.execute(SimpleStatement(f"SELECT v FROM {keyspace}.tr WHERE id = 1"), trace=True)
    assert rs.one().v == "x"
    trace = rs.get_query_trace(max_wait_sec=5)
    assert isinstance(trace.trace_id, uuid.UUID)
    assert trace.duration is not None and trace.duration.total_seconds() >= 0
    assert trace.coordinator == "127.0.0.1"
    activities = [e.description for e in trace.events]
    assert any(a.startswith("Parsing SELECT v FROM") for a in activities), activities
    # The partition read, by id and by position in token order (one partition covers the ring).
    pid = session.execute("SELECT partition_id FROM system_views.physical_partitions "
                          "WHERE keyspace_name = %s AND table_name = 'tr'", (keyspace,)).one()[0]
    token = session.execute(f"SELECT token(id) FROM {keyspace}.tr WHERE id = 1").one()[0]
    routing = [a for a in activities if a.startswith("Routing:")]
    assert routing == [f"Routing: single-partition, physical partition id {pid} (1 of 1, tokens "
                       f"(-9223372036854775808, 9223372036854775807]), token {token}"], activities
    # the session row is readable like any table, by its id
    row = session.execute("SELECT request, parameters FROM system_traces.sessions WHERE session_id = %s",
                          (trace.trace_id,)).one()
    assert row.request == "Execute CQL3 query"
    assert row.parameters["query"].startswith("SELECT v FROM")


def test_untraced_requests_carry_no_trace_id(session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.nt (id int PRIMARY KEY)")
    rs = session.execute(f"SELECT * FROM {keyspace}.nt")
    # the driver only records trace ids the server sent
    assert not rs.response_future._query_traces
    assert rs.get_all_query_traces() == []


def test_cqlsh_tracing_on(cqlsh, server, unique_name):
    ks = unique_name("trks")
    script = (f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};\n"
              f"CREATE TABLE {ks}.t (id int PRIMARY KEY, v text);\n"
              f"INSERT INTO {ks}.t (id, v) VALUES (1, 'a');\n"
              "TRACING ON;\n"
              f"SELECT * FROM {ks}.t WHERE id = 1;\n")
    out = cqlsh([], stdin=script)
    assert out.returncode == 0, out.stderr
    assert "Tracing session:" in out.stdout, out.stdout
    assert "Execute CQL3 query" in out.stdout
    assert f"Parsing SELECT * FROM {ks}.t WHERE id = 1" in out.stdout
