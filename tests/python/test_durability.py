"""What was acknowledged must survive the process dying (kill -9) and a clean SIGTERM.

storage.sync = "none" (the default) promises survival of a process crash (kill -9), not of a
machine crash; "fsync" adds fsync group commit. Both must pass these tests."""

import pytest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args

from rgtest import create_keyspace

N_ROWS = 5000

SYNC_CONFIGS = {
    "default": None,
    "none": '[storage]\nsync = "none"\n',
    "fsync": '[storage]\nsync = "fsync"\n',
}


def connect(srv):
    c = Cluster(contact_points=[srv.host], port=srv.port)
    return c, c.connect()


def read_all(srv, table):
    c, s = connect(srv)
    try:
        return {r.id: r.v for r in s.execute(f"SELECT id, v FROM {table}")}
    finally:
        c.shutdown()


@pytest.mark.parametrize("sync", sorted(SYNC_CONFIGS))
def test_acknowledged_writes_survive_kill9(server_factory, unique_name, sync):
    srv = server_factory(config=SYNC_CONFIGS[sync])
    ks = unique_name("ks")
    table = f"{ks}.durable"
    c, s = connect(srv)
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    ins = s.prepare(f"INSERT INTO {table} (id, v) VALUES (?, ?)")
    expected = {i: f"value-{i}-{'x' * (i % 50)}" for i in range(N_ROWS)}
    results = execute_concurrent_with_args(s, ins, list(expected.items()), concurrency=64)
    assert all(ok for ok, _ in results)
    # every write above has been acknowledged: kill the process right now, no clean shutdown
    srv.kill9()
    c.shutdown()

    srv.start()
    got = read_all(srv, table)
    missing = sorted(set(expected) - set(got))
    assert not missing, f"{len(missing)} acknowledged rows lost after kill -9, e.g. {missing[:10]}"
    assert got == expected


def test_writes_answered_amid_other_connections_survive_kill9(server_factory, unique_name):
    """Many connections pipeline writes at once, so that their commits interleave and one
    journal write covers several connections' commits (a connection writer yields while
    commits wait for it, `server/connection.rs`). The server is killed as soon as one
    connection has all its answers: every write that was answered is kept, and nothing else
    is made up."""
    import struct

    import cqlwire

    srv = server_factory()
    ks = unique_name("ks")
    table = f"{ks}.interleaved"
    c, s = connect(srv)
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    c.shutdown()
    conns, per_conn = 24, 150
    wires = [cqlwire.ready_connection(srv.host, srv.port) for _ in range(conns)]
    try:
        ins = [w.prepared_id(f"INSERT INTO {table} (id, v) VALUES (?, ?)") for w in wires]
        for n, w in enumerate(wires):
            frames = b"".join(
                cqlwire.frame(cqlwire.EXECUTE, cqlwire.execute_body(
                    ins[n], [struct.pack(">i", n * per_conn + i), f"v{n}-{i}".encode()]),
                    stream=i + 10)
                for i in range(per_conn))
            w.send(frames)
        answered = [wires[0].read_frame() for _ in range(per_conn)]
        srv.kill9()
    finally:
        for w in wires:
            w.close()
    assert all(f.opcode == cqlwire.RESULT for f in answered), answered[:3]
    srv.start()
    got = read_all(srv, table)
    first = {i: f"v0-{i}" for i in range(per_conn)}
    missing = sorted(k for k in first if got.get(k) != first[k])
    assert not missing, f"{len(missing)} answered writes lost after kill -9, e.g. {missing[:10]}"
    assert all(v == f"v{k // per_conn}-{k % per_conn}" for k, v in got.items())


def test_updates_and_deletes_survive_kill9(server_factory, unique_name):
    srv = server_factory()
    ks = unique_name("ks")
    table = f"{ks}.mutated"
    c, s = connect(srv)
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
    ins = s.prepare(f"INSERT INTO {table} (id, v) VALUES (?, ?)")
    execute_concurrent_with_args(s, ins, [(i, "orig") for i in range(1000)])
    upd = s.prepare(f"UPDATE {table} SET v = ? WHERE id = ?")
    execute_concurrent_with_args(s, upd, [("updated", i) for i in range(0, 1000, 3)])
    dele = s.prepare(f"DELETE FROM {table} WHERE id = ?")
    execute_concurrent_with_args(s, dele, [(i,) for i in range(0, 1000, 5)])
    srv.kill9()
    c.shutdown()

    expected = {}
    for i in range(1000):
        if i % 5 == 0:
            continue
        expected[i] = "updated" if i % 3 == 0 else "orig"
    srv.start()
    assert read_all(srv, table) == expected

    # and a second crash after more writes on the recovered data
    c, s = connect(srv)
    s.execute(f"INSERT INTO {table} (id, v) VALUES (0, 'back')")
    srv.kill9()
    c.shutdown()
    srv.start()
    expected[0] = "back"
    assert read_all(srv, table) == expected


def test_sigterm_with_open_connections_exits_cleanly(server_factory, unique_name):
    srv = server_factory()
    ks = unique_name("ks")
    c, s = connect(srv)
    create_keyspace(s, ks)
    s.execute(f"CREATE TABLE {ks}.t (id int PRIMARY KEY, v text)")
    for i in range(100):
        s.execute(f"INSERT INTO {ks}.t (id, v) VALUES ({i}, 'v{i}')")
    try:
        # the driver still holds its connections open while the server is told to stop
        code = srv.stop(timeout=10)
        assert code == 0, f"expected a clean exit (code 0) within 10 s of SIGTERM, got {code}"
    finally:
        c.shutdown()
    srv.start()
    assert read_all(srv, f"{ks}.t") == {i: f"v{i}" for i in range(100)}
