"""ALTER TYPE ADD / RENAME: every column holding the type (directly, frozen, inside collections,
tuples and other types) sees the new definition, existing values read back with the new field
as null, system_schema.types, DESCRIBE and the driver's metadata follow, and the errors are
Cassandra's."""

import pytest
from cassandra import InvalidRequest

from rgtest import error_text, wait_until


@pytest.fixture
def typed(session, keyspace):
    session.execute(f"CREATE TYPE {keyspace}.addr (street text, zip int)")
    session.execute(f"CREATE TYPE {keyspace}.person (name text, home frozen<addr>)")
    session.execute(
        f"CREATE TABLE {keyspace}.t (k int PRIMARY KEY, a addr, fa frozen<addr>, "
        f"la list<frozen<addr>>, m map<int, frozen<addr>>, tu tuple<int, frozen<addr>>, "
        f"p frozen<person>)")
    session.execute(
        f"INSERT INTO {keyspace}.t (k, a, fa, la, m, tu, p) VALUES (1, {{street: 'a', zip: 1}}, "
        f"{{street: 'b', zip: 2}}, [{{street: 'c', zip: 3}}], {{7: {{street: 'd', zip: 4}}}}, "
        f"(5, {{street: 'e', zip: 5}}), {{name: 'n', home: {{street: 'f', zip: 6}}}})")
    return keyspace


def row(session, ks, k=1):
    return session.execute(f"SELECT a, fa, la, m, tu, p FROM {ks}.t WHERE k = {k}").one()


def test_add_field_reaches_every_column(session, typed):
    ks = typed
    session.execute(f"ALTER TYPE {ks}.addr ADD country text")
    r = row(session, ks)
    assert r.a._fields == ("street", "zip", "country")
    assert (r.a.street, r.a.zip, r.a.country) == ("a", 1, None)
    assert (r.fa.street, r.fa.zip, r.fa.country) == ("b", 2, None)
    assert r.la[0].country is None and r.la[0].street == "c"
    assert r.m[7].country is None and r.m[7].zip == 4
    assert r.tu[1].country is None and r.tu[1].street == "e"
    assert r.p.home.country is None and r.p.home.zip == 6
    # the new field is writable in every shape, and selectable by name
    session.execute(
        f"UPDATE {ks}.t SET a.country = 'fr', fa = {{street: 'b', country: 'de'}}, "
        f"la = [{{country: 'it'}}], p = {{name: 'n', home: {{country: 'es'}}}} WHERE k = 1")
    r = row(session, ks)
    assert (r.a.street, r.a.country) == ("a", "fr")
    assert (r.fa.street, r.fa.zip, r.fa.country) == ("b", None, "de")
    assert r.la[0].country == "it"
    assert r.p.home.country == "es"
    assert session.execute(f"SELECT a.country, fa.country FROM {ks}.t WHERE k = 1").one() == ("fr", "de")
    ins = session.prepare(f"INSERT INTO {ks}.t (k, fa) VALUES (?, ?)")
    session.execute(ins, [2, ("x", 9, "uk")])
    assert tuple(row(session, ks, 2).fa) == ("x", 9, "uk")
    # Cassandra's system_schema and DESCRIBE
    t = session.execute(
        f"SELECT field_names, field_types FROM system_schema.types "
        f"WHERE keyspace_name = '{ks}' AND type_name = 'addr'").one()
    assert list(t.field_names) == ["street", "zip", "country"]
    assert list(t.field_types) == ["text", "int", "text"]
    desc = "\n".join(r.create_statement for r in session.execute(f"DESCRIBE TYPE {ks}.addr"))
    assert "country text" in desc


