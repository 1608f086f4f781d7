"""Cassandra 5.0 exactness (issue 13): the dangerous cases (data loss, silent wrong results,
requests that were never answered) and the groups of differences, each asserting Cassandra's
behaviour and error message with the Python driver end to end."""

import re

import pytest
from cassandra import InvalidRequest

from rgtest import error_text


@pytest.fixture
def ks(keyspace):
    return keyspace


def rows(session, q, *args):
    return [tuple(r) for r in session.execute(q, args or None)]


def invalid(session, q, *args):
    """The InvalidRequest message of a statement that must be refused."""
    with pytest.raises(InvalidRequest) as e:
        session.execute(q, args or None)
    text = error_text(e.value)
    m = re.search(r'message="(.*)"$', text, re.S)
    return m.group(1) if m else text


# ------------------------------------------------------------------ requests always answered


def test_key_components_up_to_64k_answered_never_hang(session, ks):
    """Cassandra refuses key components above 65,535 bytes; below that our store's key limit
    (the whole stored key, with prefixes) may refuse too, but always with an answer."""
    session.execute(f"CREATE TABLE {ks}.p (k text PRIMARY KEY, v int)")
    session.execute(f"CREATE TABLE {ks}.c (k int, c text, v int, PRIMARY KEY (k, c))")
    for q, big in [
        (f"INSERT INTO {ks}.p (k, v) VALUES (%s, 1)", 65536),
        (f"INSERT INTO {ks}.c (k, c, v) VALUES (1, %s, 1)", 65536),
        (f"UPDATE {ks}.c SET v = 1 WHERE k = 1 AND c = %s", 65536),
    ]:
        msg = invalid(session, q, "x" * big)
        assert msg == "Key length of 65536 is longer than maximum of 65535"
    for q in [f"INSERT INTO {ks}.p (k, v) VALUES (%s, 1)", f"INSERT INTO {ks}.c (k, c, v) VALUES (1, %s, 1)"]:
        msg = invalid(session, q, "x" * 65535)
        assert "too long" in msg
    # reads with such keys are answered (nothing can match)
    assert rows(session, f"SELECT * FROM {ks}.p WHERE k = %s", "x" * 65535) == []
    assert rows(session, f"SELECT * FROM {ks}.c WHERE k = 1 AND c = %s", "x" * 65535) == []
    assert rows(session, f"SELECT * FROM {ks}.c WHERE k = 1 AND c > %s", "x" * 65535) == []
    # long keys that fit are stored and read back; the connection is still usable
    session.execute(f"INSERT INTO {ks}.p (k, v) VALUES (%s, 2)", ("y" * 60000,))
    session.execute(f"INSERT INTO {ks}.c (k, c, v) VALUES (1, %s, 3)", ("z" * 60000,))
    assert rows(session, f"SELECT v FROM {ks}.p WHERE k = %s", "y" * 60000) == [(2,)]
    assert rows(session, f"SELECT v FROM {ks}.c WHERE k = 1") == [(3,)]


def test_conditional_batch_with_empty_in_is_refused(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c))")
    msg = invalid(
        session,
        f"BEGIN BATCH UPDATE {ks}.t SET v = 1 WHERE k = 0 AND c IN () IF v = 1; APPLY BATCH",
    )
    assert msg == "IN on the clustering key columns is not supported with conditional updates"
    msg = invalid(
        session,
        f"BEGIN BATCH UPDATE {ks}.t SET v = 1 WHERE k IN () AND c = 1 IF v = 1; APPLY BATCH",
    )
    assert msg == (
        "Batch with conditions cannot span multiple partitions "
        "(you cannot use IN on the partition key)"
    )
    msg = invalid(session, f"UPDATE {ks}.t SET v = 1 WHERE k IN (1) AND c = 1 IF v = 1")
    assert msg == "IN on the partition key is not supported with conditional updates"
    msg = invalid(session, f"DELETE FROM {ks}.t WHERE k = 1 AND c IN (1) IF v = 1")
    assert msg == "IN on the clustering key columns is not supported with conditional deletions"
    session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (0, 1, 1)")
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 0 AND c = 1") == [(1,)]


# ------------------------------------------------------------------ silent wrong results


def test_empty_partition_key_is_refused(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k text PRIMARY KEY, v int)")
    session.execute(f"CREATE TABLE {ks}.b (k blob PRIMARY KEY, v int)")
    session.execute(f"CREATE TABLE {ks}.two (k1 text, k2 text, v int, PRIMARY KEY ((k1, k2)))")
    assert invalid(session, f"INSERT INTO {ks}.t (k, v) VALUES ('', 1)") == "Key may not be empty"
    assert invalid(session, f"INSERT INTO {ks}.t (k, v) VALUES (%s, 1)", "") == "Key may not be empty"
    assert invalid(session, f"UPDATE {ks}.t SET v = 1 WHERE k = ''") == "Key may not be empty"
    assert invalid(session, f"DELETE FROM {ks}.t WHERE k = ''") == "Key may not be empty"
    assert invalid(session, f"INSERT INTO {ks}.b (k, v) VALUES (0x, 1)") == "Key may not be empty"
    assert invalid(session, f"SELECT * FROM {ks}.t WHERE k = ''") == "Key may not be empty"
    # a composite key with empty components is not empty
    session.execute(f"INSERT INTO {ks}.two (k1, k2, v) VALUES ('', '', 1)")
    assert rows(session, f"SELECT k1, k2, v FROM {ks}.two") == [("", "", 1)]
    assert rows(session, f"SELECT * FROM {ks}.t") == []


def test_clustering_restricted_select_returns_no_static_only_row(session, ks):
    session.execute(
        f"CREATE TABLE {ks}.t (k int, c int, d int, v int, s int static, PRIMARY KEY (k, c, d))"
    )
    session.execute(f"INSERT INTO {ks}.t (k, s) VALUES (1, 10)")
    # the whole partition: its static-only row
    assert rows(session, f"SELECT k, c, s FROM {ks}.t WHERE k = 1") == [(1, None, 10)]
    assert rows(session, f"SELECT k, c, s FROM {ks}.t") == [(1, None, 10)]
    assert rows(session, f"SELECT DISTINCT k, s FROM {ks}.t") == [(1, 10)]
    # clustering (or regular column) restrictions select rows: none match, nothing is returned
    for where in ["c = 3", "c = 3 AND d = 1", "c > 0", "(c, d) = (1, 1)", "c IN (1, 2)"]:
        assert rows(session, f"SELECT * FROM {ks}.t WHERE k = 1 AND {where}") == [], where
    assert rows(session, f"SELECT * FROM {ks}.t WHERE k = 1 AND v = 1 ALLOW FILTERING") == []
    assert rows(session, f"SELECT * FROM {ks}.t WHERE c = 1 ALLOW FILTERING") == []
    # a restriction on the static column alone still selects whole partitions
    assert rows(session, f"SELECT k, s FROM {ks}.t WHERE s = 10 ALLOW FILTERING") == [(1, 10)]
    session.execute(f"INSERT INTO {ks}.t (k, c, d, v) VALUES (1, 3, 1, 5)")
    assert rows(session, f"SELECT k, c, d, v, s FROM {ks}.t WHERE k = 1 AND c = 3") == [(1, 3, 1, 5, 10)]


def test_functions_in_selections_on_system_tables(session):
    assert rows(session, "SELECT blobAsInt(intAsBlob(5)) FROM system.local") == [(5,)]
    [(cluster, upper)] = rows(
        session, "SELECT cluster_name, blobAsText(textAsBlob(cluster_name)) FROM system.local"
    )
    assert cluster == upper
    [(n,)] = rows(session, "SELECT now() FROM system.local")
    assert n is not None
    [(ks,)] = rows(
        session,
        "SELECT textAsBlob(keyspace_name) FROM system_schema.keyspaces WHERE keyspace_name = 'system'",
    )
    assert ks == b"system"


# ------------------------------------------------------------------ multi-column relations in writes


@pytest.fixture
def grid(session, ks):
    """A partition with rows (a, b) for a, b in 0..2, and another partition that must survive."""
    session.execute(f"CREATE TABLE {ks}.g (k int, a int, b int, v int, PRIMARY KEY (k, a, b))")
    for k in (0, 1):
        for a in range(3):
            for b in range(3):
                session.execute(f"INSERT INTO {ks}.g (k, a, b, v) VALUES ({k}, {a}, {b}, 0)")
    return f"{ks}.g"


def keys(session, table, k=0):
    return [(r.a, r.b) for r in session.execute(f"SELECT a, b FROM {table} WHERE k = {k}")]


ALL = [(a, b) for a in range(3) for b in range(3)]


