"""A LOGGED batch across three physical partitions is committed one partition at a time
through the batch log (storage/batch_log.rs); a kill -9 at a random point of its application
leaves all of it or none of it once the server is back (20 repetitions, one restart each).

The server runs with RINGGATE_TEST_BATCHLOG_PAUSE_MS, which sleeps before each partition's
commit, so that the random kill lands before the log entry, between parts or after the last."""
import random
import struct
import time

from cassandra.cluster import Cluster
from cassandra.murmur3 import murmur3
from cassandra.query import BatchStatement, BatchType

REPETITIONS = 20
PAUSE_MS = 100


def token(k):
    return murmur3(struct.pack(">i", k))


def keys_in_each_partition(session, count):
    """`count` keys of each of the table's physical partitions, by partition."""
    ranges = sorted((r.token_start, r.token_end) for r in session.execute(
        "SELECT token_start, token_end FROM system_views.physical_partitions "
        "WHERE keyspace_name = 'bl' AND table_name = 't'"))
    assert len(ranges) == 3
    found = [[] for _ in ranges]
    k = 0
    while min(len(f) for f in found) < count:
        t = token(k)
        for i, (lo, hi) in enumerate(ranges):
            if lo < t <= hi and len(found[i]) < count:
                found[i].append(k)
        k += 1
    return found


def test_logged_batch_across_partitions_survives_kill9(server_factory, monkeypatch):
    monkeypatch.setenv("RINGGATE_TEST_BATCHLOG_PAUSE_MS", str(PAUSE_MS))
    srv = server_factory()
    cluster = Cluster(contact_points=[srv.host], port=srv.port)
    s = cluster.connect()
    s.execute("CREATE KEYSPACE bl WITH replication = {'class': 'SimpleStrategy', "
              "'replication_factor': 1}")
    s.execute("CREATE TABLE bl.t (k int PRIMARY KEY, round int) "
              "WITH cosmosdb_provisioned_throughput = 30000")
    parts = keys_in_each_partition(s, REPETITIONS)
    cluster.shutdown()
    rng = random.Random()
    outcomes = []
    for rep in range(REPETITIONS):
        keys = [p[rep] for p in parts]
        cluster = Cluster(contact_points=[srv.host], port=srv.port)
        s = cluster.connect()
        ins = s.prepare("INSERT INTO bl.t (k, round) VALUES (?, ?)")
        batch = BatchStatement(batch_type=BatchType.LOGGED)
        for k in keys:
            batch.add(ins, (k, rep))
        future = s.execute_async(batch, timeout=30)
        # Anywhere from before the log entry to after the last part (3 pauses).
        mark = srv.log_size()
        killed_after_s = rng.uniform(0, 4.5 * PAUSE_MS / 1000)
        time.sleep(killed_after_s)
        srv.kill9()
        future.add_errback(lambda _: None)  # the connection's loss is expected
        cluster.shutdown()
        srv.start()
        cluster = Cluster(contact_points=[srv.host], port=srv.port)
        s = cluster.connect()
        rows = [s.execute("SELECT round FROM bl.t WHERE k = %s", (k,)).one() for k in keys]
        cluster.shutdown()
        present = [r is not None for r in rows]
        assert all(present) or not any(present), f"repetition {rep}: {present}"
        assert all(r.round == rep for r in rows if r is not None)
        replayed = "replayed 1 batch log entries" in srv.log_text(mark)
        outcomes.append("replayed" if replayed else ("all" if all(present) else "none"))
    # Report how the kills landed (visible with -s): none / replayed / all.
    print({o: outcomes.count(o) for o in set(outcomes)})
