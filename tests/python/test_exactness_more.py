"""Cassandra 5.0 exactness (issue 13), the rest of the groups: clustering values equal in
value are one row, token() of any arguments of the key's types in a selection, ALLOW
FILTERING with an index on a later clustering column, and integer/double table options read as
Cassandra's TableAttributes reads them. Each asserts Cassandra's behaviour and message with
the Python driver end to end (test_exactness.py has the others)."""

import re
from decimal import Decimal

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException

from rgtest import error_text


@pytest.fixture
def ks(keyspace):
    return keyspace


def rows(session, q, *args):
    return [tuple(r) for r in session.execute(q, args or None)]


def refused(session, q, *args, kind=InvalidRequest):
    with pytest.raises(kind) as e:
        session.execute(q, args or None)
    text = error_text(e.value)
    m = re.search(r'message="(.*)"$', text, re.S)
    return m.group(1) if m else text


FILTERING = "Cannot execute this query as it might involve data filtering"


# ------------------------------------------------------------------ equal values, one key


def test_clustering_values_equal_in_value_are_one_row(session, ks):
    """DecimalType / IntegerType compare by value (BigDecimal.compareTo): 1.0, 1.00 and 1 are
    one clustering, so writes with any of them reach the same row, which keeps the bytes it
    was first written with; partition keys are hashed as sent (two partitions, as in
    Cassandra)."""
    session.execute(f"CREATE TABLE {ks}.d (k int, c decimal, v int, w int, PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {ks}.d (k, c, v) VALUES (0, 1.0, 1)")
    session.execute(f"INSERT INTO {ks}.d (k, c, w) VALUES (0, 1.00, 2)")
    session.execute(f"UPDATE {ks}.d SET v = 5 WHERE k = 0 AND c = 1")
    got = rows(session, f"SELECT c, v, w FROM {ks}.d WHERE k = 0")
    assert got == [(Decimal("1.0"), 5, 2)] and str(got[0][0]) == "1.0"
    assert rows(session, f"SELECT v FROM {ks}.d WHERE k = 0 AND c = 1.000") == [(5,)]
    # one batch naming the row twice, differently
    session.execute(
        f"BEGIN BATCH INSERT INTO {ks}.d (k, c, v) VALUES (0, 2.50, 1); "
        f"UPDATE {ks}.d SET w = 7 WHERE k = 0 AND c = 2.5; APPLY BATCH"
    )
    assert rows(session, f"SELECT c, v, w FROM {ks}.d WHERE k = 0 AND c > 2") == [(Decimal("2.50"), 1, 7)]
    # conditional writes read the same row
    assert rows(session, f"UPDATE {ks}.d SET v = 6 WHERE k = 0 AND c = 1.00000 IF v = 5") == [(True,)]
    assert rows(session, f"INSERT INTO {ks}.d (k, c, v) VALUES (0, 1, 9) IF NOT EXISTS")[0][0] is False
    session.execute(f"DELETE FROM {ks}.d WHERE k = 0 AND c = 1.00")
    assert rows(session, f"SELECT c FROM {ks}.d WHERE k = 0") == [(Decimal("2.50"),)]
    # varint with redundant sign bytes, in a multi-column key
    session.execute(f"CREATE TABLE {ks}.i (k int, a varint, b int, v int, PRIMARY KEY (k, a, b))")
    session.execute(f"INSERT INTO {ks}.i (k, a, b, v) VALUES (0, blobAsVarint(0x0001), 1, 1)")
    session.execute(f"INSERT INTO {ks}.i (k, a, b, v) VALUES (0, 1, 1, 2)")
    session.execute(f"INSERT INTO {ks}.i (k, a, b, v) VALUES (0, blobAsVarint(0x00000001), 0, 3)")
    assert rows(session, f"SELECT a, b, v FROM {ks}.i WHERE k = 0") == [(1, 0, 3), (1, 1, 2)]
    # partition keys: the token is of the bytes as sent, as in Cassandra
    session.execute(f"CREATE TABLE {ks}.p (k decimal PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {ks}.p (k, v) VALUES (1.0, 1)")
    session.execute(f"INSERT INTO {ks}.p (k, v) VALUES (1.00, 2)")
    assert sorted(str(r.k) for r in session.execute(f"SELECT k FROM {ks}.p")) == ["1.0", "1.00"]
    assert rows(session, f"SELECT v FROM {ks}.p WHERE k = 1.00") == [(2,)]


