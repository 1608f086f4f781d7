"""SELECT JSON, INSERT JSON (DEFAULT NULL / UNSET), and CQL functions on values."""

import json

import pytest
from cassandra import InvalidRequest

from rgtest import error_text


def test_select_json_and_insert_json(session, keyspace):
    t = f"{keyspace}.js"
    session.execute(f'CREATE TABLE {t} (k int PRIMARY KEY, v text, l list<int>, m map<text, int>, "Big" bigint, '
                    f'ts timestamp, u uuid)')
    session.execute(f"INSERT INTO {t} JSON '{{\"k\": 1, \"v\": \"héllo\", \"l\": [1, 2], \"m\": {{\"a\": 1}}, "
                    f"\"\\\"Big\\\"\": 9007199254740993, \"ts\": \"2011-02-03 04:05:00.000Z\", "
                    f"\"u\": \"123e4567-e89b-42d3-a456-556642440000\"}}'")
    r = session.execute(f'SELECT k, v, l, m, "Big", ts, u FROM {t} WHERE k = 1').one()
    assert (r.k, r.v, r.l, dict(r.m), r.Big) == (1, "héllo", [1, 2], {"a": 1}, 9007199254740993)
    got = session.execute(f"SELECT JSON k, v, l, m, \"Big\" FROM {t} WHERE k = 1").one()
    assert got._fields == ("json",) or got._fields == ("[json]",) or len(got) == 1
    doc = json.loads(got[0])
    assert doc == {"k": 1, "v": "héllo", "l": [1, 2], "m": {"a": 1}, '"Big"': 9007199254740993}
    star = json.loads(session.execute(f"SELECT JSON * FROM {t} WHERE k = 1").one()[0])
    assert star["ts"] == "2011-02-03 04:05:00.000Z"
    assert star["u"] == "123e4567-e89b-42d3-a456-556642440000"
    # DEFAULT NULL (the default) nulls missing columns; DEFAULT UNSET leaves them alone
    session.execute(f"INSERT INTO {t} JSON '{{\"k\": 1, \"v\": \"x\"}}' DEFAULT UNSET")
    r = session.execute(f"SELECT v, l FROM {t} WHERE k = 1").one()
    assert (r.v, r.l) == ("x", [1, 2])
    session.execute(f"INSERT INTO {t} JSON '{{\"k\": 1, \"v\": \"y\"}}'")
    r = session.execute(f"SELECT v, l FROM {t} WHERE k = 1").one()
    assert (r.v, r.l) == ("y", None)
    # bound JSON
    session.execute(session.prepare(f"INSERT INTO {t} JSON ?"), ['{"k": 2, "v": null}'])
    assert session.execute(f"SELECT k, v FROM {t} WHERE k = 2").one() == (2, None)
    for bad, frag in (('{"k": 3, "nope": 1}', "JSON values map contains unrecognized column: nope"),
                      ('{"k": "x"}', "Error decoding JSON value for k"),
                      ('[1]', "Could not decode JSON string as a map")):
        with pytest.raises(InvalidRequest) as e:
            session.execute(session.prepare(f"INSERT INTO {t} JSON ?"), [bad])
        assert frag in error_text(e.value), error_text(e.value)
    assert session.execute(f"SELECT k FROM {t} WHERE k = 3").one() is None


def test_functions_in_terms_and_selectors(session, keyspace):
    import datetime
    import uuid
    from cassandra.util import Date
    t = f"{keyspace}.fn"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, i int, b blob, ts timestamp, d date, tu timeuuid, "
                    f"t text, m map<text, int>, s set<int>, f double)")
    session.execute(f"INSERT INTO {t} (k, i, b, ts, d, tu, t, m, s, f) VALUES (1, blobAsInt(0x0000002a), intAsBlob(7), "
                    f"'2011-02-03 04:05:06.789+0000', toDate('2011-02-03 04:05:00+0000'), "
                    f"50554d6e-29bb-11e5-b345-feff819cdc9f, 'héllo', {{'a': 1, 'b': 2}}, {{3, 4}}, 2.5)")
    r = session.execute(f"SELECT i, b, d FROM {t} WHERE k = 1").one()
    assert (r.i, r.b, r.d) == (42, b"\x00\x00\x00\x07", Date(datetime.date(2011, 2, 3)))
    r = session.execute(f"SELECT toDate(ts), toUnixTimestamp(ts), toTimestamp(d), intAsBlob(i), blobAsInt(b), "
                        f"dateOf(tu), unixTimestampOf(tu), toDate(tu) FROM {t} WHERE k = 1").one()
    assert r[0] == Date(datetime.date(2011, 2, 3))
    assert r[1] == 1296705906789
    assert r[2] == datetime.datetime(2011, 2, 3)
    assert r[3] == b"\x00\x00\x00\x2a" and r[4] == 7
    tu = uuid.UUID("50554d6e-29bb-11e5-b345-feff819cdc9f")
    ms = (tu.time - 0x01B21DD213814000) // 10000
    assert r[6] == ms and r[5] == datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    rs = session.execute(f"SELECT CAST(i AS text), CAST(i AS double), CAST(f AS int), CAST(i AS bigint), "
                         f"CAST(ts AS date), m['b'], s[4], s[5] FROM {t} WHERE k = 1")
    assert rs.column_names[0] == "cast(i as text)"
    assert tuple(rs.one()) == ("42", 42.0, 2, 42, Date(datetime.date(2011, 2, 3)), 2, 4, None)
    # minTimeuuid / maxTimeuuid bound a timeuuid range
    c = f"{keyspace}.tus"
    session.execute(f"CREATE TABLE {c} (p int, tu timeuuid, PRIMARY KEY (p, tu))")
    session.execute(f"INSERT INTO {c} (p, tu) VALUES (0, 50554d6e-29bb-11e5-b345-feff819cdc9f)")
    got = session.execute(f"SELECT tu FROM {c} WHERE p = 0 AND tu > minTimeuuid('2015-07-14 00:00+0000') "
                          f"AND tu < maxTimeuuid('2015-07-17 00:00+0000')").all()
    assert [x.tu for x in got] == [tu]
    assert session.execute(f"SELECT tu FROM {c} WHERE p = 0 AND tu > maxTimeuuid('2015-07-17 00:00+0000')").all() == []
    # errors
    for q, frag in ((f"INSERT INTO {t} (k, i) VALUES (2, blobAsInt(0x01))", "is not a valid binary representation for type int"),
                    (f"INSERT INTO {t} (k, i) VALUES (2, toDate('2011-02-03'))", "Type error"),
                    (f"SELECT nosuch(i) FROM {t}", "Unknown function")):
        with pytest.raises(InvalidRequest) as e:
            session.execute(q)
        assert frag in error_text(e.value), error_text(e.value)
    assert session.execute(f"SELECT k FROM {t} WHERE k = 2").one() is None
