"""vector<T, n> (Cassandra 5.0): literals and binds round-trip through the Python driver,
fixed-size elements are packed without length prefixes and variable-size ones are prefixed with
an unsigned vint (checked on the wire bytes), wrong dimensions and element types are rejected
with Cassandra's messages, system_schema and DESCRIBE show the type, cqlsh prints vectors."""

import struct

import pytest
from cassandra import InvalidRequest

from rgtest import error_text


@pytest.fixture
def vt(session, keyspace):
    t = f"{keyspace}.vec"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, f vector<float, 3>, t vector<text, 2>, "
                    f"i vector<int, 2>, n vector<frozen<list<int>>, 2>, vv vector<vector<float, 2>, 2>)")
    return t


def test_round_trip_literals_and_binds(session, vt):
    session.execute(f"INSERT INTO {vt} (k, f, t, i, n) VALUES (1, [1.0, -2.5, 3e2], ['a', 'bé'], "
                    f"[-2147483648, 2147483647], [[1], []])")
    r = session.execute(f"SELECT f, t, i, n FROM {vt} WHERE k = 1").one()
    assert r.f == [1.0, -2.5, 300.0]
    assert r.t == ["a", "bé"]
    assert r.i == [-2**31, 2**31 - 1]
    assert r.n == [[1], []]
    ins = session.prepare(f"INSERT INTO {vt} (k, f, t) VALUES (?, ?, ?)")
    assert ins.column_metadata[1].type.cql_parameterized_type().endswith("VectorType<float, 3>")
    session.execute(ins, [2, [0.5, 0.25, -0.125], ["", "x" * 300]])
    r = session.execute(f"SELECT f, t FROM {vt} WHERE k = 2").one()
    assert (r.f, r.t) == ([0.5, 0.25, -0.125], ["", "x" * 300])
    # a vector of fixed-size vectors is fixed-size itself: 2 x 2 floats packed in 16 bytes
    session.execute(f"INSERT INTO {vt} (k, vv) VALUES (5, [[1.0, 2.0], [3.0, 4.0]])")
    assert session.execute(f"SELECT vv FROM {vt} WHERE k = 5").one().vv == [[1.0, 2.0], [3.0, 4.0]]
    ins3 = session.prepare(f"INSERT INTO {vt} (k, vv) VALUES (?, ?)")
    b = ins3.bind([6, [[0.0, 0.0], [0.0, 0.0]]])
    b.values[1] = struct.pack(">4f", 5, 6, 7, 8)
    session.execute(b)
    assert session.execute(f"SELECT vv FROM {vt} WHERE k = 6").one().vv == [[5.0, 6.0], [7.0, 8.0]]
    # element binds inside a literal
    ins2 = session.prepare(f"INSERT INTO {vt} (k, f) VALUES (?, [?, 2.0, ?])")
    assert [c.type.typename for c in ins2.column_metadata] == ["int", "float", "float"]
    session.execute(ins2, [3, 1.0, 3.0])
    assert session.execute(f"SELECT f FROM {vt} WHERE k = 3").one().f == [1.0, 2.0, 3.0]


def test_wire_encoding(session, vt):
    # raw bound bytes: floats packed (12 bytes), texts prefixed with their length as a vint
    ins = session.prepare(f"INSERT INTO {vt} (k, f, t) VALUES (?, ?, ?)")
    b = ins.bind([4, [0.0, 0.0, 0.0], ["q", "q"]])
    b.values[1] = struct.pack(">3f", 1.5, 2.5, 3.5)
    b.values[2] = b"\x01a\x02bc"
    session.execute(b)
    r = session.execute(f"SELECT f, t FROM {vt} WHERE k = 4").one()
    assert (r.f, r.t) == ([1.5, 2.5, 3.5], ["a", "bc"])


@pytest.mark.parametrize("stmt, message", [
    ("INSERT INTO {t} (k, f) VALUES (0, [1.0, 2.0])",
     "Invalid vector literal for f of type vector<float, 3>; expected 3 elements, but given 2"),
    ("INSERT INTO {t} (k, f) VALUES (0, [1.0, 2.0, 3.0, 4.0])",
     "Invalid vector literal for f of type vector<float, 3>; expected 3 elements, but given 4"),
    ("INSERT INTO {t} (k, i) VALUES (0, ['a', 'b'])",
     "Invalid vector literal for i: value 'a' is not of type int"),
    ("INSERT INTO {t} (k, t) VALUES (0, [1, 2])",
     "Invalid vector literal for t: value 1 is not of type text"),
])
def test_literal_errors(session, vt, stmt, message):
    with pytest.raises(InvalidRequest) as e:
        session.execute(stmt.format(t=vt))
    assert f'message="{message}"' in str(e.value)


@pytest.mark.parametrize("col, raw, message", [
    ("f", struct.pack(">2f", 1, 2), "Not enough bytes to read a vector<float, 3>"),
    ("f", struct.pack(">4f", 1, 2, 3, 4), "Unexpected 4 extraneous bytes after vector<float, 3> value"),
    ("t", b"\x01a", "Not enough bytes to read a vector<text, 2>"),
    ("t", b"\x01a\x01b\x01c", "Unexpected 2 extraneous bytes after vector<text, 2> value"),
    ("i", struct.pack(">3i", 1, 2, 3), "Unexpected 4 extraneous bytes after vector<int, 2> value"),
])
def test_bound_value_errors(session, vt, col, raw, message):
    ins = session.prepare(f"INSERT INTO {vt} (k, {col}) VALUES (?, ?)")
    sample = {"f": [1.0, 2.0, 3.0], "t": ["a", "b"], "i": [1, 2]}[col]
    b = ins.bind([9, sample])
    b.values[1] = raw
    with pytest.raises(InvalidRequest) as e:
        session.execute(b)
    assert message in error_text(e.value)
    assert session.execute(f"SELECT * FROM {vt} WHERE k = 9").one() is None


def test_schema_and_cqlsh(session, vt, cqlsh):
    ks, table = vt.split(".")
    types = dict(session.execute(
        f"SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = '{ks}' AND table_name = '{table}'"))
    assert types["f"] == "vector<float, 3>"
    assert types["n"] == "vector<frozen<list<int>>, 2>"
    desc = session.execute(f"DESCRIBE TABLE {vt}").one().create_statement
    assert "f vector<float, 3>" in desc
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"CREATE TABLE {ks}.bad (k int PRIMARY KEY, v vector<float, 0>)")
    assert "vectors may only have positive dimensions; given 0" in str(e.value)
    session.execute(f"INSERT INTO {vt} (k, f, t, n) VALUES (1, [1.0, 2.5, -3.0], ['a', 'bé'], [[1, 2], [3]])")
    out = cqlsh(["-e", f"SELECT f, t, n FROM {vt} WHERE k = 1"])
    assert out.returncode == 0, out
    lines = [l.strip() for l in out.stdout.splitlines()]
    assert "[1, 2.5, -3] | ['a', 'bé'] | [[1, 2], [3]]" in lines, out
