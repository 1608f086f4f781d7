"""A prepared SELECT keeps its bind-independent plan (projection, GROUP BY) from its first
EXECUTE (`src/query/select/shape.rs`), valid only under the schema version it was prepared
under: these check that EXECUTEs before and after ALTER TABLE ADD/DROP and DROP + CREATE of the
same table answer from the table as it is, whether or not the statement is prepared again."""

import pytest
from cassandra import InvalidRequest


def test_prepared_select_follows_add_and_drop_of_columns(session, keyspace):
    t = f"{keyspace}.t"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, v text, w text)")
    session.execute(f"INSERT INTO {t} (k, v, w) VALUES (1, 'v1', 'w1')")
    kv = session.prepare(f"SELECT k, v FROM {t} WHERE k = ?")
    kw = session.prepare(f"SELECT k, w FROM {t} WHERE k = ?")
    for _ in range(3):  # the first EXECUTE keeps the shape, the others use it
        assert list(session.execute(kv, [1])) == [(1, "v1")]
        assert list(session.execute(kw, [1])) == [(1, "w1")]

    session.execute(f"ALTER TABLE {t} ADD x text")
    session.execute(f"UPDATE {t} SET x = 'x1' WHERE k = 1")
    for _ in range(2):
        assert list(session.execute(kv, [1])) == [(1, "v1")]
        assert list(session.execute(kw, [1])) == [(1, "w1")]
    kx = session.prepare(f"SELECT k, x, v FROM {t} WHERE k = ?")
    for _ in range(2):
        assert list(session.execute(kx, [1])) == [(1, "x1", "v1")]

    # Dropped: the kept projection must not read another column in its place.
    session.execute(f"ALTER TABLE {t} DROP w")
    with pytest.raises(InvalidRequest, match="w"):
        session.execute(kw, [1])
    assert list(session.execute(kv, [1])) == [(1, "v1")]
    assert list(session.execute(kx, [1])) == [(1, "x1", "v1")]

    # Added again: a new, empty column (the dropped values stay dropped).
    session.execute(f"ALTER TABLE {t} ADD w text")
    for _ in range(2):
        assert list(session.execute(kw, [1])) == [(1, None)]
    session.execute(f"UPDATE {t} SET w = 'w2' WHERE k = 1")
    assert list(session.execute(kw, [1])) == [(1, "w2")]
    again = session.prepare(f"SELECT k, w FROM {t} WHERE k = ?")
    for _ in range(2):
        assert list(session.execute(again, [1])) == [(1, "w2")]


def test_prepared_select_reads_a_table_dropped_and_created_again(session, keyspace):
    t = f"{keyspace}.t"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, a text, b text)")
    session.execute(f"INSERT INTO {t} (k, a, b) VALUES (1, 'a1', 'b1')")
    kb = session.prepare(f"SELECT k, b FROM {t} WHERE k = ?")
    for _ in range(2):
        assert list(session.execute(kb, [1])) == [(1, "b1")]

    session.execute(f"DROP TABLE {t}")
    with pytest.raises(InvalidRequest):
        session.execute(kb, [1])

    # The same name, columns in another order: b is now the first regular column.
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, b text, z text, a text)")
    assert list(session.execute(kb, [1])) == []
    session.execute(f"INSERT INTO {t} (k, a, b, z) VALUES (1, 'a2', 'b2', 'z2')")
    for _ in range(2):
        assert list(session.execute(kb, [1])) == [(1, "b2")]
    fresh = session.prepare(f"SELECT k, b FROM {t} WHERE k = ?")
    for _ in range(2):
        assert list(session.execute(fresh, [1])) == [(1, "b2")]
