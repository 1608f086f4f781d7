"""cqlsh prints collections, nested collections, tuples, UDTs and vectors exactly as it does
against Cassandra (`{'a': [1, 2]}`, `{f1: 1, f2: 'x'}`, `(1, 'a')`, `[1, 2.5]`): the server's
result metadata and encodings are what cqlsh formats from. Also: large set elements and map
keys (Cassandra 5.0 has no 64 KiB limit on them) round-trip."""

import pytest

from test_types import cqlsh_rows


@pytest.fixture
def comp(session, keyspace):
    session.execute(f"CREATE TYPE {keyspace}.pt (f1 int, f2 text, \"Odd\" frozen<list<int>>)")
    session.execute(
        f"CREATE TABLE {keyspace}.c (k int PRIMARY KEY, m map<text, frozen<list<int>>>, "
        f"s set<frozen<map<int, text>>>, tu tuple<int, text, frozen<list<text>>>, u pt, fu frozen<pt>, "
        f"lu list<frozen<pt>>, mt map<timestamp, frozen<set<uuid>>>, ln list<frozen<list<frozen<list<int>>>>>, "
        f"v vector<float, 2>, e set<text>, tn tuple<int, int>)")
    return keyspace


# (column, literal, cqlsh text)
CASES = [
    ("m", "{'a': [1, 2], 'b''c': []}", "{'a': [1, 2], 'b''c': []}"),
    ("s", "{{2: 'y', 3: 'z'}, {1: 'x'}}", "{{1: 'x'}, {2: 'y', 3: 'z'}}"),
    ("tu", "(1, 'a', ['q', 'é'])", "(1, 'a', ['q', 'é'])"),
    ("u", "{f1: 1, f2: 'x'}", "{f1: 1, f2: 'x', Odd: null}"),
    ("fu", "{f1: 2, \"Odd\": [5]}", "{f1: 2, f2: null, Odd: [5]}"),
    ("lu", "[{f1: 3}, {f2: ''}]", "[{f1: 3, f2: null, Odd: null}, {f1: null, f2: '', Odd: null}]"),
    ("mt", "{'2024-01-02 03:04:05+0000': {6ab09bec-e68e-48d9-a5f8-97e6fb4c9b47}}",
     "{'2024-01-02 03:04:05.000000+0000': {6ab09bec-e68e-48d9-a5f8-97e6fb4c9b47}}"),
    ("ln", "[[[1], []], [[-2, 3]]]", "[[[1], []], [[-2, 3]]]"),
    ("v", "[1.5, -2]", "[1.5, -2]"),
    ("e", "{'', 'b', 'a'}", "{'', 'a', 'b'}"),
    # cqlsh's own formatting of a null tuple component (the same against Cassandra)
    ("tn", "(null, 7)", "(None, 7)"),
]


def test_cqlsh_prints_composites(session, comp, cqlsh):
    for i, (col, lit, _) in enumerate(CASES):
        session.execute(f"INSERT INTO {comp}.c (k, {col}) VALUES ({i}, {lit})")
    cols = ", ".join(c for c, _, _ in CASES)
    r = cqlsh(["-e", f"SELECT k, {cols} FROM {comp}.c WHERE k IN ({', '.join(str(i) for i in range(len(CASES)))})"])
    assert r.returncode == 0, r
    rows = {int(row[0]): row[1:] for row in cqlsh_rows(r.stdout)}
    for i, (col, lit, text) in enumerate(CASES):
        printed = rows[i][i]
        assert printed == text, f"{col} = {lit}: cqlsh printed {printed!r}, want {text!r}"
        others = [x for j, x in enumerate(rows[i]) if j != i]
        assert set(others) == {"null"}, rows[i]


def test_large_set_elements_and_map_keys(session, comp):
    big = "x" * 70000
    session.execute(f"UPDATE {comp}.c SET e = e + {{'{big}'}}, m = m + {{'{big}': [1]}} WHERE k = 100")
    r = session.execute(f"SELECT e, m FROM {comp}.c WHERE k = 100").one()
    assert list(r.e) == [big]
    assert dict(r.m) == {big: [1]}
    session.execute(f"UPDATE {comp}.c SET e = e - {{'{big}'}} WHERE k = 100")
    assert session.execute(f"SELECT e FROM {comp}.c WHERE k = 100").one().e is None
