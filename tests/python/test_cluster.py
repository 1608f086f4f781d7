"""Cluster mode's promises (issue 17), with real processes on 127.0.0.1: etcd, one PostgreSQL
and ringgate nodes (clusterlib.py), driven by the Python driver with its default settings.

- Three nodes: a driver given one discovers all three, routes token-aware (its replica for a
  key is the node that owns the key's physical partition, so no request is forwarded), and
  every row written through any node reads back through every node with Cassandra's tokens.
- kill -9 of a node under a write load: every acknowledged write is readable afterwards, and
  the load goes on through the others; the time without service for the dead node's partitions
  is measured and printed (the README reports it; never asserted on time).
- SIGSTOP of an owner past its lease: the writes it received meanwhile all fail, and never
  overwrite the value written through the new owner afterwards.
- LWT compare-and-set increments from 8 clients over 3 nodes, a node killed mid-run: the final
  value equals the number of applied answers (an answer lost with the killed node is resolved
  by reading the row's last writer).
- A join under load: a full token-range scan afterwards holds every acknowledged key exactly
  once.
"""

import contextlib
import threading
import time
import uuid

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT, NoHostAvailable
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement

import clusterlib

clusterlib.require_or_skip(pytest)

LEASE_MS = 2000


def pinned(node):
    """A driver session that sends everything to `node` (no token awareness, no failover)."""
    profile = ExecutionProfile(load_balancing_policy=clusterlib.pinned_policy(node.port),
                               request_timeout=20)
    c = Cluster(contact_points=[clusterlib.HOST], port=node.port,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        return c, c.connect()
    except Exception:
        c.shutdown()
        raise


def wait_until(what, predicate, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def owner_host(cluster, keyspace, table, key):
    """The host the driver's token map names for `key` (an int partition key)."""
    stmt = cluster.metadata.keyspaces[keyspace].tables[table]
    assert stmt is not None
    routing_key = int(key).to_bytes(4, "big", signed=True)
    replicas = cluster.metadata.get_replicas(keyspace, routing_key)
    assert len(replicas) == 1, replicas
    return replicas[0]


def node_of(c, host):
    return next(n for n in c.nodes if n.port == host.endpoint.port)


def wait_settled(c, tokens=8):
    """Until every node owns its share of the initial layout's end tokens, as system.local
    and system.peers_v2 show them: a driver connecting then sees the final ring (tokens that
    change later reach drivers only on splits and membership changes)."""
    cl, s = pinned(c.nodes[0])
    try:
        def settled():
            local = s.execute("SELECT tokens FROM system.local").one().tokens or []
            peers = [p.tokens or [] for p in s.execute("SELECT tokens FROM system.peers_v2")]
            owned = [set(local)] + [set(p) for p in peers]
            return len(owned) == len(c.running()) and all(owned) \
                and len(set().union(*owned)) == tokens and sum(map(len, owned)) == tokens
        wait_until("the nodes to own the initial layout", settled)
    finally:
        cl.shutdown()


def owners_match(c, driver):
    """Whether every partition of app.t is owned by the node the driver's token map names
    for its end token (system_views.physical_partitions, read through the first node)."""
    by_port = {n.port: n.name for n in c.nodes}
    owner_of = {t.value: by_port[h.endpoint.port]
                for t, h in driver.metadata.token_map.token_to_host_owner.items()}
    cl, s = pinned(c.nodes[0])
    try:
        rows = list(s.execute("SELECT token_end, owner FROM system_views.physical_partitions "
                              "WHERE keyspace_name = 'app' AND table_name = 't'"))
    finally:
        cl.shutdown()
    return bool(rows) and all(owner_of.get(r.token_end) == r.owner for r in rows)


def forwarded(c):
    """Requests the live nodes sent on to an owner (their /metrics counters)."""
    return sum(n.metric("ringgate_forwarded_requests_total") for n in c.nodes if n.running())


def with_table(c):
    """A token-aware driver and session on `c`, after creating app.t through it and waiting
    for schema agreement and the table's metadata."""
    driver = c.connect()
    s = driver.connect()
    create_table(s)
    assert driver.control_connection.wait_for_schema_agreement(wait_time=30)
    driver.refresh_schema_metadata()
    return driver, s


def table_and_keys(c, nodes, count):
    """Creates app.t through a token-aware driver; returns {node name: `count` keys of app.t
    that node owns} for each of `nodes`."""
    driver, _ = with_table(c)
    try:
        return {n.name: keys_owned_by(c, driver, n, count) for n in nodes}
    finally:
        driver.shutdown()


def keys_owned_by(c, driver, node, count):
    """`count` keys of app.t among 0..199 whose partition `node` owns, by the driver's token
    map (once it knows all three nodes)."""
    wait_until("three nodes", lambda: len(driver.metadata.all_hosts()) == 3)
    owned = lambda: [k for k in range(200)
                     if node_of(c, owner_host(driver, "app", "t", k)) is node][:count]
    wait_until(f"{node.name} owns {count} keys", lambda: len(owned()) == count)
    return owned()


@contextlib.contextmanager
def started(c):
    """LocalCluster `c` started; its nodes' logs printed if the body fails; stopped after."""
    c.start()
    try:
        yield c
    except BaseException:
        c.print_logs()
        raise
    finally:
        c.stop()


def settled_cluster(**settings):
    """A fixture's body: a LocalCluster (2 s lease) whose nodes own the initial layout,
    yielded; its logs printed if the test fails; stopped after."""
    with started(clusterlib.LocalCluster(lease_ms=LEASE_MS, **settings)) as c:
        wait_settled(c)
        yield c


@pytest.fixture
def cluster3():
    yield from settled_cluster(nodes=3)


def create_table(session, ks="app", extra=""):
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    session.execute(f"CREATE TABLE IF NOT EXISTS {ks}.t (pk int PRIMARY KEY, v text{extra})")


def test_three_nodes_discovered_routed_and_every_row_everywhere(cluster3):
    c = cluster3
    driver = c.connect()  # default settings: token-aware, one contact point
    try:
        s = driver.connect()
        wait_until("all three nodes discovered", lambda: len(driver.metadata.all_hosts()) == 3)
        ports = sorted(h.endpoint.port for h in driver.metadata.all_hosts())
        assert ports == sorted(n.port for n in c.nodes)
        ids = {str(h.host_id) for h in driver.metadata.all_hosts()}
        assert len(ids) == 3
        create_table(s)
        assert driver.control_connection.wait_for_schema_agreement(wait_time=30)
        # Ownership spreads: the table's 8 partitions' end tokens are the ring, each node owns
        # some; the driver read it from system.local / system.peers_v2 when it connected (the
        # nodes list a node, and announce it, only with its share).
        def ring_settled():
            tm = driver.metadata.token_map
            if tm is None or len(tm.ring) != 8:
                return False
            return {h.endpoint.port for h in tm.token_to_host_owner.values()} == set(ports)
        try:
            wait_until("the driver's token map shows the owners", ring_settled, timeout_s=40)
        except AssertionError:
            tm = driver.metadata.token_map
            print("driver ring:", tm and sorted((t.value, h.endpoint.port)
                                                 for t, h in tm.token_to_host_owner.items()))
            cl, ps = pinned(c.nodes[0])
            print("local:", ps.execute("SELECT tokens FROM system.local").one().tokens)
            for p in ps.execute("SELECT native_port, tokens FROM system.peers_v2"):
                print("peer:", p.native_port, p.tokens)
            cl.shutdown()
            raise

        # The nodes took app.t's partitions as the ring assigns them (one round or two).
        wait_until("app.t's owners to be the driver's", lambda: owners_match(c, driver))
        ins = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        # Token-aware: each write goes straight to its owner (its trace, kept by the node
        # that coordinated it, shows no hop).
        traced = []
        for k in range(30):
            r = s.execute(ins, (k, f"v{k}"), trace=True)
            traced.append((r.response_future.coordinator_host, r.response_future._query_traces[-1].trace_id))
        coordinators = {h.endpoint.port for h, _ in traced}
        assert len(coordinators) > 1, "token-aware routing should spread 30 keys over nodes"
        hops = 0
        for host, trace_id in traced:
            cl, ps = pinned(next(n for n in c.nodes if n.port == host.endpoint.port))
            try:
                wait_until("the trace", lambda: ps.execute(
                    "SELECT session_id FROM system_traces.sessions WHERE session_id = %s",
                    (trace_id,)).one() is not None)
                events = [e.activity for e in ps.execute(
                    "SELECT activity FROM system_traces.events WHERE session_id = %s",
                    (trace_id,))]
                hops += any("Forwarded to" in e for e in events)
            finally:
                cl.shutdown()
        assert hops == 0, f"{hops} of 30 token-aware writes were forwarded"
        # The same through the nodes' counters, for untraced prepared writes and reads.
        sel = s.prepare("SELECT v FROM app.t WHERE pk = ?")
        for k in range(30, 330):
            s.execute(ins, (k, f"v{k}"))
            assert s.execute(sel, (k,)).one().v == f"v{k}"
        assert forwarded(c) == 0
    finally:
        driver.shutdown()

    sessions = [pinned(n) for n in c.nodes]
    try:
        keys = range(330, 630)
        for k in keys:  # each row through a different node, so most writes are forwarded
            _, s = sessions[k % 3]
            s.execute(s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)"), (k, f"v{k}"))
        assert forwarded(c) >= 100  # about two thirds of 300
        for _, s in sessions:
            got = {r.pk: (r.v, r.t) for r in s.execute(
                SimpleStatement("SELECT pk, v, token(pk) AS t FROM app.t", fetch_size=50))}
            assert set(got) == set(range(630))
            for k, (v, t) in got.items():
                assert v == f"v{k}"
                assert t == Murmur3Token.hash_fn(k.to_bytes(4, "big", signed=True))
            sel = s.prepare("SELECT v FROM app.t WHERE pk = ?")
            for k in range(0, 630, 7):
                assert s.execute(sel, (k,)).one().v == f"v{k}"
    finally:
        for cl, _ in sessions:
            cl.shutdown()


class Writer(threading.Thread):
    """Writes unique keys through `session` until stopped; keeps what was acknowledged."""

    def __init__(self, session, base, stop):
        super().__init__(daemon=True)
        self.session, self.base, self.stop_event = session, base, stop
        self.acked, self.failed = [], 0
        self.ins = session.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")

    def run(self):
        k = self.base
        while not self.stop_event.is_set():
            try:
                self.session.execute(self.ins, (k, f"w{k}"), timeout=10)
                self.acked.append((k, time.monotonic()))
            except Exception:
                self.failed += 1
            k += 1


def test_kill9_under_write_load_keeps_every_acknowledged_write(cluster3):
    c = cluster3
    driver = c.connect()
    try:
        s = driver.connect()
        create_table(s)
        assert driver.control_connection.wait_for_schema_agreement(wait_time=30)
        wait_until("three nodes", lambda: len(driver.metadata.all_hosts()) == 3)
        stop = threading.Event()
        writers = [Writer(s, i * 1_000_000, stop) for i in range(4)]
        for w in writers:
            w.start()
        time.sleep(3)
        victim = c.node("n2")
        killed_at = time.monotonic()
        victim.kill9()
        time.sleep(LEASE_MS / 1000 * 3 + 3)
        stop.set()
        for w in writers:
            w.join(30)
        acked = {k for w in writers for k, _ in w.acked}
        after = [t for w in writers for _, t in w.acked if t > killed_at]
        assert after, "no write succeeded after the kill: the load did not go on"
    finally:
        driver.shutdown()

    # Every acknowledged write reads back, through each surviving node.
    for n in c.running():
        cl, s = pinned(n)
        try:
            sel = s.prepare("SELECT v FROM app.t WHERE pk = ?")
            missing = [k for k in sorted(acked) if s.execute(sel, (k,)).one() is None]
            assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
        finally:
            cl.shutdown()
    print(f"\n{len(acked)} writes acknowledged, all read back after the kill")


def test_unavailability_after_kill9_is_about_a_lease(cluster3):
    """Measures (prints) how long a key owned by a killed node cannot be written."""
    c = cluster3
    victim = c.node("n3")
    key = table_and_keys(c, [victim], 1)[victim.name][0]
    cl, s = pinned(c.node("n1"))
    try:
        ins = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        s.execute(ins, (key, "before"))
        victim.kill9()
        killed_at = time.monotonic()
        while True:
            try:
                s.execute(ins, (key, "after"), timeout=10)
                break
            except Exception:
                time.sleep(0.05)
            assert time.monotonic() - killed_at < 60, "no service for the dead node's key in 60 s"
        gap = time.monotonic() - killed_at
        assert s.execute("SELECT v FROM app.t WHERE pk = %s", (key,)).one().v == "after"
        print(f"\nwithout service for {gap:.2f} s after kill -9 (lease {LEASE_MS} ms)")
    finally:
        cl.shutdown()


def test_paused_owner_never_writes_after_its_lease(cluster3):
    c = cluster3
    paused = c.node("n2")
    keys = table_and_keys(c, [paused], 5)[paused.name]
    old_cl, old = pinned(paused)
    new_cl, new = pinned(c.node("n1"))
    try:
        ins_old = old.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        for k in keys:
            old.execute(ins_old, (k, "v0"))
        paused.pause()
        # Sent while it sleeps: they wait in its socket.
        pending = [old.execute_async(ins_old, (k, "stale"), timeout=60) for k in keys]
        time.sleep(LEASE_MS / 1000 * 2 + 1)
        ins_new = new.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        for k in keys:  # through the new owner (n1 forwards to it if it is not n1)
            new.execute(ins_new, (k, "new"), timeout=20)
        paused.resume()
        # Every pending write fails: handled while the node's lease is gone, it is refused
        # (Unavailable); once the node has joined again, the connection it arrived on, opened
        # before, is closed instead of running it. (The paused node itself could not commit
        # either: PostgreSQL fences it, tests/cluster_ownership/pause.rs.)
        outcomes = []
        for f in pending:
            try:
                f.result()
                outcomes.append("acknowledged")
            except Exception as e:
                outcomes.append(type(e).__name__)
        print(f"\npending writes of the paused node: {outcomes}")
        assert "acknowledged" not in outcomes
        time.sleep(1)
        for k in keys:
            assert new.execute("SELECT v FROM app.t WHERE pk = %s", (k,)).one().v == "new"
        # Once it has joined again, the resumed node serves (forwarding to the new owners), to
        # a new client (the old one gave the node up while it slept).
        def serves():
            cl2, s2 = pinned(paused)
            try:
                s2.execute(s2.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)"),
                           (keys[0], "later"), timeout=5)
                return True
            except Exception:
                return False
            finally:
                cl2.shutdown()
        wait_until("the resumed node serves again", serves, timeout_s=40)
        assert new.execute("SELECT v FROM app.t WHERE pk = %s", (keys[0],)).one().v == "later"
    finally:
        old_cl.shutdown()
        new_cl.shutdown()


def test_lwt_counter_from_8_clients_over_3_nodes_with_a_kill(cluster3):
    c = cluster3
    cl0, s0 = pinned(c.node("n1"))
    s0.execute("CREATE KEYSPACE app WITH replication = "
               "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s0.execute("CREATE TABLE app.counter (k int PRIMARY KEY, v int, marks set<text>)")
    s0.execute("INSERT INTO app.counter (k, v) VALUES (0, 0)")
    cl0.shutdown()
    clients = [pinned(c.nodes[i % 3]) for i in range(8)]
    stop = threading.Event()
    applied = [0] * 8
    unknown = [[] for _ in range(8)]  # marks of updates whose answer was lost

    def repin(i):
        """A session on a live node. The node the main thread is killing can still look
        running here and refuse the connection: then the next one."""
        for attempt in range(50):
            live = c.running()
            try:
                return pinned(live[(i + attempt) % len(live)])
            except NoHostAvailable:
                time.sleep(0.2)
        raise AssertionError(f"client {i} found no live node to move to")

    def run(i):
        cl, s = clients[i]
        seq = 0
        while not stop.is_set():
            try:
                row = s.execute(SimpleStatement("SELECT v FROM app.counter WHERE k = 0",
                                                consistency_level=ConsistencyLevel.SERIAL),
                                timeout=10).one()
                mark = f"{i}-{seq}"
                seq += 1
                try:
                    r = s.execute("UPDATE app.counter SET v = %s, marks = marks + {%s} "
                                  "WHERE k = 0 IF v = %s", (row.v + 1, mark, row.v),
                                  timeout=10).one()
                    applied[i] += bool(r.applied)
                except Exception:
                    # Unknown outcome (its node died): the row's marks say, at the end.
                    unknown[i].append(mark)
                    raise
            except Exception:
                # This client's node is gone: move to a live one.
                cl.shutdown()
                cl, s = repin(i)
                clients[i] = (cl, s)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    time.sleep(4)
    c.node("n3").kill9()
    time.sleep(8)
    stop.set()
    for t in threads:
        t.join(60)
    cl, s = pinned(c.node("n1"))
    try:
        row = s.execute("SELECT v, marks FROM app.counter WHERE k = 0").one()
    finally:
        cl.shutdown()
        for cl2, _ in clients:
            cl2.shutdown()
    marks = set(row.marks or ())
    resolved = sum(m in marks for u in unknown for m in u)
    assert sum(applied) > 0
    assert row.v == len(marks), (row.v, len(marks))
    assert row.v == sum(applied) + resolved, (row.v, applied, resolved)
    print(f"\n{sum(applied)} applied answers, {resolved} of "
          f"{sum(len(u) for u in unknown)} lost answers had applied")


def test_join_under_load_loses_and_duplicates_nothing():
    c = clusterlib.LocalCluster(nodes=2, lease_ms=LEASE_MS).start()
    try:
        driver = c.connect()
        s = driver.connect()
        create_table(s)
        assert driver.control_connection.wait_for_schema_agreement(wait_time=30)
        stop = threading.Event()
        writers = [Writer(s, i * 1_000_000, stop) for i in range(3)]
        for w in writers:
            w.start()
        time.sleep(2)
        newcomer = c.add_node()
        wait_until("the new node is discovered", lambda: len(driver.metadata.all_hosts()) == 3)
        wait_until("the new node owns tokens", lambda: any(
            owner.endpoint.port == newcomer.port
            for owner in driver.metadata.token_map.token_to_host_owner.values()), timeout_s=30)
        time.sleep(3)
        stop.set()
        for w in writers:
            w.join(30)
        acked = [k for w in writers for k, _ in w.acked]
        # Full token-range scan: 64 ranges in token order.
        seen = []
        bounds = [-(2 ** 63) + i * (2 ** 64 // 64) for i in range(64)] + [2 ** 63 - 1]
        first = s.execute("SELECT pk FROM app.t WHERE token(pk) = %s", (-(2 ** 63),))
        seen += [r.pk for r in first]
        for lo, hi in zip(bounds, bounds[1:]):
            seen += [r.pk for r in s.execute(SimpleStatement(
                "SELECT pk FROM app.t WHERE token(pk) > %s AND token(pk) <= %s",
                fetch_size=1000), (lo, hi))]
        assert len(seen) == len(set(seen)), "a row appeared twice in the scan"
        missing = set(acked) - set(seen)
        assert not missing, f"{len(missing)} acknowledged rows missing from the scan"
        driver.shutdown()
    except BaseException:
        c.print_logs()
        raise
    finally:
        c.stop()
