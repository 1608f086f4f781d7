"""Cluster mode, discovery and events (issue 17, decision 10): the Python driver with default
settings, given one node of three, finds all three through system.peers_v2 (address, port,
host id, data centre, rack, tokens), and follows the cluster through TOPOLOGY_CHANGE /
STATUS_CHANGE events: a node killed with kill -9 is removed once its lease ends, a node that
joins is added. Real processes (clusterlib.py); skipped loudly without the binaries unless
RINGGATE_REQUIRE_POSTGRES/ETCD is set."""
import socket
import struct
import threading

import pytest
from cassandra import OperationTimedOut
from cassandra.cluster import NoHostAvailable
from cassandra.policies import HostStateListener

import clusterlib
from rgtest import wait_until

clusterlib.require_or_skip(pytest)


@pytest.fixture
def cl():
    c = clusterlib.LocalCluster(nodes=3).start()
    yield c
    c.stop()


class Recorder(HostStateListener):
    def __init__(self):
        self.events, self.lock = [], threading.Lock()

    def _note(self, what, host):
        with self.lock:
            self.events.append((what, host.endpoint.port))

    def on_add(self, host):
        self._note("add", host)

    def on_remove(self, host):
        self._note("remove", host)

    def on_up(self, host):
        self._note("up", host)

    def on_down(self, host):
        self._note("down", host)

    def seen(self, what, port):
        with self.lock:
            return (what, port) in self.events

    def seen_after(self, what, port, earlier):
        """(what, port) recorded after the first (earlier, port)."""
        with self.lock:
            if (earlier, port) not in self.events:
                return False
            return (what, port) in self.events[self.events.index((earlier, port)):]


def local_host_id(cluster, session, node):
    """The host id `node` answers in system.local, asked of it once the session's pool to it
    serves (a host the driver has just learned of, or learned of again, may have none yet, or
    one still opening; the driver's host for it is looked up at each try)."""
    def ask():
        hosts = [h for h in cluster.metadata.all_hosts() if h.endpoint.port == node.port]
        try:
            answer = session.execute("SELECT host_id FROM system.local", host=hosts[0])
            return answer.one().host_id
        except (IndexError, NoHostAvailable, OperationTimedOut):
            return None
    return wait_until(ask, timeout=30, message=f"a query on {node.name}")


def test_driver_discovers_every_node_from_one(cl):
    c = cl.connect(cl.node("n2"))
    s = c.connect()
    try:
        wait_until(lambda: len(c.metadata.all_hosts()) == 3, timeout=30,
                   message="the driver to know three hosts")
        hosts = {h.endpoint.port: h for h in c.metadata.all_hosts()}
        assert sorted(hosts) == sorted(n.port for n in cl.nodes)
        for n in cl.nodes:
            h = hosts[n.port]
            assert h.endpoint.address == "127.0.0.1"
            assert h.host_id == local_host_id(c, s, n), n.name
            assert (h.datacenter, h.rack) == ("datacenter1", "rack1")
        # Distinct host ids, and every host has tokens in the driver's token map.
        assert len({h.host_id for h in hosts.values()}) == 3
        owners = set(c.metadata.token_map.token_to_host_owner.values())
        assert {h.endpoint.port for h in owners} == set(hosts)
    finally:
        c.shutdown()


def test_killed_node_is_removed_and_a_new_node_is_added(cl):
    c = cl.connect(cl.node("n1"))
    rec = Recorder()
    c.register_listener(rec)
    s = c.connect()
    try:
        wait_until(lambda: len(c.metadata.all_hosts()) == 3, timeout=30,
                   message="the driver to know three hosts")
        dead = cl.node("n3")
        dead.kill9()
        # Its lease runs out (2 s): n1 sends REMOVED_NODE and the driver drops the host.
        wait_until(lambda: rec.seen("remove", dead.port), timeout=30,
                   message="the killed node to be removed")
        assert dead.port not in {h.endpoint.port for h in c.metadata.all_hosts()}
        new = cl.add_node()
        # NEW_NODE reaches the driver, which reads system.peers_v2 again (after a random
        # delay of up to its topology_event_refresh_window, 10 s) and connects.
        wait_until(lambda: rec.seen("add", new.port), timeout=40, message="the new node")
        host = next(h for h in c.metadata.all_hosts() if h.endpoint.port == new.port)
        wait_until(lambda: host.is_up, timeout=30, message="the new node up")
        assert local_host_id(c, s, new) == host.host_id
    finally:
        c.shutdown()