@pytest.mark.parametrize(
    "where, gone",
    [
        ("(a, b) = (1, 2)", [(1, 2)]),
        ("(a, b) IN ((0, 1), (2, 2), (5, 5))", [(0, 1), (2, 2)]),
        ("(a) IN ((1), (2))", [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]),
        ("(a) = (1)", [(1, 0), (1, 1), (1, 2)]),
        ("(a, b) > (1, 1)", [(1, 2), (2, 0), (2, 1), (2, 2)]),
        ("(a, b) >= (1, 1)", [(1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]),
        ("(a, b) < (0, 2)", [(0, 0), (0, 1)]),
        ("(a, b) > (0, 1) AND (a, b) <= (1, 1)", [(0, 2), (1, 0), (1, 1)]),
        ("(a, b) > (0, 1) AND (a) < (1)", [(0, 2)]),
        ("(a) > (1)", [(2, 0), (2, 1), (2, 2)]),
        ("a = 1 AND (b) > (0)", [(1, 1), (1, 2)]),
        ("a = 2 AND (b) IN ((0), (2))", [(2, 0), (2, 2)]),
        ("(a, b) IN ()", []),
    ],
)
def test_delete_with_multi_column_relations_removes_exactly_the_named_rows(session, grid, where, gone):
    session.execute(f"DELETE FROM {grid} WHERE k = 0 AND {where}")
    assert keys(session, grid) == [r for r in ALL if r not in gone]
    assert keys(session, grid, k=1) == ALL


def test_delete_multi_column_on_desc_clustering(session, ks):
    session.execute(
        f"CREATE TABLE {ks}.d (k int, a int, b int, v int, PRIMARY KEY (k, a, b)) "
        "WITH CLUSTERING ORDER BY (a ASC, b DESC)"
    )
    for a in range(3):
        for b in range(3):
            session.execute(f"INSERT INTO {ks}.d (k, a, b, v) VALUES (0, {a}, {b}, 0)")
    session.execute(f"DELETE FROM {ks}.d WHERE k = 0 AND (a, b) > (1, 0)")
    got = sorted((r.a, r.b) for r in session.execute(f"SELECT a, b FROM {ks}.d WHERE k = 0"))
    assert got == [(0, 0), (0, 1), (0, 2), (1, 0)]


def test_update_with_multi_column_relations(session, grid):
    session.execute(f"UPDATE {grid} SET v = 5 WHERE k = 0 AND (a, b) = (1, 1)")
    session.execute(f"UPDATE {grid} SET v = 6 WHERE k = 0 AND (a, b) IN ((2, 0), (2, 2))")
    session.execute(f"UPDATE {grid} SET v = 7 WHERE k = 0 AND a = 0 AND (b) = (2)")
    got = {(r.a, r.b): r.v for r in session.execute(f"SELECT a, b, v FROM {grid} WHERE k = 0")}
    assert got == {**{r: 0 for r in ALL}, (1, 1): 5, (2, 0): 6, (2, 2): 6, (0, 2): 7}
    assert {r.v for r in session.execute(f"SELECT v FROM {grid} WHERE k = 1")} == {0}


def test_batch_with_multi_column_relations(session, grid):
    session.execute(
        f"BEGIN BATCH "
        f"DELETE FROM {grid} WHERE k = 0 AND (a, b) = (0, 0); "
        f"UPDATE {grid} SET v = 9 WHERE k = 0 AND (a, b) = (0, 1); "
        f"APPLY BATCH"
    )
    assert keys(session, grid) == ALL[1:]
    assert [r.v for r in session.execute(f"SELECT v FROM {grid} WHERE k = 0 AND a = 0 AND b = 1")] == [9]


def test_multi_column_relations_in_writes_prepared(session, grid):
    ps = session.prepare(f"DELETE FROM {grid} WHERE k = ? AND (a, b) = (?, ?)")
    session.execute(ps, (0, 2, 2))
    ps = session.prepare(f"DELETE FROM {grid} WHERE k = ? AND (a, b) IN ?")
    session.execute(ps, (0, [(0, 0), (1, 1)]))
    assert keys(session, grid) == [r for r in ALL if r not in [(2, 2), (0, 0), (1, 1)]]


@pytest.mark.parametrize(
    "stmt, message",
    [
        ("UPDATE {t} SET v = 1 WHERE k = 0 AND (a, b) > (1, 1)",
         "Slice restrictions are not supported on the clustering columns in UPDATE statements"),
        ("UPDATE {t} SET v = 1 WHERE k = 0 AND a > 1",
         "Slice restrictions are not supported on the clustering columns in UPDATE statements"),
        ("UPDATE {t} SET v = 1 WHERE k = 0 AND (a) = (1)", "Some clustering keys are missing: b"),
        ("DELETE FROM {t} WHERE k = 0 AND (a, b) = (1, 1) AND a = 1",
         "Mixing single column relations and multi column relations on clustering columns is not allowed"),
        ("DELETE FROM {t} WHERE k = 0 AND (b) = (1)",
         'PRIMARY KEY column "b" cannot be restricted as preceding column "a" is not restricted'),
        ("DELETE FROM {t} WHERE k = 0 AND (a) > (1) AND (b) = (1)",
         'Clustering column "b" cannot be restricted (preceding column "a" is restricted by a non-EQ relation)'),
        ("DELETE FROM {t} WHERE k = 0 AND (b, a) = (1, 1)",
         "Clustering columns must appear in the PRIMARY KEY order in multi-column relations"),
        ("DELETE FROM {t} WHERE k = 0 AND (k, a) = (1, 1)",
         "Multi-column relations can only be applied to clustering columns but was applied to: k"),
        ("DELETE v FROM {t} WHERE k = 0 AND (a, b) > (1, 1)",
         "Range deletions are not supported for specific columns"),
        ("DELETE v FROM {t} WHERE k = 0", "Range deletions are not supported for specific columns"),
        ("DELETE FROM {t} WHERE k = 0 AND (a, b) > (1, 1) AND (a, b) > (0, 0)",
         "More than one restriction was found for the start bound on (a, b)"),
    ],
)
def test_refused_write_restrictions_keep_every_row(session, grid, stmt, message):
    msg = invalid(session, stmt.format(t=grid))
    assert msg.startswith(message), msg
    assert keys(session, grid) == ALL


def test_index_on_static_column_finds_its_partitions(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, s int static, PRIMARY KEY (k, c))")
    session.execute(f"CREATE INDEX ON {ks}.t (s)")
    session.execute(f"INSERT INTO {ks}.t (k, c, v, s) VALUES (1, 1, 10, 7)")
    session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES (1, 2, 20)")
    session.execute(f"INSERT INTO {ks}.t (k, c, v, s) VALUES (2, 1, 30, 8)")
    session.execute(f"INSERT INTO {ks}.t (k, s) VALUES (3, 7)")
    got = sorted(tuple(r) for r in session.execute(f"SELECT k, c, v, s FROM {ks}.t WHERE s = 7"))
    assert got == [(1, 1, 10, 7), (1, 2, 20, 7), (3, None, None, 7)]
    assert rows(session, f"SELECT k, c FROM {ks}.t WHERE k = 2 AND s = 8") == [(2, 1)]
    assert rows(session, f"SELECT k FROM {ks}.t WHERE s = 9") == []
    # the static value changes: the partition moves with it
    session.execute(f"UPDATE {ks}.t SET s = 9 WHERE k = 1")
    assert sorted(r.k for r in session.execute(f"SELECT k FROM {ks}.t WHERE s = 7")) == [3]
    assert sorted(r.c for r in session.execute(f"SELECT c FROM {ks}.t WHERE s = 9")) == [1, 2]
    # other restrictions need ALLOW FILTERING, as with any index
    msg = invalid(session, f"SELECT * FROM {ks}.t WHERE s = 9 AND v = 10")
    assert msg.startswith("Cannot execute this query as it might involve data filtering")
    assert rows(session, f"SELECT k, c FROM {ks}.t WHERE s = 9 AND v = 10 ALLOW FILTERING") == [(1, 1)]


# ------------------------------------------------------------------ JSON


def test_select_json_of_aggregates_group_by_and_order_by(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, PRIMARY KEY (k, c))")
    for k in range(3):
        for c in range(2):
            session.execute(f"INSERT INTO {ks}.t (k, c, v) VALUES ({k}, {c}, {k * 10 + c})")
    assert rows(session, f"SELECT JSON count(*) FROM {ks}.t") == [('{"count": 6}',)]
    assert rows(session, f"SELECT JSON count(*), max(v) FROM {ks}.t WHERE k = 1") == [
        ('{"count": 2, "system.max(v)": 11}',)
    ]
    got = sorted(rows(session, f"SELECT JSON k, max(v) FROM {ks}.t GROUP BY k"))
    assert got == [
        ('{"k": 0, "system.max(v)": 1}',),
        ('{"k": 1, "system.max(v)": 11}',),
        ('{"k": 2, "system.max(v)": 21}',),
    ]
    assert rows(session, f"SELECT JSON c, v FROM {ks}.t WHERE k = 2 ORDER BY c DESC") == [
        ('{"c": 1, "v": 21}',),
        ('{"c": 0, "v": 20}',),
    ]
    # an aggregate over no rows is still one row
    assert rows(session, f"SELECT JSON count(*) FROM {ks}.t WHERE k = 9") == [('{"count": 0}',)]


def test_from_json_in_writes_and_prepared(session, ks):
    session.execute(
        f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int, l list<text>, m map<text, int>, ts timestamp)"
    )
    session.execute(f"INSERT INTO {ks}.t (k, v, l) VALUES (1, fromJson('7'), fromJson('[\"a\", \"b\"]'))")
    session.execute(f"UPDATE {ks}.t SET m = fromJson('{{\"x\": 1}}') WHERE k = 1")
    assert rows(session, f"SELECT v, l, m FROM {ks}.t WHERE k = 1") == [(7, ["a", "b"], {"x": 1})]
    # a bind marker inside fromJson() is text
    ps = session.prepare(f"INSERT INTO {ks}.t (k, v, ts) VALUES (?, fromJson(?), fromJson(?))")
    assert [c.type.typename for c in ps.column_metadata][1:] == ["varchar", "varchar"]
    session.execute(ps, (2, "8", '"2020-01-02 03:04:05+0000"'))
    [(v, ts)] = rows(session, f"SELECT v, ts FROM {ks}.t WHERE k = 2")
    assert v == 8 and ts.year == 2020 and ts.hour == 3
    session.execute(ps, (3, "null", "null"))
    assert rows(session, f"SELECT v, ts FROM {ks}.t WHERE k = 3") == [(None, None)]
    with pytest.raises(Exception) as e:
        session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (4, fromJson('{{bad'))")
    assert "execution of 'system.fromjson[text]' failed: Could not decode JSON string '{bad': " in str(e.value)
    with pytest.raises(Exception) as e:
        session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (4, fromJson('\"x\"'))")
    assert "execution of 'system.fromjson[text]' failed: org.apache.cassandra.serializers.MarshalException: " in str(
        e.value)
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 4") == []
    # FunctionResolver: fromJson() needs a receiver, toJson() an argument type (selections)
    assert invalid(session, f"SELECT fromJson('1') FROM {ks}.t") == (
        "fromJson() cannot be used in the selection clause of a SELECT statement"
    )
    assert invalid(session, f"INSERT INTO {ks}.t (k, l) VALUES (5, toJson(1))") == (
        "toJson() may only be used within the selection clause of SELECT statements"
    )


