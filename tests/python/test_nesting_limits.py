"""Statements and types nested beyond the documented limits are refused with a clear error,
never by a crash: operator and postfix chains in one statement (MAX_DEPTH 100 in the parser),
user types nesting user types (100 levels, 10,000 component types when expanded)."""

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException

from rgtest import error_text


@pytest.fixture
def table(session, keyspace):
    session.execute(f"CREATE TYPE {keyspace}.u (f int)")
    session.execute(f"CREATE TABLE {keyspace}.t (id int PRIMARY KEY, n int, s text, "
                    f"l list<frozen<list<int>>>, u frozen<u>)")
    session.execute(f"INSERT INTO {keyspace}.t (id, n, s) VALUES (1, 1, 'a')")
    return f"{keyspace}.t"


def assert_refused_and_alive(session, table, query):
    with pytest.raises(SyntaxException) as e:
        session.execute(query, timeout=60)
    assert "too deeply nested" in error_text(e.value), error_text(e.value)[:300]
    assert session.execute(f"SELECT n FROM {table} WHERE id = 1").one().n == 1


@pytest.mark.parametrize("link", [" + 1", " * 1", " - 1"])
def test_long_operator_chain_in_a_value_is_refused(session, table, link):
    assert_refused_and_alive(session, table,
                             f"UPDATE {table} SET n = 1{link * 100_000} WHERE id = 1")


def test_long_string_concatenation_is_refused(session, table):
    concat = "'a'" + " + 'b'" * 100_000
    assert_refused_and_alive(session, table, f"UPDATE {table} SET s = {concat} WHERE id = 1")


@pytest.mark.parametrize("selector", ["n" + " + 1" * 100_000, "n" + " * n" * 100_000,
                                      "l" + "[0]" * 100_000, "u" + ".f" * 100_000])
def test_long_selector_chains_are_refused(session, table, selector):
    assert_refused_and_alive(session, table, f"SELECT {selector} FROM {table}")


def test_chains_within_the_limit_still_work(session, table):
    session.execute(f"UPDATE {table} SET n = 0{' + 1' * 90} WHERE id = 2")
    assert session.execute(f"SELECT n FROM {table} WHERE id = 2").one().n == 90
    row = session.execute(f"SELECT n{' + 1' * 90} AS x FROM {table} WHERE id = 2").one()
    assert row.x == 180


def first_refused(session, statement_for, expected_error, limit=200):
    """Runs statement_for(1), statement_for(2), ... until one is refused with expected_error;
    returns its number."""
    for i in range(1, limit):
        try:
            session.execute(statement_for(i))
        except InvalidRequest as e:
            assert expected_error in error_text(e), error_text(e)
            return i
    pytest.fail(f"nothing refused within {limit} statements")


def test_user_type_chain_beyond_the_depth_limit_is_refused_and_survives_restart(server_factory, cluster_factory):
    srv = server_factory()
    session = cluster_factory(srv).connect()
    session.execute("CREATE KEYSPACE deep WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute("CREATE TYPE deep.t0 (a int)")
    refused_at = first_refused(session, lambda i: f"CREATE TYPE deep.t{i} (a frozen<t{i - 1}>)",
                               "nested too deeply")
    assert refused_at <= 100
    top = refused_at - 1
    # Within the limit the deepest type is usable end to end.
    session.execute(f"CREATE TABLE deep.tab (id int PRIMARY KEY, v frozen<t{top}>)")
    session.execute("INSERT INTO deep.tab (id) VALUES (1)")
    # A table column one level deeper than the deepest type is refused too.
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"CREATE TABLE deep.tab2 (id int PRIMARY KEY, v list<frozen<t{top}>>)")
    assert "nested too deeply" in error_text(e.value), error_text(e.value)
    srv.restart()
    session = cluster_factory(srv).connect()
    assert [r.id for r in session.execute("SELECT id FROM deep.tab")] == [1]


def test_shared_type_graph_is_refused_by_expanded_size(session, keyspace):
    """Each type has two fields of the previous one: 2^n component types when expanded."""
    session.execute(f"CREATE TYPE {keyspace}.s0 (a int, b int)")
    refused_at = first_refused(
        session, lambda i: f"CREATE TYPE {keyspace}.s{i} (a frozen<s{i - 1}>, b frozen<s{i - 1}>)",
        "more than 10000 component types")
    assert refused_at == 12  # s11 expands to 8191 component types, s12 to 16383
    # Growing the innermost type grows every type that uses it: refused too.
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"ALTER TYPE {keyspace}.s0 ADD c int")
    assert "more than 10000 component types" in error_text(e.value), error_text(e.value)
    session.execute(f"CREATE TABLE {keyspace}.g (id int PRIMARY KEY, v frozen<s11>)")
    session.execute(f"INSERT INTO {keyspace}.g (id) VALUES (1)")
    assert session.execute(f"SELECT id, v FROM {keyspace}.g").one().v is None