def test_rename_fields(session, typed):
    ks = typed
    session.execute(f"ALTER TYPE {ks}.addr RENAME zip TO postcode AND street TO road")
    r = row(session, ks)
    assert r.a._fields == ("road", "postcode")
    assert (r.a.road, r.a.postcode) == ("a", 1)
    assert (r.p.home.road, r.p.home.postcode) == ("f", 6)
    assert session.execute(f"SELECT fa.postcode FROM {ks}.t WHERE k = 1").one()[0] == 2
    session.execute(f"UPDATE {ks}.t SET a.postcode = 10 WHERE k = 1")
    assert row(session, ks).a.postcode == 10
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"SELECT fa.zip FROM {ks}.t WHERE k = 1")
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"UPDATE {ks}.t SET fa = {{zip: 1}} WHERE k = 1")
    assert "zip" in error_text(e.value)
    t = session.execute(
        f"SELECT field_names FROM system_schema.types "
        f"WHERE keyspace_name = '{ks}' AND type_name = 'addr'").one()
    assert list(t.field_names) == ["road", "postcode"]


def test_driver_metadata_follows(cluster, session, typed):
    ks = typed
    session.execute(f"ALTER TYPE {ks}.addr ADD country text")
    wait_until(lambda: cluster.metadata.keyspaces[ks].user_types["addr"].field_names
               == ["street", "zip", "country"], message="driver metadata refresh")
    session.execute(f"ALTER TYPE {ks}.addr RENAME country TO land")
    wait_until(lambda: cluster.metadata.keyspaces[ks].user_types["addr"].field_names
               == ["street", "zip", "land"], message="driver metadata refresh")
    assert "land text" in cluster.metadata.keyspaces[ks].user_types["addr"].as_cql_query()


def test_other_clients_get_the_event(cluster_factory, session, typed):
    """Another client's driver learns of the change from the pushed SCHEMA_CHANGE event
    (TYPE UPDATED), not from its own query's result."""
    ks = typed
    other = cluster_factory()
    other.connect()
    assert other.metadata.keyspaces[ks].user_types["addr"].field_names == ["street", "zip"]
    session.execute(f"ALTER TYPE {ks}.addr ADD country text")
    wait_until(lambda: other.metadata.keyspaces[ks].user_types["addr"].field_names
               == ["street", "zip", "country"], message="event-driven metadata refresh")


@pytest.mark.parametrize("stmt, message", [
    ("ALTER TYPE {ks}.addr ADD zip text",
     "Cannot add field zip to type {ks}.addr: a field with name zip already exists"),
    ("ALTER TYPE {ks}.addr RENAME nosuch TO x", "Unkown field nosuch in user type {ks}.addr"),
    ("ALTER TYPE {ks}.addr RENAME zip TO street", "Duplicate field name street in type {ks}.addr"),
    ("ALTER TYPE {ks}.addr ALTER zip TYPE blob", "Altering field types is no longer supported"),
    ("ALTER TYPE {ks}.nosuch ADD f int", "Type {ks}.nosuch doesn't exist"),
    ("ALTER TYPE {ks}.addr ADD self frozen<person>",
     "Cannot add new field self of type frozen<person> to user type {ks}.addr as it would create a circular reference"),
    ("ALTER TYPE {ks}.addr ADD c counter", "A user type cannot contain counters"),
])
def test_errors(session, typed, stmt, message):
    ks = typed
    with pytest.raises(InvalidRequest) as e:
        session.execute(stmt.format(ks=ks))
    assert f'message="{message.format(ks=ks)}"' in str(e.value)
    t = session.execute(
        f"SELECT field_types FROM system_schema.types "
        f"WHERE keyspace_name = '{ks}' AND type_name = 'person'").one()
    assert list(t.field_types) == ["text", "frozen<addr>"]
    # nothing changed
    t = session.execute(
        f"SELECT field_names FROM system_schema.types "
        f"WHERE keyspace_name = '{ks}' AND type_name = 'addr'").one()
    assert list(t.field_names) == ["street", "zip"]


