"""A replicated storage group (issue 18) of real processes on 127.0.0.1: a Patroni cluster
(scope = the group's name) of PostgreSQL members, one primary and synchronous standbys, whose
leader election and configuration live in ringgate's etcd under their own prefix
(`/ringgate-patroni/<group>/...`; ringgate's keys never start with '/').

    g = ReplicatedGroup("default", etcd_endpoint, directory).start()
    g.url                    libpq key=value string listing every member with
                             target_session_attrs=read-write: the group's registration
    g.primary()              the member that is primary now (Patroni REST /primary), or None
    g.kill9_primary()        SIGKILL of the primary's Patroni AND its PostgreSQL processes
                             (postmaster and backends): the machine died
    g.wait_primary(other_than=m)   the promoted standby
    m.start()                restart a killed member's Patroni: it rejoins as a standby
                             (pg_rewind when its timeline diverged)
    m.role() / m.is_sync_standby() / m.is_replica()   Patroni REST GET /patroni, /sync, /replica
    m.freeze() / m.thaw()    SIGSTOP / SIGCONT of its PostgreSQL processes

Settings (Patroni's dynamic configuration, bootstrap.dcs): `synchronous_mode: true` (a commit
is acknowledged once a synchronous standby has it; Patroni promotes only that standby, so a
failover loses no acknowledged write); `synchronous_mode_strict: false` (with 2 members, the
survivor of a failover takes writes alone until the other rejoins, instead of refusing every
write until then); ttl 20 s (Patroni's minimum: the dead primary's leader key expires after
it), loop_wait 1 s, retry_timeout 5 s (loop_wait + 2 * retry_timeout <= ttl). So service
comes back within about ttl + loop_wait = 21 s of the primary's death (FAILOVER_S).

Patroni runs as the unprivileged PostgreSQL user when started as root (PostgreSQL refuses to
run as root: RINGGATE_PG_USER, default ringgate-pg); its binary is RINGGATE_PATRONI_BIN
(scripts/install-cluster-deps patroni). As a script (scripts/cluster --replicated):
    python3 patronigroup.py start NAME ETCD_ENDPOINT DIRECTORY   prints the group's url
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pgserver
from ports import free_port

HOST = "127.0.0.1"
TTL_S, LOOP_WAIT_S, RETRY_TIMEOUT_S = 20, 1, 5
# The configured failover time: the leader key outlives a killed primary by up to ttl, then a
# loop of the standby's Patroni promotes it.
FAILOVER_S = TTL_S + LOOP_WAIT_S
NAMESPACE = "/ringgate-patroni/"
START_TIMEOUT_S = 90.0
DATABASE = "ringgate"


def find_patroni():
    cand = os.environ.get("RINGGATE_PATRONI_BIN")
    env = Path(__file__).resolve().parents[2] / ".cluster-deps" / "env"
    if not cand and env.exists():
        for line in env.read_text().splitlines():
            if line.startswith("RINGGATE_PATRONI_BIN="):
                cand = line.split("=", 1)[1].strip()
    return cand if cand and os.access(cand, os.X_OK) else None


def _pg_user():
    return os.environ.get("RINGGATE_PG_USER", "ringgate-pg") if os.geteuid() == 0 else None


def _http_status(url, timeout_s=2.0):
    """The HTTP status of GET url (None: no answer)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def _children(pid):
    """Every descendant of pid (from /proc)."""
    parents = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in parents.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class Member:
    """One PostgreSQL server and its Patroni: .name .pg_port .rest_port .proc .log_path."""

    def __init__(self, group, index):
        self.group, self.name = group, f"{group.name}-m{index + 1}"
        self.pg_port, self.rest_port = free_port(), free_port()
        self.dir = group.dir / self.name
        self.data = self.dir / "data"
        self.log_path = self.dir / "patroni.log"
        self.proc = None

    @property
    def host(self):
        return f"{HOST}:{self.pg_port}"

    def config(self):
        g, pw = self.group, "ringgate"
        return {
            "scope": g.name,
            "namespace": NAMESPACE,
            "name": self.name,
            "restapi": {"listen": f"{HOST}:{self.rest_port}",
                        "connect_address": f"{HOST}:{self.rest_port}"},
            "etcd3": {"hosts": [g.etcd_endpoint.split("://", 1)[-1]]},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL_S, "loop_wait": LOOP_WAIT_S, "retry_timeout": RETRY_TIMEOUT_S,
                    "synchronous_mode": True, "synchronous_mode_strict": False,
                    "postgresql": {
                        "use_pg_rewind": True, "use_slots": True,
                        "parameters": {"wal_log_hints": "on", "max_connections": 200,
                                       "synchronous_commit": "on"},
                    },
                },
                "initdb": [{"encoding": "UTF8"}],
            },
            "postgresql": {
                "listen": self.host, "connect_address": self.host,
                "data_dir": str(self.data), "bin_dir": g.pg_bin, "pgpass": str(self.dir / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": pw},
                    "replication": {"username": "replicator", "password": pw},
                },
                # Loopback only, as the tests' single servers (pgserver.py).
                "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
                           "host replication all 127.0.0.1/32 trust"],
                "parameters": {"unix_socket_directories": str(self.dir)},
            },
        }

    def start(self):
        """Starts (or restarts) this member's Patroni; it starts PostgreSQL."""
        self.dir.mkdir(parents=True, exist_ok=True)
        user = _pg_user()
        if user:
            shutil.chown(self.dir, user)
        path = self.dir / "patroni.json"  # YAML is a superset of JSON
        path.write_text(json.dumps(self.config(), indent=1))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.dir),
               "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        opts = {"start_new_session": True} if self.group.detach else {"preexec_fn": _die_with_parent}
        self.proc = subprocess.Popen([self.group.patroni, str(path)], cwd=self.dir, env=env,
                                     stdout=subprocess.DEVNULL, stderr=open(self.log_path, "a"),
                                     user=user, group=user, **opts)
        # For scripts/cluster stop and status.
        (self.dir / "patroni.pid").write_text(f"{self.proc.pid}\n")
        (self.dir / "address").write_text(f"{self.host} (Patroni REST {HOST}:{self.rest_port})\n")
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def rest(self, path):
        return _http_status(f"http://{HOST}:{self.rest_port}{path}")

    def role(self):
        """'primary', 'replica', ... as this member's Patroni says (None: no answer)."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.rest_port}/patroni",
                                        timeout=2) as r:
                return json.loads(r.read()).get("role")
        except (OSError, ValueError):
            return None

    def is_primary(self):
        return self.rest("/primary") == 200

    def is_replica(self):
        return self.rest("/replica") == 200

    def is_sync_standby(self):
        return self.rest("/sync") == 200

    def postmaster_pid(self):
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return None

    def kill9(self):
        """SIGKILL to Patroni, the postmaster and every PostgreSQL backend: nothing shuts down
        cleanly, no connection gets a goodbye."""
        pids = []
        if self.running():
            pids.append(self.proc.pid)
        pm = self.postmaster_pid()
        if pm:
            pids += [pm, *_children(pm)]
        if self.proc is not None:
            pids += _children(self.proc.pid)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait()

    def _postgres_pids(self):
        pm = self.postmaster_pid()
        return [pm, *_children(pm)] if pm else []

    def freeze(self):
        """SIGSTOP to its PostgreSQL processes: a standby that stops acknowledging WAL while
        its connection stays up (the primary's commits wait for it)."""
        for pid in self._postgres_pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self):
        for pid in self._postgres_pids():
            os.kill(pid, signal.SIGCONT)

    def log_text(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _die_with_parent():
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:
        pass


class ReplicatedGroup:
    def __init__(self, name, etcd_endpoint, directory, members=2, detach=False):
        self.name, self.etcd_endpoint, self.detach = name, etcd_endpoint, detach
        self.dir = Path(directory) / f"group-{name}"
        self.patroni = find_patroni()
        self.pg_bin = pgserver.find_bin_dir()
        if not self.patroni or not self.pg_bin:
            raise RuntimeError("no Patroni or PostgreSQL (run scripts/install-cluster-deps)")
        self.members = [Member(self, i) for i in range(members)]

    @property
    def hosts(self):
        return [m.host for m in self.members]

    @property
    def url(self):
        hosts = ",".join(HOST for _ in self.members)
        ports = ",".join(str(m.pg_port) for m in self.members)
        return (f"host={hosts} port={ports} user=postgres dbname={DATABASE} "
                "target_session_attrs=read-write")

    def start(self):
        """Starts every member, waits for a primary with a synchronous standby, creates the
        database. The first member bootstraps (initdb); the others copy it (pg_basebackup)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.members[0].start()
        primary = self.wait_primary(timeout_s=START_TIMEOUT_S)
        for m in self.members[1:]:
            m.start()
        self.wait_sync_standby()
        self.psql(primary, f"CREATE DATABASE {DATABASE}", dbname="postgres")
        return self

    def psql(self, member, sql, dbname=DATABASE):
        out = subprocess.run([str(Path(self.pg_bin) / "psql"), "-h", HOST, "-p",
                              str(member.pg_port), "-U", "postgres", "-d", dbname, "-XAtq",
                              "-v", "ON_ERROR_STOP=1", "-c", sql],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"psql on {member.name}: {out.stderr}")
        return out.stdout

    def primary(self):
        return next((m for m in self.members if m.running() and m.is_primary()), None)

    def wait_primary(self, other_than=None, timeout_s=60.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            p = self.primary()
            if p is not None and p is not other_than:
                return p
            time.sleep(0.1)
        raise RuntimeError(f"group {self.name}: no primary within {timeout_s}s\n{self.logs()}")

    def wait_sync_standby(self, member=None, timeout_s=START_TIMEOUT_S):
        """A member (or `member`) that is a running synchronous standby."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in [member] if member else self.members:
                if m.running() and m.is_sync_standby():
                    return m
            time.sleep(0.2)
        raise RuntimeError(f"group {self.name}: no synchronous standby within {timeout_s}s\n"
                           f"{self.logs()}")

    def kill9_primary(self):
        p = self.primary()
        if p is None:
            raise RuntimeError(f"group {self.name} has no primary to kill")
        p.kill9()
        return p

    def logs(self, tail_chars=3000):
        return "\n".join(f"----- {m.name} -----\n{m.log_text()[-tail_chars:]}"
                         for m in self.members)

    def stop(self):
        for m in self.members:
            m.kill9()
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv):
    if len(argv) != 5 or argv[1] != "start":
        print(__doc__, file=sys.stderr)
        return 2
    g = ReplicatedGroup(argv[2], argv[3], argv[4], detach=True).start()
    print(g.url)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