# ------------------------------------------------------------------ token() in selections


def test_token_selector_takes_any_arguments_of_the_key_types(session, ks):
    """TokenFct through FunctionResolver (5.0): token() in a selection takes one argument per
    partition key column, each assignable to its type: the key columns, literals, bind
    markers, other columns of the same type."""
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int, s text)")
    session.execute(f"CREATE TABLE {ks}.c (a int, b text, v int, PRIMARY KEY ((a, b)))")
    session.execute(f"INSERT INTO {ks}.t (k, v, s) VALUES (1, 2, 'x')")
    session.execute(f"INSERT INTO {ks}.t (k, v, s) VALUES (2, 1, 'y')")
    session.execute(f"INSERT INTO {ks}.c (a, b, v) VALUES (1, 'x', 0)")
    tok = dict(rows(session, f"SELECT k, token(k) FROM {ks}.t"))
    r = session.execute(f"SELECT k, token(1), token(v), token(null) FROM {ks}.t")
    assert r.column_names == ["k", "system.token(1)", "system.token(v)", "system.token(null)"]
    assert sorted(tuple(x) for x in r) == sorted([(1, tok[1], tok[2], None), (2, tok[1], tok[1], None)])
    ps = session.prepare(f"SELECT token(?) FROM {ks}.t WHERE k = 1")
    assert rows(session, ps, 2) == [(tok[2],)]
    [(ctok,)] = rows(session, f"SELECT token(a, b) FROM {ks}.c")
    assert rows(session, f"SELECT token(1, 'x'), token(v + 1, b) FROM {ks}.c") == [(ctok, ctok)]
    assert refused(session, f"SELECT token('a') FROM {ks}.t") == (
        "Type error: 'a' cannot be passed as argument 0 of function system.token of type int"
    )
    assert refused(session, f"SELECT token(s) FROM {ks}.t") == (
        "Type error: s cannot be passed as argument 0 of function system.token of type int"
    )
    # value-compatible columns are accepted (their bytes are hashed as they are), as in Cassandra
    session.execute(f"CREATE TABLE {ks}.b (k blob PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {ks}.b (k, v) VALUES (0x00000001, 1)")
    [(bk, bv)] = rows(session, f"SELECT token(k), token(v) FROM {ks}.b")
    assert bk == bv
    assert refused(session, f"SELECT token(1) FROM {ks}.c") == (
        "Invalid number of arguments in call to function system.token: 2 required but 1 provided"
    )


# ------------------------------------------------------------------ indexes and filtering


def test_index_on_a_later_clustering_column_with_other_clustering_restrictions(session, ks):
    """StatementRestrictions.needFiltering (5.0): with an index on c2 and no partition key, a
    restriction on c1 is not served by the index, so `c1 = x AND c2 = y` needs ALLOW FILTERING
    (AllowFilteringTest: `c1=0 AND c2=0` with an index on c1 alone); with it, the index
    answers and c1 filters. Within a named partition the clustering prefix needs nothing."""
    t = f"{ks}.ix"
    session.execute(f"CREATE TABLE {t} (k int, c1 int, c2 int, v int, PRIMARY KEY (k, c1, c2))")
    for k in range(3):
        for c1 in range(3):
            for c2 in range(3):
                session.execute(f"INSERT INTO {t} (k, c1, c2, v) VALUES ({k}, {c1}, {c2}, {k * 9 + c1 * 3 + c2})")
    session.execute(f"CREATE INDEX ix_c2 ON {t} (c2)")
    assert refused(session, f"SELECT * FROM {t} WHERE c1 = 1 AND c2 = 1").startswith(FILTERING)
    assert refused(session, f"SELECT * FROM {t} WHERE c2 = 1 AND v = 4").startswith(FILTERING)
    got = sorted(rows(session, f"SELECT k, c1, c2, v FROM {t} WHERE c1 = 1 AND c2 = 1 ALLOW FILTERING"))
    assert got == [(k, 1, 1, k * 9 + 4) for k in range(3)]
    assert sorted(r.k for r in session.execute(f"SELECT k FROM {t} WHERE c2 = 2")) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert rows(session, f"SELECT v FROM {t} WHERE k = 1 AND c1 = 1 AND c2 = 1") == [(13,)]
    assert rows(session, f"SELECT v FROM {t} WHERE k = 1 AND c2 = 1") == [(10,), (13,), (16,)]