# ------------------------------------------------------------------ functions


def test_blob_conversions_keep_empty_values_and_refuse_bad_bytes(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, b blob, s text)")
    assert rows(session, "SELECT textAsBlob('') FROM system.local") == [(b"",)]
    session.execute(f"INSERT INTO {ks}.t (k, b, s) VALUES (1, textAsBlob(''), blobAsText(0x))")
    assert rows(session, f"SELECT b, s FROM {ks}.t WHERE k = 1") == [(b"", "")]
    msg = invalid(session, "SELECT blobAsBigint(0x01) FROM system.local")
    assert msg == (
        "In call to function system.blobasbigint, value 0x01 is not a valid binary "
        "representation for type bigint"
    )


def test_function_results_assigned_to_value_compatible_columns(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, b blob, ts timestamp, n bigint, i int)")
    session.execute(f"INSERT INTO {ks}.t (k, b) VALUES (1, blobAsInt(0x00000005))")
    session.execute(f"INSERT INTO {ks}.t (k, ts) VALUES (2, toUnixTimestamp(now()))")
    session.execute(f"INSERT INTO {ks}.t (k, n) VALUES (3, toTimestamp(now()))")
    assert rows(session, f"SELECT b FROM {ks}.t WHERE k = 1") == [(b"\x00\x00\x00\x05",)]
    [(ts,)] = rows(session, f"SELECT ts FROM {ks}.t WHERE k = 2")
    assert ts.year >= 2024
    [(n,)] = rows(session, f"SELECT n FROM {ks}.t WHERE k = 3")
    assert n > 1_700_000_000_000
    msg = invalid(session, f"INSERT INTO {ks}.t (k, i) VALUES (4, toUnixTimestamp(now()))")
    assert msg == (
        "Type error: cannot assign result of function system.tounixtimestamp (type bigint) "
        "to i (type int)"
    )


# ------------------------------------------------------------------ DDL


def test_drop_if_exists_in_a_missing_keyspace_is_a_no_op(session, unique_name):
    missing = unique_name("nokeyspace")
    session.execute(f"DROP TABLE IF EXISTS {missing}.t")
    session.execute(f"DROP TYPE IF EXISTS {missing}.ty")
    session.execute(f"DROP INDEX IF EXISTS {missing}.ix")
    with pytest.raises(InvalidRequest):
        session.execute(f"DROP TABLE {missing}.t")


# ------------------------------------------------------------------ too permissive queries

FILTERING = "Cannot execute this query as it might involve data filtering"


def test_queries_cassandra_refuses(session, ks):
    session.execute(
        f"CREATE TABLE {ks}.t (k int, c int, d int, v int, s int static, dur duration, "
        "PRIMARY KEY (k, c, d))"
    )
    session.execute(f"INSERT INTO {ks}.t (k, c, d, v, dur) VALUES (1, 1, 1, 1, 1h)")
    session.execute(f"INSERT INTO {ks}.t (k, c, d, v) VALUES (2, 1, 1, 2)")
    # a partition key slice needs ALLOW FILTERING; with it, it filters
    assert invalid(session, f"SELECT * FROM {ks}.t WHERE k > 1").startswith(FILTERING)
    assert rows(session, f"SELECT k FROM {ks}.t WHERE k > 1 ALLOW FILTERING") == [(2,)]
    assert invalid(session, f"SELECT * FROM {ks}.t WHERE k = 1 AND v != 3 ALLOW FILTERING") == (
        'Unsupported "!=" relation: v != 3'
    )
    assert invalid(session, f"SELECT DISTINCT k FROM {ks}.t WHERE v = 1 ALLOW FILTERING") == (
        "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns."
    )
    assert invalid(session, f"SELECT DISTINCT k FROM {ks}.t WHERE k = 1 AND c = 1") == (
        "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns."
    )
    assert rows(session, f"SELECT DISTINCT k, s FROM {ks}.t WHERE k = 1") == [(1, None)]
    assert invalid(session, f"SELECT * FROM {ks}.t WHERE dur > 1s ALLOW FILTERING") == (
        "Slice restrictions are not supported on duration columns"
    )
    assert invalid(session, f"CREATE INDEX ON {ks}.t (dur)") == (
        "Secondary indexes are not supported on duration columns"
    )


def test_order_by_forms_cassandra_refuses(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, a int, b int, v int, PRIMARY KEY (k, a, b))")
    for a in range(2):
        for b in range(2):
            session.execute(f"INSERT INTO {ks}.t (k, a, b, v) VALUES (0, {a}, {b}, 0)")
    order = "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY"
    assert invalid(session, f"SELECT * FROM {ks}.t WHERE k = 0 ORDER BY b DESC") == order
    assert invalid(session, f"SELECT * FROM {ks}.t WHERE k = 0 ORDER BY b ASC, a ASC") == order
    assert invalid(session, f"SELECT * FROM {ks}.t WHERE k = 0 ORDER BY a ASC, b DESC") == (
        "Unsupported order by relation"
    )
    assert invalid(session, f"SELECT * FROM {ks}.t WHERE k = 0 ORDER BY v DESC") == (
        "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got v"
    )
    # allowed: the declared order (or all reversed); a column skipped is restricted by =
    got = rows(session, f"SELECT a, b FROM {ks}.t WHERE k = 0 ORDER BY a DESC, b DESC")
    assert got == [(1, 1), (1, 0), (0, 1), (0, 0)]
    assert rows(session, f"SELECT b FROM {ks}.t WHERE k = 0 AND a = 1 ORDER BY b DESC") == [(1,), (0,)]


# ------------------------------------------------------------------ GROUP BY, DISTINCT, unset limits


def test_group_by_limits_count_groups(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, a int, b int, v int, s int static, PRIMARY KEY (k, a, b))")
    for k in range(2):
        for a in range(3):
            for b in range(2):
                session.execute(f"INSERT INTO {ks}.t (k, a, b, v) VALUES ({k}, {a}, {b}, 1)")
    got = sorted(rows(session, f"SELECT k, a, count(*) FROM {ks}.t GROUP BY k, a PER PARTITION LIMIT 2"))
    assert got == [(0, 0, 2), (0, 1, 2), (1, 0, 2), (1, 1, 2)]
    assert len(rows(session, f"SELECT k, a, count(*) FROM {ks}.t GROUP BY k, a LIMIT 3")) == 3
    assert rows(session, f"SELECT k, a, count(*) FROM {ks}.t WHERE k = 0 GROUP BY k, a LIMIT 2") == [
        (0, 0, 2),
        (0, 1, 2),
    ]
    session.execute(f"UPDATE {ks}.t SET s = 5 WHERE k = 0")
    # DISTINCT of static columns alone, the partition key restricted
    assert rows(session, f"SELECT DISTINCT s FROM {ks}.t WHERE k = 0") == [(5,)]
    msg = invalid(session, f"SELECT DISTINCT s FROM {ks}.t")
    assert msg == "SELECT DISTINCT queries must request all the partition key columns (missing k)"


