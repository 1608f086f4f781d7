"""Cosmos DB's table options (issue 20): a Cosmos schema script with the cell-level options and the
throughput options runs unchanged through cqlsh -f; DESCRIBE, system_schema.tables and the Python
driver's metadata show the options; bad values are refused; the options survive a restart."""

from pathlib import Path

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException

SCRIPT = Path(__file__).resolve().parents[2] / "cql" / "30-cosmos-table-options.cql"

CELL_LEVEL = ("cosmosdb_cell_level_timestamp", "cosmosdb_cell_level_timestamp_tombstones",
              "cosmosdb_cell_level_timetolive")


def describe(cqlsh, srv, table):
    r = cqlsh(["-e", f"DESCRIBE TABLE {table}"], server=srv)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_cosmos_schema_script_runs_unchanged(server_factory, cqlsh, cluster_factory):
    srv = server_factory()
    r = cqlsh(["-f", str(SCRIPT)], server=srv)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr

    by_customer = describe(cqlsh, srv, "retail.orders_by_customer")
    for name in CELL_LEVEL:
        assert f"{name} = true" in by_customer, by_customer
    by_city = describe(cqlsh, srv, "retail.orders_by_city")
    assert "cosmosdb_cell_level_timestamp = true" in by_city, by_city
    assert "cosmosdb_cell_level_timetolive = false" in by_city, by_city  # set by the ALTER
    assert "cosmosdb_autoscale_max_throughput = 4000" in by_city, by_city

    s = cluster_factory(srv).connect()
    rows = {r.table_name: r for r in s.execute(
        "SELECT * FROM system_schema.tables WHERE keyspace_name = 'retail'")}
    assert rows["orders_by_city"].cosmosdb_cell_level_timestamp_tombstones is True
    assert rows["orders_by_city"].cosmosdb_cell_level_timetolive is False
    # The data written by the script is there, with its per-cell TTL.
    row = s.execute("SELECT purchase_amount, TTL(city) AS t FROM retail.orders_by_customer "
                    "WHERE customer_id = 42").one()
    assert row.purchase_amount == 1999 and 0 < row.t <= 86400

    # The driver's metadata reads the schema and exports it (it shows only Cassandra's options).
    ks = s.cluster.metadata.keyspaces["retail"]
    exported = ks.export_as_string()
    assert "CREATE TABLE retail.orders_by_customer" in exported, exported
    assert "CLUSTERING ORDER BY (purchase_time DESC)" in exported, exported


def test_describe_output_recreates_the_options(server_factory, cqlsh, cluster_factory):
    """DESCRIBE's statement runs again as it is and keeps the options; they survive a restart."""
    srv = server_factory()
    s = cluster_factory(srv).connect()
    s.execute("CREATE KEYSPACE k1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE k1.t (k int PRIMARY KEY, v text) "
              "WITH cosmosdb_cell_level_timestamp = true AND cosmosdb_cell_level_timetolive = false")
    text = describe(cqlsh, srv, "k1.t")
    assert "cosmosdb_cell_level_timestamp_tombstones" not in text, text  # not given: not shown
    s.execute("CREATE KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute(text.replace("k1.t", "k2.t"))
    again = describe(cqlsh, srv, "k2.t")
    assert again.replace("k2.t", "k1.t") == text

    srv.restart()
    after = describe(cqlsh, srv, "k1.t")
    assert after == text
    assert "cosmosdb_cell_level_timestamp = true" in after and "cosmosdb_cell_level_timetolive = false" in after


@pytest.mark.parametrize("value", ["'yes'", "1", "{'a': 'b'}"])
def test_bad_cell_level_values_are_refused(session, keyspace, value):
    with pytest.raises((SyntaxException, InvalidRequest)) as e:
        session.execute(f"CREATE TABLE {keyspace}.bad (k int PRIMARY KEY) "
                        f"WITH cosmosdb_cell_level_timestamp = {value}")
    assert "cosmosdb_cell_level_timestamp" in str(e.value), str(e.value)
    tables = session.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
                             (keyspace,))
    assert "bad" not in {r.table_name for r in tables}
    session.execute(f"CREATE TABLE {keyspace}.good (k int PRIMARY KEY)")
    with pytest.raises((SyntaxException, InvalidRequest)) as e:
        session.execute(f"ALTER TABLE {keyspace}.good WITH cosmosdb_cell_level_timetolive = {value}")
    assert "cosmosdb_cell_level_timetolive" in str(e.value), str(e.value)
