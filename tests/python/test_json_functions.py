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
