"""Cluster-wide traces and system views (issue 17), with real processes (clusterlib.py: etcd,
PostgreSQL and 3 ringgate nodes) and the Python driver with its default settings.

- Tracing: any node answers for any session (a SELECT on system_traces gathers every node's
  rows), so `get_query_trace()` works whichever node the driver asks; a forwarded request's
  session shows the hop and the owner's own events, with the owner as their source.
- system_views.hot_partitions read through any node ranks the hottest keys of every owner;
  throttle counters (throughput, physical_partitions) read the same through every node.
- system_views.physical_partitions read through any node lists every physical partition of a
  table once, with its owner (the node whose tokens in system.local/peers_v2 include the
  partition's end token) and the owner's size figures.
- After kill -9 of a node the view on the survivors still answers (the dead node is left out
  with a warning), and once its partitions are taken over they show the survivors as owners;
  a paused (SIGSTOP) node is left out after the per-node deadline, with a warning naming it.
- cqlsh TRACING ON against a cluster node prints every session.
"""

import subprocess
import time
import uuid

import pytest
from cassandra.query import SimpleStatement

import clusterlib
from conftest import cqlsh_command
from test_cluster import LEASE_MS, create_table, node_of, owner_host, pinned, wait_settled, \
    wait_until

clusterlib.require_or_skip(pytest)

VIEW = ("SELECT partition_id, owner, token_end, bytes FROM system_views.physical_partitions "
        "WHERE keyspace_name = 'app' AND table_name = 't' ALLOW FILTERING")


@pytest.fixture(scope="module")
def cluster3():
    c = clusterlib.LocalCluster(nodes=3, lease_ms=LEASE_MS).start()
    try:
        wait_settled(c)
        cl, s = pinned(c.nodes[0])
        create_table(s)
        # A new table's partitions are taken by their owners within a moment: read through
        # each node, a partition shows an owner once that node serves or knows its owner.
        for n in c.nodes:
            cn, sn = pinned(n)
            wait_until("every partition owned", lambda: all(r.owner for r in sn.execute(VIEW)))
            cn.shutdown()
        for k in range(200):
            s.execute("INSERT INTO app.t (pk, v) VALUES (%s, %s)", (k, "x" * 100))
        cl.shutdown()
        yield c
    except BaseException:
        c.print_logs()
        raise
    finally:
        c.stop()


def ring_known(driver, c):
    def settled():
        tm = driver.metadata.token_map
        return tm is not None and len(tm.ring) == 8 and \
            {h.endpoint.port for h in tm.token_to_host_owner.values()} == {n.port for n in c.running()}
    wait_until("three nodes", lambda: len(driver.metadata.all_hosts()) == len(c.running()))
    wait_until("the driver's token map shows the owners", settled, timeout_s=40)


def trace_rows(session, trace_id):
    sess = session.execute("SELECT * FROM system_traces.sessions WHERE session_id = %s",
                           (trace_id,)).one()
    events = list(session.execute("SELECT * FROM system_traces.events WHERE session_id = %s",
                                  (trace_id,)))
    return sess, events


def test_every_trace_is_found_through_the_default_policy_and_shows_the_owner(cluster3):
    c = cluster3
    driver = c.connect()
    try:
        s = driver.connect()
        ring_known(driver, c)
        ins = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        sel = s.prepare("SELECT v FROM app.t WHERE pk = ?")
        results = []
        # 20 traced requests on keys of every owner: prepared ones go token-aware to their
        # owner, simple ones (no routing key) to any node, so many are forwarded.
        for k in range(20):
            key = 1000 + k
            stmt = {0: (ins, (key, "w")), 1: (sel, (key,)),
                    2: (SimpleStatement("INSERT INTO app.t (pk, v) VALUES (%s, 's')"), (key,)),
                    3: (SimpleStatement("SELECT v FROM app.t WHERE pk = %s"), (key,))}[k % 4]
            r = s.execute(stmt[0], stmt[1], trace=True)
            results.append((key, r))
        owners = set()
        forwarded = 0
        for key, r in results:
            trace = r.get_query_trace(max_wait_sec=10)
            assert trace.duration is not None and trace.events, key
            activities = [e.description for e in trace.events]
            coordinator = r.response_future.coordinator_host
            owner = owner_host(driver, "app", "t", key)
            owners.add(owner.endpoint.port)
            hop = [a for a in activities if a.startswith("Forwarded to")]
            if coordinator.endpoint.port == owner.endpoint.port:
                assert not hop, activities
                continue
            forwarded += 1
            owner_name = node_of(c, owner).name
            assert hop and owner_name in hop[0], activities
            # The owner's own steps are in the coordinator's session.
            assert "Answering the coordinator" in activities, activities
        assert len(owners) == 3, "the keys should cover every owner"
        assert forwarded > 0, "simple statements should have been forwarded some of the time"
    finally:
        driver.shutdown()


def owner_node(c, key):
    """The node owning app.t's `key`, by a default driver's token map."""
    driver = c.connect()
    driver.connect()
    ring_known(driver, c)
    owner = node_of(c, owner_host(driver, "app", "t", key))
    driver.shutdown()
    return owner


