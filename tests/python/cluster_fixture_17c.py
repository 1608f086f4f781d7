"""A small private fixture for the forwarding tests (test_forwarding.py): one etcd, one
PostgreSQL database and two ringgate nodes, `a` and `b`, started with the placement test hook
RINGGATE_TEST_PLACEMENT_OWNER=a (node b owns nothing: every write and single-partition read that
reaches it is forwarded to a). The shared cluster fixture is tests/python/clusterlib.py.

Why node a is restarted after b starts: a node opens every partition at startup (size
counters) with a newer owner epoch, which fences the other node's handles until read-only
handles for partitions owned elsewhere exist; a's restart makes its epoch the newest again,
and b never opens a partition afterwards (everything it is asked is forwarded).
"""

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pgserver
from ports import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("RINGGATE_BIN", str(ROOT / "target" / "release" / "ringgate"))


def etcd_bin():
    if os.environ.get("RINGGATE_ETCD_BIN"):
        return os.environ["RINGGATE_ETCD_BIN"]
    env = ROOT / ".cluster-deps" / "env"
    if env.exists():
        for line in env.read_text().splitlines():
            if line.startswith("RINGGATE_ETCD_BIN="):
                return line.split("=", 1)[1].strip()
    return None


def wait_port(port, proc, log, timeout_s=60):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited: {Path(log).read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"port {port} not open after {timeout_s} s")


class Node:
    def __init__(self, cluster, name):
        self.cluster, self.name = cluster, name
        self.port = free_port()
        self.log = os.path.join(cluster.dir, f"{name}.log")
        self.proc = None

    def start(self):
        c = self.cluster
        env = dict(os.environ, RINGGATE_TEST_PLACEMENT_OWNER=c.owner)
        args = [
            BIN, "serve", "--data-dir", os.path.join(c.dir, self.name),
            "--set", f"listen=127.0.0.1:{self.port}",
            "--set", "storage.backend=postgres",
            "--set", f"storage.postgres.url={c.pg.url('rg')}",
            "--set", f'cluster.etcd=["http://127.0.0.1:{c.etcd_port}"]',
            "--set", f"cluster.node_name={self.name}",
            "--set", "cluster.lease_ms=2000",
            "--set", "http.enabled=false",
        ] + [a for kv in c.settings for a in ("--set", kv)]
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "a"))
        wait_port(self.port, self.proc, self.log)
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill9(self):
        self.stop(signal.SIGKILL)


class TwoNodes:
    """etcd + PostgreSQL; nodes a and b (b forwards everything to `owner`)."""

    def __init__(self, owner="a", settings=()):
        self.dir = tempfile.mkdtemp(prefix="rg17c-")
        self.owner = owner
        self.settings = list(settings)
        self.pg = None
        self.etcd = None
        self.nodes = {}

    def start_backends(self):
        bin_dir, etcd = pgserver.find_bin_dir(), etcd_bin()
        if not bin_dir or not etcd:
            return False
        self.pg = pgserver.PgServer(bin_dir).start()
        self.pg.create_database("rg")
        self.etcd_port, peer = free_port(), free_port()
        self.etcd = subprocess.Popen(
            [etcd, "--data-dir", os.path.join(self.dir, "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"default=http://127.0.0.1:{peer}", "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.etcd_port, self.etcd, os.devnull)
        return True

    def node(self, name):
        return self.nodes.setdefault(name, Node(self, name))

    def close(self):
        for n in self.nodes.values():
            n.stop()
        if self.etcd:
            self.etcd.kill()
            self.etcd.wait()
        if self.pg:
            self.pg.remove()
