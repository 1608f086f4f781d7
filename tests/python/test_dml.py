"""INSERT/UPDATE/DELETE/SELECT through the Python driver: keys, ranges, LIMIT, token order,
prepared statements and their routing metadata, paging, and value types."""

import datetime
import math
import struct
import uuid

from cassandra.concurrent import execute_concurrent_with_args
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement

from rgtest import composite_routing_key, int_bytes


def test_insert_update_delete_by_primary_key(session, keyspace):
    t = f"{keyspace}.iud"
    session.execute(f"CREATE TABLE {t} (pk int, c int, v text, n int, PRIMARY KEY (pk, c))")
    session.execute(f"INSERT INTO {t} (pk, c, v, n) VALUES (1, 1, 'a', 10)")
    session.execute(f"INSERT INTO {t} (pk, c, v, n) VALUES (1, 2, 'b', 20)")
    assert session.execute(f"SELECT v, n FROM {t} WHERE pk = 1 AND c = 1").one() == ("a", 10)

    # INSERT of an existing key overwrites only the given columns (upsert)
    session.execute(f"INSERT INTO {t} (pk, c, v) VALUES (1, 1, 'a2')")
    assert session.execute(f"SELECT v, n FROM {t} WHERE pk = 1 AND c = 1").one() == ("a2", 10)

    session.execute(f"UPDATE {t} SET v = 'b2', n = 21 WHERE pk = 1 AND c = 2")
    assert session.execute(f"SELECT v, n FROM {t} WHERE pk = 1 AND c = 2").one() == ("b2", 21)
    # UPDATE of a missing row creates it (upsert)
    session.execute(f"UPDATE {t} SET v = 'new' WHERE pk = 2 AND c = 7")
    assert session.execute(f"SELECT pk, c, v, n FROM {t} WHERE pk = 2 AND c = 7").one() == (2, 7, "new", None)

    session.execute(f"DELETE FROM {t} WHERE pk = 1 AND c = 1")
    assert session.execute(f"SELECT * FROM {t} WHERE pk = 1 AND c = 1").one() is None
    assert [tuple(r) for r in session.execute(f"SELECT c, v FROM {t} WHERE pk = 1")] == [(2, "b2")]
    # deleting a row that does not exist is fine
    session.execute(f"DELETE FROM {t} WHERE pk = 9 AND c = 9")
    # a deleted row can be written again
    session.execute(f"INSERT INTO {t} (pk, c, v) VALUES (1, 1, 'again')")
    assert session.execute(f"SELECT v, n FROM {t} WHERE pk = 1 AND c = 1").one() == ("again", None)


def test_select_star_and_column_lists(session, keyspace):
    t = f"{keyspace}.cols"
    session.execute(f"CREATE TABLE {t} (pk int, c int, b text, a text, PRIMARY KEY (pk, c))")
    session.execute(f"INSERT INTO {t} (pk, c, a, b) VALUES (1, 2, 'A', 'B')")
    rs = session.execute(f"SELECT * FROM {t}")
    # SELECT * order: partition key, clustering columns, then the other columns by name
    assert rs.column_names == ["pk", "c", "a", "b"]
    assert [tuple(r) for r in rs] == [(1, 2, "A", "B")]
    rs = session.execute(f"SELECT b, pk FROM {t} WHERE pk = 1")
    assert rs.column_names == ["b", "pk"]
    assert [tuple(r) for r in rs] == [("B", 1)]
    # a missing row
    assert session.execute(f"SELECT * FROM {t} WHERE pk = 2").one() is None