# ------------------------------------------------------------------ table options


def test_integer_and_double_table_options_read_as_cassandra(session, ks):
    """TableAttributes.getInt / getDouble: integer options are Java ints (2^31 is refused,
    never wrapped), doubles must parse; both as syntax errors with Cassandra's messages. An
    option map's values must be constants, however deeply a value nests."""

    def option(opt):
        return refused(session, f"CREATE TABLE {ks}.o (k int PRIMARY KEY) WITH {opt}", kind=SyntaxException)

    assert option("max_index_interval = 4294967296") == "Invalid integer value 4294967296 for 'max_index_interval'"
    assert option("max_index_interval = 2147483648") == "Invalid integer value 2147483648 for 'max_index_interval'"
    assert option("gc_grace_seconds = 2147483648") == "Invalid integer value 2147483648 for 'gc_grace_seconds'"
    assert option("min_index_interval = 1.5") == "Invalid integer value 1.5 for 'min_index_interval'"
    assert option("default_time_to_live = 'soon'") == "Invalid integer value soon for 'default_time_to_live'"
    assert option("bloom_filter_fp_chance = 'low'") == "Invalid double value low for 'bloom_filter_fp_chance'"
    # (positioned, as this server places every error found after the grammar matched)
    assert option("compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': {'a': 1}}").endswith(
        "Invalid property value: {'a': 1} for property: 'sstable_size_in_mb'"
    )
    deep = "[" * 5000 + "1" + "]" * 5000
    msg = option(f"compression = {{'class': 'LZ4Compressor', 'x': {deep}}}")
    assert msg.endswith("Statement too deeply nested"), msg[:200]
    session.execute(f"CREATE TABLE {ks}.o (k int PRIMARY KEY) WITH max_index_interval = 2147483647")
    [r] = session.execute("SELECT max_index_interval FROM system_schema.tables "
                          "WHERE keyspace_name = %s AND table_name = 'o'", (ks,))
    assert r.max_index_interval == 2147483647


# ------------------------------------------------------------------ relations and literals


def test_collection_relations_and_tuple_literals_worded_as_cassandra(session, ks):
    """Operator.validateFor: a non-frozen collection is restricted by CONTAINS / CONTAINS KEY
    only, a non-frozen UDT by nothing; Tuples.Literal.validateAssignableTo's messages."""
    session.execute(f"CREATE TYPE {ks}.pt (x int)")
    session.execute(
        f"CREATE TABLE {ks}.t (k int, c int, l list<int>, s set<int>, m map<int, int>, "
        f"fl frozen<list<int>>, u pt, tu frozen<tuple<int, text>>, v int, PRIMARY KEY (k, c))"
    )
    session.execute(f"INSERT INTO {ks}.t (k, c, l, s, m, fl, tu) VALUES (0, 0, [1], {{1}}, {{1: 1}}, [1], (1, 'a'))")
    for where, message in [
        ("l = [1]", "Collection column 'l' (list<int>) cannot be restricted by a '=' relation"),
        ("s > {1}", "Collection column 's' (set<int>) cannot be restricted by a '>' relation"),
        ("m = {1: 1}", "Collection column 'm' (map<int, int>) cannot be restricted by a '=' relation"),
        ("l IN ([1])", "Collection column 'l' (list<int>) cannot be restricted by a 'IN' relation"),
        ("u = {x: 1}", "Non-frozen UDT column 'u' (pt) cannot be restricted by any relation"),
    ]:
        assert refused(session, f"SELECT * FROM {ks}.t WHERE {where} ALLOW FILTERING") == message, where
    # what Cassandra allows on them
    for where in ["l CONTAINS 1", "m CONTAINS KEY 1", "m[1] = 1", "fl = [1]", "tu = (1, 'a')"]:
        assert rows(session, f"SELECT k FROM {ks}.t WHERE {where} ALLOW FILTERING") == [(0,)], where
    assert refused(session, f"INSERT INTO {ks}.t (k, c, tu) VALUES (0, 1, (1, 'a', 3))") == (
        "Invalid tuple literal for tu: too many elements. Type frozen<tuple<int, text>> expects 2 but got 3"
    )
    assert refused(session, f"INSERT INTO {ks}.t (k, c, tu) VALUES (0, 1, ('x', 'a'))") == (
        "Invalid tuple literal for tu: component 0 is not of type int"
    )
    assert refused(session, f"INSERT INTO {ks}.t (k, c, v) VALUES (0, 1, (1, 2))") == (
        "Invalid tuple type literal for v of type int"
    )
    assert rows(session, f"SELECT count(*) FROM {ks}.t") == [(1,)]