def test_unset_limit_means_no_limit(session, ks):
    from cassandra.query import UNSET_VALUE

    session.execute(f"CREATE TABLE {ks}.t (k int, c int, PRIMARY KEY (k, c))")
    for c in range(5):
        session.execute(f"INSERT INTO {ks}.t (k, c) VALUES (0, {c})")
    ps = session.prepare(f"SELECT c FROM {ks}.t WHERE k = 0 LIMIT ?")
    assert len(list(session.execute(ps, (UNSET_VALUE,)))) == 5
    assert len(list(session.execute(ps, (2,)))) == 2
    ps = session.prepare(f"SELECT c FROM {ks}.t WHERE k = 0 PER PARTITION LIMIT ?")
    assert len(list(session.execute(ps, (UNSET_VALUE,)))) == 5
    with pytest.raises(InvalidRequest, match="LIMIT must be strictly positive"):
        session.execute(ps, (0,))


# ------------------------------------------------------------------ replication


def test_replication_validated_as_cassandra(session, unique_name):
    from cassandra.protocol import ConfigurationException

    name = unique_name("repl")
    [(dc,)] = rows(session, "SELECT data_center FROM system.local")

    def refused(replication):
        with pytest.raises(ConfigurationException) as e:
            session.execute(f"CREATE KEYSPACE {name} WITH replication = {replication}")
        return str(e.value)

    assert f"Unrecognized strategy option {{nodc}} passed to NetworkTopologyStrategy for keyspace {name}" in refused(
        "{'class': 'NetworkTopologyStrategy', 'nodc': 1}"
    )
    assert "Configuration for at least one datacenter must be present" in refused(
        "{'class': 'NetworkTopologyStrategy'}"
    )
    assert f"Unrecognized strategy option {{foo}} passed to SimpleStrategy for keyspace {name}" in refused(
        "{'class': 'SimpleStrategy', 'replication_factor': 1, 'foo': 2}"
    )
    session.execute(
        f"CREATE KEYSPACE {name} WITH replication = {{'class': 'NetworkTopologyStrategy', '{dc}': 1}}"
    )
    session.execute(
        f"ALTER KEYSPACE {name} WITH replication = {{'class': 'NetworkTopologyStrategy', 'replication_factor': 1}}"
    )
    with pytest.raises(ConfigurationException):
        session.execute(
            f"ALTER KEYSPACE {name} WITH replication = {{'class': 'NetworkTopologyStrategy', 'dc9': 1}}"
        )


def test_literals_and_hinted_markers_as_selectors(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 2)")
    r = session.execute(f"SELECT 5 AS x, 'a', v FROM {ks}.t")
    assert r.column_names == ["x", "'a'", "v"]
    assert [tuple(x) for x in r] == [(5, "a", 2)]
    assert rows(session, "SELECT 5 AS v FROM system.local") == [(5,)]
    assert rows(session, f"SELECT (bigint) 5 FROM {ks}.t") == [(5,)]
    ps = session.prepare(f"SELECT (int) ? AS x, v FROM {ks}.t")
    assert [tuple(x) for x in session.execute(ps, (7,))] == [(7, 2)]


def test_conditional_writes_with_multi_column_relations(session, grid):
    r = session.execute(f"UPDATE {grid} SET v = 5 WHERE k = 0 AND (a, b) = (1, 1) IF v = 0").one()
    assert r[0] is True
    r = session.execute(f"UPDATE {grid} SET v = 6 WHERE k = 0 AND (a, b) = (1, 1) IF v = 0").one()
    assert r[0] is False and r.v == 5
    r = session.execute(f"DELETE FROM {grid} WHERE k = 0 AND (a, b) = (2, 2) IF EXISTS").one()
    assert r[0] is True
    assert keys(session, grid) == [x for x in ALL if x != (2, 2)]
    msg = invalid(session, f"UPDATE {grid} SET v = 1 WHERE k = 0 AND (a, b) IN ((0, 0)) IF v = 0")
    assert msg == "IN on the clustering key columns is not supported with conditional updates"


def test_equal_timestamps_reconcile_as_cassandra(session, ks):
    """Cells.reconcile: on a timestamp tie an expiring cell beats one that never expires
    (whatever the values), a tombstone beats both; only then the greater value wins."""
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int, m map<int, int>)")
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (0, 5) USING TIMESTAMP 10")
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 10 AND TTL 1000 SET v = 1 WHERE k = 0")
    assert rows(session, f"SELECT v, writetime(v) FROM {ks}.t WHERE k = 0") == [(1, 10)]
    # the other order: the live cell written second still loses
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 20 AND TTL 1000 SET v = 1, m[1] = 1 WHERE k = 1")
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 20 SET v = 9, m[1] = 9 WHERE k = 1")
    (v, ttl_v, m), = rows(session, f"SELECT v, ttl(v), m FROM {ks}.t WHERE k = 1")
    assert (v, dict(m)) == (1, {1: 1}) and 0 < ttl_v <= 1000
    # between two live cells the greater value wins; a tombstone beats any value
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (2, 3) USING TIMESTAMP 30")
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (2, 2) USING TIMESTAMP 30")
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 2") == [(3,)]
    session.execute(f"DELETE v FROM {ks}.t USING TIMESTAMP 30 WHERE k = 2")
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 30 AND TTL 1000 SET v = 7 WHERE k = 2")
    assert rows(session, f"SELECT v FROM {ks}.t WHERE k = 2") == [(None,)]


def test_index_info_lists_built_indexes(session, ks):
    """system."IndexInfo": one row per built index, keyed by the keyspace (in a column named
    table_name, as in Cassandra) and the index name."""
    session.execute(f"CREATE TABLE {ks}.t (a int, b int, c int, v int, PRIMARY KEY ((a, b), c))")
    session.execute(f"CREATE INDEX t_v ON {ks}.t (v)")
    session.execute(f"CREATE INDEX ON {ks}.t (c)")
    q = 'SELECT table_name, index_name, value FROM system."IndexInfo" WHERE table_name = %s'
    assert rows(session, q, ks) == [(ks, "t_c_idx", None), (ks, "t_v", None)]
    session.execute(f"DROP INDEX {ks}.t_v")
    assert rows(session, q, ks) == [(ks, "t_c_idx", None)]


def test_unset_binds_in_tuples_udts_and_in_conditions(session, ks):
    """A tuple or frozen UDT is written whole, so an unset field is refused (Tuples /
    UserTypes); an IN condition leaves its unset elements out (ColumnCondition)."""
    from cassandra.query import UNSET_VALUE as UNSET

    session.execute(f"CREATE TYPE {ks}.ut (a int, b int)")
    session.execute(
        f"CREATE TABLE {ks}.t (k int PRIMARY KEY, tu frozen<tuple<int, int>>, fu frozen<ut>, v int)"
    )
    session.execute(f"INSERT INTO {ks}.t (k, tu, fu, v) VALUES (0, (1, 2), {{a: 1, b: 2}}, 1)")

    def refused(q, *args):
        return invalid(session, session.prepare(q), *args)

    assert refused(f"UPDATE {ks}.t SET tu = (?, 1) WHERE k = 0", UNSET) == (
        "Invalid unset value for tuple field number 0"
    )
    assert refused(f"INSERT INTO {ks}.t (k, fu) VALUES (0, {{a: 1, b: ?}})", UNSET) == (
        "Invalid unset value for field 'b' of user defined type ut"
    )
    assert rows(session, f"SELECT tu, fu.a, fu.b FROM {ks}.t WHERE k = 0") == [((1, 2), 1, 2)]
    up = session.prepare(f"UPDATE {ks}.t SET v = 2 WHERE k = 0 IF v IN (?, ?)")
    assert rows(session, up, UNSET, 1) == [(True,)]
    assert rows(session, up, UNSET, UNSET) == [(False, 2)]
    whole = session.prepare(f"UPDATE {ks}.t SET v = 3 WHERE k = 0 IF v IN ?")
    assert invalid(session, whole, UNSET) == "Invalid 'unset' value in condition"
    assert invalid(session, whole, None) == "Invalid null list in IN condition"


def test_failed_condition_answers_static_columns_only_when_it_reads_them(session, ks):
    """A failed conditional write on a missing row answers the conditions' columns of the
    static row when a condition is on a static column, and `[applied]` alone otherwise."""
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, s int static, v int, PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {ks}.t (k, c, s, v) VALUES (0, 1, 5, 1)")
    assert rows(session, f"UPDATE {ks}.t SET v = 3 WHERE k = 0 AND c = 6 IF v IN (2, 4)") == [(False,)]
    assert rows(session, f"UPDATE {ks}.t SET v = 3 WHERE k = 0 AND c = 6 IF v = 2") == [(False,)]
    assert rows(session, f"UPDATE {ks}.t SET v = 3 WHERE k = 0 AND c = 6 IF s = 2 AND v = 1") == [
        (False, 5, None)
    ]
    assert rows(session, f"UPDATE {ks}.t SET s = 3 WHERE k = 0 IF s = 2") == [(False, 5)]
    assert rows(session, f"UPDATE {ks}.t SET s = 3 WHERE k = 9 IF s = 2") == [(False,)]
    assert rows(session, f"UPDATE {ks}.t SET v = 3 WHERE k = 0 AND c = 6 IF v IN (null, 2)") == [(True,)]


