"""No client can hold the server's connection slots or guess passwords at speed:
handshake and authentication timeouts, reserved room for clients that can log in
(limits.startup_timeout_ms, limits.auth_timeout_ms, limits.reserved_connections), an opt-in
idle timeout (limits.idle_timeout_ms), and
closing a connection after repeated login failures."""

import socket
import time

import pytest
from cassandra.auth import PlainTextAuthProvider

import cqlwire
from cqlwire import Conn

AUTH_CONFIG = """\
[auth]
enabled = true

[auth.users]
cassandra = "cassandra"
"""


def silent_sockets(srv, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection((srv.host, srv.port), timeout=10)
        socks.append(s)
    return socks


def test_a_silent_connection_is_closed_after_the_startup_timeout(server_factory):
    srv = server_factory(settings={"limits.startup_timeout_ms": 300})
    with Conn(srv.host, srv.port) as c:
        assert c.wait_closed(timeout=10) == []
    # OPTIONS alone does not count as a handshake.
    with Conn(srv.host, srv.port) as c:
        c.options()
        c.wait_closed(timeout=10)
    cqlwire.assert_server_healthy(srv.host, srv.port)


def test_a_connection_that_does_not_log_in_is_closed_after_the_auth_timeout(server_factory):
    srv = server_factory(settings={"auth.enabled": True, "limits.auth_timeout_ms": 300},
                         config=AUTH_CONFIG)
    with Conn(srv.host, srv.port) as c:
        assert c.startup().opcode == cqlwire.AUTHENTICATE
        c.wait_closed(timeout=10)
    # A logged-in connection stays, however long it is idle past both timeouts.
    with cqlwire.ready_connection(srv.host, srv.port, user="cassandra", password="cassandra") as c:
        with Conn(srv.host, srv.port) as other:
            other.startup()
            other.wait_closed(timeout=10)
        assert c.query("SELECT key FROM system.local").opcode == cqlwire.RESULT


def test_silent_sockets_holding_every_slot_do_not_lock_out_clients(server_factory, cluster_factory):
    srv = server_factory(settings={"auth.enabled": True, "limits.max_connections": 40,
                                   "limits.reserved_connections": 4},
                         config=AUTH_CONFIG)
    ready = cqlwire.ready_connection(srv.host, srv.port, user="cassandra", password="cassandra")
    socks = silent_sockets(srv, 60)
    try:
        cluster = cluster_factory(srv, auth_provider=PlainTextAuthProvider("cassandra", "cassandra"))
        session = cluster.connect()
        assert session.execute("SELECT key FROM system.local").one().key == "local"
        # The connection that had logged in before the flood was not the one closed.
        assert ready.query("SELECT key FROM system.local").opcode == cqlwire.RESULT
    finally:
        ready.close()
        for s in socks:
            s.close()


def test_repeated_login_failures_close_the_connection(server_factory, cluster_factory):
    srv = server_factory(settings={"auth.enabled": True}, config=AUTH_CONFIG)
    with Conn(srv.host, srv.port) as c:
        assert c.startup().opcode == cqlwire.AUTHENTICATE
        for attempt in range(2):
            f = c.request(cqlwire.AUTH_RESPONSE, cqlwire.auth_response_body("cassandra", f"guess{attempt}"),
                          stream=2 + attempt)
            assert f.error()[0] == cqlwire.ERR_BAD_CREDENTIALS
        c.send_frame(cqlwire.AUTH_RESPONSE, cqlwire.auth_response_body("nobody", "guess"), stream=9)
        frames = c.wait_closed(timeout=30)
        assert [f.stream for f in frames] == [9] and frames[0].error()[0] == cqlwire.ERR_BAD_CREDENTIALS
    # Not a lockout: the right password still works from the same address.
    cluster = cluster_factory(srv, auth_provider=PlainTextAuthProvider("cassandra", "cassandra"))
    assert cluster.connect().execute("SELECT key FROM system.local").one().key == "local"


@pytest.mark.parametrize("setting", ["limits.startup_timeout_ms", "limits.auth_timeout_ms"])
def test_zero_timeouts_are_refused_at_startup(ringgate_bin, tmp_path, setting):
    import subprocess
    r = subprocess.run([str(ringgate_bin), "serve", "--data-dir", str(tmp_path / "d"),
                        "--listen", "127.0.0.1:0", "--set", f"{setting}=0"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert setting in r.stdout + r.stderr


def test_idle_timeout_closes_only_silent_connections(server_factory, cluster_factory):
    """limits.idle_timeout_ms (off by default): a ready connection that sends nothing is
    closed; one that sends heartbeats, and the Python driver with heartbeats, stay."""
    srv = server_factory(settings={"limits.idle_timeout_ms": 1500})
    with cqlwire.ready_connection(srv.host, srv.port) as silent, \
            cqlwire.ready_connection(srv.host, srv.port) as beating:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:  # OPTIONS every 0.5 s: never idle for 1.5 s
            beating.options()
            time.sleep(0.5)
        silent.wait_closed(timeout=10)
        assert beating.query("SELECT key FROM system.local").opcode == cqlwire.RESULT
    c = cluster_factory(srv, idle_heartbeat_interval=0.5)
    s = c.connect()
    pool = next(iter(s._pools.values()))
    conn = pool._connection
    time.sleep(4)
    assert s.execute("SELECT key FROM system.local").one().key == "local"
    assert pool._connection is conn and not conn.is_defunct


def test_without_idle_timeout_a_ready_connection_stays(server_factory):
    srv = server_factory(settings={"limits.startup_timeout_ms": 300})
    with cqlwire.ready_connection(srv.host, srv.port) as c:
        time.sleep(2)
        assert c.query("SELECT key FROM system.local").opcode == cqlwire.RESULT
