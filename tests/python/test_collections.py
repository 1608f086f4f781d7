"""Collections (frozen and non-frozen list/set/map), tuples and UDTs: literals, binds, nesting,
every collection operation with Cassandra's results, DELETE of elements and fields, counters."""

import pytest
from cassandra import InvalidRequest

from rgtest import error_text


def one(session, q, *args):
    row = session.execute(q, args or None).one()
    return None if row is None else row[0]


@pytest.fixture
def ct(session, keyspace):
    t = f"{keyspace}.coll"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, l list<int>, s set<text>, m map<text, int>, "
                    f"fl frozen<list<int>>, fs frozen<set<int>>, fm frozen<map<int, text>>, "
                    f"tu tuple<int, text, boolean>, n frozen<map<text, list<int>>>, ls list<frozen<set<int>>>)")
    return t


def test_whole_values_round_trip(session, ct):
    session.execute(f"INSERT INTO {ct} (k, l, s, m, fl, fs, fm, tu, n, ls) VALUES (1, [3, 1, 3], {{'b', 'a', 'b'}}, "
                    f"{{'x': 1, 'y': 2}}, [5, 4], {{9, 7}}, {{2: 'two', 1: 'one'}}, (1, 'é', true), "
                    f"{{'a': [1, 2], 'b': []}}, [{{1}}, {{2, 3}}])")
    r = session.execute(f"SELECT l, s, m, fl, fs, fm, tu, n, ls FROM {ct} WHERE k = 1").one()
    assert r.l == [3, 1, 3]
    assert list(r.s) == ["a", "b"]
    assert dict(r.m) == {"x": 1, "y": 2}
    assert r.fl == [5, 4]
    assert list(r.fs) == [7, 9]
    assert list(r.fm.items()) == [(1, "one"), (2, "two")]
    assert r.tu == (1, "é", True)
    assert dict(r.n) == {"a": [1, 2], "b": []}
    assert [set(x) for x in r.ls] == [{1}, {2, 3}]
    # bound values
    ins = session.prepare(f"INSERT INTO {ct} (k, l, s, m, tu) VALUES (?, ?, ?, ?, ?)")
    session.execute(ins, [2, [1, 2], {"z"}, {"q": 5}, (None, "x", False)])
    r = session.execute(f"SELECT l, s, m, tu FROM {ct} WHERE k = 2").one()
    assert (r.l, set(r.s), dict(r.m), r.tu) == ([1, 2], {"z"}, {"q": 5}, (None, "x", False))
    # an empty non-frozen collection is null
    session.execute(f"INSERT INTO {ct} (k, l, s, m) VALUES (3, [], {{}}, {{}})")
    r = session.execute(f"SELECT l, s, m FROM {ct} WHERE k = 3").one()
    assert (r.l, r.s, r.m) == (None, None, None)
    # overwrite replaces the whole collection
    session.execute(f"UPDATE {ct} SET l = [7], s = {{'c'}}, m = {{'z': 0}} WHERE k = 1")
    r = session.execute(f"SELECT l, s, m FROM {ct} WHERE k = 1").one()
    assert (r.l, set(r.s), dict(r.m)) == ([7], {"c"}, {"z": 0})


