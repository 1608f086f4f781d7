"""CQL errors come back as the right protocol errors with Cassandra's messages, and the
server (and the same connection) keeps working afterwards."""

import re

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException

from rgtest import error_text


@pytest.fixture
def tables(session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.t (id int PRIMARY KEY, n int, s text)")
    session.execute(f"CREATE TABLE {keyspace}.comp (a int, b int, c int, v int, PRIMARY KEY ((a, b), c))")
    return keyspace


def still_works(session, keyspace):
    """The same session (same connection) answers a normal query after an error."""
    session.execute(f"INSERT INTO {keyspace}.t (id, n, s) VALUES (1, 1, 'ok')")
    assert session.execute(f"SELECT s FROM {keyspace}.t WHERE id = 1").one().s == "ok"


@pytest.mark.parametrize("query", [
    "SELEC * FROM system.local",
    "SELECT * zeppelin system.local",
    "SELECT * FROM system.local WHERE",
    "INSERT INTO t (a) VALUES (",
    "CREATE TABLE",
    "SELECT * FROM system.local\nWHERE key = = 'local'",
])
def test_syntax_error(session, tables, query):
    with pytest.raises(SyntaxException) as e:
        session.execute(query)
    assert e.value.code == 0x2000
    assert re.search(r"line \d+:\d+", error_text(e.value)), error_text(e.value)
    still_works(session, tables)


def test_syntax_error_position_is_on_the_right_line(session, tables):
    with pytest.raises(SyntaxException) as e:
        session.execute("SELECT *\nFROM system.local\nWHERE key = = 'local'")
    assert re.search(r"line 3:\d+", error_text(e.value)), error_text(e.value)


def test_unknown_keyspace(cluster_factory, session, tables):
    fresh = cluster_factory().connect()
    with pytest.raises(InvalidRequest) as e:
        fresh.execute("USE nosuchks")
    assert "Keyspace 'nosuchks' does not exist" in error_text(e.value)
    with pytest.raises(InvalidRequest) as e:
        session.execute("SELECT * FROM nosuchks.t")
    assert re.search(r"(?i)keyspace '?nosuchks'? does( not|n't) exist", error_text(e.value)), error_text(e.value)
    with pytest.raises(InvalidRequest) as e:
        session.execute("CREATE TABLE nosuchks.t (id int PRIMARY KEY)")
    assert re.search(r"(?i)keyspace '?nosuchks'? does( not|n't) exist", error_text(e.value)), error_text(e.value)
    still_works(session, tables)
    still_works(fresh, tables)


def test_unknown_table(session, tables):
    for q in (f"SELECT * FROM {tables}.nosuch",
              f"INSERT INTO {tables}.nosuch (id) VALUES (1)",
              f"UPDATE {tables}.nosuch SET n = 1 WHERE id = 1",
              f"DELETE FROM {tables}.nosuch WHERE id = 1"):
        with pytest.raises(InvalidRequest) as e:
            session.execute(q)
        assert "unconfigured table nosuch" in error_text(e.value), (q, error_text(e.value))
    with pytest.raises(InvalidRequest) as e:
        session.prepare(f"SELECT * FROM {tables}.nosuch WHERE id = ?")
    assert "unconfigured table" in error_text(e.value)
    still_works(session, tables)


def test_unknown_column(session, tables):
    for q in (f"SELECT nosuchcol FROM {tables}.t",
              f"SELECT * FROM {tables}.t WHERE nosuchcol = 1",
              f"INSERT INTO {tables}.t (id, nosuchcol) VALUES (1, 1)",
              f"UPDATE {tables}.t SET nosuchcol = 1 WHERE id = 1"):
        with pytest.raises(InvalidRequest) as e:
            session.execute(q)
        assert "Undefined column name nosuchcol" in error_text(e.value), (q, error_text(e.value))
    still_works(session, tables)


@pytest.mark.parametrize("values", [
    "(1, 'text', 'x')",       # text literal into an int column
    "(1, 1.5, 'x')",          # float literal into an int column
    "(1, 1, 42)",             # int literal into a text column
    "('one', 1, 'x')",        # text literal into the int partition key
    "(1, 99999999999, 'x')",  # out of range for int
    "(1, true, 'x')",         # boolean into int
])
def test_wrong_literal_type(session, tables, values):
    with pytest.raises(InvalidRequest):
        session.execute(f"INSERT INTO {tables}.t (id, n, s) VALUES {values}")
    assert session.execute(f"SELECT * FROM {tables}.t WHERE id = 1").one() is None
    still_works(session, tables)


def test_missing_key_parts(session, tables):
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"INSERT INTO {tables}.comp (a, c, v) VALUES (1, 2, 3)")
    assert "Some partition key parts are missing: b" in error_text(e.value)
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"UPDATE {tables}.comp SET v = 1 WHERE a = 1 AND c = 2")
    assert "Some partition key parts are missing: b" in error_text(e.value)
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"INSERT INTO {tables}.comp (a, b, v) VALUES (1, 2, 3)")
    assert "Some clustering keys are missing: c" in error_text(e.value)
    with pytest.raises(InvalidRequest):
        session.execute(f"INSERT INTO {tables}.t (n, s) VALUES (1, 'x')")
    still_works(session, tables)


