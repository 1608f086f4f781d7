"""The data directory fills up: a 512 MiB tmpfs holds the data dir and a filler file takes most of
it. Writes then get a clear error (not a hang, not a crash), everything acknowledged stays
readable, and once the filler is deleted writes work again without a restart; after a restart
every acknowledged row is still there.

Mounting needs root (CAP_SYS_ADMIN); without it the test is skipped and says why."""

import os
import subprocess
import time

import pytest
from cassandra.cluster import Cluster

from rgtest import error_text, wait_until

# The server's default reserve (storage.min_free_bytes, 256 MiB) has to hold what is owed when
# writes stop: the flush of a full memtable (64 MiB, written while its journal still exists)
# and compactions. So the disk is 512 MiB (tmpfs pages cost memory only when used) and the
# filler leaves 300 MiB: writes stop after about 44 MiB.
DISK_BYTES = 512 * 1024 * 1024
FREE_AFTER_FILLER_BYTES = 300 * 1024 * 1024
ROW_BYTES = 65536
MAX_WRITES = 5_000


@pytest.fixture
def small_disk(tmp_path):
    """A 512 MiB tmpfs at the data dir server_factory's first server uses."""
    mount_point = tmp_path / "server1" / "data"
    mount_point.mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the disk-full test (needs root): {r.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(path, free_bytes):
    """Writes a filler file leaving about `free_bytes` free on path's file system."""
    st = os.statvfs(path)
    size = st.f_bavail * st.f_frsize - free_bytes
    filler = path / "filler"
    with open(filler, "wb") as f:
        chunk = b"\0" * (1 << 20)
        while size > 0:
            f.write(chunk[: min(size, len(chunk))])
            size -= len(chunk)
    return filler


def test_disk_full_gives_clear_errors_loses_nothing_and_recovers(small_disk, server_factory):
    srv = server_factory()
    try:
        c = Cluster(contact_points=[srv.host], port=srv.port, connect_timeout=10)
        s = c.connect()
        s.execute("CREATE KEYSPACE d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE d.t (id int PRIMARY KEY, v blob)")
        ins = s.prepare("INSERT INTO d.t (id, v) VALUES (?, ?)")
        filler = fill(small_disk, FREE_AFTER_FILLER_BYTES)
        acked, error = [], None
        for key in range(MAX_WRITES):
            try:
                s.execute(ins, (key, key.to_bytes(4, "big") * (ROW_BYTES // 4)), timeout=30)
            except Exception as e:  # the first refused write ends the loop
                error = e
                break
            acked.append(key)
        assert error is not None, f"{MAX_WRITES} writes of {ROW_BYTES} bytes fit in a full disk"
        text = error_text(error)
        print("disk full error:", type(error).__name__, text)
        assert "No space left on device" in text and "storage.min_free_bytes" in text, f"unclear disk-full error: {type(error).__name__}: {text}"
        assert srv.running(), "the server died when the disk filled up"
        # Still serving reads, and every acknowledged row is whole.
        sel = s.prepare("SELECT v FROM d.t WHERE id = ?")
        for key in acked:
            assert s.execute(sel, (key,)).one().v == key.to_bytes(4, "big") * (ROW_BYTES // 4)
        # Free the space: writes work again without a restart.
        filler.unlink()

        def write_works():
            try:
                s.execute(ins, (MAX_WRITES, b"after"), timeout=10)
                return True
            except Exception:
                time.sleep(0.5)
                return False

        wait_until(write_works, timeout=60, message="a write to succeed after freeing space")
        s.execute(ins, (MAX_WRITES + 1, b"after"))
        c.shutdown()
        srv.restart(kill9=True)
        c = Cluster(contact_points=[srv.host], port=srv.port, connect_timeout=10)
        s = c.connect()
        sel = s.prepare("SELECT v FROM d.t WHERE id = ?")
        for key in acked:
            assert s.execute(sel, (key,)).one().v == key.to_bytes(4, "big") * (ROW_BYTES // 4), key
        assert s.execute(sel, (MAX_WRITES + 1,)).one().v == b"after"
        c.shutdown()
    finally:
        srv.stop()