def test_list_operations(session, ct):
    session.execute(f"INSERT INTO {ct} (k, l) VALUES (1, [1, 2, 3])")
    session.execute(f"UPDATE {ct} SET l = l + [4, 5] WHERE k = 1")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 1") == [1, 2, 3, 4, 5]
    session.execute(f"UPDATE {ct} SET l = [0, -1] + l WHERE k = 1")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 1") == [0, -1, 1, 2, 3, 4, 5]
    session.execute(f"UPDATE {ct} SET l = [-2] + l WHERE k = 1")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 1") == [-2, 0, -1, 1, 2, 3, 4, 5]
    session.execute(f"UPDATE {ct} SET l[1] = 10 WHERE k = 1")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 1") == [-2, 10, -1, 1, 2, 3, 4, 5]
    session.execute(f"UPDATE {ct} SET l = l - [1, 5, 99] WHERE k = 1")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 1") == [-2, 10, -1, 2, 3, 4]
    session.execute(f"DELETE l[0] FROM {ct} WHERE k = 1")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 1") == [10, -1, 2, 3, 4]
    session.execute(f"UPDATE {ct} SET l += [6] WHERE k = 1")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 1") == [10, -1, 2, 3, 4, 6]
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"UPDATE {ct} SET l[6] = 1 WHERE k = 1")
    assert "List index 6 out of bound, list has size 6" in error_text(e.value)
    with pytest.raises(InvalidRequest):
        session.execute(f"DELETE l[10] FROM {ct} WHERE k = 1")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 1") == [10, -1, 2, 3, 4, 6]
    # appending to a missing row creates it; removing everything makes it null
    session.execute(f"UPDATE {ct} SET l = l + [1, 1] WHERE k = 2")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 2") == [1, 1]
    session.execute(f"UPDATE {ct} SET l = l - [1] WHERE k = 2")
    assert one(session, f"SELECT l FROM {ct} WHERE k = 2") is None
    # bound
    session.execute(session.prepare(f"UPDATE {ct} SET l = l + ? WHERE k = ?"), [[8, 9], 3])
    session.execute(session.prepare(f"UPDATE {ct} SET l[?] = ? WHERE k = ?"), [0, 7, 3])
    assert one(session, f"SELECT l FROM {ct} WHERE k = 3") == [7, 9]


def test_set_and_map_operations(session, ct):
    session.execute(f"INSERT INTO {ct} (k, s, m) VALUES (1, {{'a'}}, {{'a': 1}})")
    session.execute(f"UPDATE {ct} SET s = s + {{'c', 'b'}}, m = m + {{'b': 2, 'a': 10}} WHERE k = 1")
    r = session.execute(f"SELECT s, m FROM {ct} WHERE k = 1").one()
    assert list(r.s) == ["a", "b", "c"] and list(r.m.items()) == [("a", 10), ("b", 2)]
    session.execute(f"UPDATE {ct} SET s = s - {{'a', 'zz'}}, m = m - {{'b'}} WHERE k = 1")
    r = session.execute(f"SELECT s, m FROM {ct} WHERE k = 1").one()
    assert list(r.s) == ["b", "c"] and dict(r.m) == {"a": 10}
    session.execute(f"UPDATE {ct} SET m['c'] = 3, m['a'] = 11 WHERE k = 1")
    assert dict(one(session, f"SELECT m FROM {ct} WHERE k = 1")) == {"a": 11, "c": 3}
    session.execute(f"DELETE m['a'], s['b'] FROM {ct} WHERE k = 1")
    r = session.execute(f"SELECT s, m FROM {ct} WHERE k = 1").one()
    assert list(r.s) == ["c"] and dict(r.m) == {"c": 3}
    session.execute(f"UPDATE {ct} SET m['c'] = null WHERE k = 1")
    assert one(session, f"SELECT m FROM {ct} WHERE k = 1") is None
    session.execute(f"DELETE s FROM {ct} WHERE k = 1")
    assert one(session, f"SELECT s FROM {ct} WHERE k = 1") is None
    # per-element timestamps: an older write of one element does not win over a newer one
    session.execute(f"UPDATE {ct} USING TIMESTAMP 100 SET m['x'] = 1 WHERE k = 5")
    session.execute(f"UPDATE {ct} USING TIMESTAMP 300 SET m['y'] = 3 WHERE k = 5")
    session.execute(f"UPDATE {ct} USING TIMESTAMP 200 SET m = {{'z': 2}} WHERE k = 5")
    assert dict(one(session, f"SELECT m FROM {ct} WHERE k = 5")) == {"y": 3, "z": 2}
    session.execute(f"UPDATE {ct} USING TIMESTAMP 150 SET m['z'] = 0 WHERE k = 5")
    assert dict(one(session, f"SELECT m FROM {ct} WHERE k = 5")) == {"y": 3, "z": 2}