def test_a_forwarded_trace_reads_the_same_through_every_node(cluster3):
    c = cluster3
    key = 7
    owner = owner_node(c, key)
    coordinator = next(n for n in c.nodes if n is not owner)
    cl, s = pinned(coordinator)
    try:
        r = s.execute("SELECT v FROM app.t WHERE pk = %s", (key,), trace=True)
        trace_id = r.response_future._query_traces[-1].trace_id
    finally:
        cl.shutdown()
    seen = []
    for n in c.nodes:  # the coordinator, the owner and the third node
        cl, s = pinned(n)
        try:
            wait_until("the session", lambda: trace_rows(s, trace_id)[0] is not None)
            sess, events = trace_rows(s, trace_id)
            assert sess.coordinator_port == coordinator.port
            by_port = {}
            for e in events:
                by_port.setdefault(e.source_port, []).append(e.activity)
            assert any(a.startswith(f"Forwarded to {owner.name}") for a in by_port[coordinator.port])
            assert any(a.startswith("Read 1 stored rows") for a in by_port[owner.port]), by_port
            seen.append(sorted((e.event_id, e.activity, e.source_port) for e in events))
            # Paged: the merged rows page like a single node's, each row once.
            paged = list(s.execute(SimpleStatement(
                "SELECT event_id FROM system_traces.events WHERE session_id = %s",
                fetch_size=2), (trace_id,)))
            assert sorted(e.event_id for e in paged) == sorted(e.event_id for e in events)
        finally:
            cl.shutdown()
    assert seen[0] == seen[1] == seen[2]


def node_tokens(session):
    """{native port: set of token texts} from system.local and system.peers_v2."""
    local = session.execute("SELECT rpc_port, tokens FROM system.local").one()
    out = {local.rpc_port: set(local.tokens or [])}
    for p in session.execute("SELECT native_port, tokens FROM system.peers_v2"):
        out[p.native_port] = set(p.tokens or [])
    return out


def check_view(c, session, alive):
    """The view through `session`: every partition once, owned by a live node whose tokens
    include its end token; returns {partition_id: (owner, bytes)}."""
    rows = list(session.execute(VIEW))
    ids = [r.partition_id for r in rows]
    assert len(ids) == len(set(ids)) and ids, rows
    tokens = node_tokens(session)
    for r in rows:
        assert r.owner in alive, rows
        assert str(r.token_end) in tokens[c.node(r.owner).port], (r, tokens)
    return {r.partition_id: (r.owner, r.bytes) for r in rows}


def test_physical_partitions_through_any_node_show_each_partition_once_with_its_owner(cluster3):
    c = cluster3
    names = {n.name for n in c.nodes}
    views = []
    for n in c.nodes:
        cl, s = pinned(n)
        try:
            # Sizes are counted by each owner (in the background after a takeover).
            def settled():
                v = check_view(c, s, names)
                return all(b > 0 for _, b in v.values()) and v
            wait_until("owners' sizes", settled)
            views.append(check_view(c, s, names))
        finally:
            cl.shutdown()
    assert views[0] == views[1] == views[2]
    assert {o for o, _ in views[0].values()} == names


def test_hot_partitions_through_any_node_rank_every_owners_keys(cluster3):
    c = cluster3
    a, b = 5000, next(k for k in range(5001, 5200) if owner_node(c, k) is not owner_node(c, 5000))
    cl, s = pinned(c.nodes[0])
    try:
        ins = s.prepare("INSERT INTO app.t (pk, v) VALUES (?, ?)")
        for i in range(60):  # through n1: most are forwarded, consumed on the owner
            s.execute(ins, (a, "h"))
            if i < 40:
                s.execute(ins, (b, "h"))
    finally:
        cl.shutdown()
    for n in c.nodes:
        cl, s = pinned(n)
        try:
            rows = list(s.execute("SELECT rank, partition_key FROM system_views.hot_partitions "
                                  "WHERE keyspace_name = 'app' AND table_name = 't' ALLOW FILTERING"))
            assert [r.rank for r in rows] == list(range(1, len(rows) + 1)), rows
            keys = [r.partition_key for r in rows]
            assert len(keys) == len(set(keys)), rows
            assert keys[:2] == [str(a), str(b)], rows
        finally:
            cl.shutdown()


