"""Server-side request timeouts (`limits.write_timeout_ms`, `limits.read_timeout_ms`), as
Cassandra's write_request_timeout / read_request_timeout: ringgate on PostgreSQL whose data
table another session holds locked, so that storage hangs without an error (as a commit waiting
for a silent synchronous standby does). The Python driver gets Cassandra's WriteTimeout (with
the right write type) and ReadTimeout within the limit, long before its own client timeout;
the timed-out write's outcome was unknown and it does commit once storage answers; the server
then serves as before. Skipped (loudly) without PostgreSQL binaries unless
RINGGATE_REQUIRE_POSTGRES is set."""
import subprocess
import time

import pytest
from cassandra import ReadTimeout, WriteTimeout

from rgtest import create_keyspace
from test_postgres_backend import connect, pg  # noqa: F401 (the module's PostgreSQL server)

LIMIT_MS = 1500


class TableLock:
    """A psql session holding ACCESS EXCLUSIVE on a table until released."""

    def __init__(self, pg_server, dbname, table):
        cmd = pg_server._cmd("psql", "-X", "-q", "-t", "-A", "-h", "127.0.0.1", "-p", pg_server.port,
                             "-U", "postgres", "-d", dbname, "-v", "ON_ERROR_STOP=1")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, cwd="/")
        self.send(f"BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE; SELECT 'locked';")
        line = self.proc.stdout.readline()  # -t -A: the value alone, once the lock is held
        assert line.strip() == "locked", f"psql answered {line!r} (exit {self.proc.poll()})"

    def send(self, sql):
        self.proc.stdin.write(sql + "\n")
        self.proc.stdin.flush()

    def release(self):
        self.send("COMMIT;")
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def timed_server(pg, server_factory):  # noqa: F811
    dbname = "rgtimeouts"
    url = pg.create_database(dbname)
    srv = server_factory(settings={"storage.backend": "postgres", "storage.postgres.url": url,
                                   "limits.write_timeout_ms": str(LIMIT_MS),
                                   "limits.read_timeout_ms": str(LIMIT_MS)})
    return srv, dbname


def timed(call):
    began = time.monotonic()
    with pytest.raises(Exception) as e:
        call()
    return e.value, time.monotonic() - began


def test_writes_and_reads_stuck_in_storage_get_cassandras_timeouts(pg, timed_server):  # noqa: F811
    srv, dbname = timed_server
    c, s = connect(srv)
    try:
        create_keyspace(s, "tmo")
        s.execute("CREATE TABLE tmo.t (k int PRIMARY KEY, v text)")
        ins = s.prepare("INSERT INTO tmo.t (k, v) VALUES (?, ?)")
        cas = s.prepare("INSERT INTO tmo.t (k, v) VALUES (?, ?) IF NOT EXISTS")
        sel = s.prepare("SELECT v FROM tmo.t WHERE k = ?")
        s.execute(ins, (1, "before"))

        lock = TableLock(pg, dbname, "ringgate_data")
        try:
            e, took = timed(lambda: s.execute(ins, (2, "while stuck"), timeout=20))
            assert isinstance(e, WriteTimeout), repr(e)
            assert e.write_type == 0, e  # SIMPLE (the driver's WriteType.SIMPLE)
            assert "timed out" in str(e)
            assert LIMIT_MS / 1000 - 0.2 <= took < 10, took

            e, _ = timed(lambda: s.execute(cas, (3, "cas"), timeout=20))
            assert isinstance(e, WriteTimeout) and e.write_type == 5, repr(e)  # CAS

            e, _ = timed(lambda: s.execute("UPDATE tmo.t SET v = 'text' WHERE k = 4", timeout=20))
            assert isinstance(e, WriteTimeout), repr(e)

            e, took = timed(lambda: s.execute(sel, (1,), timeout=20))
            assert isinstance(e, ReadTimeout), repr(e)
            assert took < 10, took
        finally:
            lock.release()

        # The timed-out writes' outcome was unknown: they were waiting, and now commit, each on
        # its own (one of them may land after another was seen).
        def row(k):
            r = s.execute(sel, (k,)).one()
            return r and r.v
        deadline = time.monotonic() + 20
        for k in (2, 3, 4):
            while row(k) is None and time.monotonic() < deadline:
                time.sleep(0.1)
        assert row(2) == "while stuck"
        assert row(3) == "cas"
        assert row(4) == "text"
        # And the server serves as before.
        s.execute(ins, (5, "after"))
        assert row(5) == "after" and row(1) == "before"
    finally:
        c.shutdown()