def read_frame(sock):
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        assert chunk, "connection closed"
        head += chunk
    length = struct.unpack(">i", head[5:9])[0]
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        assert chunk, "connection closed"
        body += chunk
    return head, body


def frame(opcode, body, stream=1):
    return struct.pack(">BBhBi", 4, 0, stream, opcode, len(body)) + body


def string_list(items):
    out = struct.pack(">H", len(items))
    for i in items:
        out += struct.pack(">H", len(i)) + i.encode()
    return out


def test_register_for_topology_and_status_gets_only_those_events(cl):
    """A raw v4 connection to n1 registered for TOPOLOGY_CHANGE and STATUS_CHANGE only: a
    new node gives NEW_NODE and UP with its address; no SCHEMA_CHANGE arrives."""
    sock = socket.create_connection(("127.0.0.1", cl.node("n1").port), timeout=30)
    try:
        sock.sendall(frame(0x01, struct.pack(">H", 1) + struct.pack(">H", 11) + b"CQL_VERSION"
                           + struct.pack(">H", 5) + b"3.0.0"))
        assert read_frame(sock)[0][4] == 0x02  # READY
        sock.sendall(frame(0x0B, string_list(["TOPOLOGY_CHANGE", "STATUS_CHANGE"])))
        assert read_frame(sock)[0][4] == 0x02
        c = cl.connect(cl.node("n2"))
        c.connect().execute("CREATE KEYSPACE evks WITH replication = "
                            "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        c.shutdown()
        new = cl.add_node()
        # Events about the other nodes may come first (n1 may learn of n3's start only now).
        seen = []
        while len([e for e in seen if e[3] == new.port]) < 2:
            head, body = read_frame(sock)
            assert head[4] == 0x0C and struct.unpack(">h", head[2:4])[0] == -1
            n = struct.unpack(">H", body[:2])[0]
            kind = body[2:2 + n].decode()
            assert kind in ("TOPOLOGY_CHANGE", "STATUS_CHANGE"), kind
            rest = body[2 + n:]
            m = struct.unpack(">H", rest[:2])[0]
            change = rest[2:2 + m].decode()
            addr = rest[2 + m:]
            size = addr[0]
            port = struct.unpack(">i", addr[1 + size:5 + size])[0]
            seen.append((kind, change, socket.inet_ntoa(addr[1:1 + size]), port))
        assert sorted(e for e in seen if e[3] == new.port) == [
            ("STATUS_CHANGE", "UP", "127.0.0.1", new.port),
            ("TOPOLOGY_CHANGE", "NEW_NODE", "127.0.0.1", new.port)]
        others = {n.port for n in cl.nodes if n is not new}
        assert {e[3] for e in seen} <= others | {new.port}
    finally:
        sock.close()


def test_paused_node_is_removed_and_announced_again_when_it_rejoins(cl):
    """SIGSTOP past the lease: the others drop the node (REMOVED_NODE); after SIGCONT it
    finds its lease gone, joins again on a new one, and is announced (NEW_NODE) and served."""
    c = cl.connect(cl.node("n1"))
    rec = Recorder()
    c.register_listener(rec)
    s = c.connect()
    try:
        wait_until(lambda: len(c.metadata.all_hosts()) == 3, timeout=30,
                   message="the driver to know three hosts")
        paused = cl.node("n2")
        paused.pause()
        try:
            wait_until(lambda: rec.seen("remove", paused.port), timeout=30,
                       message="the paused node to be removed")
        finally:
            paused.resume()
        wait_until(lambda: rec.seen_after("add", paused.port, "remove"), timeout=40,
                   message="the resumed node to be added again")
        served = local_host_id(c, s, paused)
        host = next(h for h in c.metadata.all_hosts() if h.endpoint.port == paused.port)
        assert served == host.host_id
    finally:
        c.shutdown()