def test_contains_and_slices_on_partition_keys(session, ks):
    """CONTAINS on a partition key: refused on a non-collection (as the relation is prepared),
    a filter needing ALLOW FILTERING on a frozen collection key (PartitionKeyRestrictions
    .needFiltering: hasContains); UPDATE and DELETE name their statement type in the
    partition-key messages (StatementRestrictions)."""
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c))")
    session.execute(f"CREATE TABLE {ks}.fk (k frozen<set<int>> PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {ks}.fk (k, v) VALUES ({{1, 2}}, 1)")
    session.execute(f"INSERT INTO {ks}.fk (k, v) VALUES ({{3}}, 2)")
    contains = "Cannot use CONTAINS on non-collection column k"
    assert refused(session, f"SELECT * FROM {ks}.t WHERE k CONTAINS 1 ALLOW FILTERING") == contains
    assert refused(session, f"UPDATE {ks}.t SET v = 1 WHERE k CONTAINS 0 AND c = 1") == contains
    assert refused(session, f"DELETE FROM {ks}.t WHERE k CONTAINS 0") == contains
    assert refused(session, f"SELECT * FROM {ks}.fk WHERE k CONTAINS 1").startswith(FILTERING)
    assert rows(session, f"SELECT v FROM {ks}.fk WHERE k CONTAINS 1 ALLOW FILTERING") == [(1,)]
    only_eq = "Only EQ and IN relation are supported on the partition key (unless you use the token() function)"
    assert refused(session, f"UPDATE {ks}.t SET v = 1 WHERE k > 0 AND c = 1") == f"{only_eq} for UPDATE statements"
    assert refused(session, f"DELETE FROM {ks}.t WHERE k > 0") == f"{only_eq} for DELETE statements"
    assert refused(session, f"DELETE FROM {ks}.t WHERE token(k) = 1") == (
        "The token function cannot be used in WHERE clauses for DELETE statements"
    )


def test_missing_keyspace_and_unknown_data_centre_messages(session, unique_name):
    """Drop/AlterTableStatement, DropTypeStatement, DropIndexStatement: an object in a missing
    keyspace is a missing object ('Table 'ks.t' doesn't exist'; IF EXISTS: nothing);
    NetworkTopologyStrategy.validateOptions names the unknown data centre on ALTER too."""
    from cassandra.protocol import ConfigurationException

    missing = unique_name("nokeyspace")
    session.execute(f"DROP TABLE IF EXISTS {missing}.t")
    session.execute(f"ALTER TABLE IF EXISTS {missing}.t ADD x int")
    assert refused(session, f"DROP TABLE {missing}.t") == f"Table '{missing}.t' doesn't exist"
    assert refused(session, f"ALTER TABLE {missing}.t ADD x int") == f"Table '{missing}.t' doesn't exist"
    assert refused(session, f"DROP TYPE {missing}.ty") == f"Type '{missing}.ty' doesn't exist"
    # CREATE statements name the keyspace (Create{Table,Index,Type}Statement), CREATE INDEX a
    # missing table by its name alone
    for q in [f"CREATE TABLE {missing}.t (k int PRIMARY KEY)", f"CREATE INDEX ON {missing}.t (v)",
              f"CREATE TYPE {missing}.ty (a int)"]:
        assert refused(session, q) == f"Keyspace '{missing}' doesn't exist", q
    # (DropIndexStatement's message ends with a stray quote, in Cassandra 5.0 too)
    assert refused(session, f"DROP INDEX {missing}.ix") == f"Index '{missing}.ix' doesn't exist'"
    name = unique_name("repl")
    session.execute(f"CREATE KEYSPACE {name} WITH replication = "
                    "{'class': 'NetworkTopologyStrategy', 'replication_factor': 1}")
    assert refused(session, f"CREATE INDEX ON {name}.nosuch (v)") == "Table 'nosuch' doesn't exist"
    msg = refused(session, f"ALTER KEYSPACE {name} WITH replication = {{'class': 'NetworkTopologyStrategy', 'dc9': 1}}",
                  kind=ConfigurationException)
    assert msg == f"Unrecognized strategy option {{dc9}} passed to NetworkTopologyStrategy for keyspace {name}"


