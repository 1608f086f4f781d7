"""Free TCP ports for the processes tests start (ringgate, etcd, PostgreSQL, Patroni).

Why not simply bind port 0 and hand the port on: the kernel picks such a port from the
ephemeral range (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default), the same
range every outgoing connection's local port comes from. Between the test closing its probe
socket and the child binding the port, any client connection on the machine (the Rust tests run
beside pytest) may take it; a CI run once failed that way ("bind: address already in use"). So
ports come from below that range, where no outgoing connection goes: a random one, checked
free by binding it, never handed out twice by one process (tests/common/ports.rs is the Rust
side's twin)."""

import random
import socket

HOST = "127.0.0.1"
LOW_PORT = 20000  # above the well-known and most registered services' ports
TRIES = 1000

_GIVEN = set()
_RANDOM = random.Random()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host=HOST):
    """A port of `host` free now, below the ephemeral range, not handed out before by this
    process."""
    high = max(_ephemeral_low(), LOW_PORT + 1000)
    for _ in range(TRIES):
        port = _RANDOM.randrange(LOW_PORT, high)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    raise RuntimeError(f"no free port in [{LOW_PORT}, {high}) after {TRIES} tries")
