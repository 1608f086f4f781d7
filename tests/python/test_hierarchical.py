"""Hierarchical partition keys (partition_key_kind = 'MultiHash'): placement by per-level hashes,
prefix queries routed only to the physical partitions holding the prefix, and traces that show it."""
import random
import re
import time

import pytest
from cassandra import InvalidRequest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.metadata import Murmur3Token

MIN_TOKEN = -(2 ** 63)


def multihash_token(levels):
    """The documented placement: top bits of each level's Murmur3 hash, concatenated
    (32+32 bits for two levels, 22+21+21 for three), mapped onto the ring as u - 2^63."""
    bits = [32, 32] if len(levels) == 2 else [22, 21, 21]
    u, shift = 0, 64
    for v, b in zip(levels, bits):
        h = Murmur3Token.hash_fn(v.encode()) & (2 ** 64 - 1)
        shift -= b
        u |= (h >> (64 - b)) << shift
    u = max(u, 1)
    return u - 2 ** 63


def trace_routing(rs):
    trace = rs.get_query_trace(max_wait_sec=5)
    lines = [e.description for e in trace.events if e.description.startswith("Routing:")]
    assert len(lines) == 1, [e.description for e in trace.events]
    return lines[0]


def partition_ids(line):
    m = re.search(r"\[([0-9, ]*)\]", line)
    return [int(x) for x in m.group(1).split(",") if x.strip()] if m else []


def test_multihash_ddl_rules(session, keyspace):
    with pytest.raises(InvalidRequest, match="2 or 3 levels"):
        session.execute(f"CREATE TABLE {keyspace}.one (a text, b int, PRIMARY KEY (a, b)) "
                        f"WITH partition_key_kind = 'MultiHash'")
    with pytest.raises(InvalidRequest, match="at most 3"):
        session.execute(f"CREATE TABLE {keyspace}.four (a text, b text, c text, d text, e int, "
                        f"PRIMARY KEY ((a, b, c, d), e)) WITH partition_key_kind = 'MultiHash'")
    session.execute(f"CREATE TABLE {keyspace}.h (a text, b text, c int, PRIMARY KEY ((a, b), c)) "
                    f"WITH partition_key_kind = 'MultiHash'")
    row = session.execute("SELECT partition_key_kind FROM system_schema.tables WHERE keyspace_name = %s "
                          "AND table_name = 'h'", (keyspace,)).one()
    assert row.partition_key_kind == "MultiHash"
    desc = session.execute(f"DESCRIBE TABLE {keyspace}.h").one().create_statement
    assert "partition_key_kind = 'MultiHash'" in desc
    with pytest.raises(InvalidRequest, match="cannot be altered"):
        session.execute(f"ALTER TABLE {keyspace}.h WITH partition_key_kind = 'Hash'")
    # token() is the documented per-level placement
    session.execute(f"INSERT INTO {keyspace}.h (a, b, c) VALUES ('x', 'y', 1)")
    tok = session.execute(f"SELECT token(a, b) FROM {keyspace}.h").one()[0]
    assert tok == multihash_token(["x", "y"])


