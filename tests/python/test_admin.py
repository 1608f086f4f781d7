"""`ringgate admin` against a running server (issue 19): status, tables, partitions, hot,
maintenance commands over CQL (system_views.maintenance), and an online backup taken while
writes run, restored with `ringgate restore` into a server that holds exactly that state."""

import json
import subprocess
import threading
import time

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster
from cassandra.protocol import OverloadedErrorMessage

from rgtest import create_keyspace, rethrowing_profile


def admin(ringgate_bin, srv, *args, json_out=True, check=True):
    cmd = [str(ringgate_bin), "admin", "--host", srv.address] + (["--json"] if json_out else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, (cmd, r.stdout, r.stderr)
    return json.loads(r.stdout) if json_out and r.returncode == 0 else r


def server_with_keyspace(server_factory, unique_name):
    """A new server, a driver session on it and a new keyspace. Errors are rethrown as they
    came: the default policy retries a 429 on the next host, and with one host the driver's
    NoHostAvailable may be raised before it records the host's error (it records it after
    handing the retry to another thread), so a 429 could not be told from other failures."""
    srv = server_factory()
    profile = rethrowing_profile()
    c = Cluster(contact_points=[srv.host], port=srv.port,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    s = c.connect()
    ks = create_keyspace(s, unique_name("ks"))
    return srv, c, s, ks


def test_admin_reports_what_system_views_show(ringgate_bin, server_factory, unique_name):
    srv, c, s, ks = server_with_keyspace(server_factory, unique_name)
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cosmosdb_provisioned_throughput = 20000")
    ins = s.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
    for k in range(100):
        s.execute(ins, (k, "x" * k))
    status = admin(ringgate_bin, srv, "status")
    assert status["tables"] == 1 and status["physical_partitions"] == 2
    assert status["logical_partitions"] == 100
    tables = admin(ringgate_bin, srv, "tables")
    assert [(t["keyspace_name"], t["table_name"], t["provisioned_ru"]) for t in tables] == [(ks, "t", 20000)]
    parts = admin(ringgate_bin, srv, "partitions", f"{ks}.t")
    views = {r.partition_id: r for r in s.execute(
        "SELECT partition_id, bytes, logical_partitions FROM system_views.physical_partitions "
        "WHERE keyspace_name = %s AND table_name = %s", (ks, "t"))}
    assert {p["partition_id"]: (p["bytes"], p["logical_partitions"]) for p in parts} == \
        {i: (r.bytes, r.logical_partitions) for i, r in views.items()}
    hot = admin(ringgate_bin, srv, "hot", f"{ks}.t")
    assert hot["largest"][0]["partition_key"] == "99"  # the longest value
    assert hot["hottest"], hot
    # Human-readable output is a table with a header.
    text = admin(ringgate_bin, srv, "partitions", f"{ks}.t", json_out=False).stdout
    assert text.splitlines()[0].split()[:3] == ["partition_id", "token_start", "token_end"], text
    # Maintenance: garbage-collect removes a range tombstone and the rows it shadows.
    s.execute(f"CREATE TABLE {ks}.r (k int, c int, PRIMARY KEY (k, c)) WITH gc_grace_seconds = 0")
    for i in range(10):
        s.execute(f"INSERT INTO {ks}.r (k, c) VALUES (1, {i})")
    s.execute(f"DELETE FROM {ks}.r WHERE k = 1 AND c < 5")
    time.sleep(1.1)  # the tombstone's local deletion time (seconds) must be past
    gc = admin(ringgate_bin, srv, "garbage-collect", f"{ks}.r")
    assert gc["result"] == "1 partitions lost tombstones", gc
    assert admin(ringgate_bin, srv, "flush")["result"] == "flushed"
    assert admin(ringgate_bin, srv, "compact")["result"] == "compacted"
    assert [r.c for r in s.execute(f"SELECT c FROM {ks}.r WHERE k = 1")] == [5, 6, 7, 8, 9]
    # Errors: a clear message and exit code 1.
    bad = admin(ringgate_bin, srv, "partitions", "nodot", check=False)
    assert bad.returncode == 1 and "KEYSPACE.TABLE" in bad.stderr
    bad = admin(ringgate_bin, srv, "garbage-collect", f"{ks}.nope", check=False)
    assert bad.returncode == 1 and "unconfigured table nope" in bad.stderr, bad.stderr
    c.shutdown()


def test_admin_logs_in_when_auth_is_enabled(ringgate_bin, server_factory):
    srv = server_factory(config='[auth]\nenabled = true\n[auth.users]\nops = "secret"\n')
    r = admin(ringgate_bin, srv, "status", check=False)
    assert r.returncode == 1 and "--username" in r.stderr
    r = admin(ringgate_bin, srv, "-u", "ops", "-p", "wrong", "status", check=False)
    assert r.returncode == 1 and "server error 0x0100" in r.stderr, r.stderr
    assert admin(ringgate_bin, srv, "-u", "ops", "-p", "secret", "status")["tables"] == 0


def test_online_backup_restores_exactly_its_point_in_time(ringgate_bin, server_factory, unique_name,
                                                           tmp_path):
    srv, c, s, ks = server_with_keyspace(server_factory, unique_name)
    s.execute(f"CREATE TYPE {ks}.addr (street text, n int)")
    s.execute(f"CREATE TABLE {ks}.a (k int PRIMARY KEY, v text, home frozen<addr>) "
              f"WITH cosmosdb_provisioned_throughput = 20000")
    s.execute(f"CREATE TABLE {ks}.b (k int, c int, v blob, PRIMARY KEY (k, c)) "
              f"WITH cosmosdb_autoscale_max_throughput = 4000")
    ins_a = s.prepare(f"INSERT INTO {ks}.a (k, v, home) VALUES (?, ?, {{street: 'x', n: 1}})")
    ins_b = s.prepare(f"INSERT INTO {ks}.b (k, c, v) VALUES (?, ?, ?)")
    # Writers: each write's (start, acknowledged) times, by key.
    times = {}
    stop = threading.Event()

    def execute_admitted(stmt, args):
        # On a quiet machine the writers outrun table b's autoscale budget: a rate-limited
        # (429) write wrote nothing, so it is sent again after the server's RetryAfterMs.
        # Bounded by time, not attempts: three writers share the budget, and one of them may
        # find it spent by the others many times in a row.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                return s.execute(stmt, args)
            except OverloadedErrorMessage as e:
                assert "Request rate is large" in str(e), e
                time.sleep(0.01)
        raise AssertionError("a write was rate-limited for 60 s")

    def write(worker):
        i = 0
        while not stop.is_set():
            k = worker * 1_000_000 + i
            # The first attempt's start: a write counts as begun then (conservative).
            started = time.monotonic()
            execute_admitted(ins_a, (k, f"v{k}"))
            execute_admitted(ins_b, (k % 50, k, b"y" * 100))
            times[k] = (started, time.monotonic())
            i += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    backup_dir = tmp_path / "backup"
    began = time.monotonic()
    out = admin(ringgate_bin, srv, "backup", "--to", str(backup_dir))
    ended = time.monotonic()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert "written to" in out["result"], out
    acked_before = {k for k, (st, ack) in times.items() if ack < began}
    started_after = {k for k, (st, ack) in times.items() if st > ended}
    assert acked_before and started_after, (len(acked_before), len(started_after))
    # A backup directory is never overwritten.
    again = admin(ringgate_bin, srv, "backup", "--to", str(backup_dir), check=False)
    assert again.returncode == 1 and "not empty" in again.stderr
    c.shutdown()

    # Restore into the data directory of the next server_factory server (server2).
    new_dir = tmp_path / "server2" / "data"
    r = subprocess.run([str(ringgate_bin), "restore", "--from", str(backup_dir), "--data-dir", str(new_dir)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    restored = server_factory()
    assert restored.data_dir == new_dir
    c2 = Cluster(contact_points=[restored.host], port=restored.port)
    s2 = c2.connect()
    keys_a = {row.k for row in s2.execute(f"SELECT k FROM {ks}.a")}
    assert acked_before <= keys_a
    assert not keys_a & started_after
    # Writes are whole: both statements of a key, or the second missing only for the last
    # writes in flight; the partition key set of b is all there.
    home = s2.execute(f"SELECT home FROM {ks}.a WHERE k = %s", (min(acked_before),)).one().home
    assert (home.street, home.n) == ("x", 1)
    # Schema, partition maps and throughput settings came along.
    tp = {r.table_name: r for r in s2.execute(
        "SELECT table_name, provisioned_ru, autoscale_max_ru, physical_partitions "
        "FROM system_views.throughput WHERE keyspace_name = %s", (ks,))}
    assert (tp["a"].provisioned_ru, tp["a"].physical_partitions) == (20000, 2)
    assert tp["b"].autoscale_max_ru == 4000
    logical = sum(r.logical_partitions for r in s2.execute(
        "SELECT logical_partitions FROM system_views.physical_partitions "
        "WHERE keyspace_name = %s AND table_name = %s", (ks, "a")))
    assert logical == len(keys_a)
    c2.shutdown()


def test_restore_refuses_incomplete_or_damaged_backups(ringgate_bin, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    for command in (["restore"], ["admin", "restore"]):
        r = subprocess.run([str(ringgate_bin), *command, "--from", str(empty), "--data-dir", str(tmp_path / "d")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "manifest.json" in r.stderr, (command, r.stderr)
