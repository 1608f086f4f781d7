"""Statements for features ringgate does not offer (materialized views, user-defined functions
and aggregates, triggers, roles and permissions): Cassandra's grammar has them, so a schema
script written for Cassandra holds them. Each gets an answer that says what happened, never a
syntax error pointing at valid CQL: DROP ... IF EXISTS of something that cannot exist succeeds
as Cassandra's does, a DROP without it gets Cassandra's "doesn't exist", and whatever would
create one is refused clearly."""

import re

import pytest
from cassandra import InvalidRequest, Unauthorized
from cassandra.protocol import SyntaxException
from cassandra.auth import PlainTextAuthProvider

from rgtest import error_text

VIEWS = "Materialized views are disabled. ringgate does not support materialized views."
FUNCTIONS = "User-defined functions are disabled: ringgate does not run user-defined code"
AGGREGATES = "User-defined aggregates are disabled: ringgate does not run user-defined code"
ANONYMOUS = "You have to be logged in and not anonymous to perform this request"
ROLES = ("Roles and permissions are not managed through CQL: ringgate's users are set in its "
         "configuration (auth.users)")
NO_KEYSPACE = ("No keyspace has been specified. USE a keyspace, or explicitly specify "
               "keyspace.tablename")

ROLE_STATEMENTS = [
    "LIST ROLES",
    "LIST USERS",
    "CREATE ROLE IF NOT EXISTS bob WITH PASSWORD = 'pw' AND LOGIN = true",
    "ALTER ROLE bob WITH PASSWORD = 'other'",
    "DROP ROLE IF EXISTS bob",
    "CREATE USER carol WITH PASSWORD 'pw' NOSUPERUSER",
    "GRANT SELECT ON ALL KEYSPACES TO bob",
    "REVOKE MODIFY ON KEYSPACE ks FROM bob",
    "LIST ALL PERMISSIONS OF bob",
    "ADD IDENTITY 'spiffe://x' TO ROLE 'bob'",
]


def message(exc):
    """The server's message alone, without the driver's "Error from server: code=..." frame."""
    text = error_text(exc)
    m = re.search(r'message="(.*)"$', text, re.S)
    return m.group(1) if m else text


def refused(session, q, kind=InvalidRequest):
    with pytest.raises(kind) as e:
        session.execute(q)
    return message(e.value)