# ------------------------------------------------------------------ DESCRIBE of what is missing


def test_describe_of_missing_elements_words_them_as_cassandra(cluster_factory, session, ks):
    """Cassandra's DescribeStatement checks the keyspace first ("'x' not found in keyspaces"),
    then names the kind of element it looked for."""
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    session.execute(f"CREATE INDEX t_v ON {ks}.t (v)")
    for q, msg in [
        (f"DESCRIBE TABLE {ks}.nope", f"Table 'nope' not found in keyspace '{ks}'"),
        (f"DESCRIBE INDEX {ks}.nope", f"Table for existing index 'nope' not found in '{ks}'"),
        (f"DESCRIBE MATERIALIZED VIEW {ks}.nope", f"Materialized view 'nope' not found in '{ks}'"),
        (f"DESCRIBE FUNCTION {ks}.nope", f"User defined function 'nope' not found in '{ks}'"),
        (f"DESCRIBE AGGREGATE {ks}.nope", f"User defined aggregate 'nope' not found in '{ks}'"),
        (f"DESCRIBE TYPE {ks}.nope", f"User defined type 'nope' not found in '{ks}'"),
        (f"DESCRIBE {ks}.nope", f"'nope' not found in keyspace '{ks}'"),
        ("DESCRIBE TABLE no_such_ks.t", "'no_such_ks' not found in keyspaces"),
        ("DESCRIBE FUNCTION no_such_ks.f", "'no_such_ks' not found in keyspaces"),
        ("DESCRIBE AGGREGATE no_such_ks.a", "'no_such_ks' not found in keyspaces"),
        ("DESCRIBE MATERIALIZED VIEW no_such_ks.v", "'no_such_ks' not found in keyspaces"),
        ("DESCRIBE TYPE no_such_ks.u", "'no_such_ks' not found in keyspaces"),
    ]:
        assert refused(session, q) == msg, q
    # Without a keyspace, a bare name that is no keyspace is looked up as one.
    bare = cluster_factory().connect()
    assert refused(bare, "DESCRIBE nope") == "'nope' not found in keyspaces"
    assert refused(bare, "DESCRIBE TABLE nope") == "No keyspace specified and no current keyspace"


def test_describe_of_a_name_finds_indexes_and_a_tables_indexes(session, ks):
    """DESCRIBE <name> resolves a table (with its indexes, as DESCRIBE TABLE) or an index."""
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    session.execute(f"CREATE INDEX t_v ON {ks}.t (v)")
    by_name = [(r.type, r.name) for r in session.execute(f"DESCRIBE {ks}.t")]
    assert by_name == [("table", "t"), ("index", "t_v")]
    assert by_name == [(r.type, r.name) for r in session.execute(f"DESCRIBE TABLE {ks}.t")]
    index = list(session.execute(f"DESCRIBE {ks}.t_v"))
    assert [(r.type, r.name) for r in index] == [("index", "t_v")]
    assert index[0].create_statement == f"CREATE INDEX t_v ON {ks}.t (v);"
