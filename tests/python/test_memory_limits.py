"""Clients that never read their answers cannot grow the server's memory: responses not yet
written count against limits.max_unsent_bytes_per_connection and limits.max_unsent_bytes,
and requests wait while their connection is over budget."""

import time

import pytest

import cqlwire
from cqlwire import Conn

ROW_BYTES = 1_900_000
PIPELINED = 400  # 400 x 1.9 MB = 760 MB if every answer were kept


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def peak_rss_while(pid, seconds):
    peak, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_bytes(pid))
        time.sleep(0.05)
    return peak


def pipeline_reads(srv, table, n):
    c = cqlwire.ready_connection(srv.host, srv.port)
    query = cqlwire.query_body(f"SELECT b FROM {table} WHERE id = 1")
    c.send(b"".join(cqlwire.frame(cqlwire.QUERY, query, stream=s) for s in range(1, n + 1)))
    return c


def test_pipelined_reads_never_read_do_not_grow_the_server(server_factory, cluster_factory):
    srv = server_factory(settings={"limits.max_unsent_bytes_per_connection": "8MiB",
                                   "limits.max_unsent_bytes": "24MiB"})
    session = cluster_factory(srv).connect()
    session.execute("CREATE KEYSPACE m WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE m.t (id int PRIMARY KEY, b blob)")
    session.execute("INSERT INTO m.t (id, b) VALUES (1, %s)", (b"\x07" * ROW_BYTES,))
    base = rss_bytes(srv.proc.pid)
    # Three connections that never read: each over its own budget, together over the global one.
    hogs = [pipeline_reads(srv, "m.t", PIPELINED) for _ in range(3)]
    try:
        peak = peak_rss_while(srv.proc.pid, 5)
        assert peak - base < 250 << 20, f"server grew by {(peak - base) >> 20} MiB"
        # A client that reads its answers is still served, big rows included.
        for _ in range(5):
            assert len(session.execute("SELECT b FROM m.t WHERE id = 1").one().b) == ROW_BYTES
    finally:
        for h in hogs:
            h.close()
    # Once the hogs are gone their unsent bytes leave the global count: a new pipelining
    # client that does read gets every answer.
    with pipeline_reads(srv, "m.t", 50) as c:
        streams = set()
        for _ in range(50):
            f = c.read_frame()
            assert f.opcode == cqlwire.RESULT, f
            streams.add(f.stream)
        assert streams == set(range(1, 51))


def test_a_prepared_statement_larger_than_the_cache_allows_is_refused(session):
    from cassandra import InvalidRequest
    huge = "x" * (5 << 20)
    with pytest.raises(InvalidRequest) as e:
        session.prepare(f"SELECT * FROM system.local WHERE key = '{huge}'")
    msg = str(e.value)
    assert "is larger than allowed maximum of 8 MiB: SELECT * FROM system.local WHERE key = 'xxx" in msg, msg[:300]
    assert len(msg) < 1000
    assert session.prepare("SELECT key FROM system.local").query_string


def test_pipelined_lz4_bodies_that_expand_are_bounded_in_flight(server_factory, cluster_factory):
    """lz4 bodies may expand up to 256x: 1 MiB query strings arrive as a few KiB each. While
    the requests wait (their client reads no answers), what they hold is bounded by
    limits.max_in_flight_request_bytes."""
    import os

    import lz4.block

    srv = server_factory(settings={"limits.max_unsent_bytes_per_connection": "4MiB",
                                   "limits.max_in_flight_request_bytes": "16MiB"})
    session = cluster_factory(srv).connect()
    session.execute("CREATE KEYSPACE z WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TABLE z.t (id int PRIMARY KEY, b blob)")
    session.execute("INSERT INTO z.t (id, b) VALUES (1, %s)", (os.urandom(ROW_BYTES),))
    base = rss_bytes(srv.proc.pid)
    c = Conn(srv.host, srv.port)
    try:
        assert c.startup(COMPRESSION="lz4").opcode == cqlwire.READY
        padding = "/*" + "x" * (1 << 20) + "*/"
        plain = cqlwire.query_body(f"SELECT b FROM z.t WHERE id = 1 {padding}")
        body = len(plain).to_bytes(4, "big") + lz4.block.compress(plain, store_size=False)
        assert len(body) < 10_000
        c.send(b"".join(cqlwire.frame(cqlwire.QUERY, body, stream=s, flags=0x01) for s in range(1, 401)))
        peak = peak_rss_while(srv.proc.pid, 5)
        assert peak - base < 250 << 20, f"server grew by {(peak - base) >> 20} MiB"
        assert session.execute("SELECT id FROM z.t WHERE id = 1").one().id == 1
    finally:
        c.close()