def test_using_timestamp_long_min_value_is_refused(session, ks):
    """UpdateParameters: Long.MIN_VALUE means "no timestamp" inside Cassandra."""
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
    expected = "Out of bound timestamp, must be in [-9223372036854775807, 9223372036854775807]"
    lo = -(2**63)
    assert invalid(session, f"INSERT INTO {ks}.t (k, v) VALUES (1, 1) USING TIMESTAMP {lo}") == expected
    assert invalid(session, session.prepare(f"UPDATE {ks}.t USING TIMESTAMP ? SET v = 1 WHERE k = 1"), lo) == expected
    assert invalid(
        session, f"BEGIN BATCH USING TIMESTAMP {lo} INSERT INTO {ks}.t (k, v) VALUES (1, 1); APPLY BATCH"
    ) == expected
    session.execute(f"INSERT INTO {ks}.t (k, v) VALUES (1, 1) USING TIMESTAMP {lo + 1}")
    assert rows(session, f"SELECT writetime(v) FROM {ks}.t WHERE k = 1") == [(lo + 1,)]


def test_static_only_writes_refuse_clustering_restrictions(session, ks):
    session.execute(f"CREATE TABLE {ks}.t (k int, c int, s int static, v int, PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {ks}.t (k, c, s, v) VALUES (0, 1, 1, 1)")
    msg = "Invalid restrictions on clustering columns since the {} statement modifies only static columns"
    assert invalid(session, f"UPDATE {ks}.t SET s = 2 WHERE k = 0 AND c = 1") == msg.format("UPDATE")
    assert invalid(session, f"DELETE s FROM {ks}.t WHERE k = 0 AND c = 1") == msg.format("DELETE")
    assert invalid(session, f"UPDATE {ks}.t SET s = 2 WHERE k = 0 AND c = 1 IF s = 1") == msg.format("UPDATE")
    assert rows(session, f"SELECT s, v FROM {ks}.t WHERE k = 0") == [(1, 1)]
    # a regular column in the assignments or the conditions names the row: accepted
    session.execute(f"UPDATE {ks}.t SET s = 2, v = 2 WHERE k = 0 AND c = 1")
    assert rows(session, f"UPDATE {ks}.t SET s = 3 WHERE k = 0 AND c = 1 IF v = 2") == [(True,)]
    session.execute(f"UPDATE {ks}.t SET s = 4 WHERE k = 0")
    session.execute(f"DELETE FROM {ks}.t WHERE k = 0 AND c = 1")
    assert rows(session, f"SELECT s FROM {ks}.t WHERE k = 0") == [(4,)]


def test_unset_collection_keys_and_indexes(session, ks):
    """Maps.SetterByKey / DiscarderByKey and Lists.SetterByIndex refuse an unset key or index;
    an unset value or an unset list index in a DELETE changes nothing."""
    from cassandra.query import UNSET_VALUE as UNSET

    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, l list<text>, m map<text, text>)")
    session.execute(f"INSERT INTO {ks}.t (k, l, m) VALUES (10, ['a', 'b'], {{'k': 'v'}})")

    def refused(q, *args):
        return invalid(session, session.prepare(q), *args)

    assert refused(f"UPDATE {ks}.t SET m[?] = 'x' WHERE k = 10", UNSET) == "Invalid unset map key"
    assert refused(f"UPDATE {ks}.t SET m[?] = 'x' WHERE k = 10", None) == "Invalid null map key"
    assert refused(f"DELETE m[?] FROM {ks}.t WHERE k = 10", UNSET) == "Invalid unset map key"
    assert refused(f"UPDATE {ks}.t SET l[?] = 'x' WHERE k = 10", UNSET) == "Invalid unset value for list index"
    for q, args in [
        (f"UPDATE {ks}.t SET m['k'] = ? WHERE k = 10", (UNSET,)),
        (f"UPDATE {ks}.t SET l[1] = ? WHERE k = 10", (UNSET,)),
        (f"DELETE l[?] FROM {ks}.t WHERE k = 10", (UNSET,)),
    ]:
        session.execute(session.prepare(q), args)
    assert rows(session, f"SELECT l, m FROM {ks}.t WHERE k = 10") == [(["a", "b"], {"k": "v"})]


def test_unset_binds_in_multi_column_relations(session, ks):
    """Cassandra's messages for unset values in multi-column relations (a tuple field, a whole
    tuple, a whole IN list)."""
    from cassandra.query import UNSET_VALUE as UNSET

    session.execute(f"CREATE TABLE {ks}.t (k int, i int, j int, s text, PRIMARY KEY (k, i, j))")
    cases = [
        ("(i, j) = (?, ?)", (UNSET, 1), "Invalid unset value for tuple field number 0"),
        ("(i, j) IN ((?, ?))", (UNSET, 1), "Invalid unset value for tuple field number 0"),
        ("(i, j) > (1, ?)", (UNSET,), "Invalid unset value for tuple field number 1"),
        ("(i, j) = ?", (UNSET,), "Invalid unset value for tuple (i,j)"),
        ("(i, j) IN (?, ?)", (UNSET, (1, 1)), "Invalid unset value for tuple (i,j)"),
        ("(i, j) IN ?", (UNSET,), "Invalid unset value for in(i,j)"),
    ]
    for where, args, message in cases:
        q = session.prepare(f"SELECT * FROM {ks}.t WHERE k = 0 AND {where}")
        assert invalid(session, q, *args) == message, where


# ------------------------------------------------------------------ WRITETIME / TTL of parts


def test_writetime_and_ttl_of_elements_fields_and_slices(session, ks):
    """Cassandra 5.0 (WritetimeOrTTLTest): an element, field or slice of a non-frozen set, map
    or UDT has its own cells' timestamps and TTLs (a slice: a list); every part of a frozen
    value shares the column's; a part that is not there has none; list parts are refused."""
    session.execute(f"CREATE TYPE {ks}.pt (x int, y int)")
    session.execute(
        f"CREATE TABLE {ks}.t (k int PRIMARY KEY, s set<int>, m map<int, text>, l list<int>, "
        f"u pt, fs frozen<set<int>>, fu frozen<pt>, v int)"
    )
    session.execute(
        f"INSERT INTO {ks}.t (k, s, m, l, u, fs, fu, v) "
        f"VALUES (1, {{1}}, {{1: 'a'}}, [1], {{x: 1}}, {{1, 2}}, {{x: 1}}, 1) USING TIMESTAMP 1"
    )
    session.execute(
        f"UPDATE {ks}.t USING TIMESTAMP 2 AND TTL 2000 SET s = s + {{2}}, m[2] = 'b', u.y = 2 WHERE k = 1"
    )

    def q(sel):
        return rows(session, f"SELECT {sel} FROM {ks}.t WHERE k = 1")[0]

    assert q("writetime(s[1]), writetime(s[2]), writetime(s[3]), maxwritetime(s[2])") == (1, 2, None, 2)
    assert q("writetime(s), writetime(s[..1]), writetime(s[2..]), writetime(s[3..])") == (
        [1, 2], [1], [2], None)
    assert q("maxwritetime(s[1..2]), maxwritetime(s[0..0]), writetime(s[0..0])") == (2, None, None)
    assert q("writetime(m[1]), writetime(m[2]), writetime(m[1..2]), writetime(m[3])") == (1, 2, [1, 2], None)
    assert q("writetime(u.x), writetime(u.y), maxwritetime(u.y)") == (1, 2, 2)
    ttl_y, ttl_x, ttl_m2 = q("ttl(u.y), ttl(u.x), ttl(m[2])")
    assert 1900 < ttl_y <= 2000 and ttl_x is None and 1900 < ttl_m2 <= 2000
    # frozen: every part shares the column's timestamp; a part that is not there has none
    assert q("writetime(fs[1]), writetime(fs[3]), writetime(fs[1..]), writetime(fs[5..])") == (1, None, 1, None)
    assert q("writetime(fu.x), writetime(fu.y), ttl(fu.x)") == (1, None, None)
    r = session.execute(f"SELECT writetime(m[1]), ttl(u.y), maxwritetime(s[1..2]) FROM {ks}.t WHERE k = 1")
    assert r.column_names == ["writetime(m[1])", "ttl(u.y)", "maxwritetime(s[1..2])"]
    assert [t.typename for t in r.column_types] == ["bigint", "int", "bigint"]
    # inside other selectors
    assert q("writetime(v) + 1, bigintAsBlob(writetime(s[2])), writetime(u.y) * 10") == (
        2, b"\x00" * 7 + b"\x02", 20)
    assert rows(session, f"SELECT k, writetime(s[2]) FROM {ks}.t") == [(1, 2)]
    # list parts and primary key columns are refused with Cassandra's messages
    for fn in ["writetime", "maxwritetime", "ttl"]:
        assert invalid(session, f"SELECT {fn}(l[0]) FROM {ks}.t") == (
            "Element selection is only allowed on sets and maps, but l is a list")
        assert invalid(session, f"SELECT {fn}(l[0..1]) FROM {ks}.t") == (
            "Slice selection is only allowed on sets and maps, but l is a list")
        assert invalid(session, f"SELECT {fn}(k) FROM {ks}.t") == (
            f"Cannot use selection function {fn} on PRIMARY KEY part k")


