"""A real PostgreSQL server for end-to-end tests (the PostgreSQL storage backend, later the
cluster tests): initdb into a temporary directory as an unprivileged user (PostgreSQL refuses to
run as root; RINGGATE_PG_USER, default ringgate-pg, created by scripts/install-cluster-deps),
pg_ctl start on a free 127.0.0.1 port, stop at the end.

Binaries: $RINGGATE_PG_BIN, else the RINGGATE_PG_BIN line of .cluster-deps/env (written by
scripts/install-cluster-deps), else Debian's /usr/lib/postgresql/*/bin. Without them
`find_bin_dir()` returns None: tests skip loudly, unless RINGGATE_REQUIRE_POSTGRES is set
(scripts/test sets it), then they fail.
"""

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def find_bin_dir():
    candidates = []
    if os.environ.get("RINGGATE_PG_BIN"):
        candidates.append(os.environ["RINGGATE_PG_BIN"])
    env = ROOT / ".cluster-deps" / "env"
    if env.exists():
        for line in env.read_text().splitlines():
            if line.startswith("RINGGATE_PG_BIN="):
                candidates.append(line.split("=", 1)[1].strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for d in candidates:
        if all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "createdb")):
            return d
    return None


class PgServer:
    """One PostgreSQL server: .port, .url(dbname), .create_database(name), .stop()."""

    def __init__(self, bin_dir):
        # Its own directory under /tmp: pytest's are private to root, and the server's user
        # must reach its data and socket directory.
        self.bin = Path(bin_dir)
        self.dir = Path(tempfile.mkdtemp(prefix="ringgate-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.user = None
        if os.geteuid() == 0:
            self.user = os.environ.get("RINGGATE_PG_USER", "ringgate-pg")
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(self.dir, self.user)

    def _cmd(self, name, *args):
        exe = [str(self.bin / name), *map(str, args)]
        return ["runuser", "-u", self.user, "--", *exe] if self.user else exe

    def _run(self, name, *args):
        out = subprocess.run(self._cmd(name, *args), capture_output=True, text=True, cwd="/")
        if out.returncode != 0:
            raise RuntimeError(f"{name} failed: {out.stdout}{out.stderr}")

    def start(self):
        if not self.data.exists():
            self._run("initdb", "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8",
                      "-D", self.data)
        opts = f"-p {self.port} -h 127.0.0.1 -k {self.dir} -c max_connections=200"
        self._run("pg_ctl", "-w", "-o", opts, "-l", self.dir / "log", "-D", self.data, "start")
        return self

    def stop(self, mode="fast"):
        self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def remove(self):
        """Stops the server (immediately) if it runs and deletes its directory."""
        subprocess.run(self._cmd("pg_ctl", "-D", self.data, "-m", "immediate", "stop"),
                       capture_output=True, cwd="/")
        shutil.rmtree(self.dir, ignore_errors=True)

    def create_database(self, name):
        self._run("createdb", "-h", "127.0.0.1", "-p", self.port, "-U", "postgres", name)
        return self.url(name)

    def sql(self, dbname, sql):
        """One statement through psql as the superuser; its output, unaligned, no headers."""
        out = subprocess.run(self._cmd("psql", "-h", "127.0.0.1", "-p", self.port, "-U", "postgres",
                                       "-d", dbname, "-At", "-c", sql),
                             capture_output=True, text=True, cwd="/")
        if out.returncode != 0:
            raise RuntimeError(f"psql failed: {out.stdout}{out.stderr}")
        return out.stdout.strip()

    def url(self, dbname):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def log_text(self):
        path = self.dir / "log"
        return path.read_text(errors="replace") if path.exists() else ""