def test_partition_key_equality_and_in(session, keyspace):
    t = f"{keyspace}.pkin"
    session.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
    for i in range(10):
        session.execute(f"INSERT INTO {t} (id, v) VALUES ({i}, 'v{i}')")
    assert session.execute(f"SELECT v FROM {t} WHERE id = 4").one().v == "v4"
    assert sorted(tuple(r) for r in session.execute(f"SELECT id, v FROM {t} WHERE id IN (1, 3, 5, 42)")) == \
        [(1, "v1"), (3, "v3"), (5, "v5")]
    prepared = session.prepare(f"SELECT id FROM {t} WHERE id IN ?")
    assert sorted(r.id for r in session.execute(prepared, ([0, 9, 77],))) == [0, 9]

    c = f"{keyspace}.pkin2"
    session.execute(f"CREATE TABLE {c} (p1 text, p2 int, c int, v text, PRIMARY KEY ((p1, p2), c))")
    for p1 in ("a", "b"):
        for p2 in (1, 2, 3):
            session.execute(f"INSERT INTO {c} (p1, p2, c, v) VALUES ('{p1}', {p2}, 0, '{p1}{p2}')")
    assert session.execute(f"SELECT v FROM {c} WHERE p1 = 'b' AND p2 = 2").one().v == "b2"
    assert sorted(r.v for r in session.execute(f"SELECT v FROM {c} WHERE p1 = 'a' AND p2 IN (1, 3)")) == ["a1", "a3"]


def test_clustering_equality_and_ranges(session, keyspace):
    t = f"{keyspace}.rng"
    session.execute(f"CREATE TABLE {t} (pk int, c int, v int, PRIMARY KEY (pk, c))")
    ins = session.prepare(f"INSERT INTO {t} (pk, c, v) VALUES (?, ?, ?)")
    execute_concurrent_with_args(session, ins, [(p, c, p * 100 + c) for p in (1, 2) for c in range(20)])

    def cs(where):
        return [r.c for r in session.execute(f"SELECT c FROM {t} WHERE pk = 1 AND {where}")]

    assert [r.c for r in session.execute(f"SELECT c FROM {t} WHERE pk = 1")] == list(range(20))
    assert cs("c = 5") == [5]
    assert cs("c > 5 AND c <= 10") == [6, 7, 8, 9, 10]
    assert cs("c >= 15") == [15, 16, 17, 18, 19]
    assert cs("c < 3") == [0, 1, 2]
    assert cs("c > 7 AND c < 8") == []
    assert cs("c IN (3, 1, 17)") == [1, 3, 17]

    m = f"{keyspace}.rng2"
    session.execute(f"CREATE TABLE {m} (pk int, c1 int, c2 text, PRIMARY KEY (pk, c1, c2))")
    for c1 in range(3):
        for c2 in ("a", "b", "c", "d"):
            session.execute(f"INSERT INTO {m} (pk, c1, c2) VALUES (1, {c1}, '{c2}')")
    rows = [tuple(r) for r in session.execute(f"SELECT c1, c2 FROM {m} WHERE pk = 1 AND c1 = 1 AND c2 > 'b'")]
    assert rows == [(1, "c"), (1, "d")]
    rows = [tuple(r) for r in session.execute(f"SELECT c1, c2 FROM {m} WHERE pk = 1 AND c1 >= 1")]
    assert rows == [(c1, c2) for c1 in (1, 2) for c2 in "abcd"]


def test_clustering_order_desc(session, keyspace):
    t = f"{keyspace}.desc_t"
    session.execute(f"CREATE TABLE {t} (pk int, c int, v text, PRIMARY KEY (pk, c)) WITH CLUSTERING ORDER BY (c DESC)")
    for c in (3, 1, 4, 0, 2):
        session.execute(f"INSERT INTO {t} (pk, c, v) VALUES (1, {c}, 'x')")
    assert [r.c for r in session.execute(f"SELECT c FROM {t} WHERE pk = 1")] == [4, 3, 2, 1, 0]
    assert [r.c for r in session.execute(f"SELECT c FROM {t} WHERE pk = 1 AND c >= 2")] == [4, 3, 2]
    assert [r.c for r in session.execute(f"SELECT c FROM {t} WHERE pk = 1 LIMIT 2")] == [4, 3]


