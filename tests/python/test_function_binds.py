"""Bind markers inside function arguments: PREPARE types each marker as the function's
argument type (not blob), so the driver serializes the right bytes and the functions see them."""

import datetime
import uuid

import pytest
from cassandra import InvalidRequest

from rgtest import error_text


def marker_types(ps):
    return [c.type.typename for c in ps.column_metadata]


def test_blob_conversions(session, keyspace):
    t = f"{keyspace}.fb"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, b blob, i int)")
    ins = session.prepare(f"INSERT INTO {t} (k, b, i) VALUES (?, textAsBlob(?), blobAsInt(?))")
    assert marker_types(ins) == ["int", "varchar", "blob"]
    assert ins.column_metadata[1].name == "arg0(system.textasblob)"
    session.execute(ins, [1, "héllo", b"\x00\x00\x01\x00"])
    r = session.execute(f"SELECT b, i FROM {t} WHERE k = 1").one()
    assert (r.b, r.i) == ("héllo".encode(), 256)
    ins2 = session.prepare(f"INSERT INTO {t} (k, b) VALUES (?, bigintAsBlob(?))")
    assert marker_types(ins2) == ["int", "bigint"]
    session.execute(ins2, [2, -2])
    assert session.execute(f"SELECT b FROM {t} WHERE k = 2").one().b == b"\xff" * 7 + b"\xfe"
    # a blob that is not an int fails in the function with Cassandra's message
    with pytest.raises(InvalidRequest) as e:
        session.execute(ins, [3, "x", b"\x01"])
    assert "is not a valid binary representation for type int" in error_text(e.value)


def test_time_functions(session, keyspace):
    t = f"{keyspace}.ft"
    session.execute(f"CREATE TABLE {t} (k int, u timeuuid, PRIMARY KEY (k, u))")
    ins = session.prepare(f"INSERT INTO {t} (k, u) VALUES (?, now())")
    for _ in range(3):
        session.execute(ins, [1])
    sel = session.prepare(f"SELECT count(*) FROM {t} WHERE k = ? AND u > minTimeuuid(?) AND u < maxTimeuuid(?)")
    assert marker_types(sel) == ["int", "timestamp", "timestamp"]
    now = datetime.datetime.now(datetime.timezone.utc)
    hour = datetime.timedelta(hours=1)
    assert session.execute(sel, [1, now - hour, now + hour]).one()[0] == 3
    assert session.execute(sel, [1, now + hour, now + 2 * hour]).one()[0] == 0
    conv = session.prepare(f"SELECT k FROM {t} WHERE k = ? AND u = minTimeuuid(?)")
    assert marker_types(conv) == ["int", "timestamp"]


def test_token_of_markers(session, keyspace):
    t = f"{keyspace}.tk"
    session.execute(f"CREATE TABLE {t} (a int, b text, v int, PRIMARY KEY ((a, b)))")
    for i in range(20):
        session.execute(f"INSERT INTO {t} (a, b, v) VALUES ({i}, 'x{i}', {i})")
    sel = session.prepare(f"SELECT a FROM {t} WHERE token(a, b) >= token(?, ?)")
    assert marker_types(sel) == ["int", "varchar"]
    assert [c.name for c in sel.column_metadata] == ["a", "b"]
    all_rows = [r.a for r in session.execute(f"SELECT a, token(a, b) FROM {t}")]
    pivot = all_rows[7]
    got = [r.a for r in session.execute(sel, [pivot, f"x{pivot}"])]
    assert got == all_rows[7:]
    # token() of literals too
    got = [r.a for r in session.execute(f"SELECT a FROM {t} WHERE token(a, b) > token({pivot}, 'x{pivot}')")]
    assert got == all_rows[8:]
    with pytest.raises(InvalidRequest):
        session.execute(f"SELECT a FROM {t} WHERE token(a, b) > token(1)")


def test_markers_in_selections(session, keyspace):
    t = f"{keyspace}.sm"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, i int, ts timestamp)")
    session.execute(f"INSERT INTO {t} (k, i, ts) VALUES (1, 40, '2024-01-01 00:00:00+0000')")
    ps = session.prepare(f"SELECT k, textAsBlob(?), i + (int)?, blobAsBigint(?) FROM {t} WHERE k = ?")
    assert marker_types(ps) == ["varchar", "int", "blob", "int"]
    r = session.execute(ps, ["ab", 2, b"\x00" * 7 + b"\x05", 1]).one()
    assert tuple(r) == (1, b"ab", 42, 5)
    with pytest.raises(InvalidRequest) as e:
        session.prepare(f"SELECT i + ? FROM {t}")
    assert "Ambiguous '+' operation with args i and ?" in error_text(e.value)