def test_prefix_routing_over_split_partitions(server_factory, cluster_factory):
    srv = server_factory(set_args=["partitions.physical_split_bytes=256KiB"])
    session = cluster_factory(srv).connect()
    session.execute("CREATE KEYSPACE mh WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    ddl = ("CREATE TABLE mh.{name} (tenant text, usr text, sess text, ts int, body text, "
           "PRIMARY KEY ((tenant, usr, sess), ts)) {extra}")
    session.execute(ddl.format(name="events", extra="WITH partition_key_kind = 'MultiHash'"))
    session.execute(ddl.format(name="flat", extra=""))
    rng = random.Random(8)
    rows = []
    for t in range(200):
        users = 60 if t == 0 else rng.randint(1, 3)
        for u in range(users):
            for s in range(rng.randint(1, 3)):
                for ts in range(rng.randint(1, 6) if t else 8):
                    rows.append((f"t{t}", f"u{u}", f"s{s}", ts, "x" * rng.randint(50, 400)))
    for table in ("events", "flat"):
        ins = session.prepare(f"INSERT INTO mh.{table} (tenant, usr, sess, ts, body) VALUES (?, ?, ?, ?, ?)")
        execute_concurrent_with_args(session, ins, rows, concurrency=64)
    # wait for the background splits to settle
    deadline = time.time() + 30
    while True:
        parts = list(session.execute("SELECT partition_id, token_start, token_end, bytes FROM "
                                     "system_views.physical_partitions WHERE keyspace_name = 'mh' "
                                     "AND table_name = 'events'"))
        if len(parts) >= 4 and all(p.bytes <= 256 * 1024 + 4096 for p in parts) or time.time() > deadline:
            break
        time.sleep(0.5)
    assert len(parts) >= 4, parts
    # none above the split threshold (plus at most one write)
    assert all(p.bytes <= 256 * 1024 + 4096 for p in parts), parts
    total = len(parts)

    # the big tenant spans several physical partitions
    t0_tokens = sorted({multihash_token(["t0", r[1], r[2]]) for r in rows if r[0] == "t0"})
    spanned = {p.partition_id for p in parts for tok in t0_tokens if p.token_start < tok <= p.token_end}
    assert len(spanned) >= 2, "the big tenant should span several physical partitions"

    def q(stmt, *args, filtering=False):
        rs = session.execute(stmt + (" ALLOW FILTERING" if filtering else ""), args, trace=True)
        return sorted(tuple(r) for r in rs), trace_routing(rs)

    cols = "tenant, usr, sess, ts, body"
    # tenant: only its rows, only the partitions overlapping its range, no ALLOW FILTERING
    got, route = q(f"SELECT {cols} FROM mh.events WHERE tenant = %s", "t0")
    want, _ = q(f"SELECT {cols} FROM mh.flat WHERE tenant = %s", "t0", filtering=True)
    assert got == want == sorted(r for r in rows if r[0] == "t0")
    ids = partition_ids(route)
    assert set(ids) == spanned, (route, spanned)
    assert route.startswith("Routing: targeted") and len(ids) < total
    # a small tenant: one partition (its whole range fits in one)
    got, route = q(f"SELECT {cols} FROM mh.events WHERE tenant = %s", "t17")
    assert got == sorted(r for r in rows if r[0] == "t17")
    assert route.startswith("Routing: targeted, 1 of")
    # tenant + user: one or few
    got, route = q(f"SELECT {cols} FROM mh.events WHERE tenant = %s AND usr = %s", "t0", "u3")
    assert got == sorted(r for r in rows if r[0] == "t0" and r[1] == "u3")
    assert len(partition_ids(route)) <= 2
    # the full key: single-partition
    got, route = q(f"SELECT {cols} FROM mh.events WHERE tenant = %s AND usr = %s AND sess = %s", "t0", "u3", "s0")
    assert got == sorted(r for r in rows if r[:3] == ("t0", "u3", "s0"))
    assert route.startswith("Routing: single-partition")
    # a later level alone needs ALLOW FILTERING and fans out to all
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        session.execute("SELECT * FROM mh.events WHERE sess = 's1'")
    got, route = q(f"SELECT {cols} FROM mh.events WHERE sess = %s", "s1", filtering=True)
    want, _ = q(f"SELECT {cols} FROM mh.flat WHERE sess = %s", "s1", filtering=True)
    assert got == want == sorted(r for r in rows if r[2] == "s1")
    assert route.startswith("Routing: fan-out to all")
    # IN on the first level, clustering restriction, ORDER BY and LIMIT, aggregates, paging
    got, _ = q(f"SELECT {cols} FROM mh.events WHERE tenant IN (%s, %s) AND usr = %s", "t3", "t0", "u0")
    assert got == sorted(r for r in rows if r[0] in ("t3", "t0") and r[1] == "u0")
    n = session.execute("SELECT count(*) FROM mh.events WHERE tenant = 't0'").one()[0]
    assert n == sum(1 for r in rows if r[0] == "t0")
    from cassandra.query import SimpleStatement
    paged = [tuple(r) for r in session.execute(SimpleStatement(
        f"SELECT {cols} FROM mh.events WHERE tenant = 't0'", fetch_size=13))]
    assert sorted(paged) == sorted(r for r in rows if r[0] == "t0")
    assert len(paged) == len(set(paged))


def test_cqlsh_tracing_shows_routing_for_the_seed_examples(session, cqlsh):
    """The worked example in cql/ runs in cqlsh, and TRACING ON shows a routing line for each
    query of its routing table."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    schema = (root / "cql" / "10-multi-tenant-schema.cql").read_text()
    out = cqlsh([], stdin=schema)
    assert out.returncode == 0, out.stderr
    ins = session.prepare("INSERT INTO saas.events (tenant_id, user_id, session_id, ts, kind, payload) "
                          "VALUES (?, ?, ?, toTimestamp(now()), 'view', 'p')")
    for t in range(1, 4):
        for u in range(1, 4):
            session.execute(ins, (f"tenant-{t:04d}", f"user-{u:04d}", "session-0001"))
    routing = (root / "cql" / "11-multi-tenant-routing.cql").read_text()
    out = cqlsh([], stdin=routing)
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if "Routing:" in l]
    assert len(lines) == 5, out.stdout
    assert "single-partition" in lines[0]
    assert "targeted" in lines[1] and "targeted" in lines[2]
    assert "fan-out" in lines[3] and "fan-out" in lines[4]