def test_ttl_lists_with_untimed_elements_decode(session, ks):
    """ttl() of a non-frozen collection holds a null entry per element without a TTL, as
    Cassandra 5.0 sends it (ColumnTimestamps: CollectionSerializer.pack of null buffers). The
    Python driver's pure-Python decoder reads those as None (its Cython one cannot, with
    Cassandra as with us), so this reads them through it."""
    from cassandra.protocol import _ProtocolHandler

    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, s set<int>, m map<int, int>)")
    session.execute(f"INSERT INTO {ks}.t (k, s, m) VALUES (1, {{1}}, {{1: 1}}) USING TIMESTAMP 1")
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 2 AND TTL 2000 SET s = s + {{2}}, m[2] = 2 WHERE k = 1")
    before = session.client_protocol_handler
    session.client_protocol_handler = _ProtocolHandler
    try:
        (ts, tm, tslice), = rows(session, f"SELECT ttl(s), ttl(m), ttl(s[1..2]) FROM {ks}.t WHERE k = 1")
    finally:
        session.client_protocol_handler = before
    for got in (ts, tm, tslice):
        assert got[0] is None and 1900 < got[1] <= 2000, got


# ------------------------------------------------------------------ frozen values from binds


class _Pairs(list):
    """Map entries for the driver's map serializer in the order given, duplicates included
    (what another client may send)."""

    def items(self):
        return list(self)


def test_bound_frozen_sets_and_maps_are_normalised(session, ks):
    """Sets.Value / Maps.Value.fromSerialized: a bound set or map becomes a sorted,
    duplicate-free value (a map keeps the last value of a repeated key), so it is the same
    frozen value as the literal, as a cell, a clustering key or in a comparison."""
    from cassandra.protocol import _ProtocolHandler

    session.execute(
        f"CREATE TABLE {ks}.t (k int, c frozen<set<int>>, m frozen<map<int, text>>, "
        f"l frozen<list<frozen<set<int>>>>, PRIMARY KEY (k, c))"
    )
    ins = session.prepare(f"INSERT INTO {ks}.t (k, c, m, l) VALUES (0, ?, ?, ?)")
    session.execute(ins, ([3, 1, 3, 2], _Pairs([(2, "b"), (1, "a"), (2, "c")]), [[2, 1, 2]]))
    # the literal names the same row
    session.execute(f"UPDATE {ks}.t SET m = {{5: 'e'}} WHERE k = 0 AND c = {{1, 2, 3}}")
    assert rows(session, f"SELECT k FROM {ks}.t") == [(0,)]
    # read raw (the pure-Python decoder keeps the order sent: a map is a list of pairs)
    before = session.client_protocol_handler
    session.client_protocol_handler = _ProtocolHandler
    try:
        session.execute(ins, ([9, 8], _Pairs([(2, "b"), (1, "a"), (2, "c")]), [[2, 1, 2]]))
        got = {tuple(r.c): (list(r.m.items()), [list(x) for x in r.l])
               for r in session.execute(f"SELECT c, m, l FROM {ks}.t WHERE k = 0")}
    finally:
        session.client_protocol_handler = before
    assert got == {
        (1, 2, 3): ([(5, "e")], [[1, 2]]),
        (8, 9): ([(1, "a"), (2, "c")], [[1, 2]]),
    }
    sel = session.prepare(f"SELECT k FROM {ks}.t WHERE k = 0 AND c = ?")
    assert [tuple(r) for r in session.execute(sel, ([9, 8, 9],))] == [(0,)]
    flt = session.prepare(f"SELECT c FROM {ks}.t WHERE l = ? ALLOW FILTERING")
    assert len(list(session.execute(flt, ([[2, 2, 1]],)))) == 2


# ------------------------------------------------------------------ aggregates in selectors


def test_aggregates_of_computed_inputs_and_inside_functions(session, ks):
    """Cassandra 5.0 (WritetimeOrTTLTest.testFunctions, AggregationTest): aggregates over
    writetime()/maxwritetime() and other selectors, functions and operations over
    aggregates; an aggregate inside an aggregate is refused."""
    import datetime

    session.execute(
        f"CREATE TABLE {ks}.t (k int, c int, v int, ts timestamp, s set<int>, PRIMARY KEY (k, c))"
    )
    session.execute(
        f"INSERT INTO {ks}.t (k, c, v, ts, s) VALUES (0, 0, 0, '2024-03-05 10:00:00+0000', {{1, 2, 3}}) "
        "USING TIMESTAMP 1"
    )
    session.execute(
        f"INSERT INTO {ks}.t (k, c, v, ts, s) VALUES (0, 1, 5, '2024-03-07 23:00:00+0000', {{10, 20, 30}}) "
        "USING TIMESTAMP 10"
    )
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 2 SET s = s + {{2, 3}} WHERE k = 0 AND c = 0")
    session.execute(f"UPDATE {ks}.t USING TIMESTAMP 20 SET s = s + {{20, 30}} WHERE k = 0 AND c = 1")
    session.execute(
        f"INSERT INTO {ks}.t (k, c, v, ts) VALUES (1, 0, 7, '2024-01-01 00:00:00+0000') USING TIMESTAMP 5"
    )

    def q(sel, where=""):
        return rows(session, f"SELECT {sel} FROM {ks}.t {where}")

    assert q("min(writetime(v)), max(writetime(v)), min(maxwritetime(s)), max(maxwritetime(s))",
             "WHERE k = 0") == [(1, 10, 2, 20)]
    assert q("min(writetime(s)), max(writetime(s))", "WHERE k = 0") == [([1, 2, 2], [10, 20, 20])]
    assert q("toDate(min(ts)), toDate(max(ts))", "WHERE k = 0") == [
        (datetime.date(2024, 3, 5), datetime.date(2024, 3, 7))
    ]
    assert q("max(v) - min(v), count(*) + 1, sum(v + 1)", "WHERE k = 0") == [(5, 3, 7)]
    assert sorted(q("k, toUnixTimestamp(max(ts)), max(v) * 2", "GROUP BY k")) == [
        (0, 1709852400000, 10),
        (1, 1704067200000, 14),
    ]
    r = session.execute(f"SELECT toDate(max(ts)), min(writetime(v)) FROM {ks}.t")
    assert r.column_names == ["system.todate(system.max(ts))", "system.min(writetime(v))"]
    assert invalid(session, f"SELECT max(min(v)) FROM {ks}.t") == (
        "aggregate functions cannot be used as arguments of aggregate functions"
    )


# ------------------------------------------------------------------ DDL


def test_ddl_names_options_and_drop_using_timestamp(session, ks):
    """Cassandra 5.0: table names up to 222 characters (SchemaUtils.validateTableName,
    CASSANDRA-20389), keyspace names up to 48; compaction classes and numeric table options
    validated with TableParams' / CompactionParams' messages; ALTER TABLE DROP ... USING
    TIMESTAMP records the drop at that time."""
    import datetime

    from cassandra.protocol import ConfigurationException

    def refused(q, kind=ConfigurationException):
        with pytest.raises(kind) as e:
            session.execute(q)
        text = error_text(e.value)
        m = re.search(r'message="(.*)"$', text, re.S)
        return m.group(1) if m else text

    long_name = "t" * 222
    session.execute(f"CREATE TABLE {ks}.{long_name} (k int PRIMARY KEY, v int)")
    session.execute(f"INSERT INTO {ks}.{long_name} (k, v) VALUES (1, 1)")
    assert rows(session, f"SELECT v FROM {ks}.{long_name}") == [(1,)]
    too_long = "l" * 223
    assert refused(f"CREATE TABLE {ks}.{too_long} (k int PRIMARY KEY)") == (
        f'{ks}.{too_long}: Table name must not be more than 222 characters long (got 223 characters for "{too_long}")'
    )
    assert refused(f'CREATE TABLE {ks}."d-3" (k int PRIMARY KEY)') == (
        f'{ks}.d-3: Table name must not be empty or not contain non-alphanumeric-underscore characters (got "d-3")'
    )
    ks_name = "k" * 49
    assert refused(
        f"CREATE KEYSPACE {ks_name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
        InvalidRequest,
    ) == (
        f'Keyspace name must not be empty, more than 48 characters long, or contain '
        f'non-alphanumeric-underscore characters (got "{ks_name}")'
    )

    def option(opt):
        return refused(f"CREATE TABLE {ks}.o (k int PRIMARY KEY) WITH {opt}")

    assert option("compaction = {'class': 'Nope'}") == (
        "Unable to find compaction strategy class 'org.apache.cassandra.db.compaction.Nope'"
    )
    assert option("compaction = {'class': 'org.example.Nope'}") == (
        "Unable to find compaction strategy class 'org.example.Nope'"
    )
    assert option("compaction = {'min_threshold': '2'}") == (
        "Missing sub-option 'class' for the 'compaction' option."
    )
    assert option("crc_check_chance = 2") == (
        "crc_check_chance must be larger than or equal to 0 and smaller than or equal to 1.0 (got 2.0)"
    )
    assert option("min_index_interval = 0") == "min_index_interval must be greater than or equal to 1 (got 0)"
    assert option("memtable_flush_period_in_ms = -1") == (
        "memtable_flush_period_in_ms must be greater than or equal to 0 (got -1)"
    )
    session.execute(
        f"CREATE TABLE {ks}.o (k int PRIMARY KEY, v int, w int) "
        "WITH compaction = {'class': 'UnifiedCompactionStrategy'}"
    )
    session.execute(
        f"ALTER TABLE {ks}.o WITH compaction = {{'class': 'org.apache.cassandra.db.compaction.LeveledCompactionStrategy'}}"
    )
    # DROP ... USING TIMESTAMP (micros): the drop's recorded time
    session.execute(f"ALTER TABLE {ks}.o DROP v USING TIMESTAMP 1700000000000000")
    assert rows(
        session,
        "SELECT column_name, dropped_time FROM system_schema.dropped_columns "
        "WHERE keyspace_name = %s AND table_name = 'o'",
        ks,
    ) == [("v", datetime.datetime(2023, 11, 14, 22, 13, 20))]
    assert [c for c in session.execute(f"SELECT * FROM {ks}.o").column_names] == ["k", "w"]