def test_limit(session, keyspace):
    t = f"{keyspace}.lim"
    session.execute(f"CREATE TABLE {t} (pk int, c int, PRIMARY KEY (pk, c))")
    for p in range(4):
        for c in range(10):
            session.execute(f"INSERT INTO {t} (pk, c) VALUES ({p}, {c})")
    assert [r.c for r in session.execute(f"SELECT c FROM {t} WHERE pk = 2 LIMIT 5")] == [0, 1, 2, 3, 4]
    assert len(list(session.execute(f"SELECT * FROM {t} LIMIT 3"))) == 3
    assert len(list(session.execute(f"SELECT * FROM {t} LIMIT 100"))) == 40
    assert [r.c for r in session.execute(f"SELECT c FROM {t} WHERE pk = 2 AND c > 6 LIMIT 2")] == [7, 8]
    # LIMIT bigger than a page: the limit holds across pages
    rs = session.execute(SimpleStatement(f"SELECT * FROM {t} LIMIT 25", fetch_size=4))
    assert len(list(rs)) == 25


def test_full_scan_is_in_token_order(session, keyspace):
    t = f"{keyspace}.scan"
    session.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
    ins = session.prepare(f"INSERT INTO {t} (id, v) VALUES (?, ?)")
    ids = list(range(-150, 150))
    execute_concurrent_with_args(session, ins, [(i, i * 2) for i in ids])
    rows = list(session.execute(f"SELECT token(id), id, v FROM {t}"))
    assert sorted(r.id for r in rows) == ids
    tokens = [r[0] for r in rows]
    assert tokens == sorted(tokens), "a full scan must return partitions in token order"
    for r in rows:
        assert r[0] == Murmur3Token.hash_fn(int_bytes(r.id))
        assert r.v == r.id * 2
    # SELECT * without token() gives the same order
    assert [r.id for r in session.execute(f"SELECT * FROM {t}")] == [r.id for r in rows]


def test_prepared_positional_and_named_markers(session, keyspace):
    t = f"{keyspace}.prep"
    session.execute(f"CREATE TABLE {t} (pk int, c text, v double, PRIMARY KEY (pk, c))")
    ins = session.prepare(f"INSERT INTO {t} (pk, c, v) VALUES (?, ?, ?)")
    assert [col.name for col in ins.column_metadata] == ["pk", "c", "v"]
    session.execute(ins, (1, "a", 1.5))
    session.execute(ins, [1, "b", 2.5])

    named_ins = session.prepare(f"INSERT INTO {t} (pk, c, v) VALUES (:key, :cl, :val)")
    assert [col.name for col in named_ins.column_metadata] == ["key", "cl", "val"]
    session.execute(named_ins, {"val": 3.5, "key": 2, "cl": "z"})

    sel = session.prepare(f"SELECT c, v FROM {t} WHERE pk = :pk AND c = :c")
    assert [col.name for col in sel.column_metadata] == ["pk", "c"]
    assert tuple(session.execute(sel, {"pk": 1, "c": "b"}).one()) == ("b", 2.5)
    assert tuple(session.execute(sel, {"c": "z", "pk": 2}).one()) == ("z", 3.5)

    sel_pos = session.prepare(f"SELECT c FROM {t} WHERE pk = ?")
    assert [r.c for r in session.execute(sel_pos, (1,))] == ["a", "b"]
    # re-preparing the same text gives the same statement id
    assert session.prepare(f"SELECT c FROM {t} WHERE pk = ?").query_id == sel_pos.query_id
    # UPDATE and DELETE prepared too
    upd = session.prepare(f"UPDATE {t} SET v = ? WHERE pk = ? AND c = ?")
    session.execute(upd, (9.25, 1, "a"))
    assert session.execute(sel, (1, "a")).one().v == 9.25
    dele = session.prepare(f"DELETE FROM {t} WHERE pk = ? AND c = ?")
    session.execute(dele, (1, "a"))
    assert session.execute(sel, (1, "a")).one() is None