def test_invalid_collection_operations(session, ct):
    session.execute(f"INSERT INTO {ct} (k, fl, l) VALUES (1, [1], [1])")
    for q in (f"UPDATE {ct} SET fl = fl + [2] WHERE k = 1",
              f"UPDATE {ct} SET fl[0] = 2 WHERE k = 1",
              f"UPDATE {ct} SET s = [1] + s WHERE k = 1",
              f"UPDATE {ct} SET l = l + {{1}} WHERE k = 1",
              f"UPDATE {ct} SET l = [null] WHERE k = 1",
              f"UPDATE {ct} SET m = {{'a': 'b'}} WHERE k = 1"):
        with pytest.raises(InvalidRequest):
            session.execute(q)
    r = session.execute(f"SELECT fl, l FROM {ct} WHERE k = 1").one()
    assert (r.fl, r.l) == ([1], [1])


def test_udts(session, keyspace):
    session.execute(f"CREATE TYPE {keyspace}.addr (street text, zip int)")
    t = f"{keyspace}.people"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, a addr, fa frozen<addr>, la list<frozen<addr>>)")
    session.execute(f"INSERT INTO {t} (k, a, fa, la) VALUES (1, {{street: 'Main', zip: 5}}, {{zip: 7}}, "
                    f"[{{street: 'x', zip: 1}}])")
    r = session.execute(f"SELECT a, fa, la FROM {t} WHERE k = 1").one()
    assert (r.a.street, r.a.zip) == ("Main", 5)
    assert (r.fa.street, r.fa.zip) == (None, 7)
    assert (r.la[0].street, r.la[0].zip) == ("x", 1)
    session.execute(f"UPDATE {t} SET a.zip = 6 WHERE k = 1")
    r = session.execute(f"SELECT a FROM {t} WHERE k = 1").one()
    assert (r.a.street, r.a.zip) == ("Main", 6)
    session.execute(f"DELETE a.street FROM {t} WHERE k = 1")
    r = session.execute(f"SELECT a FROM {t} WHERE k = 1").one()
    assert (r.a.street, r.a.zip) == (None, 6)
    with pytest.raises(InvalidRequest):
        session.execute(f"UPDATE {t} SET fa.zip = 1 WHERE k = 1")
    with pytest.raises(InvalidRequest):
        session.execute(f"UPDATE {t} SET a.nope = 1 WHERE k = 1")


def test_counters(session, keyspace):
    t = f"{keyspace}.cnt"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, c counter, d counter)")
    session.execute(f"UPDATE {t} SET c = c + 1 WHERE k = 1")
    session.execute(f"UPDATE {t} SET c = c + 5, d = d - 2 WHERE k = 1")
    session.execute(f"UPDATE {t} SET c -= 1 WHERE k = 1")
    r = session.execute(f"SELECT c, d FROM {t} WHERE k = 1").one()
    assert (r.c, r.d) == (5, -2)
    session.execute(session.prepare(f"UPDATE {t} SET c = c + ? WHERE k = ?"), [10, 1])
    assert one(session, f"SELECT c FROM {t} WHERE k = 1") == 15
    for q, frag in ((f"INSERT INTO {t} (k, c) VALUES (2, 1)", "INSERT statements are not allowed on counter tables"),
                    (f"UPDATE {t} SET c = 1 WHERE k = 1", "Cannot set the value of counter column c"),
                    (f"UPDATE {t} USING TTL 10 SET c = c + 1 WHERE k = 1", "Cannot provide custom TTL for counter updates")):
        with pytest.raises(InvalidRequest) as e:
            session.execute(q)
        assert frag in error_text(e.value), error_text(e.value)
    with pytest.raises(InvalidRequest):
        session.execute(f"CREATE TABLE {keyspace}.mixed (k int PRIMARY KEY, c counter, v int)")
    assert one(session, f"SELECT c FROM {t} WHERE k = 1") == 15
