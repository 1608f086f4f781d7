"""Password authentication (auth.enabled with users from the config file), through the
driver, cqlsh and raw frames."""

import pytest
from cassandra import AuthenticationFailed
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster, NoHostAvailable

import cqlwire
from cqlwire import Conn

AUTH_CONFIG = """\
[auth]
enabled = true

[auth.users]
cassandra = "cassandra"
alice = "wonder land é"
"""

TIMEOUT = 10.0


@pytest.fixture
def auth_server(server_factory):
    return server_factory(settings={"auth.enabled": True}, config=AUTH_CONFIG)


def connect_errors(srv, **kwargs):
    """Connect, expecting failure; returns the per-host errors of NoHostAvailable."""
    c = Cluster(contact_points=[srv.host], port=srv.port, connect_timeout=TIMEOUT, **kwargs)
    try:
        with pytest.raises(NoHostAvailable) as e:
            c.connect()
        return list(e.value.errors.values())
    finally:
        c.shutdown()


@pytest.mark.parametrize("user,password", [("cassandra", "cassandra"), ("alice", "wonder land é")])
def test_driver_with_credentials_connects(auth_server, cluster_factory, user, password):
    c = cluster_factory(auth_server, auth_provider=PlainTextAuthProvider(user, password))
    s = c.connect()
    assert c.protocol_version in (4, 5)
    assert s.execute("SELECT key FROM system.local").one().key == "local"
    s.execute("CREATE KEYSPACE IF NOT EXISTS authks WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE IF NOT EXISTS authks.t (id int PRIMARY KEY, v text)")
    s.execute("INSERT INTO authks.t (id, v) VALUES (1, %s)", (user,))
    assert s.execute("SELECT v FROM authks.t WHERE id = 1").one().v == user


@pytest.mark.parametrize("user,password", [
    ("cassandra", "wrong"),
    ("cassandra", ""),
    ("cassandra", "Cassandra"),
    ("nobody", "cassandra"),
    ("alice", "cassandra"),
])
def test_wrong_credentials_fail(auth_server, user, password):
    errors = connect_errors(auth_server, auth_provider=PlainTextAuthProvider(user, password))
    assert errors and all(isinstance(e, AuthenticationFailed) for e in errors), errors
    # and the server is still up for the right user
    c = Cluster(contact_points=[auth_server.host], port=auth_server.port,
                auth_provider=PlainTextAuthProvider("cassandra", "cassandra"))
    try:
        assert c.connect().execute("SELECT key FROM system.local").one().key == "local"
    finally:
        c.shutdown()


def test_no_credentials_fail(auth_server):
    errors = connect_errors(auth_server)
    assert errors and all(isinstance(e, AuthenticationFailed) for e in errors), errors


def test_auth_disabled_server_needs_no_credentials(session):
    # the default server runs without auth: plain connections work (see the session fixture)
    assert session.execute("SELECT key FROM system.local").one().key == "local"


def test_raw_startup_asks_for_password_authenticator(auth_server):
    with Conn(auth_server.host, auth_server.port, timeout=TIMEOUT) as c:
        c.options()
        f = c.startup(stream=2)
        assert f.opcode == cqlwire.AUTHENTICATE, f
        # clients (cdrs-tokio) match this class name exactly
        assert cqlwire.parse_authenticate(f.body) == "org.apache.cassandra.auth.PasswordAuthenticator"


def test_raw_query_before_auth_is_refused(auth_server):
    # after STARTUP, before AUTH_RESPONSE
    with Conn(auth_server.host, auth_server.port, timeout=TIMEOUT) as c:
        assert c.startup(stream=1).opcode == cqlwire.AUTHENTICATE
        c.send_frame(cqlwire.QUERY, cqlwire.query_body("SELECT * FROM system.local"), stream=2)
        try:
            f = c.read_response(2)
        except cqlwire.Closed:
            pytest.fail("the server should answer with an ERROR, not just close the connection")
        assert f.opcode == cqlwire.ERROR, f"a query before authentication must not run: {f!r}"
    # before STARTUP at all
    with Conn(auth_server.host, auth_server.port, timeout=TIMEOUT) as c:
        c.send_frame(cqlwire.QUERY, cqlwire.query_body("SELECT * FROM system.local"), stream=3)
        f = c.read_response(3)
        assert f.opcode == cqlwire.ERROR, f
    # a PREPARE before auth likewise
    with Conn(auth_server.host, auth_server.port, timeout=TIMEOUT) as c:
        assert c.startup(stream=1).opcode == cqlwire.AUTHENTICATE
        f = c.prepare("SELECT * FROM system.local", stream=4)
        assert f.opcode == cqlwire.ERROR, f


def test_raw_auth_flow(auth_server):
    with Conn(auth_server.host, auth_server.port, timeout=TIMEOUT) as c:
        assert c.startup(stream=1).opcode == cqlwire.AUTHENTICATE
        f = c.request(cqlwire.AUTH_RESPONSE, cqlwire.auth_response_body("cassandra", "wrong"), stream=2)
        assert f.opcode == cqlwire.ERROR
        assert f.error()[0] == cqlwire.ERR_BAD_CREDENTIALS
    with Conn(auth_server.host, auth_server.port, timeout=TIMEOUT) as c:
        assert c.startup(stream=1).opcode == cqlwire.AUTHENTICATE
        f = c.request(cqlwire.AUTH_RESPONSE, cqlwire.auth_response_body("cassandra", "cassandra"), stream=2)
        assert f.opcode == cqlwire.AUTH_SUCCESS, f
        f = c.query("SELECT key FROM system.local", stream=3)
        assert f.opcode == cqlwire.RESULT, f


def test_cqlsh_with_credentials(auth_server, cqlsh):
    r = cqlsh(["-u", "cassandra", "-p", "cassandra", "-e", "SELECT key FROM system.local"], server=auth_server)
    assert r.returncode == 0, r
    assert "(1 rows)" in r.stdout, r
    r = cqlsh(["-u", "cassandra", "-p", "nope", "-e", "SELECT key FROM system.local"], server=auth_server)
    assert r.returncode != 0, r
    assert "(1 rows)" not in r.stdout
