"""Secondary indexes: created on existing data, maintained on every write and delete, used by
queries without ALLOW FILTERING, shown in system_schema.indexes, DESCRIBE and driver metadata."""
import struct

import pytest
from cassandra import InvalidRequest
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement


def tok(k):
    return Murmur3Token.hash_fn(struct.pack(">i", k))


def test_index_on_regular_column(session, cluster, keyspace):
    t = f"{keyspace}.users"
    session.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, city text, age int)")
    ins = session.prepare(f"INSERT INTO {t} (id, city, age) VALUES (?, ?, ?)")
    cities = ["paris", "oslo", "lima"]
    for i in range(300):
        session.execute(ins, (i, cities[i % 3], i % 50))
    # without an index the query needs ALLOW FILTERING
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute(f"SELECT id FROM {t} WHERE city = 'oslo'")
    # the index is built over the existing rows
    session.execute(f"CREATE INDEX users_city ON {t} (city)")
    got = [r.id for r in session.execute(f"SELECT id FROM {t} WHERE city = 'oslo'")]
    want = sorted((i for i in range(300) if i % 3 == 1), key=tok)
    assert got == want, "index results come back in token order"
    # paging over index results
    stmt = SimpleStatement(f"SELECT id FROM {t} WHERE city = 'oslo'", fetch_size=7)
    assert [r.id for r in session.execute(stmt)] == want
    # maintained on update and delete
    session.execute(f"UPDATE {t} SET city = 'rome' WHERE id = 1")
    session.execute(f"DELETE FROM {t} WHERE id = 4")
    session.execute(f"INSERT INTO {t} (id, city, age) VALUES (1000, 'oslo', 1)")
    got = {r.id for r in session.execute(f"SELECT id FROM {t} WHERE city = 'oslo'")}
    assert got == (set(want) - {1, 4}) | {1000}
    assert [r.id for r in session.execute(f"SELECT id FROM {t} WHERE city = 'rome'")] == [1]
    # a null removes the entry
    session.execute(f"UPDATE {t} SET city = null WHERE id = 1")
    assert list(session.execute(f"SELECT id FROM {t} WHERE city = 'rome'")) == []
    # prepared, and combined with another restriction under ALLOW FILTERING
    p = session.prepare(f"SELECT id FROM {t} WHERE city = ? AND age = ? ALLOW FILTERING")
    got = sorted(r.id for r in session.execute(p, ("paris", 3)))
    assert got == sorted(i for i in range(300) if i % 3 == 0 and i % 50 == 3)
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute(f"SELECT id FROM {t} WHERE city = 'paris' AND age = 3")

    # visible in the schema tables, DESCRIBE and the driver's metadata
    row = session.execute("SELECT kind, options FROM system_schema.indexes WHERE keyspace_name = %s "
                          "AND table_name = 'users' AND index_name = 'users_city'", (keyspace,)).one()
    assert row.kind == "COMPOSITES" and row.options["target"] == "city"
    desc = "\n".join(r.create_statement for r in session.execute(f"DESCRIBE TABLE {t}"))
    assert f"CREATE INDEX users_city ON {t} (city);" in desc
    cluster.refresh_table_metadata(keyspace, "users")
    assert "users_city" in cluster.metadata.keyspaces[keyspace].tables["users"].indexes

    # IF NOT EXISTS, duplicates, drop
    session.execute(f"CREATE INDEX IF NOT EXISTS users_city ON {t} (city)")
    with pytest.raises(InvalidRequest):
        session.execute(f"CREATE INDEX users_city ON {t} (city)")
    with pytest.raises(InvalidRequest, match="dependent secondary indexes"):
        session.execute(f"ALTER TABLE {t} DROP city")
    session.execute(f"DROP INDEX {keyspace}.users_city")
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute(f"SELECT id FROM {t} WHERE city = 'oslo'")
    session.execute(f"DROP INDEX IF EXISTS {keyspace}.users_city")
    with pytest.raises(InvalidRequest):
        session.execute(f"DROP INDEX {keyspace}.users_city")


def test_index_on_clustering_column_and_default_name(session, keyspace):
    t = f"{keyspace}.ev"
    session.execute(f"CREATE TABLE {t} (dev int, day int, seq int, v text, PRIMARY KEY (dev, day, seq))")
    ins = session.prepare(f"INSERT INTO {t} (dev, day, seq, v) VALUES (?, ?, ?, ?)")
    for dev in range(10):
        for day in range(5):
            session.execute(ins, (dev, day, dev * 10 + day, "x"))
    session.execute(f"CREATE INDEX ON {t} (seq)")
    names = [r.index_name for r in session.execute(
        "SELECT index_name FROM system_schema.indexes WHERE keyspace_name = %s AND table_name = 'ev'", (keyspace,))]
    assert names == ["ev_seq_idx"]
    rows = list(session.execute(f"SELECT dev, day FROM {t} WHERE seq = 42"))
    assert [(r.dev, r.day) for r in rows] == [(4, 2)]
    # within one partition an indexed restriction needs no ALLOW FILTERING either
    rows = list(session.execute(f"SELECT day FROM {t} WHERE dev = 3 AND seq = 31"))
    assert [r.day for r in rows] == [1]