# ------------------------------------------------------------------ unset elements


def test_unset_elements_in_collection_literals_and_in_lists(session, ks):
    """Lists/Sets/Maps.DelayedValue.bind: an unset element (or map value) leaves the whole
    collection unset, so its assignment changes nothing; an unset map key is refused. In a
    SELECT or DELETE, an unset element of `c IN (?, ?)` is refused (checkBindValueSet)."""
    from cassandra.query import UNSET_VALUE as UNSET

    session.execute(
        f"CREATE TABLE {ks}.t (k int, c int, l list<int>, s set<int>, m map<int, int>, "
        f"fl frozen<list<int>>, PRIMARY KEY (k, c))"
    )
    session.execute(f"INSERT INTO {ks}.t (k, c, l, s, m, fl) VALUES (0, 0, [9], {{9}}, {{9: 9}}, [9])")
    for q in [
        f"UPDATE {ks}.t SET l = [?, 1] WHERE k = 0 AND c = 0",
        f"UPDATE {ks}.t SET l = l + [1, ?] WHERE k = 0 AND c = 0",
        f"UPDATE {ks}.t SET s = {{?, 1}} WHERE k = 0 AND c = 0",
        f"UPDATE {ks}.t SET m = {{1: ?}} WHERE k = 0 AND c = 0",
        f"UPDATE {ks}.t SET fl = [?, 1] WHERE k = 0 AND c = 0",
        f"INSERT INTO {ks}.t (k, c, l) VALUES (0, 0, [1, ?])",
    ]:
        session.execute(session.prepare(q), (UNSET,))
    assert rows(session, f"SELECT l, s, m, fl FROM {ks}.t WHERE k = 0") == [([9], {9}, {9: 9}, [9])]
    assert invalid(session, session.prepare(f"UPDATE {ks}.t SET m = {{?: 1}} WHERE k = 0 AND c = 0"), UNSET) == (
        "unset value is not supported for map keys"
    )
    assert invalid(session, session.prepare(f"UPDATE {ks}.t SET l = [?, 1] WHERE k = 0 AND c = 0"), None) == (
        "null is not supported inside collections"
    )
    for q, args in [
        (f"SELECT * FROM {ks}.t WHERE k = 0 AND c IN (?, ?)", (UNSET, 0)),
        (f"SELECT * FROM {ks}.t WHERE k IN (?, ?)", (UNSET, 0)),
        (f"SELECT * FROM {ks}.t WHERE k = 0 AND c IN ?", (UNSET,)),
        (f"DELETE FROM {ks}.t WHERE k = 0 AND c IN (?, ?)", (UNSET, 0)),
    ]:
        col = "k" if "k IN" in q else "c"
        assert invalid(session, session.prepare(q), *args) == f"Invalid unset value for column {col}", q
    assert rows(session, f"SELECT c FROM {ks}.t WHERE k = 0 AND c IN (0, null)") == [(0,)]


def test_indexed_values_of_64k_refused_with_cassandras_message(session, ks):
    """CassandraIndex.validateIndexedValue: a value of 65,535 bytes or more cannot be
    indexed, when written into an indexed column and when an index is built over it."""
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text, w text)")
    session.execute(f"CREATE INDEX ON {ks}.t (v)")
    big = "x" * 70000
    assert invalid(session, f"INSERT INTO {ks}.t (k, v) VALUES (1, %s)", big) == (
        f"Cannot index value of size 70000 for index t_v_idx on {ks}.t(v) (maximum allowed size=65535)"
    )
    session.execute(f"INSERT INTO {ks}.t (k, v, w) VALUES (2, 'small', %s)", (big,))
    assert invalid(session, f"CREATE INDEX ON {ks}.t (w)") == (
        f"Cannot index value of size 70000 for index t_w_idx on {ks}.t(w) (maximum allowed size=65535)"
    )
    assert rows(session, f"SELECT k FROM {ks}.t WHERE v = 'small'") == [(2,)]


def test_token_relation_errors(session, ks):
    """ColumnsExpression.Kind.TOKEN.validateColumns: the problem with token()'s columns in a
    relation is narrowed down in Cassandra's order (TokenRelationTest)."""
    session.execute(f"CREATE TABLE {ks}.t (a int, b int, c int, v int, PRIMARY KEY ((a, b), c))")
    session.execute(f"INSERT INTO {ks}.t (a, b, c, v) VALUES (1, 2, 3, 4)")
    cases = [
        ("token(a) > 0", "The token() function must be applied to all partition key components or none of them"),
        ("token(a) > token(0) AND token(b) > token(0)",
         "The token() function must be applied to all partition key components or none of them"),
        ("token(a, b, a) > 0", "The token() function contains duplicate partition key components"),
        ("token(a, b, c) > 0", "The token() function must contains only partition key components"),
        ("token(b, a) > 0", "The token function arguments must be in the partition key order: a, b"),
    ]
    for where, message in cases:
        assert invalid(session, f"SELECT * FROM {ks}.t WHERE {where}") == message, where
    assert rows(session, f"SELECT c FROM {ks}.t WHERE token(a, b) = token(1, 2)") == [(3,)]


def _routing(rs):
    return [e.description for e in rs.get_query_trace(max_wait_sec=5).events
            if e.description.startswith("Routing:")]


def test_indexes_on_key_components_are_used_without_allow_filtering(session, ks):
    """Cassandra 5.0 (CassandraIndexTest: indexOnFirst/SecondPartitionKeyColumn,
    indexOnFirst/SecondClusteringColumn): an index on a component of a composite partition key
    or on a clustering column serves `=` without ALLOW FILTERING; without the index the same
    query asks for it. Results equal a filtering scan, in token order, paged."""
    from cassandra.query import SimpleStatement

    t = f"{ks}.kc"
    session.execute(f"CREATE TABLE {t} (k1 int, k2 int, c1 int, c2 int, v int, "
                    f"PRIMARY KEY ((k1, k2), c1, c2))")
    ins = session.prepare(f"INSERT INTO {t} (k1, k2, c1, c2, v) VALUES (?, ?, ?, ?, ?)")
    for i in range(60):
        session.execute(ins, (i % 7, i % 5, i % 3, i % 4, i))
    # Cassandra 4 and 5's message, whole, for a partial partition key too (3.x named the parts)
    whole = ("Cannot execute this query as it might involve data filtering and thus may have "
             "unpredictable performance. If you want to execute this query despite the performance "
             "unpredictability, use ALLOW FILTERING")
    for where in ["k1 = 1", "k2 = 2", "c1 = 1", "c2 = 3"]:
        msg = invalid(session, f"SELECT * FROM {t} WHERE {where}")
        assert msg == whole, msg
    everything = rows(session, f"SELECT * FROM {t}")  # token order
    for col in ["k1", "k2", "c1", "c2"]:
        session.execute(f"CREATE INDEX kc_{col} ON {t} ({col})")
    for col, pos in [("k1", 0), ("k2", 1), ("c1", 2), ("c2", 3)]:
        want = [r for r in everything if r[pos] == 1]
        assert want
        rs = session.execute(SimpleStatement(f"SELECT * FROM {t} WHERE {col} = 1", fetch_size=4),
                             trace=True)
        assert _routing(rs)[0].startswith("Routing: fan-out"), (col, _routing(rs))
        assert f"secondary index kc_{col}" in _routing(rs)[0], (col, _routing(rs))
        assert [tuple(r) for r in rs] == want, col
        assert rows(session, f"SELECT * FROM {t} WHERE {col} = 1 ALLOW FILTERING") == want
    # two restrictions: one is served by the index, the other filters
    msg = invalid(session, f"SELECT * FROM {t} WHERE k2 = 1 AND c1 = 2")
    assert msg.startswith("Cannot execute this query as it might involve data filtering"), msg
    assert rows(session, f"SELECT * FROM {t} WHERE k2 = 1 AND c1 = 2 ALLOW FILTERING") == [
        r for r in everything if r[1] == 1 and r[2] == 2]
    # within a named partition the clustering index needs nothing either
    assert rows(session, f"SELECT * FROM {t} WHERE k1 = 1 AND k2 = 1 AND c2 = 1") == [
        r for r in everything if r[:2] == (1, 1) and r[3] == 1]


