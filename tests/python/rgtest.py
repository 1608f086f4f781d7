"""Small helpers shared by the test modules (not fixtures: see conftest.py for those)."""

import struct
import time

import pytest


def wait_until(predicate, timeout=15.0, interval=0.1, message="condition"):
    """Poll `predicate` until it returns a truthy value or the deadline passes (then fail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}", pytrace=False)
        time.sleep(interval)


def rethrowing_profile(**kwargs):
    """An execution profile whose requests fail with the server's error as it came, never
    retried: the driver's default retries some errors (Overloaded, Server, Unavailable) on the
    next host, and with one host it may raise NoHostAvailable with an empty error map (it
    records the host's error only after handing the retry to another thread), so a test could
    not tell a 429 from any other failure. `kwargs`: more of the profile's settings."""
    from cassandra.cluster import ExecutionProfile
    from cassandra.policies import FallthroughRetryPolicy
    return ExecutionProfile(retry_policy=FallthroughRetryPolicy(), **kwargs)


def error_text(exc):
    """The server's message of a driver exception (ErrorMessage subclasses have .message)."""
    msg = getattr(exc, "message", None)
    return msg if isinstance(msg, str) else str(exc)


def composite_routing_key(*parts):
    """The routing key of a multi-column partition key, built the way the driver (and
    Cassandra's CompositeType) does: per component a u16 big-endian length, the bytes, 0x00."""
    return b"".join(struct.pack(">H", len(p)) + p + b"\x00" for p in parts)


def int_bytes(v):
    return struct.pack(">i", v)


def bigint_bytes(v):
    return struct.pack(">q", v)


def create_keyspace(session, name, rf=1):
    session.execute(f"CREATE KEYSPACE {name} WITH replication = "
                    f"{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
    return name


def kill9_and_restart(srv, threads, cluster, stop=None):
    """SIGKILL the server under load, let the client threads notice (set `stop` if given),
    close the cluster and start the server again on the same data."""
    srv.kill9()
    if stop is not None:
        stop.set()
    for t in threads:
        t.join(timeout=30)
    cluster.shutdown()
    srv.start()
