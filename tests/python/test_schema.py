"""DDL through the Python driver, and the schema as the driver's metadata sees it."""

import uuid

import pytest
from cassandra import AlreadyExists, InvalidRequest
from cassandra.cluster import Cluster
from cassandra.protocol import ConfigurationException

from rgtest import create_keyspace, error_text, wait_until


def schema_version(session):
    return session.execute("SELECT schema_version FROM system.local WHERE key = 'local'").one().schema_version


def local_dc(session):
    return session.execute("SELECT data_center FROM system.local WHERE key = 'local'").one().data_center


def table_meta(cluster, ks, table):
    return cluster.metadata.keyspaces[ks].tables[table]


# ---------------------------------------------------------------------------- keyspaces

def test_create_keyspace_simple_strategy(cluster, session, unique_name):
    ks = unique_name("ks")
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    meta = cluster.metadata.keyspaces[ks]
    assert type(meta.replication_strategy).__name__ == "SimpleStrategy"
    assert meta.replication_strategy.replication_factor == 1
    assert meta.durable_writes is True
    row = session.execute("SELECT * FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one()
    assert row.replication["class"].endswith("SimpleStrategy")
    assert row.replication["replication_factor"] == "1"
    assert row.durable_writes is True


def test_create_keyspace_network_topology_strategy(cluster, session, unique_name):
    ks = unique_name("ks")
    dc = local_dc(session)
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', '{dc}': 1}}")
    meta = cluster.metadata.keyspaces[ks]
    assert type(meta.replication_strategy).__name__ == "NetworkTopologyStrategy"
    assert meta.replication_strategy.dc_replication_factors == {dc: 1}
    row = session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one()
    assert row.replication["class"].endswith("NetworkTopologyStrategy")
    assert row.replication[dc] == "1"
    # usable: a table in it takes writes and reads
    session.execute(f"CREATE TABLE {ks}.t (id int PRIMARY KEY, v text)")
    session.execute(f"INSERT INTO {ks}.t (id, v) VALUES (1, 'nts')")
    assert session.execute(f"SELECT v FROM {ks}.t WHERE id = 1").one().v == "nts"
    assert list(cluster.metadata.token_map.get_replicas(ks, cluster.metadata.token_map.ring[0])) == \
        cluster.metadata.all_hosts()


def test_if_not_exists_and_already_exists(session, unique_name):
    ks = unique_name("ks")
    create = f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
    session.execute(create)
    session.execute(create.replace("CREATE KEYSPACE", "CREATE KEYSPACE IF NOT EXISTS"))
    with pytest.raises(AlreadyExists) as e:
        session.execute(create)
    assert e.value.keyspace == ks
    assert not e.value.table

    session.execute(f"CREATE TABLE {ks}.t (id int PRIMARY KEY)")
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.t (id int PRIMARY KEY)")
    with pytest.raises(AlreadyExists) as e:
        session.execute(f"CREATE TABLE {ks}.t (id int PRIMARY KEY)")
    assert e.value.keyspace == ks
    assert e.value.table == "t"
    # the server is still fine
    assert session.execute("SELECT key FROM system.local").one().key == "local"


def test_use_keyspace(cluster_factory, keyspace):
    c = cluster_factory()
    s = c.connect()
    s.execute(f"USE {keyspace}")
    assert s.keyspace == keyspace
    s.execute("CREATE TABLE used (id int PRIMARY KEY, v text)")
    s.execute("INSERT INTO used (id, v) VALUES (1, 'one')")
    assert s.execute("SELECT v FROM used WHERE id = 1").one().v == "one"
    prepared = s.prepare("SELECT v FROM used WHERE id = ?")
    assert s.execute(prepared, (1,)).one().v == "one"
    # connect(keyspace) does the same USE on every connection
    s2 = cluster_factory().connect(keyspace)
    assert s2.execute("SELECT v FROM used WHERE id = 1").one().v == "one"
    assert "used" in c.metadata.keyspaces[keyspace].tables


# ---------------------------------------------------------------------------- tables and keys

def test_single_column_primary_key(cluster, session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.single (id int PRIMARY KEY, v text, n bigint)")
    t = table_meta(cluster, keyspace, "single")
    assert [c.name for c in t.partition_key] == ["id"]
    assert t.clustering_key == []
    assert {n: c.cql_type for n, c in t.columns.items()} == {"id": "int", "v": "text", "n": "bigint"}


def test_compound_primary_key(cluster, session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.compound (pk int, c1 text, c2 int, v text, PRIMARY KEY (pk, c1, c2))")
    t = table_meta(cluster, keyspace, "compound")
    assert [c.name for c in t.partition_key] == ["pk"]
    assert [c.name for c in t.clustering_key] == ["c1", "c2"]
    assert not t.columns["c1"].is_reversed and not t.columns["c2"].is_reversed
    assert [c.name for c in t.primary_key] == ["pk", "c1", "c2"]
    assert set(t.columns) == {"pk", "c1", "c2", "v"}


def test_composite_partition_key_with_desc_clustering(cluster, session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.composite (p1 text, p2 int, c1 int, v text, "
                    f"PRIMARY KEY ((p1, p2), c1)) WITH CLUSTERING ORDER BY (c1 DESC)")
    t = table_meta(cluster, keyspace, "composite")
    assert [c.name for c in t.partition_key] == ["p1", "p2"]
    assert [c.name for c in t.clustering_key] == ["c1"]
    assert t.clustering_key[0].name == "c1"
    assert t.columns["c1"].is_reversed is True
    assert "CLUSTERING ORDER BY (c1 DESC)" in t.export_as_string()
    assert "PRIMARY KEY ((p1, p2), c1)" in t.export_as_string()


def test_system_schema_rows_for_a_table(session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.rows_t (p1 text, p2 int, c1 int, c2 text, v text, w int, "
                    f"PRIMARY KEY ((p1, p2), c1, c2)) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC)")
    tables = session.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = 'rows_t'",
                             (keyspace,)).one()
    assert tables is not None
    # normal (non-COMPACT) tables carry {'compound'}; empty flags make the driver drop columns
    assert "compound" in set(tables.flags or ())
    cols = {r.column_name: (r.kind, r.position, r.clustering_order, r.type) for r in session.execute(
        "SELECT * FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'rows_t'", (keyspace,))}
    assert cols == {
        "p1": ("partition_key", 0, "none", "text"),
        "p2": ("partition_key", 1, "none", "int"),
        "c1": ("clustering", 0, "desc", "int"),
        "c2": ("clustering", 1, "asc", "text"),
        "v": ("regular", -1, "none", "text"),
        "w": ("regular", -1, "none", "int"),
    }


def test_alter_table_add_and_drop_column(cluster, session, keyspace):
    session.execute(f"CREATE TABLE {keyspace}.alt (id int PRIMARY KEY, a text)")
    session.execute(f"INSERT INTO {keyspace}.alt (id, a) VALUES (1, 'x')")
    session.execute(f"ALTER TABLE {keyspace}.alt ADD extra bigint")
    t = table_meta(cluster, keyspace, "alt")
    assert t.columns["extra"].cql_type == "bigint"
    row = session.execute(f"SELECT * FROM {keyspace}.alt WHERE id = 1").one()
    assert row.a == "x" and row.extra is None
    session.execute(f"INSERT INTO {keyspace}.alt (id, a, extra) VALUES (2, 'y', 42)")
    assert session.execute(f"SELECT extra FROM {keyspace}.alt WHERE id = 2").one().extra == 42

    session.execute(f"ALTER TABLE {keyspace}.alt DROP a")
    t = table_meta(cluster, keyspace, "alt")
    assert set(t.columns) == {"id", "extra"}
    rs = session.execute(f"SELECT * FROM {keyspace}.alt WHERE id = 2")
    assert rs.column_names == ["id", "extra"]
    with pytest.raises(InvalidRequest):
        session.execute(f"SELECT a FROM {keyspace}.alt WHERE id = 2")


def test_drop_table_and_keyspace(cluster, session, unique_name):
    ks = create_keyspace(session, unique_name("ks"))
    session.execute(f"CREATE TABLE {ks}.gone (id int PRIMARY KEY)")
    session.execute(f"CREATE TABLE {ks}.stays (id int PRIMARY KEY)")
    session.execute(f"INSERT INTO {ks}.gone (id) VALUES (1)")
    session.execute(f"DROP TABLE {ks}.gone")
    assert set(cluster.metadata.keyspaces[ks].tables) == {"stays"}
    with pytest.raises(InvalidRequest) as e:
        session.execute(f"SELECT * FROM {ks}.gone")
    assert "unconfigured table" in error_text(e.value)
    session.execute(f"DROP TABLE IF EXISTS {ks}.gone")
    # re-creating a dropped table gives an empty table
    session.execute(f"CREATE TABLE {ks}.gone (id int PRIMARY KEY)")
    assert list(session.execute(f"SELECT * FROM {ks}.gone")) == []

    session.execute(f"DROP KEYSPACE {ks}")
    assert ks not in cluster.metadata.keyspaces
    assert session.execute("SELECT * FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)).one() is None
    assert list(session.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = %s", (ks,))) == []
    with pytest.raises(InvalidRequest):
        session.execute(f"SELECT * FROM {ks}.stays")
    session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    with pytest.raises((InvalidRequest, ConfigurationException)):
        session.execute(f"DROP KEYSPACE {ks}")


def test_case_of_names(cluster, session, unique_name):
    ks = unique_name("ks")
    mixed_ks = ("Mixed" + ks)[:48]
    session.execute(f"CREATE KEYSPACE \"{mixed_ks}\" WITH replication = "
                    f"{{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE KEYSPACE {ks.upper()} WITH replication = "
                    f"{{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    assert mixed_ks in cluster.metadata.keyspaces
    assert ks in cluster.metadata.keyspaces and ks.upper() not in cluster.metadata.keyspaces

    session.execute(f'CREATE TABLE "{mixed_ks}"."MixedCase" ("Id" int PRIMARY KEY, "Value" text, plain int)')
    session.execute(f"CREATE TABLE {ks}.UpperT (ID int PRIMARY KEY, Val text)")
    assert set(cluster.metadata.keyspaces[mixed_ks].tables) == {"MixedCase"}
    assert set(cluster.metadata.keyspaces[ks].tables) == {"uppert"}
    assert set(table_meta(cluster, mixed_ks, "MixedCase").columns) == {"Id", "Value", "plain"}
    assert set(table_meta(cluster, ks, "uppert").columns) == {"id", "val"}

    session.execute(f'INSERT INTO "{mixed_ks}"."MixedCase" ("Id", "Value", PLAIN) VALUES (1, \'v\', 2)')
    row = session.execute(f'SELECT "Value", plain FROM "{mixed_ks}"."MixedCase" WHERE "Id" = 1').one()
    assert row.Value == "v" and row.plain == 2
    session.execute(f"INSERT INTO {ks}.UPPERT (Id, VAL) VALUES (3, 'w')")
    assert session.execute(f"SELECT val FROM {ks}.uppert WHERE id = 3").one().val == "w"

    with pytest.raises(InvalidRequest):  # unquoted -> mixedcase, which does not exist
        session.execute(f'SELECT * FROM "{mixed_ks}".MixedCase')
    with pytest.raises(InvalidRequest):  # unquoted column Value -> value, which does not exist
        session.execute(f'SELECT Value FROM "{mixed_ks}"."MixedCase" WHERE "Id" = 1')
    with pytest.raises(InvalidRequest):  # unquoted keyspace -> lower case, which does not exist
        session.execute(f'SELECT * FROM {mixed_ks}."MixedCase"')
    session.execute(f'DROP KEYSPACE "{mixed_ks}"')
    session.execute(f"DROP KEYSPACE {ks}")


def test_schema_version_changes_after_each_ddl(session, unique_name):
    ks = unique_name("ks")
    seen = [schema_version(session)]
    assert isinstance(seen[0], uuid.UUID)
    for stmt in (
        f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
        f"CREATE TABLE {ks}.t (id int PRIMARY KEY, a text)",
        f"ALTER TABLE {ks}.t ADD b int",
        f"ALTER TABLE {ks}.t DROP a",
        f"DROP TABLE {ks}.t",
        f"DROP KEYSPACE {ks}",
    ):
        session.execute(stmt)
        v = schema_version(session)
        assert v is not None
        assert v not in seen, f"schema_version did not change after: {stmt}"
        seen.append(v)
    # a non-DDL statement leaves it alone
    session.execute("SELECT * FROM system.local")
    assert schema_version(session) == seen[-1]


# The columns clients read from each system_schema table (Cassandra 4.x/5.x names).
SYSTEM_SCHEMA_COLUMNS = {
    "keyspaces": {"keyspace_name", "durable_writes", "replication"},
    "tables": {"keyspace_name", "table_name", "flags", "extensions"},
    "columns": {"keyspace_name", "table_name", "column_name", "type", "kind", "position", "clustering_order"},
    "types": {"keyspace_name", "type_name", "field_names", "field_types"},
    "functions": {"keyspace_name", "function_name", "argument_types", "argument_names", "body",
                  "called_on_null_input", "language", "return_type"},
    "aggregates": {"keyspace_name", "aggregate_name", "argument_types", "final_func", "initcond",
                   "return_type", "state_func", "state_type"},
    "triggers": {"keyspace_name", "table_name", "trigger_name", "options"},
    "indexes": {"keyspace_name", "table_name", "index_name", "kind", "options"},
    "views": {"keyspace_name", "view_name", "base_table_id", "base_table_name", "include_all_columns",
              "where_clause"},
}


@pytest.mark.parametrize("table", sorted(SYSTEM_SCHEMA_COLUMNS))
def test_system_schema_tables_have_client_columns(session, table):
    rs = session.execute(f"SELECT * FROM system_schema.{table}")
    missing = SYSTEM_SCHEMA_COLUMNS[table] - set(rs.column_names)
    assert not missing, f"system_schema.{table} lacks {sorted(missing)}; has {rs.column_names}"


def test_system_keyspaces_are_described_in_system_schema(session):
    ks = {r.keyspace_name for r in session.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    assert {"system", "system_schema"} <= ks
    tables = {(r.keyspace_name, r.table_name) for r in session.execute(
        "SELECT keyspace_name, table_name FROM system_schema.tables")}
    for t in (("system", "local"), ("system", "peers"), ("system_schema", "keyspaces"),
              ("system_schema", "tables"), ("system_schema", "columns")):
        assert t in tables


def test_schema_change_events_reach_another_client(cluster_factory, session, keyspace, unique_name):
    # A second, independent client: it may only learn about these changes from
    # SCHEMA_CHANGE events pushed on its control connection (no manual refresh).
    other = cluster_factory()
    other.connect()
    assert keyspace in other.metadata.keyspaces

    session.execute(f"CREATE TABLE {keyspace}.evt (id int PRIMARY KEY, v text)")
    wait_until(lambda: "evt" in other.metadata.keyspaces[keyspace].tables, timeout=15,
               message="the second client to see the new table")

    session.execute(f"ALTER TABLE {keyspace}.evt ADD w int")
    wait_until(lambda: "w" in other.metadata.keyspaces[keyspace].tables["evt"].columns, timeout=15,
               message="the second client to see the new column")

    ks2 = create_keyspace(session, unique_name("ks"))
    wait_until(lambda: ks2 in other.metadata.keyspaces, timeout=15,
               message="the second client to see the new keyspace")

    session.execute(f"DROP TABLE {keyspace}.evt")
    wait_until(lambda: "evt" not in other.metadata.keyspaces[keyspace].tables, timeout=15,
               message="the second client to see the table dropped")
    session.execute(f"DROP KEYSPACE {ks2}")
    wait_until(lambda: ks2 not in other.metadata.keyspaces, timeout=15,
               message="the second client to see the keyspace dropped")


def test_schema_survives_restart(server_factory, unique_name):
    srv = server_factory()
    ks = unique_name("ks")
    c = Cluster(contact_points=[srv.host], port=srv.port)
    try:
        s = c.connect()
        create_keyspace(s, ks)
        s.execute(f"CREATE TABLE {ks}.single (id int PRIMARY KEY, v text)")
        s.execute(f"CREATE TABLE {ks}.compound (pk int, c1 text, c2 int, v text, PRIMARY KEY (pk, c1, c2))")
        s.execute(f"CREATE TABLE {ks}.composite (p1 text, p2 int, c1 int, v text, "
                  f"PRIMARY KEY ((p1, p2), c1)) WITH CLUSTERING ORDER BY (c1 DESC)")
        s.execute(f'CREATE TABLE {ks}."Quoted" ("Key" int PRIMARY KEY)')
        s.execute(f"ALTER TABLE {ks}.single ADD added int")
        s.execute(f"CREATE TABLE {ks}.dropped (id int PRIMARY KEY)")
        s.execute(f"DROP TABLE {ks}.dropped")
        s.execute(f"INSERT INTO {ks}.composite (p1, p2, c1, v) VALUES ('a', 1, 2, 'row')")
        before = schema_version(s)
    finally:
        c.shutdown()

    srv.restart(kill9=True)

    c = Cluster(contact_points=[srv.host], port=srv.port)
    try:
        s = c.connect()
        tables = c.metadata.keyspaces[ks].tables
        assert set(tables) == {"single", "compound", "composite", "Quoted"}
        assert set(tables["single"].columns) == {"id", "v", "added"}
        assert [x.name for x in tables["compound"].clustering_key] == ["c1", "c2"]
        comp = tables["composite"]
        assert [x.name for x in comp.partition_key] == ["p1", "p2"]
        assert comp.columns["c1"].is_reversed
        assert s.execute(f"SELECT v FROM {ks}.composite WHERE p1 = 'a' AND p2 = 1").one().v == "row"
        assert schema_version(s) == before
    finally:
        c.shutdown()
