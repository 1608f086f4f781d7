"""cqlsh COPY TO / COPY FROM round-trips a table (COPY TO reads the ring as token ranges)."""
from cassandra.concurrent import execute_concurrent_with_args


def test_copy_to_then_from_round_trips(session, keyspace, cqlsh, tmp_path):
    for name in ("src", "dst"):
        session.execute(f"CREATE TABLE {keyspace}.{name} (k int, c text, v double, tags set<text>, "
                        f"PRIMARY KEY (k, c))")
    ins = session.prepare(f"INSERT INTO {keyspace}.src (k, c, v, tags) VALUES (?, ?, ?, ?)")
    rows = [(k, f"c{j}", k * 1.5 + j, {f"t{k % 3}", "x"}) for k in range(700) for j in range(3)]
    execute_concurrent_with_args(session, ins, rows, concurrency=64)
    csv = tmp_path / "src.csv"
    out = cqlsh(["-e", f"COPY {keyspace}.src (k, c, v, tags) TO '{csv}' WITH HEADER = true"])
    assert out.returncode == 0, out.stderr
    assert f"{len(rows)} rows exported" in out.stdout, out.stdout
    out = cqlsh(["-e", f"COPY {keyspace}.dst (k, c, v, tags) FROM '{csv}' WITH HEADER = true"])
    assert out.returncode == 0, out.stderr
    assert f"{len(rows)} rows imported" in out.stdout, out.stdout
    src = sorted(tuple(r) for r in session.execute(f"SELECT k, c, v, tags FROM {keyspace}.src"))
    dst = sorted(tuple(r) for r in session.execute(f"SELECT k, c, v, tags FROM {keyspace}.dst"))
    assert len(src) == len(rows)
    assert dst == src