def test_null_primary_key_is_rejected(session, tables):
    ins = session.prepare(f"INSERT INTO {tables}.t (id, n) VALUES (?, ?)")
    with pytest.raises(InvalidRequest):
        session.execute(ins, (None, 1))
    still_works(session, tables)


def test_many_errors_in_a_row_do_not_hurt(session, tables):
    for i in range(200):
        with pytest.raises((InvalidRequest, SyntaxException)):
            session.execute(f"SELECT x{i} FROM {tables}.t" if i % 2 else f"SELEKT {i}")
    still_works(session, tables)


def test_an_internal_error_is_answered_and_the_connection_stays_usable(server_factory, monkeypatch):
    """A panic while a request is executed (forced by the RINGGATE_TEST_PANIC_QUERY test hook)
    is answered with a Server error, logged, and the same connection keeps answering, also
    the requests in flight with it and the statements that touched the same tables."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster
    from cassandra.protocol import ServerError

    from rgtest import create_keyspace, rethrowing_profile

    monkeypatch.setenv("RINGGATE_TEST_PANIC_QUERY", "/* panic here */")
    srv = server_factory()
    # no retry: the driver would try a Server error on the next host (there is none)
    profile = rethrowing_profile()
    c = Cluster(contact_points=[srv.host], port=srv.port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        s = c.connect()
        create_keyspace(s, "pg")
        s.execute("CREATE TABLE pg.t (k int PRIMARY KEY, v int)")
        s.execute("INSERT INTO pg.t (k, v) VALUES (1, 1)")
        [pool] = s.get_pools()
        [conn] = pool.get_connections()
        for _ in range(3):
            with pytest.raises(ServerError) as e:
                s.execute("UPDATE pg.t SET v = 2 WHERE k = 1 /* panic here */")
            assert "Internal error while executing the request" in error_text(e.value)
        # in flight together on the one connection: every request gets its own answer
        futures = [s.execute_async("SELECT v FROM pg.t WHERE k = 1" + (" /* panic here */" if i % 2 else ""))
                   for i in range(20)]
        for i, f in enumerate(futures):
            if i % 2:
                with pytest.raises(ServerError):
                    f.result()
            else:
                assert [r.v for r in f.result()] == [1]
        # the failed requests applied nothing; the table still takes writes
        s.execute("UPDATE pg.t SET v = 3 WHERE k = 1")
        assert [r.v for r in s.execute("SELECT v FROM pg.t WHERE k = 1")] == [3]
        assert "request handling panicked" in srv.log_text()
        # ... all of it on the one connection the session opened first
        assert pool.get_connections() == [conn] and not conn.is_defunct and not conn.is_closed
    finally:
        c.shutdown()
