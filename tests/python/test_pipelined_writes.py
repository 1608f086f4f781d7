"""Writes pipelined on one connection (many requests in flight, answered as they finish):
prepared point writes run in the connection's read loop, up to 32 per read of the socket, and
their journal entries reach the OS once per batch of answers (storage/settle.rs). Each
request must still succeed or fail on its own, and every change must be kept."""

import random

from cassandra.query import SimpleStatement

from rgtest import error_text

N = 300


def run_all(session, calls):
    """Sends every (statement, params) before waiting for any answer; returns (ok, value)
    per call, in order."""
    futures = [session.execute_async(stmt, params) for stmt, params in calls]
    out = []
    for f in futures:
        try:
            out.append((True, f.result()))
        except Exception as e:  # noqa: BLE001 - the test inspects each failure
            out.append((False, e))
    return out


def test_a_failing_write_among_good_ones_fails_alone(session, keyspace):
    t = f"{keyspace}.mixed"
    session.execute(f"CREATE TABLE {t} (k text PRIMARY KEY, v text)")
    session.execute(f"INSERT INTO {t} (k, v) VALUES ('cas', 'orig')")
    ins = session.prepare(f"INSERT INTO {t} (k, v) VALUES (?, ?)")
    cas = session.prepare(f"UPDATE {t} SET v = ? WHERE k = 'cas' IF v = ?")
    too_long = "x" * 70_000
    calls, kinds = [], []
    for i in range(N):
        if i % 10 == 3:
            calls.append((ins, (too_long + str(i), "bad")))
            kinds.append("bad")
        elif i == 150:
            calls.append((cas, ("lost", "not what it holds")))
            kinds.append("cas-miss")
        elif i == 151:
            calls.append((cas, ("won", "orig")))
            kinds.append("cas-hit")
        else:
            calls.append((ins, (f"k{i}", f"v{i}")))
            kinds.append("good")
    results = run_all(session, calls)
    for i, ((ok, value), kind) in enumerate(zip(results, kinds)):
        if kind == "bad":
            assert not ok, f"request {i} with a 70,000-byte key succeeded"
            key_bytes = len(too_long) + len(str(i))
            want = f"Key length of {key_bytes} is longer than maximum of 65535"
            assert want in error_text(value), error_text(value)
        else:
            assert ok, f"request {i} ({kind}) failed: {value!r}"
    applied = {kind: results[kinds.index(kind)][1].one()[0] for kind in ("cas-miss", "cas-hit")}
    assert applied == {"cas-miss": False, "cas-hit": True}
    rows = {r.k: r.v for r in session.execute(f"SELECT k, v FROM {t}")}
    expected = {f"k{i}": f"v{i}" for i, kind in enumerate(kinds) if kind == "good"}
    expected["cas"] = "won"
    assert rows == expected


def test_pipelined_writes_to_one_key_keep_every_change(session, keyspace):
    t = f"{keyspace}.one_key"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, v text, l list<int>, n int)")
    append = session.prepare(f"UPDATE {t} SET l = l + ? WHERE k = 1")
    results = run_all(session, [(append, ([i],)) for i in range(N)])
    assert all(ok for ok, _ in results)
    (row,) = session.execute(f"SELECT l FROM {t} WHERE k = 1")
    assert sorted(row.l) == list(range(N)), "every pipelined append is kept, once"

    # Last write wins by timestamp, whatever order the writes are sent and applied in.
    stamped = session.prepare(f"INSERT INTO {t} (k, v, n) VALUES (2, ?, ?) USING TIMESTAMP ?")
    order = list(range(N))
    random.Random(15).shuffle(order)
    results = run_all(session, [(stamped, (f"v{i}", i, 1_000 + i)) for i in order])
    assert all(ok for ok, _ in results)
    (row,) = session.execute(f"SELECT v, n, writetime(v) AS wt FROM {t} WHERE k = 2")
    assert (row.v, row.n, row.wt) == (f"v{N - 1}", N - 1, 1_000 + N - 1)


def test_writes_answered_in_one_batch_are_read_back_at_once(session, keyspace):
    """Every write's answer means the write is visible: a read sent after the answers came
    back finds all of them (a write and a read pipelined to each key, in that order, too)."""
    t = f"{keyspace}.visible"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, v int)")
    ins = session.prepare(f"INSERT INTO {t} (k, v) VALUES (?, ?)")
    sel = session.prepare(f"SELECT v FROM {t} WHERE k = ?")
    results = run_all(session, [(ins, (i, i * 7)) for i in range(N)])
    assert all(ok for ok, _ in results)
    reads = run_all(session, [(sel, (i,)) for i in range(N)])
    assert [r.one().v for ok, r in reads] == [i * 7 for i in range(N)]
    count = session.execute(SimpleStatement(f"SELECT count(*) FROM {t}")).one()[0]
    assert count == N