@pytest.fixture
def table(session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.t (k int PRIMARY KEY, v text)")
    return f"{keyspace}.t"


def test_creating_what_is_not_offered_is_refused_with_the_reason(session, keyspace, table):
    ks = keyspace
    assert refused(session, f"CREATE MATERIALIZED VIEW IF NOT EXISTS {ks}.by_v AS SELECT * "
                            f"FROM {table} WHERE v IS NOT NULL AND k IS NOT NULL "
                            f"PRIMARY KEY (v, k) WITH CLUSTERING ORDER BY (k DESC)") == VIEWS
    assert refused(session, f"CREATE OR REPLACE FUNCTION {ks}.twice (a int) CALLED ON NULL "
                            f"INPUT RETURNS int LANGUAGE java AS $$ return 2 * a; $$") == FUNCTIONS
    assert refused(session, f"CREATE FUNCTION IF NOT EXISTS {ks}.f (a text) RETURNS NULL ON "
                            f"NULL INPUT RETURNS text LANGUAGE java AS 'return a;'") == FUNCTIONS
    assert refused(session, f"CREATE AGGREGATE {ks}.total (int) SFUNC twice STYPE int "
                            f"INITCOND 0") == AGGREGATES
    # Cassandra checks the keyspace and the table before it tries to load the class.
    assert refused(session, f"CREATE TRIGGER tr ON {table} USING 'org.example.Audit'") == (
        "Trigger class 'org.example.Audit' couldn't be loaded: ringgate does not run triggers")
    assert refused(session, f"CREATE TRIGGER tr ON {ks}.nope USING 'org.example.Audit'") == (
        "Table 'nope' doesn't exist")
    assert refused(session, "CREATE TRIGGER tr ON no_such_ks.t USING 'org.example.Audit'") == (
        "Keyspace 'no_such_ks' doesn't exist")
    # Nothing was made: the schema tables the drivers read hold no view, function or trigger.
    for t in ("views", "functions", "aggregates", "triggers"):
        rows = session.execute(f"SELECT * FROM system_schema.{t} WHERE keyspace_name = %s", (ks,))
        assert list(rows) == [], t


def test_dropping_what_cannot_exist_answers_as_cassandra_does(session, keyspace, table):
    ks = keyspace
    for q in [f"DROP MATERIALIZED VIEW IF EXISTS {ks}.by_v",
              f"ALTER MATERIALIZED VIEW IF EXISTS {ks}.by_v WITH comment = 'x'",
              f"DROP FUNCTION IF EXISTS {ks}.twice",
              f"DROP FUNCTION IF EXISTS {ks}.twice(int, frozen<list<text>>)",
              f"DROP AGGREGATE IF EXISTS {ks}.total",
              f"DROP TRIGGER IF EXISTS tr ON {table}",
              "DROP MATERIALIZED VIEW IF EXISTS no_such_ks.v"]:
        assert list(session.execute(q)) == [], q
    assert refused(session, f"DROP MATERIALIZED VIEW {ks}.by_v") == (
        f"Materialized view '{ks}.by_v' doesn't exist")
    assert refused(session, f"ALTER MATERIALIZED VIEW {ks}.by_v WITH comment = 'x'") == (
        f"Materialized view '{ks}.by_v' doesn't exist")
    assert refused(session, f"DROP FUNCTION {ks}.twice") == f"Function '{ks}.twice' doesn't exist"
    assert refused(session, f"DROP FUNCTION {ks}.twice (int, Frozen<List<text>>)") == (
        f"Function '{ks}.twice(int, frozen<list<text>>)' doesn't exist")
    assert refused(session, f"DROP AGGREGATE {ks}.total()") == (
        f"Aggregate '{ks}.total()' doesn't exist")
    assert refused(session, f"DROP TRIGGER tr ON {table}") == (
        f"Trigger 'tr' on '{table}' doesn't exist")
    # The table the trigger statements named is untouched.
    session.execute(f"INSERT INTO {table} (k, v) VALUES (1, 'a')")
    assert session.execute(f"SELECT v FROM {table} WHERE k = 1").one().v == "a"


def test_unqualified_names_take_the_session_keyspace(cluster_factory, keyspace):
    bare = cluster_factory().connect()
    assert refused(bare, "DROP MATERIALIZED VIEW v") == NO_KEYSPACE
    assert refused(bare, "DROP FUNCTION IF EXISTS f") == NO_KEYSPACE
    used = cluster_factory().connect(keyspace)
    assert refused(used, "DROP MATERIALIZED VIEW v") == (
        f"Materialized view '{keyspace}.v' doesn't exist")
    assert list(used.execute("DROP TRIGGER IF EXISTS tr ON t")) == []


@pytest.mark.parametrize("q", ROLE_STATEMENTS)
def test_role_statements_without_login_get_cassandras_anonymous_answer(session, q):
    assert refused(session, q, Unauthorized) == ANONYMOUS


def test_role_statements_of_a_logged_in_user_name_the_configuration(server_factory,
                                                                    cluster_factory):
    srv = server_factory(settings={"auth.enabled": True},
                         config='[auth]\nenabled = true\n\n[auth.users]\nadmin = "secret"\n')
    s = cluster_factory(srv, auth_provider=PlainTextAuthProvider("admin", "secret")).connect()
    for q in ROLE_STATEMENTS:
        assert refused(s, q) == ROLES, q


def test_malformed_statements_are_still_syntax_errors(session):
    for q in ["CREATE MATERIALIZED v AS SELECT * FROM t",
              "DROP FUNCTION ks.f(int",
              "CREATE OR REPLACE TABLE ks.t (k int PRIMARY KEY)",
              "DROP TRIGGER tr",
              "CREATE ROLE r WITH PASSWORD = 'unterminated"]:
        with pytest.raises(SyntaxException):
            session.execute(q)


def test_prepared_statements_answer_the_same(session, keyspace):
    drop = session.prepare(f"DROP MATERIALIZED VIEW IF EXISTS {keyspace}.v")
    assert list(session.execute(drop)) == []
    create = session.prepare(f"CREATE FUNCTION {keyspace}.f (a int) CALLED ON NULL INPUT "
                             f"RETURNS int LANGUAGE java AS 'return a;'")
    with pytest.raises(InvalidRequest) as e:
        session.execute(create)
    assert message(e.value) == FUNCTIONS


def test_a_cassandra_schema_script_runs_past_them_in_cqlsh(cqlsh, session, unique_name,
                                                           tmp_path):
    """A script made for Cassandra: its DROP ... IF EXISTS lines pass, the view and the function
    are refused with their reasons, and every table and row after them is there."""
    ks = unique_name("script")
    script = tmp_path / "schema.cql"
    script.write_text(f"""
CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};
USE {ks};
DROP MATERIALIZED VIEW IF EXISTS users_by_email;
DROP FUNCTION IF EXISTS normalize;
CREATE TABLE users (id int PRIMARY KEY, email text);
CREATE MATERIALIZED VIEW users_by_email AS
    SELECT * FROM users WHERE email IS NOT NULL AND id IS NOT NULL
    PRIMARY KEY (email, id);
CREATE FUNCTION normalize (s text) RETURNS NULL ON NULL INPUT RETURNS text
    LANGUAGE java AS $$ return s.toLowerCase(); $$;
CREATE TABLE orders (id int PRIMARY KEY, user_id int);
INSERT INTO users (id, email) VALUES (1, 'a@example.com');
INSERT INTO orders (id, user_id) VALUES (7, 1);
""")
    r = cqlsh(["-f", str(script)])
    assert VIEWS in r.stderr, r.stderr
    assert FUNCTIONS in r.stderr, r.stderr
    assert "SyntaxException" not in r.stderr, r.stderr
    assert r.stderr.count("InvalidRequest") == 2, r.stderr
    assert session.execute(f"SELECT email FROM {ks}.users WHERE id = 1").one().email == (
        "a@example.com")
    assert session.execute(f"SELECT user_id FROM {ks}.orders WHERE id = 7").one().user_id == 1
