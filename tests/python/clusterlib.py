"""A local ringgate cluster of real processes on 127.0.0.1, for the cluster tests and
`scripts/cluster`: one etcd, one PostgreSQL (pgserver.py) and N `ringgate serve` nodes with
`storage.backend = "postgres"` and `cluster.etcd` set, each with its own data directory, CQL
port and node name (n1, n2, ...).

    c = LocalCluster(nodes=3).start()
    LocalCluster(nodes=3, groups=2)    2 PostgreSQL servers as 2 storage groups ("default",
                             "group2"): node k's own settings name server (k-1) mod 2, whose
                             group it registers at startup
    LocalCluster(groups=2, replicated=True)   each group a Patroni cluster of a primary and a
                             synchronous standby (patronigroup.py) over the cluster's etcd;
                             c.replicated[i] is group i's ReplicatedGroup (primary(),
                             kill9_primary(), wait_primary(), members[k].start() ...)
    c.addresses()            -> ["127.0.0.1:PORT", ...] of the running nodes
    c.node("n2").kill9()     real SIGKILL (no clean shutdown, its lease runs out)
    c.node("n2").pause() / .resume()   SIGSTOP / SIGCONT
    c.node("n2").restart()   same name, data dir and port; waits until it serves
    c.add_node()             a new node n<k+1>
    c.stop()                 everything, processes and directories

Binaries: etcd from $RINGGATE_ETCD_BIN or the RINGGATE_ETCD_BIN line of .cluster-deps/env
(scripts/install-cluster-deps), PostgreSQL as pgserver.py finds it. Without them `missing()`
names what is absent: tests skip loudly, or fail when RINGGATE_REQUIRE_POSTGRES or
RINGGATE_REQUIRE_ETCD is set (scripts/test sets them).

Why a short lease (2 s by default): a killed node's absence is seen within about a lease, so
failure tests wait seconds, not the default 5 s lease.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pgserver
from ports import free_port

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
READY_TIMEOUT_S = 60.0


def _deps_env():
    env = ROOT / ".cluster-deps" / "env"
    out = {}
    if env.exists():
        for line in env.read_text().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    return out


def find_etcd():
    for cand in (os.environ.get("RINGGATE_ETCD_BIN"), _deps_env().get("RINGGATE_ETCD_BIN"),
                 shutil.which("etcd")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def find_etcdctl():
    """etcdctl, found as find_etcd finds etcd (the tests that read etcd's keys use it)."""
    for cand in (os.environ.get("RINGGATE_ETCDCTL_BIN"), _deps_env().get("RINGGATE_ETCDCTL_BIN"),
                 shutil.which("etcdctl")):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise RuntimeError("etcdctl not found: run scripts/install-cluster-deps")


def ringgate_binary():
    from conftest import default_binary  # the one lookup of the binary the tests run
    return default_binary()


def missing():
    """What the cluster needs and this machine lacks (empty: everything is there)."""
    out = []
    if pgserver.find_bin_dir() is None:
        out.append("no PostgreSQL server binaries")
    if find_etcd() is None:
        out.append("no etcd binary")
    if not ringgate_binary().exists():
        out.append(f"no ringgate binary at {ringgate_binary()}")
    return out


def require_or_skip(pytest):
    """Skips the calling test module loudly without the binaries, or fails when required."""
    gaps = missing()
    if not gaps:
        return
    msg = ", ".join(gaps) + " (run scripts/install-cluster-deps and cargo build --release)"
    if os.environ.get("RINGGATE_REQUIRE_POSTGRES") or os.environ.get("RINGGATE_REQUIRE_ETCD"):
        pytest.fail(f"RINGGATE_REQUIRE_POSTGRES/ETCD is set but there is {msg}")
    print(f"\n!!!!! SKIPPING the cluster tests: {msg} !!!!!")
    pytest.skip(msg, allow_module_level=True)


def _die_with_parent():
    """preexec_fn: the kernel kills the child when the test process dies (no leftovers)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:
        pass


def wait_port(port, proc, timeout_s=READY_TIMEOUT_S, what="process", log=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = Path(log).read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening\n{tail}")
        try:
            socket.create_connection((HOST, port), 0.3).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {HOST}:{port} within {timeout_s}s")


# Starts of etcd tried when its port was taken first.
ETCD_START_TRIES = 3


class Etcd:
    def __init__(self, binary, directory, detach=False):
        self.binary, self.dir, self.detach = binary, Path(directory), detach
        self.client_port, self.peer_port = free_port(), free_port()
        self.proc = None

    @property
    def endpoint(self):
        return f"http://{HOST}:{self.client_port}"

    def start(self):
        """Starts etcd; one whose port another process took first (bound between free_port's
        check and etcd's bind) starts again on fresh ports, as the Rust harness's does
        (tests/cluster_control/support.rs). Nothing knows the ports before the first start."""
        for attempt in range(1, ETCD_START_TRIES + 1):
            try:
                self._spawn(attempt)
                return self
            except RuntimeError as e:
                if attempt == ETCD_START_TRIES or "address already in use" not in str(e):
                    raise
                self.client_port, self.peer_port = free_port(), free_port()

    def _spawn(self, attempt):
        c, p = f"http://{HOST}:{self.client_port}", f"http://{HOST}:{self.peer_port}"
        log = self.dir / "etcd.log"
        # A fresh data directory per try: a failed try may have written its member's URLs.
        data = self.dir / ("etcd" if attempt == 1 else f"etcd-{attempt}")
        with open(log, "w") as err:
            self.proc = subprocess.Popen(
                [self.binary, "--data-dir", str(data), "--listen-client-urls", c,
                 "--advertise-client-urls", c, "--listen-peer-urls", p,
                 "--initial-advertise-peer-urls", p, "--initial-cluster", f"default={p}",
                 "--log-level", "warn"],
                stdout=subprocess.DEVNULL, stderr=err, **_spawn_opts(self.detach))
        wait_port(self.client_port, self.proc, what="etcd", log=log)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _spawn_opts(detach):
    # Detached (scripts/cluster): the processes outlive the script, in their own session.
    return {"start_new_session": True} if detach else {"preexec_fn": _die_with_parent}


class Node:
    """One ringgate node: .name .port .address .proc .log_path; kill9/pause/resume/restart;
    metric(name) reads one of its /metrics counters."""

    def __init__(self, cluster, name, group=0):
        self.cluster, self.name, self.group = cluster, name, group
        self.port = free_port()
        self.http_port = free_port()
        self.data_dir = cluster.dir / name
        self.log_path = cluster.dir / f"{name}.log"
        self.proc = None

    @property
    def address(self):
        return f"{HOST}:{self.port}"

    def metric(self, name):
        """The value of an unlabelled series of the node's /metrics (None if absent)."""
        import urllib.request
        with urllib.request.urlopen(f"http://{HOST}:{self.http_port}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return None

    def command(self):
        c = self.cluster
        settings = {
            "listen": self.address,
            "storage.backend": "postgres",
            "storage.postgres.url": c.pg_urls[self.group],
            "cluster.etcd": f'["{c.etcd.endpoint}"]',
            "cluster.node_name": self.name,
            "cluster.advertise": self.address,
            "cluster.lease_ms": str(c.lease_ms),
            "http.listen": f"{HOST}:{self.http_port}",
            **c.settings,
        }
        if len(c.pg_urls) > 1:
            settings["storage.group"] = group_name(self.group)
        cmd = [str(ringgate_binary()), "serve", "--data-dir", str(self.data_dir)]
        for k, v in settings.items():
            cmd += ["--set", f"{k}={v}"]
        if os.environ.get("RINGGATE_LOG_LEVEL"):
            cmd += ["--log-level", os.environ["RINGGATE_LOG_LEVEL"]]
        return cmd

    def start(self):
        """Starts the node and waits until it serves. A node restarted within its old
        lease finds its name still registered and exits: it is started again until the old
        lease has expired (bounded)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            logged = self.log_path.stat().st_size if self.log_path.exists() else 0
            # The server logs to stdout: both streams go to the node's log (print_logs).
            with open(self.log_path, "a") as log:
                self.proc = subprocess.Popen(self.command(), stdout=log,
                                             stderr=subprocess.STDOUT,
                                             **_spawn_opts(self.cluster.detach))
            try:
                wait_port(self.port, self.proc, what=f"node {self.name}", log=self.log_path)
                return self
            except RuntimeError:
                with open(self.log_path, errors="replace") as f:
                    f.seek(logged)
                    taken = "already registered" in f.read()
                if not taken or time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.running():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout_s=10):
        """SIGTERM (a clean leave), SIGKILL after `timeout_s`."""
        if not self.running():
            return None
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def restart(self, kill9=True):
        self.kill9() if kill9 else self.stop()
        return self.start()

    def log_text(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class LocalCluster:
    def __init__(self, nodes=3, lease_ms=2000, settings=None, directory=None, detach=False,
                 groups=1, replicated=False):
        self.count, self.lease_ms, self.groups = nodes, lease_ms, groups
        self.replicated_groups = replicated
        self.replicated = []
        self.settings = dict(settings or {})
        self.detach = detach
        self.dir = Path(directory or tempfile.mkdtemp(prefix="ringgate-cluster-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.pg = self.etcd = self.pg_url = None
        self.pgs, self.pg_urls = [], []
        self.nodes = []

    def start(self):
        gaps = missing()
        if gaps:
            raise RuntimeError(", ".join(gaps))
        try:
            self.etcd = Etcd(find_etcd(), self.dir, self.detach).start()
            if self.replicated_groups:
                self._start_replicated()
            else:
                for _ in range(self.groups):
                    pg = pgserver.PgServer(pgserver.find_bin_dir()).start()
                    self.pgs.append(pg)
                    self.pg_urls.append(pg.create_database("ringgate"))
                self.pg = self.pgs[0]
            self.pg_url = self.pg_urls[0]
            for _ in range(self.count):
                self.add_node()
        except BaseException:
            self.print_logs()
            self.stop()
            raise
        return self

    def _start_replicated(self):
        import patronigroup
        # The members' directories are under ours: the PostgreSQL user must reach them.
        os.chmod(self.dir, 0o755)
        self.replicated = [patronigroup.ReplicatedGroup(group_name(i), self.etcd.endpoint,
                                                        self.dir, detach=self.detach)
                           for i in range(self.groups)]
        # In parallel: a group takes tens of seconds (initdb, then a base backup).
        errors = []

        def start(g):
            try:
                g.start()
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=start, args=(g,)) for g in self.replicated]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self.pg_urls += [g.url for g in self.replicated]

    def add_node(self):
        k = len(self.nodes)
        node = Node(self, f"n{k + 1}", group=k % max(1, len(self.pg_urls)))
        self.nodes.append(node)
        return node.start()

    def node(self, name):
        return next(n for n in self.nodes if n.name == name)

    def running(self):
        return [n for n in self.nodes if n.running()]

    def addresses(self):
        return [n.address for n in self.running()]

    def connect(self, node=None, **kwargs):
        """A Python driver Cluster with default settings on one node (the first running)."""
        from cassandra.cluster import Cluster
        n = node or self.running()[0]
        return Cluster(contact_points=[HOST], port=n.port, **kwargs)

    def print_logs(self, tail_chars=4000):
        for n in self.nodes:
            print(f"----- {n.name} log (tail) -----\n{n.log_text()[-tail_chars:]}")
        for g in self.replicated:
            print(g.logs(tail_chars))

    def stop(self):
        for n in self.nodes:
            n.kill9()
        for g in self.replicated:
            g.stop()
        if self.etcd:
            self.etcd.stop()
        for pg in self.pgs:
            pg.remove()
        shutil.rmtree(self.dir, ignore_errors=True)


def group_name(index):
    """The storage group of PostgreSQL server `index` (0-based): the first is the default."""
    return "default" if index == 0 else f"group{index + 1}"


def pinned_policy(port):
    """A load balancing policy that sends every request to the node listening on `port`:
    the nodes share 127.0.0.1, so WhiteListRoundRobinPolicy (by address) cannot tell them
    apart once the driver discovers them through system.peers_v2."""
    from cassandra.policies import HostDistance, RoundRobinPolicy

    class Pinned(RoundRobinPolicy):
        def populate(self, cluster, hosts):
            super().populate(cluster, [h for h in hosts if h.endpoint.port == port])

        def distance(self, host):
            return HostDistance.LOCAL if host.endpoint.port == port else HostDistance.IGNORED

        def on_up(self, host):
            if host.endpoint.port == port:
                super().on_up(host)

        def on_add(self, host):
            if host.endpoint.port == port:
                super().on_add(host)

    return Pinned()