def test_throttling_counts_read_the_same_through_every_node(cluster3):
    """The owner's throttle counters, summed over nodes in `throughput` and per partition in
    `physical_partitions`, read the same through every node (not just through the owner)."""
    from cassandra import OperationTimedOut
    from cassandra.cluster import NoHostAvailable
    from cassandra.protocol import OverloadedErrorMessage
    c = cluster3
    cl, s = pinned(c.nodes[0])
    rejected = 0
    try:
        s.execute("CREATE TABLE app.hot (pk int PRIMARY KEY, v text) "
                  "WITH cosmosdb_provisioned_throughput = 400")
        ins = s.prepare("INSERT INTO app.hot (pk, v) VALUES (?, ?)")
        for _ in range(20):
            futures = [s.execute_async(ins, (1, "x" * 200)) for _ in range(200)]
            for f in futures:
                try:
                    f.result()
                except (OverloadedErrorMessage, NoHostAvailable, OperationTimedOut):
                    rejected += 1
            if rejected:
                break
    finally:
        cl.shutdown()
    assert rejected, "the owner never throttled"
    seen = []
    for n in c.nodes:
        cl, s = pinned(n)
        try:
            total = s.execute("SELECT throttled_requests FROM system_views.throughput WHERE "
                              "keyspace_name = 'app' AND table_name = 'hot'").one()
            parts = s.execute("SELECT throttled_requests FROM system_views.physical_partitions "
                              "WHERE keyspace_name = 'app' AND table_name = 'hot' ALLOW FILTERING")
            seen.append((total.throttled_requests, sum(p.throttled_requests for p in parts)))
        finally:
            cl.shutdown()
    assert seen[0][0] > 0 and all(x == (seen[0][0], seen[0][0]) for x in seen), seen


def test_cqlsh_tracing_on_finds_every_session(cluster3):
    """cqlsh fetches each trace through any of the nodes (they share 127.0.0.1, so its host
    whitelist admits all three)."""
    c = cluster3
    keys = range(0, 200, 9)
    script = "TRACING ON\n" + "".join(f"SELECT v FROM app.t WHERE pk = {k};\n" for k in keys)
    p = subprocess.run(cqlsh_command() + [clusterlib.HOST, str(c.running()[0].port)],
                       input=script, capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert out.count("Tracing session:") == len(keys), out
    assert out.count("Request complete") >= len(keys), out
    assert "Unable to fetch query trace" not in out and "not found" not in out, out
    # A statement forwarded to its owner shows the owner's steps.
    assert out.count("Forwarded to") == out.count("Answering the coordinator"), out


def test_after_kill9_the_survivors_view_answers_and_shows_the_new_owners(cluster3):
    c = cluster3
    victim = c.nodes[2]
    before = None
    cl, s = pinned(c.nodes[0])
    try:
        before = check_view(c, s, {n.name for n in c.nodes})
    finally:
        cl.shutdown()
    assert victim.name in {o for o, _ in before.values()}
    victim.kill9()
    survivors = [n for n in c.nodes if n is not victim]
    for n in survivors:
        cl, s = pinned(n)
        try:
            # At once: an answer (the dead node is left out, with a warning while it is a member).
            r = s.execute(VIEW)
            ids = [x.partition_id for x in r]
            assert sorted(ids) == sorted(before), ids
            for w in r.response_future.warnings or []:
                assert victim.name in w, w
            names = {m.name for m in survivors}

            def taken_over():
                try:
                    return {o for o, _ in check_view(c, s, names).values()} <= names
                except AssertionError:  # an owner or its tokens not settled yet
                    return False
            wait_until("the survivors own every partition", taken_over,
                       timeout_s=LEASE_MS / 1000 * 10)
            assert sorted(check_view(c, s, names)) == sorted(before)
        finally:
            cl.shutdown()


def test_a_node_that_does_not_answer_is_left_out_with_a_warning(cluster3):
    c = cluster3
    asked, paused = c.running()[:2]
    cl, s = pinned(asked)
    try:
        before = sorted(r.partition_id for r in s.execute(VIEW))
        # Only members are asked: `paused` must be one in `asked`'s member list (a lease lost
        # under load rejoins), which the ring behind system.peers_v2 may list before it does.
        # A traced read names how many other nodes it merged: every other running one.
        others = len(c.running()) - 1

        def every_other_node_merged():
            trace = s.execute(VIEW, trace=True).get_query_trace(max_wait_sec=10)
            merged = f"Merging the rows of {others} other node(s)"
            return any(e.description == merged for e in trace.events)
        # A node whose lease keep-alives lag under load may lose its membership between that
        # check and the read (and rejoin later): then it is not asked, and rightly no warning
        # names it. So the pause is tried again, a few times; a read that asks it must warn,
        # and one that does not warn must not have asked it (its trace names those asked).
        warned = []
        for _ in range(3):
            wait_until(f"{paused.name} a member", every_other_node_merged)
            paused.pause()
            try:
                r = s.execute(VIEW, trace=True)
                assert sorted(x.partition_id for x in r) == before
                warnings = r.response_future.warnings or []
                warned = [w for w in warnings if paused.name in w and "left out" in w]
            finally:
                paused.resume()
            if warned:
                break
            trace = r.get_query_trace(max_wait_sec=10)
            asked = [e.description for e in trace.events if e.description.startswith("Asked ")]
            assert asked, "the fan-out's trace names no members asked"
            names = asked[0].partition(": ")[2].split(", ")
            assert paused.name not in names, \
                f"{paused.name} was asked, did not answer, and no warning named it: {asked[0]}"
        assert warned, "the paused node was never left out with a warning"
    finally:
        cl.shutdown()
