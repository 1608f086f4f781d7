"""cqlsh 6.2 (the real one, from PyPI) against the server: connecting without warnings,
server-side DESCRIBE, DDL and DML, and its table output."""

import re

import pytest

KEY_FORMS = {
    "single": ("(id int PRIMARY KEY, v text, n bigint)",
               r"(id int PRIMARY KEY|PRIMARY KEY \(id\))"),
    "compound": ("(pk int, c1 text, c2 int, v text, PRIMARY KEY (pk, c1, c2))",
                 r"PRIMARY KEY \(pk, c1, c2\)"),
    "composite": ("(p1 text, p2 int, c1 int, v text, PRIMARY KEY ((p1, p2), c1)) WITH CLUSTERING ORDER BY (c1 DESC)",
                  r"PRIMARY KEY \(\(p1, p2\), c1\)"),
}
COLUMN_TYPES = {
    "single": {"id": "int", "v": "text", "n": "bigint"},
    "compound": {"pk": "int", "c1": "text", "c2": "int", "v": "text"},
    "composite": {"p1": "text", "p2": "int", "c1": "int", "v": "text"},
}


def assert_clean(r):
    """Exit 0, nothing alarming on stderr, and no version-mismatch warning anywhere."""
    assert r.returncode == 0, r
    assert "warning" not in r.stderr.lower() and "error" not in r.stderr.lower(), r
    assert "cqlsh was built against" not in r.stdout + r.stderr, \
        f"cqlsh warns about release_version (it expects 5.0.0):\n{r}"


def parse_table(stdout):
    """Parse cqlsh's tabular output: returns (header, rows, footer_count) of the first table."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if re.fullmatch(r"-+(\+-+)*", line) and i > 0:
            header = [h.strip() for h in lines[i - 1].split("|")]
            rows = []
            j = i + 1
            while j < len(lines) and lines[j].strip():
                rows.append([c.strip() for c in lines[j].split(" | ")])
                j += 1
            m = re.search(r"^\((\d+) rows\)$", "\n".join(lines[j:]), re.M)
            return header, rows, int(m.group(1)) if m else None
    raise AssertionError(f"no table in cqlsh output:\n{stdout}")


def test_connects_without_warnings(cqlsh):
    r = cqlsh(["-e", "SELECT key, cluster_name FROM system.local"])
    assert_clean(r)
    header, rows, count = parse_table(r.stdout)
    assert header == ["key", "cluster_name"]
    assert rows[0][0] == "local"
    assert count == 1
    r = cqlsh(["-e", "SHOW VERSION"])
    assert_clean(r)
    assert re.search(r"Native protocol v[45]", r.stdout), r


def test_describe_keyspaces(cqlsh, keyspace):
    r = cqlsh(["-e", "DESCRIBE KEYSPACES"])
    assert_clean(r)
    names = set(r.stdout.split())
    assert {"system", "system_schema", keyspace} <= names, r


def test_describe_tables(cqlsh, session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.alpha (id int PRIMARY KEY)")
    session.execute(f"CREATE TABLE {keyspace}.beta (id int PRIMARY KEY)")
    r = cqlsh(["-k", keyspace, "-e", "DESCRIBE TABLES"])
    assert_clean(r)
    assert set(r.stdout.split()) == {"alpha", "beta"}, r
    # without a current keyspace: every keyspace, each under its heading
    r = cqlsh(["-e", "DESCRIBE TABLES"])
    assert_clean(r)
    assert f"Keyspace {keyspace}" in r.stdout, r
    section = r.stdout.split(f"Keyspace {keyspace}", 1)[1].split("Keyspace ", 1)[0]
    assert {"alpha", "beta"} <= set(section.split())


@pytest.mark.parametrize("form", sorted(KEY_FORMS))
def test_describe_table(cqlsh, session, keyspace, form):
    ddl, pk_pattern = KEY_FORMS[form]
    session.execute(f"CREATE TABLE {keyspace}.t {ddl}")
    r = cqlsh(["-e", f"DESCRIBE TABLE {keyspace}.t"])
    assert_clean(r)
    out = r.stdout
    assert f"CREATE TABLE {keyspace}.t (" in out, r
    for col, typ in COLUMN_TYPES[form].items():
        assert re.search(rf"\b{col} {typ}\b", out), f"column {col} {typ} missing:\n{out}"
    assert "PRIMARY KEY" in out
    assert re.search(pk_pattern, out), f"expected {pk_pattern}:\n{out}"
    if form == "composite":
        assert "CLUSTERING ORDER BY (c1 DESC)" in out
    assert out.rstrip().endswith(";"), "a DESCRIBE statement should end with ';' so it can be fed back"

    r = cqlsh(["-e", f"DESCRIBE KEYSPACE {keyspace}"])
    assert_clean(r)
    assert f"CREATE KEYSPACE {keyspace} WITH" in r.stdout
    assert f"CREATE TABLE {keyspace}.t (" in r.stdout


def test_ddl_and_dml_through_cqlsh(cqlsh, cluster, unique_name):
    ks = unique_name("ks")
    script = f"""
CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};
USE {ks};
CREATE TABLE single {KEY_FORMS['single'][0]};
CREATE TABLE compound {KEY_FORMS['compound'][0]};
CREATE TABLE composite {KEY_FORMS['composite'][0]};
INSERT INTO single (id, v, n) VALUES (1, 'one', 100);
INSERT INTO single (id, v, n) VALUES (2, 'twö ☃', -5);
INSERT INTO single (id, v) VALUES (3, 'three');
INSERT INTO compound (pk, c1, c2, v) VALUES (1, 'a', 1, 'x');
INSERT INTO compound (pk, c1, c2, v) VALUES (1, 'a', 2, 'y');
INSERT INTO compound (pk, c1, c2, v) VALUES (1, 'b', 1, 'z');
INSERT INTO composite (p1, p2, c1, v) VALUES ('k', 1, 1, 'first');
INSERT INTO composite (p1, p2, c1, v) VALUES ('k', 1, 2, 'second');
SELECT id, v, n FROM single WHERE id IN (1, 2, 3);
"""
    r = cqlsh([], stdin=script)
    assert_clean(r)
    header, rows, count = parse_table(r.stdout)
    assert header == ["id", "v", "n"]
    assert sorted(rows) == sorted([["1", "one", "100"], ["2", "twö ☃", "-5"], ["3", "three", "null"]])
    assert count == 3

    cluster.refresh_schema_metadata()
    tables = cluster.metadata.keyspaces[ks].tables
    assert set(tables) == {"single", "compound", "composite"}
    assert [c.name for c in tables["composite"].partition_key] == ["p1", "p2"]
    assert tables["composite"].columns["c1"].is_reversed

    r = cqlsh(["-k", ks, "-e", "SELECT c1, c2, v FROM compound WHERE pk = 1"])
    assert_clean(r)
    header, rows, count = parse_table(r.stdout)
    assert header == ["c1", "c2", "v"]
    assert rows == [["a", "1", "x"], ["a", "2", "y"], ["b", "1", "z"]]
    assert count == 3

    r = cqlsh(["-k", ks, "-e", "SELECT * FROM composite WHERE p1 = 'k' AND p2 = 1"])
    assert_clean(r)
    header, rows, count = parse_table(r.stdout)
    assert header == ["p1", "p2", "c1", "v"]
    assert rows == [["k", "1", "2", "second"], ["k", "1", "1", "first"]]  # c1 DESC
    assert count == 2

    r = cqlsh(["-k", ks, "-e", "SELECT * FROM single WHERE id = 99"])
    assert_clean(r)
    assert "(0 rows)" in r.stdout, r


def test_select_many_rows_pages_in_cqlsh(cqlsh, session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.many (id int PRIMARY KEY, v text)")
    ins = session.prepare(f"INSERT INTO {keyspace}.many (id, v) VALUES (?, ?)")
    for i in range(250):  # more than cqlsh's page size of 100
        session.execute(ins, (i, f"v{i}"))
    r = cqlsh(["-e", f"SELECT id, v FROM {keyspace}.many"])
    assert_clean(r)
    assert "(250 rows)" in r.stdout
    ids = sorted(int(line.split("|")[0]) for line in r.stdout.splitlines()
                 if re.fullmatch(r"\s*\d+ \|\s+v\d+\s*", line))
    assert ids == list(range(250))


def test_errors_are_reported(cqlsh, keyspace):
    r = cqlsh(["-e", "SELECT * FROM nosuchks.nosuch"])
    assert r.returncode != 0
    assert "nosuchks" in r.stderr, r
    r = cqlsh(["-e", "SELEC 1"])
    assert r.returncode != 0
    assert "SyntaxException" in r.stderr or "Syntax" in r.stderr, r


@pytest.mark.parametrize("form", sorted(KEY_FORMS))
def test_describe_output_recreates_the_table(cqlsh, cluster, session, keyspace, form):
    ddl, _ = KEY_FORMS[form]
    session.execute(f"CREATE TABLE {keyspace}.t {ddl}")
    before = cqlsh(["-e", f"DESCRIBE TABLE {keyspace}.t"])
    assert_clean(before)
    statement = before.stdout.strip()
    assert statement.startswith(f"CREATE TABLE {keyspace}.t ("), before

    r = cqlsh([], stdin=f"DROP TABLE {keyspace}.t;\n{statement}\n")
    assert_clean(r)

    after = cqlsh(["-e", f"DESCRIBE TABLE {keyspace}.t"])
    assert_clean(after)
    assert after.stdout == before.stdout

    cluster.refresh_table_metadata(keyspace, "t")
    t = cluster.metadata.keyspaces[keyspace].tables["t"]
    assert {n: c.cql_type for n, c in t.columns.items()} == COLUMN_TYPES[form]
    if form == "composite":
        assert [c.name for c in t.partition_key] == ["p1", "p2"]
        assert t.columns["c1"].is_reversed