def test_many_hits_in_one_partition_page_in_order_with_statics(session, keyspace):
    """An index read looks a partition's hits up in groups (with the partition's header): a
    partition with more hits than a group, read in pages, gives every row once, in clustering
    order, with its static, and a deleted row or a row of a deleted range is skipped."""
    t = f"{keyspace}.wide_ix"
    session.execute(f"CREATE TABLE {t} (k int, c int, s text static, v int, PRIMARY KEY (k, c))")
    ins = session.prepare(f"INSERT INTO {t} (k, c, v) VALUES (?, ?, ?)")
    for k in (1, 2):
        session.execute(f"INSERT INTO {t} (k, s) VALUES ({k}, 'static-{k}')")
        for c in range(100):
            session.execute(ins, (k, c, c % 2))
    session.execute(f"CREATE INDEX ON {t} (v)")
    session.execute(f"DELETE FROM {t} WHERE k = 1 AND c = 3")
    session.execute(f"DELETE FROM {t} WHERE k = 2 AND c > 40 AND c <= 60")
    want = [(k, c, f"static-{k}") for k in sorted((1, 2), key=tok) for c in range(1, 100, 2)
            if not (k == 1 and c == 3) and not (k == 2 and 40 < c <= 60)]
    for fetch_size in (7, 33, 5000):
        stmt = SimpleStatement(f"SELECT k, c, s FROM {t} WHERE v = 1", fetch_size=fetch_size)
        assert [(r.k, r.c, r.s) for r in session.execute(stmt)] == want, fetch_size


def test_index_errors(session, keyspace):
    t = f"{keyspace}.errs"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, c counter)")
    with pytest.raises(InvalidRequest, match="only partition key column"):
        session.execute(f"CREATE INDEX ON {t} (k)")
    with pytest.raises(InvalidRequest, match="counter"):
        session.execute(f"CREATE INDEX ON {t} (c)")
    with pytest.raises(InvalidRequest):
        session.execute(f"CREATE INDEX ON {t} (nosuch)")


def test_contains_and_collection_indexes(session, keyspace):
    t = f"{keyspace}.docs"
    session.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, tags set<text>, attrs map<text, int>, hist list<int>)")
    ins = session.prepare(f"INSERT INTO {t} (id, tags, attrs, hist) VALUES (?, ?, ?, ?)")
    docs = {}
    for i in range(60):
        tags = {f"t{i % 4}", f"t{i % 7}"}
        attrs = {f"k{i % 5}": i, "all": 1}
        hist = [i % 3, i % 11]
        docs[i] = (tags, attrs, hist)
        session.execute(ins, (i, tags, attrs, hist))

    def ids(q):
        return sorted(r.id for r in session.execute(q))

    want_tag = sorted(i for i, d in docs.items() if "t3" in d[0])
    want_key = sorted(i for i, d in docs.items() if "k2" in d[1])
    want_val = sorted(i for i, d in docs.items() if 7 in d[1].values())
    want_hist = sorted(i for i, d in docs.items() if 10 in d[2])
    # without indexes: filtering
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute(f"SELECT id FROM {t} WHERE tags CONTAINS 't3'")
    assert ids(f"SELECT id FROM {t} WHERE tags CONTAINS 't3' ALLOW FILTERING") == want_tag
    assert ids(f"SELECT id FROM {t} WHERE attrs CONTAINS KEY 'k2' ALLOW FILTERING") == want_key
    assert ids(f"SELECT id FROM {t} WHERE attrs CONTAINS 7 ALLOW FILTERING") == want_val
    assert ids(f"SELECT id FROM {t} WHERE hist CONTAINS 10 ALLOW FILTERING") == want_hist
    # with indexes: no ALLOW FILTERING, same rows, maintained on collection updates
    session.execute(f"CREATE INDEX ON {t} (tags)")
    session.execute(f"CREATE INDEX ON {t} (keys(attrs))")
    session.execute(f"CREATE INDEX ON {t} (values(hist))")
    assert ids(f"SELECT id FROM {t} WHERE tags CONTAINS 't3'") == want_tag
    assert ids(f"SELECT id FROM {t} WHERE attrs CONTAINS KEY 'k2'") == want_key
    assert ids(f"SELECT id FROM {t} WHERE hist CONTAINS 10") == want_hist
    session.execute(f"UPDATE {t} SET tags = tags + {{'fresh'}} WHERE id = 5")
    session.execute(f"UPDATE {t} SET tags = tags - {{'t3'}} WHERE id = {want_tag[0]}")
    assert ids(f"SELECT id FROM {t} WHERE tags CONTAINS 'fresh'") == [5]
    assert ids(f"SELECT id FROM {t} WHERE tags CONTAINS 't3'") == want_tag[1:]
    idx = {r.index_name: r.options["target"] for r in session.execute(
        "SELECT index_name, options FROM system_schema.indexes WHERE keyspace_name = %s AND table_name = 'docs'",
        (keyspace,))}
    assert sorted(idx.values()) == ["keys(attrs)", "values(hist)", "values(tags)"]
    with pytest.raises(InvalidRequest):
        session.execute(f"SELECT id FROM {t} WHERE id CONTAINS 3 ALLOW FILTERING")