def test_partition_key_component_index_finds_static_only_partitions(session, ks):
    """Cassandra 5.0's testIndexOnPartitionKeyWithPartitionWithoutRows: a partition left with
    only its static row is still found through an index on a partition key component."""
    t = f"{ks}.ps"
    session.execute(f"CREATE TABLE {t} (pk1 int, pk2 int, c int, s int static, v int, "
                    f"PRIMARY KEY ((pk1, pk2), c))")
    session.execute(f"CREATE INDEX ON {t} (pk2)")
    for pk1, c, v in [(1, 1, 1), (1, 2, 2), (3, 1, 1), (4, 1, 1)]:
        session.execute(f"INSERT INTO {t} (pk1, pk2, c, s, v) VALUES (%s, 1, %s, 9, %s)",
                        (pk1, c, v))
    q = f"SELECT pk1, pk2, c, s, v FROM {t} WHERE pk2 = 1"
    assert sorted(rows(session, q)) == [(1, 1, 1, 9, 1), (1, 1, 2, 9, 2), (3, 1, 1, 9, 1),
                                        (4, 1, 1, 9, 1)]
    session.execute(f"DELETE FROM {t} WHERE pk1 = 3 AND pk2 = 1 AND c = 1")
    got = rows(session, q)
    assert sorted(got, key=lambda r: (r[0], r[2] or 0)) == [
        (1, 1, 1, 9, 1), (1, 1, 2, 9, 2), (3, 1, None, 9, None), (4, 1, 1, 9, 1)]
    assert got == rows(session, q + " ALLOW FILTERING")


def test_table_options_validated_as_cassandra(session, ks):
    """TableParams.validate, CompressionParams, CachingParams, SpeculativeRetryPolicy and the
    compaction strategies' validateOptions of Cassandra 5.0: their messages, and the forms
    Cassandra stores for the options it accepts."""
    from cassandra.protocol import ConfigurationException

    def option(opt, table="o"):
        with pytest.raises(ConfigurationException) as e:
            session.execute(f"CREATE TABLE {ks}.{table} (k int PRIMARY KEY) WITH {opt}")
        text = error_text(e.value)
        m = re.search(r'message="(.*)"$', text, re.S)
        return m.group(1) if m else text

    bloom = "bloom_filter_fp_chance must be larger than 6.71E-5 and less than or equal to 1.0"
    assert option("bloom_filter_fp_chance = 0.0000001") == f"{bloom} (got 1.0E-7)"
    assert option("bloom_filter_fp_chance = 1.1") == f"{bloom} (got 1.1)"
    assert option("bloom_filter_fp_chance = -0.5") == f"{bloom} (got -0.5)"
    assert option("compression = {'class': 'Nope'}") == (
        "Could not create Compression for type org.apache.cassandra.io.compress.Nope"
    )
    assert option("compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 3}") == (
        "chunk_length_in_kb must be a power of 2"
    )
    assert option("compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 0}") == (
        "Invalid negative or null chunk_length_in_kb"
    )
    assert option("compression = {'class': 'SnappyCompressor', 'level': 3}") == (
        "Unknown compression options level"
    )
    assert option("compression = {'chunk_length_in_kb': 4}") == (
        "Missing sub-option 'class' for the 'compression' option."
    )
    assert option("compression = {'enabled': false, 'class': 'LZ4Compressor'}") == (
        "If the 'enabled' option is set to false no other options must be specified"
    )
    assert option("caching = {'keys': 'SOME'}") == (
        "Invalid value 'SOME' for caching sub-option 'keys': only 'ALL' and 'NONE' are allowed"
    )
    assert option("caching = {'rows_per_partition': 'many'}") == (
        "Invalid value 'many' for caching sub-option 'rows_per_partition': only 'ALL', 'NONE', "
        "and integer values are allowed"
    )
    assert option("caching = {'keys': 'ALL', 'rows': 'ALL'}") == (
        "Invalid caching sub-options [rows]: only 'keys' and 'rows_per_partition' are allowed"
    )
    assert option("speculative_retry = 'sometimes'") == (
        "Invalid value sometimes for option 'speculative_retry'"
    )
    assert option("speculative_retry = '100p'") == (
        "Invalid value 100p for PERCENTILE option 'speculative_retry': must be between (0.0 and 100.0)"
    )
    assert option("speculative_retry = 'MIN(99p,95p)'") == (
        "Invalid value MIN(99p,95p) for option 'speculative_retry': MIN()/MAX() arguments should "
        "be of different types, but both are of type PERCENTILE"
    )
    assert option("speculative_retry = 'MAX(99p,10xs)'") == (
        "Invalid value MAX(99p,10xs) for option 'speculative_retry'"
    )
    assert option("compaction = {'class': 'SizeTieredCompactionStrategy', 'sstable_size_in_mb': 1}") == (
        "Properties specified [sstable_size_in_mb] are not understood by SizeTieredCompactionStrategy"
    )
    assert option("compaction = {'class': 'LeveledCompactionStrategy', 'nope': 1}") == (
        "Properties specified [nope] are not understood by LeveledCompactionStrategy"
    )
    assert option("max_index_interval = 100") == (
        "max_index_interval must be greater than or equal to min_index_interval (128) (got 100)"
    )
    assert option("min_index_interval = 4096") == (
        "max_index_interval must be greater than or equal to min_index_interval (4096) (got 2048)"
    )
    # accepted forms are stored as Cassandra stores them
    session.execute(
        f"CREATE TABLE {ks}.o (k int PRIMARY KEY) WITH bloom_filter_fp_chance = 0.1 "
        "AND compression = {'class': 'ZstdCompressor', 'chunk_length_in_kb': 64, 'compression_level': 3} "
        "AND caching = {'rows_per_partition': '10'} AND speculative_retry = 'min(95.5PERCENTILE, 20ms)' "
        "AND additional_write_policy = 'none' "
        "AND compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': 160, 'enabled': 'true'} "
        "AND min_index_interval = 64 AND max_index_interval = 64"
    )
    [r] = session.execute(
        "SELECT bloom_filter_fp_chance, compression, caching, speculative_retry, "
        "additional_write_policy, min_index_interval, max_index_interval FROM system_schema.tables "
        "WHERE keyspace_name = %s AND table_name = 'o'", (ks,))
    assert r.bloom_filter_fp_chance == 0.1
    assert r.compression == {"class": "org.apache.cassandra.io.compress.ZstdCompressor",
                             "chunk_length_in_kb": "64", "compression_level": "3"}
    assert r.caching == {"keys": "NONE", "rows_per_partition": "10"}
    assert r.speculative_retry == "MIN(95.5p,20ms)"
    assert r.additional_write_policy == "NEVER"
    assert (r.min_index_interval, r.max_index_interval) == (64, 64)
    session.execute(f"ALTER TABLE {ks}.o WITH compression = {{'enabled': 'false'}}")
    [r] = session.execute("SELECT compression FROM system_schema.tables WHERE keyspace_name = %s "
                          "AND table_name = 'o'", (ks,))
    assert r.compression == {"enabled": "false"}
    with pytest.raises(ConfigurationException) as e:
        session.execute(f"ALTER TABLE {ks}.o WITH max_index_interval = 32")
    assert "max_index_interval must be greater than or equal to min_index_interval (64) (got 32)" in str(e.value)


def test_token_selector_argument_errors(session, ks):
    """Cassandra 5.0 resolves token() in a selection through FunctionResolver with the table's
    partition key types: its arity and argument type messages."""
    session.execute(f"CREATE TABLE {ks}.tk (k1 uuid, k2 text, v int, PRIMARY KEY ((k1, k2)))")
    session.execute(f"INSERT INTO {ks}.tk (k1, k2, v) VALUES (uuid(), 'drivers', 1)")
    assert len(rows(session, f"SELECT token(k1, k2) FROM {ks}.tk")) == 1
    assert invalid(session, f"SELECT token(k1) FROM {ks}.tk") == (
        "Invalid number of arguments in call to function system.token: 2 required but 1 provided"
    )
    assert invalid(session, f"SELECT token(k1, k2, v) FROM {ks}.tk") == (
        "Invalid number of arguments in call to function system.token: 2 required but 3 provided"
    )
    assert invalid(session, f"SELECT token(k2, k1) FROM {ks}.tk") == (
        "Type error: k2 cannot be passed as argument 0 of function system.token of type uuid"
    )