def test_prepared_routing_key_indexes(cluster_factory, session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.r1 (pk int, c int, v text, PRIMARY KEY (pk, c))")
    session.execute(f"CREATE TABLE {keyspace}.r2 (p1 text, p2 int, c1 int, v text, PRIMARY KEY ((p1, p2), c1))")

    # With schema metadata turned off the driver cannot derive the routing key from table
    # metadata: routing_key_indexes can only come from the pk indexes in the server's
    # PREPARED result (what token-aware routing relies on).
    c = cluster_factory(schema_metadata_enabled=False)
    s = c.connect()
    cases = [
        (f"INSERT INTO {keyspace}.r1 (pk, c, v) VALUES (?, ?, ?)", [0]),
        (f"INSERT INTO {keyspace}.r1 (v, c, pk) VALUES (?, ?, ?)", [2]),
        (f"SELECT * FROM {keyspace}.r1 WHERE pk = ? AND c = ?", [0]),
        (f"UPDATE {keyspace}.r1 SET v = ? WHERE pk = ? AND c = ?", [1]),
        (f"DELETE FROM {keyspace}.r1 WHERE pk = ? AND c = ?", [0]),
        (f"INSERT INTO {keyspace}.r2 (p1, p2, c1, v) VALUES (?, ?, ?, ?)", [0, 1]),
        (f"INSERT INTO {keyspace}.r2 (c1, p2, v, p1) VALUES (?, ?, ?, ?)", [3, 1]),
        (f"SELECT v FROM {keyspace}.r2 WHERE p1 = ? AND p2 = ? AND c1 = ?", [0, 1]),
        (f"SELECT v FROM {keyspace}.r2 WHERE p2 = :b AND p1 = :a", [1, 0]),
    ]
    for query, expected in cases:
        p = s.prepare(query)
        assert p.routing_key_indexes is not None, f"no routing key for: {query}"
        assert list(p.routing_key_indexes) == expected, query

    # the routing key the driver builds hashes to the token the server computes
    p = s.prepare(f"INSERT INTO {keyspace}.r2 (c1, p2, v, p1) VALUES (?, ?, ?, ?)")
    bound = p.bind((5, 42, "v", "héllo"))
    assert bound.routing_key == composite_routing_key("héllo".encode(), int_bytes(42))
    s.execute(bound)
    tok = s.execute(f"SELECT token(p1, p2) FROM {keyspace}.r2 WHERE p1 = 'héllo' AND p2 = 42").one()[0]
    assert tok == Murmur3Token.hash_fn(bound.routing_key)

    # and with the default (metadata-enabled) driver the answer is the same
    assert list(session.prepare(f"INSERT INTO {keyspace}.r2 (c1, p2, v, p1) VALUES (?, ?, ?, ?)")
                .routing_key_indexes) == [3, 1]


def _pages(session, statement, params=None):
    """All pages of a query, fetched one by one, as lists of tuples."""
    rs = session.execute(statement, params)
    pages = [[tuple(r) for r in rs.current_rows]]
    while rs.has_more_pages:
        rs.fetch_next_page()
        pages.append([tuple(r) for r in rs.current_rows])
    return pages


def test_paging_full_scan(session, keyspace):
    t = f"{keyspace}.paged"
    session.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
    ins = session.prepare(f"INSERT INTO {t} (id, v) VALUES (?, ?)")
    execute_concurrent_with_args(session, ins, [(i, f"v{i}") for i in range(1000)])

    unpaged = [tuple(r) for r in session.execute(SimpleStatement(f"SELECT id, v FROM {t}", fetch_size=None))]
    assert len(unpaged) == 1000
    assert sorted(r[0] for r in unpaged) == list(range(1000))

    pages = _pages(session, SimpleStatement(f"SELECT id, v FROM {t}", fetch_size=7))
    assert all(len(p) <= 7 for p in pages), [len(p) for p in pages]
    assert sum(len(p) for p in pages) == 1000
    assert len(pages) >= math.ceil(1000 / 7)
    assert [r for p in pages for r in p] == unpaged

    # automatic paging through the ResultSet iterator, and a prepared statement
    assert [tuple(r) for r in session.execute(SimpleStatement(f"SELECT id, v FROM {t}", fetch_size=7))] == unpaged
    prepared = session.prepare(f"SELECT id, v FROM {t}")
    prepared.fetch_size = 7
    assert [tuple(r) for r in session.execute(prepared)] == unpaged


def test_paging_within_a_partition(session, keyspace):
    t = f"{keyspace}.paged2"
    session.execute(f"CREATE TABLE {t} (pk int, c int, v text, PRIMARY KEY (pk, c))")
    ins = session.prepare(f"INSERT INTO {t} (pk, c, v) VALUES (?, ?, ?)")
    execute_concurrent_with_args(session, ins, [(p, c, f"{p}:{c}") for p in (1, 2) for c in range(1000)])
    query = f"SELECT c, v FROM {t} WHERE pk = ?"
    # simple statements take %s placeholders (the driver interpolates them client-side)
    simple = f"SELECT c, v FROM {t} WHERE pk = %s"
    unpaged = [tuple(r) for r in session.execute(SimpleStatement(simple, fetch_size=None), (1,))]
    assert unpaged == [(c, f"1:{c}") for c in range(1000)]
    pages = _pages(session, SimpleStatement(simple, fetch_size=7), (1,))
    assert all(len(p) <= 7 for p in pages)
    assert [r for p in pages for r in p] == unpaged

    # resume from a saved paging state in a new request (stateless paging)
    prepared = session.prepare(query)
    prepared.fetch_size = 7
    first = session.execute(prepared, (1,))
    got = [tuple(r) for r in first.current_rows]
    state = first.paging_state
    assert state is not None
    rest = session.execute(prepared, (1,), paging_state=state)
    got += [tuple(r) for r in rest]
    assert got == unpaged


TYPES_DDL = ("k int PRIMARY KEY, i int, bi bigint, t text, a ascii, b blob, bo boolean, u uuid, tu timeuuid, "
             "ts timestamp, d double, f float")
TYPE_COLUMNS = ["k", "i", "bi", "t", "a", "b", "bo", "u", "tu", "ts", "d", "f"]


def _type_rows():
    return [
        (1, 0, 0, "plain", "ascii text", b"\x00\x01\x02\xff", True, uuid.UUID("5b6962dd-3f90-4c93-8f61-eabfa4a803e2"),
         uuid.UUID("fe2b4360-28c6-11e2-81c1-0800200c9a66"), datetime.datetime(2021, 3, 4, 5, 6, 7, 123000),
         3.141592653589793, 2.5),
        (2, -2**31, -2**63, "héllo wörld ☃ 日本語 🙂", "~!@#$%^&*()_+", b"", False, uuid.uuid4(), uuid.uuid1(),
         datetime.datetime(1960, 1, 1, 0, 0, 0, 1000), -1e300, -0.15625),
        (3, 2**31 - 1, 2**63 - 1, "", "", bytes(range(256)), True, uuid.uuid4(), uuid.uuid1(),
         datetime.datetime(1970, 1, 1), 5e-324, 3.4028234663852886e38),
        (4, None, None, None, None, None, None, None, None, None, None, None),
        (5, 7, 7, "it's", "q'uote", b"x" * 1000, False, uuid.UUID(int=0), uuid.uuid1(),
         datetime.datetime(2038, 1, 19, 3, 14, 8, 999000), float("inf"), float("-inf")),
    ]


def _assert_rows_equal(got, expected):
    for g, e in zip(got, expected):
        for name, gv, ev in zip(TYPE_COLUMNS, g, e):
            assert gv == ev, f"column {name}: got {gv!r}, expected {ev!r}"
            if ev is not None:
                assert type(gv) is type(ev), f"column {name}: got {type(gv)}, expected {type(ev)}"
    assert len(got) == len(expected)


def test_types_round_trip_prepared(session, keyspace):
    t = f"{keyspace}.types_p"
    session.execute(f"CREATE TABLE {t} ({TYPES_DDL})")
    ins = session.prepare(f"INSERT INTO {t} ({', '.join(TYPE_COLUMNS)}) VALUES ({', '.join('?' * len(TYPE_COLUMNS))})")
    rows = _type_rows()
    for r in rows:
        session.execute(ins, r)
    sel = session.prepare(f"SELECT {', '.join(TYPE_COLUMNS)} FROM {t} WHERE k = ?")
    got = [tuple(session.execute(sel, (r[0],)).one()) for r in rows]
    _assert_rows_equal(got, rows)
    # the same through an unprepared SELECT *
    star = {r.k: r for r in session.execute(f"SELECT * FROM {t}")}
    _assert_rows_equal([tuple(getattr(star[r[0]], c) for c in TYPE_COLUMNS) for r in rows], rows)


def test_types_round_trip_literals(session, keyspace):
    t = f"{keyspace}.types_l"
    session.execute(f"CREATE TABLE {t} ({TYPES_DDL})")
    session.execute(
        f"INSERT INTO {t} ({', '.join(TYPE_COLUMNS)}) VALUES (1, -42, 9223372036854775807, 'héllo ☃ it''s', "
        f"'ascii', 0xcafe00ff, true, 5b6962dd-3f90-4c93-8f61-eabfa4a803e2, fe2b4360-28c6-11e2-81c1-0800200c9a66, "
        f"'2020-01-02 03:04:05.678+0000', 1.25e10, -2.5)")
    session.execute(
        f"INSERT INTO {t} (k, i, bi, t, a, b, bo, ts, d, f) VALUES (2, 2147483647, -9223372036854775808, '', '', 0x, "
        f"false, 1700000000000, -0.5, 0.0)")
    got = [tuple(session.execute(f"SELECT {', '.join(TYPE_COLUMNS)} FROM {t} WHERE k = {k}").one()) for k in (1, 2)]
    expected = [
        (1, -42, 9223372036854775807, "héllo ☃ it's", "ascii", b"\xca\xfe\x00\xff", True,
         uuid.UUID("5b6962dd-3f90-4c93-8f61-eabfa4a803e2"), uuid.UUID("fe2b4360-28c6-11e2-81c1-0800200c9a66"),
         datetime.datetime(2020, 1, 2, 3, 4, 5, 678000), 1.25e10, -2.5),
        (2, 2147483647, -9223372036854775808, "", "", b"", False, None, None,
         datetime.datetime.fromtimestamp(1700000000, datetime.timezone.utc).replace(tzinfo=None), -0.5, 0.0),
    ]
    _assert_rows_equal(got, expected)


def test_text_partition_keys_non_ascii(session, keyspace):
    t = f"{keyspace}.txt"
    session.execute(f"CREATE TABLE {t} (k text PRIMARY KEY, n int)")
    keys = ["a", "é", "日本語", "🙂🙃", "ÿ" * 17, "mixed ascii and ü"]
    ins = session.prepare(f"INSERT INTO {t} (k, n) VALUES (?, ?)")
    for i, k in enumerate(keys):
        session.execute(ins, (k, i))
    sel = session.prepare(f"SELECT n, token(k) FROM {t} WHERE k = ?")
    for i, k in enumerate(keys):
        row = session.execute(sel, (k,)).one()
        assert row[0] == i
        assert row[1] == Murmur3Token.hash_fn(k.encode("utf-8"))


def test_float_is_32_bit(session, keyspace):
    t = f"{keyspace}.flt"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, f float)")
    session.execute(session.prepare(f"INSERT INTO {t} (k, f) VALUES (?, ?)"), (1, 0.1))
    got = session.execute(f"SELECT f FROM {t} WHERE k = 1").one().f
    assert got == struct.unpack(">f", struct.pack(">f", 0.1))[0]
    assert got != 0.1