def test_map_entry_restrictions(session, keyspace):
    t = f"{keyspace}.ent"
    session.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, attrs map<text, int>)")
    ins = session.prepare(f"INSERT INTO {t} (id, attrs) VALUES (?, ?)")
    for i in range(40):
        session.execute(ins, (i, {f"k{i % 4}": i % 3, "z": 0}))
    want = sorted(i for i in range(40) if i % 4 == 1 and i % 3 == 2)
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute(f"SELECT id FROM {t} WHERE attrs['k1'] = 2")
    got = sorted(r.id for r in session.execute(f"SELECT id FROM {t} WHERE attrs['k1'] = 2 ALLOW FILTERING"))
    assert got == want
    session.execute(f"CREATE INDEX ON {t} (entries(attrs))")
    got = sorted(r.id for r in session.execute(f"SELECT id FROM {t} WHERE attrs['k1'] = 2"))
    assert got == want
    p = session.prepare(f"SELECT id FROM {t} WHERE attrs[?] = ?")
    assert sorted(r.id for r in session.execute(p, ("k1", 2))) == want


def test_index_is_local_to_each_physical_partition(session, keyspace):
    """Entries live in the physical partition of their row (as Cassandra's are local to each
    node): a query reads every partition's index in token order, the trace shows the fan-out,
    the rows are those a filtering scan finds, paged across partitions; a token restriction
    reads only the partitions it overlaps. Index builds over existing rows commit per partition."""
    t = f"{keyspace}.local_ix"
    session.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int) "
                    f"WITH cosmosdb_provisioned_throughput = 40000")
    ins = session.prepare(f"INSERT INTO {t} (id, v) VALUES (?, ?)")
    for i in range(400):
        session.execute(ins, (i, i % 7))
    parts = session.execute("SELECT partition_id, token_start, token_end FROM "
                            "system_views.physical_partitions WHERE keyspace_name = %s "
                            "AND table_name = 'local_ix'", (keyspace,)).all()
    assert len(parts) >= 4
    # built over existing rows, then maintained by writes
    session.execute(f"CREATE INDEX local_ix_v ON {t} (v)")
    session.execute(f"UPDATE {t} SET v = 3 WHERE id = 0")
    want = sorted(r.id for r in session.execute(
        f"SELECT id FROM {t} WHERE v = 3 ALLOW FILTERING"))
    assert len(want) == 58
    rs = session.execute(SimpleStatement(f"SELECT id FROM {t} WHERE v = 3", fetch_size=5),
                         trace=True)
    trace = rs.get_query_trace(max_wait_sec=5)
    routing = [e.description for e in trace.events if e.description.startswith("Routing:")]
    in_token_order = ", ".join(str(p.partition_id)
                               for p in sorted(parts, key=lambda p: p.token_start))
    assert routing == [f"Routing: fan-out to all {len(parts)} physical partitions (secondary index "
                       f"local_ix_v, local: one index range read per partition, in token order): "
                       f"ids [{in_token_order}]"], routing
    got = [r.id for r in rs]
    assert sorted(got) == want and len(got) == len(set(got))
    # token order, across the partitions
    assert [tok(i) for i in got] == sorted(tok(i) for i in got)
    # a token restriction: only the partitions overlapping it
    first = sorted(parts, key=lambda p: p.token_start)[0]
    rs = session.execute(SimpleStatement(
        f"SELECT id FROM {t} WHERE v = 3 AND token(id) <= %s", fetch_size=3),
        (first.token_end,), trace=True)
    got = sorted(r.id for r in rs)
    assert got == sorted(i for i in want if tok(i) <= first.token_end)
    routing = [e.description for e in rs.get_query_trace(max_wait_sec=5).events
               if e.description.startswith("Routing:")]
    assert routing[0].startswith(f"Routing: targeted, 1 of {len(parts)} physical partitions"), routing
