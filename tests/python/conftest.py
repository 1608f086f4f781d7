"""Fixtures for the end-to-end suite: real ringgate server processes and real clients.

Server processes
    server              session-scoped server with the default settings
    server_factory      start(**opts) -> RinggateServer; extra servers for auth/TLS/restart tests,
                        each with its own data dir and port, stopped at the end of the test
    RinggateServer      .host .port .http_port (metrics, dashboard) .data_dir .log_path .proc
                        .stop() (SIGTERM, kill after 10 s) -> exit code
                        .kill9()                         -> SIGKILL, no clean shutdown
                        .restart(kill9=True)             same data dir and port, waits until ready
                        .log_text()

Clients
    cluster, session    session-scoped Python driver Cluster/Session on the default server, with
                        the driver's DEFAULT settings except contact point and port
    cluster_factory     make(srv=None, **cluster_kwargs) -> Cluster (shut down after the test)
    keyspace            a fresh, uniquely named SimpleStrategy keyspace on the default server
    unique_name         unique_name(prefix) -> a unique lower-case identifier
    cqlsh               cqlsh(args, stdin=None, server=None, ...) -> CqlshResult(stdout, stderr, returncode)

Environment
    RINGGATE_BIN        server binary (default: $CARGO_TARGET_DIR or ./target, then release/ringgate)
    RINGGATE_LOG_LEVEL  if set, passed as --log-level to every server
"""

import atexit
import itertools
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from cassandra.cluster import Cluster

from ports import free_port
from rgtest import create_keyspace

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
HOST = "127.0.0.1"

# Every server started in this pytest run, for log reporting and emergency cleanup.
_SERVERS = []


