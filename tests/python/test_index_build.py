"""CREATE INDEX over existing rows while the table splits: the build's commits to a split
parent are fenced, and the build starts over through the current partition map, so the index
answers exactly what a scan finds. The server runs with RINGGATE_TEST_INDEX_BUILD_PAUSE_MS (a
test hook sleeping before each commit of a build), so the split lands during the build."""

import threading
import time

from cassandra.cluster import Cluster

from rgtest import create_keyspace

PAUSE_MS = 300


def test_index_build_starts_over_after_a_split_fences_it(server_factory, monkeypatch):
    monkeypatch.setenv("RINGGATE_TEST_INDEX_BUILD_PAUSE_MS", str(PAUSE_MS))
    srv = server_factory()
    c = Cluster(contact_points=[srv.host], port=srv.port)
    s = c.connect()
    try:
        create_keyspace(s, "ib")
        s.execute("CREATE TABLE ib.t (id int PRIMARY KEY, v int) WITH cosmosdb_provisioned_throughput = 20000")
        ins = s.prepare("INSERT INTO ib.t (id, v) VALUES (?, ?)")
        for i in range(300):
            s.execute(ins, (i, i % 5))
        before = s.execute("SELECT partition_id FROM system_views.physical_partitions "
                           "WHERE keyspace_name = 'ib' AND table_name = 't'").all()
        mark = srv.log_size()
        errors = []

        def create_index():
            try:
                s.execute("CREATE INDEX t_v ON ib.t (v)", timeout=60)
            except Exception as e:  # reported below, with the checks
                errors.append(e)

        build = threading.Thread(target=create_index)
        build.start()
        # The build commits its first partition after PAUSE_MS: split the table before that.
        time.sleep(PAUSE_MS / 3000)
        s.execute("ALTER TABLE ib.t WITH cosmosdb_provisioned_throughput = 80000", timeout=60)
        build.join(timeout=60)
        assert not errors, f"CREATE INDEX failed: {errors}"
        after = s.execute("SELECT partition_id FROM system_views.physical_partitions "
                          "WHERE keyspace_name = 'ib' AND table_name = 't'").all()
        assert len(after) > len(before), (before, after)
        assert "index build fenced by a split" in srv.log_text(mark), "the split did not land during the build"
        for g in range(5):
            want = sorted(r.id for r in s.execute(f"SELECT id FROM ib.t WHERE v = {g} ALLOW FILTERING"))
            got = sorted(r.id for r in s.execute(f"SELECT id FROM ib.t WHERE v = {g}"))
            assert got == want, f"index and scan differ for v = {g}"
    finally:
        c.shutdown()
