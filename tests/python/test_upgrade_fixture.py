"""A data directory written by the release before per-partition storage (commit 785ed3e,
tests/fixtures/upgrade/) opens with this version and reads back every row, index entry,
physical partition and size; opened twice (the upgrade runs once) and after a kill -9 during the
first start (the upgrade is crash-safe)."""
import sys
import tarfile
from pathlib import Path

import pytest
from cassandra.cluster import Cluster

from conftest import RinggateServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade"
sys.path.insert(0, str(FIXTURES))
import make_fixture  # noqa: E402


def _server_on_fixture(ringgate_bin, tmp_path):
    with tarfile.open(FIXTURES / "data-785ed3e.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    return RinggateServer(ringgate_bin, tmp_path, name="upgraded")


def _check_everything(srv):
    events, owners, wide = make_fixture.expected_rows()
    cluster = Cluster(contact_points=[srv.host], port=srv.port)
    try:
        s = cluster.connect()
        rows = list(s.execute("SELECT dev, seq, name, owner, tags, attrs, hist, home FROM up.events"))
        assert len(rows) == len(events)
        by_key = {(r.dev, r.seq): r for r in rows}
        for e in events:
            r = by_key[(e["dev"], e["seq"])]
            assert r.name == e["name"]
            assert r.owner == owners[e["dev"]]
            assert set(r.tags) == e["tags"]
            assert dict(r.attrs) == e["attrs"]
            assert list(r.hist) == e["hist"]
            assert (r.home.street, r.home.zip) == e["home"]
        # Clustering order is DESC within a partition.
        seqs = [r.seq for r in s.execute("SELECT seq FROM up.events WHERE dev = 3")]
        assert seqs == sorted(range(make_fixture.SEQS), reverse=True)
        # The secondary index answers as before, paged.
        stmt = s.prepare("SELECT dev, seq FROM up.events WHERE name = ?")
        stmt.fetch_size = 7
        got = sorted((r.dev, r.seq) for r in s.execute(stmt, ["n3"]))
        assert got == sorted((e["dev"], e["seq"]) for e in events if e["name"] == "n3")
        # The table with throughput kept its physical partitions.
        parts = list(s.execute("SELECT partition_id FROM system_views.physical_partitions "
                               "WHERE keyspace_name = 'up' AND table_name = 'wide'"))
        assert len(parts) == 3
        got_wide = {r.k: r.v for r in s.execute("SELECT k, v FROM up.wide") if r.k < 1000}
        assert got_wide == wide
        ttl = s.execute("SELECT v, TTL(v) AS t FROM up.wide WHERE k = 1000").one()
        assert ttl.v == "ttl" and 0 < ttl.t <= 630720000
        # Sizes were kept: every logical partition of events is counted.
        n = s.execute("SELECT count(*) FROM system_views.logical_partitions "
                      "WHERE keyspace_name = 'up' AND table_name = 'events' ALLOW FILTERING").one()
        assert n[0] == min(20, make_fixture.DEVICES)
        # It is writable after the upgrade.
        s.execute("INSERT INTO up.wide (k, v) VALUES (5000, 'new')")
        assert s.execute("SELECT v FROM up.wide WHERE k = 5000").one().v == "new"
    finally:
        cluster.shutdown()


def test_fixture_of_previous_release_reads_back(ringgate_bin, tmp_path):
    srv = _server_on_fixture(ringgate_bin, tmp_path)
    try:
        srv.start()
        _check_everything(srv)
        srv.stop()
        # The size records moved out of the metadata space on the first start (all 221
        # logical partitions: 20 of events, 201 of wide), and only then.
        assert "moved 221 size records" in srv.log_text()
        mark = srv.log_size()
        srv.start()
        _check_everything(srv)
        assert "size records" not in srv.log_text(mark)
    finally:
        srv.stop()


def test_upgrade_survives_kill_during_first_start(ringgate_bin, tmp_path):
    srv = _server_on_fixture(ringgate_bin, tmp_path)
    try:
        # Kill as soon as the process runs: the upgrade may be anywhere in its steps.
        srv.start(wait=False)
        srv.kill9()
        srv.start()
        _check_everything(srv)
    finally:
        srv.stop()