def test_if_exists_forms(session, typed):
    ks = typed
    session.execute(f"ALTER TYPE IF EXISTS {ks}.nosuch ADD f int")
    session.execute(f"ALTER TYPE {ks}.addr ADD IF NOT EXISTS zip text")
    session.execute(f"ALTER TYPE {ks}.addr RENAME IF EXISTS nosuch TO x AND zip TO z")
    t = session.execute(
        f"SELECT field_names, field_types FROM system_schema.types "
        f"WHERE keyspace_name = '{ks}' AND type_name = 'addr'").one()
    assert (list(t.field_names), list(t.field_types)) == (["street", "z"], ["text", "int"])


def test_type_in_partition_key_cannot_grow(session, keyspace):
    session.execute(f"CREATE TYPE {keyspace}.pt (a int)")
    session.execute(f"CREATE TABLE {keyspace}.pk (k frozen<pt> PRIMARY KEY, v int)")
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"ALTER TYPE {keyspace}.pt ADD b int")
    assert error_text(e.value).endswith(
        f"Cannot add new field b of type int to user type {keyspace}.pt as the type is being used "
        f"in partition key by the following tables: {keyspace}.pk\"")
    # renaming is fine
    session.execute(f"ALTER TYPE {keyspace}.pt RENAME a TO b")


def test_survives_restart(server_factory, cluster_factory, unique_name):
    from rgtest import create_keyspace
    srv = server_factory()
    s = cluster_factory(srv).connect()
    ks = create_keyspace(s, unique_name("ks"))
    s.execute(f"CREATE TYPE {ks}.u (a int)")
    s.execute(f"CREATE TYPE {ks}.w (inner frozen<u>)")
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, w frozen<w>, u u)")
    s.execute(f"INSERT INTO {ks}.t (k, w, u) VALUES (1, {{inner: {{a: 1}}}}, {{a: 2}})")
    s.execute(f"ALTER TYPE {ks}.u ADD b text")
    s.execute(f"ALTER TYPE {ks}.u RENAME a TO x")
    srv.restart()
    s2 = cluster_factory(srv).connect()
    r = s2.execute(f"SELECT w, u FROM {ks}.t WHERE k = 1").one()
    assert (r.w.inner.x, r.w.inner.b) == (1, None)
    assert (r.u.x, r.u.b) == (2, None)


def test_prepare_again_after_alter_sees_new_fields(session, typed):
    ks = typed
    q = f"INSERT INTO {ks}.t (k, fa) VALUES (?, ?)"
    before = session.prepare(q)
    assert before.column_metadata[1].type.fieldnames == ("street", "zip")
    session.execute(f"ALTER TYPE {ks}.addr ADD country text")
    after = session.prepare(q)
    assert after.column_metadata[1].type.fieldnames == ("street", "zip", "country")
    session.execute(after, [3, ("s", 1, "nl")])
    assert tuple(session.execute(f"SELECT fa FROM {ks}.t WHERE k = 3").one().fa) == ("s", 1, "nl")
    sel = session.prepare(f"SELECT fa FROM {ks}.t WHERE k = ?")
    assert sel.result_metadata[0][3].fieldnames == ("street", "zip", "country")


def test_drop_type_still_in_use(session, typed):
    ks = typed
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"DROP TYPE {ks}.addr")
    assert f"Cannot drop user type '{ks}.addr' as it is still used by user types person" in str(e.value)
    session.execute(f"DROP TABLE {ks}.t")
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"DROP TYPE {ks}.addr")
    assert "still used by user types person" in str(e.value)
    session.execute(f"CREATE TABLE {ks}.t2 (k int PRIMARY KEY, l list<frozen<person>>)")
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"DROP TYPE {ks}.person")
    assert f"Cannot drop user type '{ks}.person' as it is still used by tables t2" in str(e.value)
    session.execute(f"DROP TABLE {ks}.t2")
    session.execute(f"DROP TYPE {ks}.person")
    session.execute(f"DROP TYPE {ks}.addr")
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"DROP TYPE {ks}.addr")
    assert f"Type '{ks}.addr' doesn't exist" in str(e.value)
    session.execute(f"DROP TYPE IF EXISTS {ks}.addr")