def default_binary() -> Path:
    env = os.environ.get("RINGGATE_BIN")
    if env:
        return Path(env).resolve()
    target = Path(os.environ.get("CARGO_TARGET_DIR") or (ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    return target / "release" / "ringgate"


def _die_with_parent():
    """preexec_fn: have the kernel SIGKILL the server if this pytest process dies, so that no
    server outlives an interrupted or killed test run (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except Exception:
        pass


def _format_setting(key, value):
    if isinstance(value, bool):
        value = "true" if value else "false"
    return f"{key}={value}"


class RinggateServer:
    """One `ringgate serve` process with its own data dir, port and log file."""

    _ids = itertools.count(1)

    def __init__(self, binary: Path, workdir: Path, settings=None, set_args=(), config=None,
                 extra_args=(), port=None, host=HOST, name=None):
        self.binary = Path(binary)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.name = name or f"ringgate-{next(self._ids)}"
        self.host = host
        self.port = port or free_port(host)
        # Servers run side by side: each gets its own HTTP (metrics/dashboard) port.
        self.http_port = free_port(host)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "server.log"
        self.set_args = [_format_setting(k, v) for k, v in (settings or {}).items()] + list(set_args)
        if config is not None and not isinstance(config, Path):
            # Config given as TOML text: write it next to the data dir.
            path = self.workdir / "ringgate.toml"
            path.write_text(config)
            config = path
        self.config_path = config
        self.extra_args = list(extra_args)
        self.proc = None
        self.starts = 0
        _SERVERS.append(self)

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    def command(self):
        cmd = [str(self.binary), "serve", "--listen", self.address, "--data-dir", str(self.data_dir)]
        cmd += ["--set", f"http.listen={self.host}:{self.http_port}"]
        if self.config_path is not None:
            cmd += ["--config", str(self.config_path)]
        for s in self.set_args:
            cmd += ["--set", s]
        level = os.environ.get("RINGGATE_LOG_LEVEL")
        if level:
            cmd += ["--log-level", level]
        return cmd + self.extra_args

    def start(self, wait=True):
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is already running"
        if not self.binary.exists():
            pytest.fail(f"ringgate binary not found at {self.binary}; build it with `cargo build "
                        f"--release` or set RINGGATE_BIN", pytrace=False)
        cmd = self.command()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== [test harness] start #{self.starts}: {shlex.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.workdir, start_new_session=True,
                                         preexec_fn=_die_with_parent)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=READY_TIMEOUT):
        """Wait until the port accepts TCP connections; fail with the server's log otherwise."""
        deadline = time.monotonic() + timeout
        last_err = None
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                pytest.fail(f"{self.name} exited with code {code} before accepting connections "
                            f"on {self.address}\n--- server log ({self.log_path}) ---\n{self.log_tail()}",
                            pytrace=False)
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return self
            except OSError as e:
                last_err = e
            time.sleep(0.05)
        self._hard_kill()
        pytest.fail(f"{self.name} did not accept connections on {self.address} within {timeout:.0f}s "
                    f"(last error: {last_err})\n--- server log ({self.log_path}) ---\n{self.log_tail()}",
                    pytrace=False)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM, then SIGKILL if still alive after `timeout` s. Returns the exit code
        (negative = killed by that signal, as subprocess reports it)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._note(f"did not exit {timeout:.0f}s after SIGTERM; sending SIGKILL")
                self._hard_kill()
        self._note(f"exited with code {self.proc.returncode}")
        return self.proc.returncode

    def kill9(self):
        """SIGKILL: no chance to flush or clean up (simulates a crash / power-off of the process)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)
            self._note("killed with SIGKILL by the test")

    def restart(self, kill9=True):
        """Stop (kill -9 by default, else SIGTERM) and start again on the same data dir and port."""
        if kill9:
            self.kill9()
        else:
            self.stop()
        return self.start()

    def _hard_kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass

    def _note(self, msg):
        try:
            with open(self.log_path, "ab") as log:
                log.write(f"=== [test harness] {self.name} {msg}\n".encode())
        except OSError:
            pass

    def log_size(self):
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_text(self, start=0):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, start=0, max_lines=300):
        lines = self.log_text(start).splitlines()
        if len(lines) > max_lines:
            lines = [f"... ({len(lines) - max_lines} earlier lines in {self.log_path})"] + lines[-max_lines:]
        return "\n".join(lines)

    def __repr__(self):
        return f"<RinggateServer {self.name} {self.address} data={self.data_dir}>"


@atexit.register
def _kill_leftover_servers():
    for srv in _SERVERS:
        srv._hard_kill()


# ---------------------------------------------------------------------------- failure reports

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item._ringgate_log_offsets = {id(s): s.log_size() for s in _SERVERS}
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    offsets = getattr(item, "_ringgate_log_offsets", {})
    for srv in _SERVERS:
        start = offsets.get(id(srv), 0)
        title = f"ringgate log: {srv.name} {srv.address} ({srv.log_path})"
        if srv.log_size() > start:
            report.sections.append((title + ", output during this test", srv.log_tail(start)))
        elif srv.running():
            report.sections.append((title + ", no output during this test; last lines",
                                    srv.log_tail(0, max_lines=40)))


# ---------------------------------------------------------------------------- servers

@pytest.fixture(scope="session")
def ringgate_bin():
    return default_binary()


# Throughput: the suite's servers run with the defaults. Under `throughput.enforce =
# "provisioned"` tables without throughput are accounted, not rejected, so tests load data freely;
# tables created with cosmosdb_*_throughput are rate-limited as on Cosmos DB.


@pytest.fixture(scope="session")
def server(ringgate_bin, tmp_path_factory):
    srv = RinggateServer(ringgate_bin, tmp_path_factory.mktemp("server-default"), name="default")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def server_factory(ringgate_bin, tmp_path):
    """start(settings={'auth.enabled': True}, set_args=['k=v'], config='toml text' or Path,
    extra_args=[...], wait=True) -> a started RinggateServer, stopped after the test."""
    started = []
    counter = itertools.count(1)

    def start(settings=None, set_args=(), config=None, extra_args=(), wait=True, name=None):
        n = next(counter)
        srv = RinggateServer(ringgate_bin, tmp_path / f"server{n}", settings=settings, set_args=set_args,
                             config=config, extra_args=extra_args, name=name or f"extra{n}")
        started.append(srv)
        return srv.start(wait=wait)

    yield start
    for srv in started:
        srv.stop()


# ---------------------------------------------------------------------------- driver

@pytest.fixture(scope="session")
def cluster(server):
    """The Python driver with its defaults: only the contact point and port are set (no
    protocol_version, so the driver negotiates it)."""
    c = Cluster(contact_points=[server.host], port=server.port)
    yield c
    c.shutdown()


@pytest.fixture(scope="session")
def session(cluster):
    return cluster.connect()


@pytest.fixture
def cluster_factory(server):
    """make(srv=None, **kwargs) -> a new Cluster for that server (default: the default server),
    not yet connected; every one is shut down after the test."""
    made = []

    def make(srv=None, **kwargs):
        srv = srv or server
        c = Cluster(contact_points=[srv.host], port=srv.port, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.shutdown()


_name_counter = itertools.count(1)


def make_unique_name(prefix, hint=""):
    hint = re.sub(r"[^a-z0-9]+", "_", hint.lower()).strip("_")
    base = f"{prefix}_{next(_name_counter)}_{os.getpid() % 10000}"
    if hint:
        base = f"{base}_{hint}"
    return base[:48]  # Cassandra's limit for keyspace and table names


@pytest.fixture
def unique_name(request):
    hint = request.node.originalname or request.node.name

    def make(prefix="n"):
        return make_unique_name(prefix, hint)

    return make


@pytest.fixture
def keyspace(session, unique_name):
    """A new keyspace (SimpleStrategy, RF 1) on the default server; dropped afterwards."""
    name = create_keyspace(session, unique_name("ks"))
    yield name
    try:
        session.execute(f"DROP KEYSPACE IF EXISTS {name}")
    except Exception:  # dropping is tested on its own; don't turn every test into an error
        pass


# ---------------------------------------------------------------------------- cqlsh

class CqlshResult(NamedTuple):
    stdout: str
    stderr: str
    returncode: int

    def __str__(self):
        return f"cqlsh exit {self.returncode}\n--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"


def cqlsh_command():
    """How to start the venv's cqlsh: the `cqlsh` console script next to this interpreter,
    else `python -m cqlshlib` (the package's __main__)."""
    script = Path(sys.executable).parent / "cqlsh"
    if script.exists():
        return [sys.executable, str(script)]
    found = shutil.which("cqlsh")
    if found:
        return [found]
    return [sys.executable, "-m", "cqlshlib"]


@pytest.fixture
def cqlsh(server, tmp_path):
    """cqlsh(args, stdin=None, server=None, cqlshrc=None, env=None, timeout=120) -> CqlshResult.

    Runs `cqlsh [--cqlshrc FILE] HOST PORT ARGS...` with HOME in a temp dir (no user config or
    history), TZ unset and UTF-8 I/O. `args` is a list (or a string, split like a shell would)."""
    home = tmp_path / "cqlsh-home"
    (home / ".cassandra").mkdir(parents=True, exist_ok=True)
    counter = itertools.count(1)

    def run(args=(), stdin=None, server=server, cqlshrc=None, env=None, timeout=120):
        if isinstance(args, str):
            args = shlex.split(args)
        rc_path = home / f"cqlshrc.{next(counter)}"
        rc_path.write_text(cqlshrc or "")
        rc_path.chmod(0o600)
        e = {k: v for k, v in os.environ.items() if k not in ("TZ", "SSL_VALIDATE", "SSL_CERTFILE", "CQLSH_HOST", "CQLSH_PORT")}
        e.update(HOME=str(home), CQL_HISTORY=str(home / ".cassandra" / "cqlsh_history"),
                 PYTHONIOENCODING="utf-8", LC_ALL="C.UTF-8", LANG="C.UTF-8")
        e.update(env or {})
        cmd = cqlsh_command() + ["--cqlshrc", str(rc_path), server.host, str(server.port)] + list(args)
        try:
            p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, encoding="utf-8",
                               timeout=timeout, env=e, cwd=home)
        except subprocess.TimeoutExpired as ex:
            pytest.fail(f"cqlsh timed out after {timeout}s: {shlex.join(cmd)}\n"
                        f"stdout: {ex.stdout!r}\nstderr: {ex.stderr!r}", pytrace=False)
        return CqlshResult(p.stdout, p.stderr, p.returncode)

    return run