def test_concurrent_first_writes_to_new_partitions_are_all_kept(cluster_factory, session, keyspace):
    """Writers on several connections append to partitions that do not exist yet: the first
    write of a partition skips reading its row (no size record: `query/write/row_read.rs`);
    the others, on the same keys at the same time, must still merge with it, not replace it."""
    from concurrent.futures import ThreadPoolExecutor

    t = f"{keyspace}.fresh"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, l list<int>)")
    writers, keys, rounds = 4, 40, 5
    clusters = [cluster_factory() for _ in range(writers)]
    sessions = [c.connect() for c in clusters]

    def write(w):
        s = sessions[w]
        append = s.prepare(f"UPDATE {t} SET l = l + ? WHERE k = ?")
        calls = [(append, ([w * 1000 + r], k)) for r in range(rounds) for k in range(keys)]
        return run_all(s, calls)

    with ThreadPoolExecutor(writers) as pool:
        results = list(pool.map(write, range(writers)))
    assert all(ok for per in results for ok, _ in per)
    rows = {r.k: sorted(r.l) for r in session.execute(f"SELECT k, l FROM {t}")}
    want = sorted(w * 1000 + r for w in range(writers) for r in range(rounds))
    assert rows == {k: want for k in range(keys)}


def test_requests_sent_in_one_write_get_one_answer_each(server, session, keyspace):
    """Hundreds of EXECUTEs in one send, so that reads of the socket hold many at once (the
    read loop runs up to 32 per read and gathers their answers into one message for the
    writer, `server/gathered.rs`; the rest run as tasks): every stream gets exactly one answer,
    the failing requests (a key over 64 KiB, a value of the wrong size, an unknown prepared
    id) fail alone, and every good write is kept."""
    import struct

    import cqlwire

    t = f"{keyspace}.one_send"
    session.execute(f"CREATE TABLE {t} (k int PRIMARY KEY, v text)")
    tk = f"{keyspace}.one_send_text"
    session.execute(f"CREATE TABLE {tk} (k text PRIMARY KEY, v text)")
    with cqlwire.ready_connection(server.host, server.port) as c:
        ins = c.prepared_id(f"INSERT INTO {t} (k, v) VALUES (?, ?)")
        ins_text = c.prepared_id(f"INSERT INTO {tk} (k, v) VALUES (?, ?)")
        sel = c.prepared_id(f"SELECT v FROM {t} WHERE k = ?")
        kinds, blob = {}, b""
        for stream in range(1, 601):
            key = struct.pack(">i", stream)
            if stream % 7 == 0:
                kind, body = "long-key", cqlwire.execute_body(ins_text, [b"x" * 70_000, b"v"])
            elif stream % 11 == 0:
                kind, body = "bad-value", cqlwire.execute_body(ins, [b"\x01\x02", b"v"])
            elif stream % 13 == 0:
                kind, body = "unprepared", cqlwire.execute_body(b"\x00" * 16, [key])
            elif stream > 300 and (stream - 300) % 7 != 0:
                # Reads of keys written earlier in this same send (stream - 300 < 300).
                kind, body = "read", cqlwire.execute_body(sel, [struct.pack(">i", stream - 300)])
            else:
                kind, body = "write", cqlwire.execute_body(ins, [key, f"v{stream}".encode()])
            kinds[stream] = kind
            blob += cqlwire.frame(cqlwire.EXECUTE, body, stream=stream)
        c.send(blob)
        answers = {}
        for _ in kinds:
            f = c.read_frame()
            assert f.stream not in answers, f"stream {f.stream} answered twice: {f!r}"
            answers[f.stream] = f
        writes = {s for s, k in kinds.items() if k == "write"}
        for stream, kind in kinds.items():
            f = answers[stream]
            if kind in ("write", "read"):
                assert f.opcode == cqlwire.RESULT, f"{kind} on stream {stream}: {f!r}"
            else:
                code, message = f.error()
                want = {"long-key": cqlwire.ERR_INVALID, "bad-value": cqlwire.ERR_INVALID,
                        "unprepared": 0x2500}[kind]
                assert code == want, f"{kind} on stream {stream}: {code:#x} {message}"
        # A read finds its key's write or nothing (pipelined requests run in no promised
        # order), never the value of a write that failed.
        for stream, kind in kinds.items():
            if kind == "read" and stream - 300 not in writes:
                assert f"v{stream - 300}".encode() not in answers[stream].body, stream
    rows = {r.k: r.v for r in session.execute(f"SELECT k, v FROM {t}")}
    assert rows == {s: f"v{s}" for s in writes}
